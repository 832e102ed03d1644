/*
 * test/c/hostport_test.c: unit test of hostport.c, the one reader of
 * "host:port" (URLs, connect()'s host lists, seeds), and of
 * topo_node_parse, which reads seeds and MOVED/ASK targets with it.
 *
 * Checks:
 * - names, IPv4, IPv6 in brackets; a port or none; every message for a
 *   wrong part (empty host, a byte no host has, an unclosed bracket, a
 *   colon without a port, a port out of range or not decimal), printable
 *   and short whatever the input;
 * - topo_node_parse: the port required; an IPv6 address without brackets,
 *   as Redis writes it in MOVED and ASK ("::1:7002"), read by its last
 *   colon.
 *
 * Run by `make ctest`; exits non-zero on any failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "base/hostport.h"
#include "topo/topo_node.h"

static void parses(const char *s, const char *host, int port) {
    const char *h;
    size_t hl;
    int p;
    char err[200];
    int rc = hostport_parse(s, strlen(s), &h, &hl, &p, err, sizeof err);
    CHECK(rc == 0, "'%s': %s", s, err);
    if (rc != 0) return;
    CHECK(hl == strlen(host) && memcmp(h, host, hl) == 0, "'%s': host '%.*s'", s, (int)hl, h);
    CHECK(p == port, "'%s': port %d", s, p);
}

static void refuses(const char *s, size_t len, const char *msg) {
    const char *h;
    size_t hl, i;
    int p;
    char err[200];
    int rc = hostport_parse(s, len, &h, &hl, &p, err, sizeof err);
    CHECK(rc == -1, "'%.*s' accepted", (int)len, s);
    CHECK(rc != -1 || strcmp(err, msg) == 0, "'%.*s': '%s', not '%s'", (int)len, s, err, msg);
    for (i = 0; rc == -1 && err[i]; i++)
        CHECK(err[i] >= 32 && err[i] < 127, "'%.*s': byte %d in the message", (int)len, s, err[i]);
    CHECK(rc != -1 || strlen(err) < 120, "'%.*s': message of %zu bytes", (int)len, s, strlen(err));
}

static void node_parses(const char *s, const char *host, int port) {
    topo_node n;
    int rc = topo_node_parse(s, strlen(s), &n);
    CHECK(rc == 0, "node '%s'", s);
    if (rc != 0) return;
    CHECK(strcmp(n.host, host) == 0 && n.port == port, "node '%s': %s %d", s, n.host, n.port);
    topo_node_clear(&n);
}

static void node_refuses(const char *s) {
    topo_node n;
    CHECK(topo_node_parse(s, strlen(s), &n) == -1, "node '%s' accepted", s);
}

int main(void) {
    char long_host[400];
    parses("127.0.0.1:6379", "127.0.0.1", 6379);
    parses("localhost", "localhost", 0);
    parses("redis-1.example_internal:1", "redis-1.example_internal", 1);
    parses("[::1]:7000", "::1", 7000);
    parses("[fe80::1.2.3.4]", "fe80::1.2.3.4", 0);
    parses("h:65535", "h", 65535);
    refuses(":6379", 5, "host expected");
    refuses("", 0, "host expected");
    refuses("a b:1", 5, "host 'a b' is not a host name or address");
    refuses("a\tb", 3, "host 'a\\x09b' is not a host name or address");
    refuses("a\0b:1", 5, "host 'a\\x00b' is not a host name or address");
    refuses("caf\xc3\xa9", 5, "host 'caf\\xc3\\xa9' is not a host name or address");
    refuses("h'x", 3, "host 'h\\x27x' is not a host name or address");
    refuses("[::1", 4, "an IPv6 address expected inside [ ], got '[::1'");
    refuses("[abc]:1", 7, "an IPv6 address expected inside [ ], got '[abc]:1'");
    refuses("[]:1", 4, "an IPv6 address expected inside [ ], got '[]:1'");
    refuses("h:", 2, "port expected after ':'");
    refuses("[::1]:", 6, "port expected after ':'");
    refuses("h:0", 3, "port must be a number 1-65535, got '0'");
    refuses("h:65536", 7, "port must be a number 1-65535, got '65536'");
    refuses("h:99999999999999999999", 22, "port must be a number 1-65535, got '99999999999999999999'");
    refuses("h:12:34", 7, "port must be a number 1-65535, got '12:34'");
    refuses("h:-1", 4, "port must be a number 1-65535, got '-1'");
    refuses("[::1]x", 6, "port must be a number 1-65535, got ''");
    memset(long_host, 'a', 254);
    long_host[254] = '\0';
    /* (shown cut at 60 bytes: 57 and "...") */
    refuses(long_host, 254, "host 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...' is not a host name or address");
    node_parses("127.0.0.1:7002", "127.0.0.1", 7002);
    node_parses("[::1]:7002", "::1", 7002);
    node_parses("::1:7002", "::1", 7002);
    node_parses("fe80::1:2:30001", "fe80::1:2", 30001);
    node_parses("redis-1:7002", "redis-1", 7002);
    node_refuses("127.0.0.1");
    node_refuses("127.0.0.1:");
    node_refuses(":7002");
    node_refuses("a b:7002");
    return check_report("hostport_test");
}
