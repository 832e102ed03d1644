/*
 * hostport.c: "host:port" as redislock reads it (see hostport.h).
 */
#include "base/hostport.h"

#include <stdio.h>
#include <string.h>

#define HOSTPORT_NAME_MAX 253
#define HOSTPORT_SHOWN_MAX 60

int hostport_valid_host(const char *host, size_t len) {
    size_t i;
    int colon = memchr(host, ':', len) != NULL;
    if (len == 0 || len > HOSTPORT_NAME_MAX) return 0;
    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)host[i];
        int hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
        int name = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
                   c == '.' || c == '_';
        if (colon ? !(hex || c == ':' || c == '.') : !name) return 0;
    }
    return 1;
}

/* Part of the input as a message may show it: printable ('\xNN' for a
 * control byte, a byte above 127, a backslash or a quote), quoted, and
 * cut at HOSTPORT_SHOWN_MAX. */
static void hostport_shown(const char *s, size_t len, char *out, size_t outlen) {
    char buf[HOSTPORT_SHOWN_MAX * 4 + 1];
    size_t i, n = 0;
    for (i = 0; i < len && n + 5 < sizeof buf; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 32 || c >= 127 || c == '\\' || c == '\'') n += (size_t)snprintf(buf + n, sizeof buf - n, "\\x%02x", c);
        else buf[n++] = (char)c;
    }
    buf[n] = '\0';
    if (n > HOSTPORT_SHOWN_MAX) memcpy(buf + HOSTPORT_SHOWN_MAX - 3, "...", 4);
    snprintf(out, outlen, "'%s'", buf);
}

/* The ":port" part (rest, n bytes, n > 0): 0, or -1 with err. */
static int hostport_port(const char *rest, size_t n, int *port, char *err, size_t errlen) {
    char shown[HOSTPORT_SHOWN_MAX + 8];
    long p = 0;
    size_t i;
    if (n == 1 && rest[0] == ':') {
        snprintf(err, errlen, "port expected after ':'");
        return -1;
    }
    for (i = 1; i < n && p <= 65535; i++) {
        if (rest[i] < '0' || rest[i] > '9') break;
        p = p * 10 + (rest[i] - '0');
    }
    if (rest[0] != ':' || i < n || p < 1 || p > 65535) {
        hostport_shown(rest + 1, n - 1, shown, sizeof shown);
        snprintf(err, errlen, "port must be a number 1-65535, got %s", shown);
        return -1;
    }
    *port = (int)p;
    return 0;
}

int hostport_parse(const char *s, size_t len, const char **host, size_t *hostlen, int *port, char *err,
                   size_t errlen) {
    char shown[HOSTPORT_SHOWN_MAX + 8];
    const char *rest;
    *port = 0;
    if (len > 0 && s[0] == '[') {
        const char *close = memchr(s, ']', len);
        *host = s + 1;
        *hostlen = close ? (size_t)(close - s - 1) : 0;
        if (close == NULL || !memchr(*host, ':', *hostlen) || !hostport_valid_host(*host, *hostlen)) {
            hostport_shown(s, len, shown, sizeof shown);
            snprintf(err, errlen, "an IPv6 address expected inside [ ], got %s", shown);
            return -1;
        }
        rest = close + 1;
    } else {
        const char *colon = memchr(s, ':', len);
        *host = s;
        *hostlen = colon ? (size_t)(colon - s) : len;
        if (*hostlen == 0) {
            snprintf(err, errlen, "host expected");
            return -1;
        }
        if (!hostport_valid_host(*host, *hostlen)) {
            hostport_shown(*host, *hostlen, shown, sizeof shown);
            snprintf(err, errlen, "host %s is not a host name or address", shown);
            return -1;
        }
        rest = s + *hostlen;
    }
    if (rest == s + len) return 0;
    return hostport_port(rest, (size_t)(s + len - rest), port, err, errlen);
}
