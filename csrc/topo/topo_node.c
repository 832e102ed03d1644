/*
 * topo_node.c: a topology's nodes and snapshots (see topo_node.h).
 */
#define _GNU_SOURCE
#include "topo/topo_node.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hostport.h"
#include "base/monotime.h"
#include "net/resolve.h"
#include "base/secret.h"
#include "base/slot.h"

/* ---- nodes ----------------------------------------------------------------- */

void topo_node_clear(topo_node *n) {
    free(n->host);
    free(n->path);
    free(n->username);
    secret_free(n->password);
    tls_ctx_release(n->tls);
    memset(n, 0, sizeof *n);
}

int topo_node_dup(topo_node *dst, const topo_node *src) {
    *dst = *src;
    dst->host = src->host ? strdup(src->host) : NULL;
    dst->path = src->path ? strdup(src->path) : NULL;
    dst->username = src->username ? strdup(src->username) : NULL;
    dst->password = src->password ? strdup(src->password) : NULL;
    tls_ctx_retain(dst->tls);
    if ((src->host && !dst->host) || (src->path && !dst->path) ||
        (src->username && !dst->username) || (src->password && !dst->password)) {
        topo_node_clear(dst);
        return -1;
    }
    return 0;
}

int topo_node_same(const topo_node *a, const topo_node *b) {
    if ((a->path == NULL) != (b->path == NULL)) return 0;
    if (a->path) return strcmp(a->path, b->path) == 0;
    return a->port == b->port && a->host && b->host && strcmp(a->host, b->host) == 0;
}

int topo_node_parse(const char *s, size_t len, topo_node *out) {
    char err[160], v6[300];
    const char *host, *last = NULL;
    size_t hostlen, i;
    int port, colons = 0;
    memset(out, 0, sizeof *out);
    for (i = 0; i < len; i++)
        if (s[i] == ':') {
            colons++;
            last = s + i;
        }
    if (len > 0 && s[0] != '[' && colons > 1 && len + 2 < sizeof v6) {
        /* an IPv6 address as Redis writes one in MOVED and ASK, without
         * brackets ("::1:7002"): the last colon is the port's */
        int n = snprintf(v6, sizeof v6, "[%.*s]%.*s", (int)(last - s), s, (int)(s + len - last), last);
        s = v6;
        len = (size_t)n;
    }
    if (hostport_parse(s, len, &host, &hostlen, &port, err, sizeof err) != 0 || port == 0) return -1;
    out->host = strndup(host, hostlen);
    if (out->host == NULL) return -1;
    out->port = port;
    return 0;
}

void topo_node_describe(const topo_node *n, char *buf, size_t len) {
    if (n->path)
        snprintf(buf, len, "%s", n->path);
    else if (n->host && strchr(n->host, ':'))
        snprintf(buf, len, "[%s]:%d", n->host, n->port);
    else
        snprintf(buf, len, "%s:%d", n->host ? n->host : "?", n->port);
}

int topo_node_resolve(topo_node *n, int may_resolve, int64_t deadline, char *err, size_t errlen) {
    char where[160];
    if (n->addrs.n > 0) return 0;
    if (n->path) {
        if (sock_unix(n->path, &n->addrs) == 0) return 0;
        snprintf(err, errlen, "bad unix socket path");
        return -1;
    }
    if (sock_numeric(n->host, n->port, &n->addrs)) return 0;
    if (!may_resolve) {
        topo_node_describe(n, where, sizeof where);
        snprintf(err, errlen, "%.100s is a name this thread may not resolve", where);
        return -1;
    }
    return resolve_host(n->host, n->port, deadline, &n->addrs, err, errlen);
}

conn *topo_node_conn(topo_node *n, const conn_config *base, int may_resolve, int64_t deadline, long max_ms,
                     char *err, size_t errlen) {
    conn_config cfg;
    conn *c;
    long left_ms = (long)((deadline - monotime_us()) / 1000);
    if (left_ms > max_ms) left_ms = max_ms;
    if (left_ms < 1) left_ms = 1;
    if (topo_node_resolve(n, may_resolve, deadline, err, errlen) != 0) return NULL;
    cfg = *base;
    cfg.host = n->host;
    cfg.port = n->port;
    cfg.path = NULL;
    cfg.connect_timeout_ms = left_ms;
    cfg.timeout_ms = left_ms;
    c = conn_new(&cfg);
    if (c == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->may_resolve = 0;
    conn_set_addrs(c, &n->addrs);
    return c;
}

/* ---- snapshots ---------------------------------------------------------------- */

topo_snap *topo_snap_new(int nnodes, int with_slots) {
    topo_snap *s = calloc(1, sizeof *s);
    if (s == NULL) return NULL;
    s->nodes = calloc((size_t)(nnodes > 0 ? nnodes : 1), sizeof *s->nodes);
    if (with_slots) s->slot_node = malloc(SLOT_COUNT * sizeof *s->slot_node);
    if (s->nodes == NULL || (with_slots && s->slot_node == NULL)) {
        free(s->nodes);
        free(s->slot_node);
        free(s);
        return NULL;
    }
    if (with_slots) {
        int i;
        for (i = 0; i < SLOT_COUNT; i++) s->slot_node[i] = TOPO_NO_NODE;
    }
    s->nnodes = nnodes;
    return s;
}

void topo_snap_free(topo_snap *s) {
    int i;
    if (s == NULL) return;
    for (i = 0; i < s->nnodes; i++) topo_node_clear(&s->nodes[i]);
    free(s->nodes);
    free(s->slot_node);
    free(s);
}

int topo_node_of(const topo_snap *s, const char *key, size_t len) {
    uint16_t n;
    if (s->slot_node == NULL) return 0;
    n = s->slot_node[slot_of(key, len)];
    return n == TOPO_NO_NODE ? -1 : n;
}
