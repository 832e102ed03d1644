/*
 * recovery.c: the classes of refusals and failures, and what to do about
 * each in each topology mode (see recovery.h).
 */
#include "exec/recovery.h"

#include <string.h>

#include "net/conn.h"
#include "exec/topo_mode.h"

#define R RECOVERY_RETRY
#define RS RECOVERY_RESOLVE
#define D RECOVERY_DROP
#define A RECOVERY_ASKING
#define P RECOVERY_PAUSE
#define E RECOVERY_EVAL

/* todo[class][mode]: single, sentinel, cluster, redlock (enum topo_mode). */
static const unsigned recovery_todo[RECOVERY_CLASSES][4] = {
    [RECOVERY_NONE]        = {0, 0, 0, 0},
    [RECOVERY_MOVED]       = {0, 0, R | RS, 0},
    [RECOVERY_ASK]         = {0, 0, R | A, 0},
    [RECOVERY_TRYAGAIN]    = {0, 0, R | P, 0},
    [RECOVERY_CLUSTERDOWN] = {0, 0, 0, 0},
    [RECOVERY_READONLY]    = {0, R | RS | D, R | RS | D, 0},
    [RECOVERY_MASTERDOWN]  = {0, R | RS | D, R | RS | D, 0},
    [RECOVERY_LOADING]     = {R | P, R | P | RS, R | P | RS, 0},
    [RECOVERY_NOSCRIPT]    = {R | E, R | E, R | E, R | E},
    [RECOVERY_UNSENT]      = {0, R | RS, R | RS, R},
    [RECOVERY_TIMEOUT]     = {0, RS, RS, 0},
    [RECOVERY_RESET]       = {0, RS, RS, R},
};

#undef R
#undef RS
#undef D
#undef A
#undef P
#undef E

static const char *const recovery_names[RECOVERY_CLASSES] = {
    "none", "moved", "ask", "tryagain", "clusterdown", "readonly", "masterdown", "loading",
    "noscript", "unsent", "timeout", "reset",
};

/* The error codes Redis puts first, as whole words. */
static const struct {
    const char *word;
    size_t len;
    int cls;
} recovery_words[] = {
    {"MOVED", 5, RECOVERY_MOVED},
    {"ASK", 3, RECOVERY_ASK},
    {"TRYAGAIN", 8, RECOVERY_TRYAGAIN},
    {"CLUSTERDOWN", 11, RECOVERY_CLUSTERDOWN},
    {"READONLY", 8, RECOVERY_READONLY},
    {"MASTERDOWN", 10, RECOVERY_MASTERDOWN},
    {"LOADING", 7, RECOVERY_LOADING},
    {"NOSCRIPT", 8, RECOVERY_NOSCRIPT},
};

/* host:port, [v6]:port or v6:port: something before the last colon, and
 * 1 to 5 digits after it (topo_node_parse checks the rest). */
static int recovery_is_address(const char *p, size_t len) {
    size_t colon = len, i;
    for (i = len; i > 0; i--)
        if (p[i - 1] == ':') {
            colon = i - 1;
            break;
        }
    if (colon == len || colon == 0 || len - colon - 1 < 1 || len - colon - 1 > 5) return 0;
    for (i = colon + 1; i < len; i++)
        if (p[i] < '0' || p[i] > '9') return 0;
    return 1;
}

static void recovery_set(recovery *out, int cls, int mode) {
    out->cls = cls;
    out->todo = mode >= 0 && mode < 4 ? recovery_todo[cls][mode] : 0;
    out->target = NULL;
    out->target_len = 0;
}

void recovery_of_error(const char *s, size_t len, int mode, recovery *out) {
    size_t i;
    recovery_set(out, RECOVERY_NONE, mode);
    if (s == NULL || len < 3) return;
    for (i = 0; i < sizeof recovery_words / sizeof recovery_words[0]; i++) {
        size_t n = recovery_words[i].len;
        if (len >= n && memcmp(s, recovery_words[i].word, n) == 0 && (len == n || s[n] == ' ')) {
            int cls = recovery_words[i].cls;
            if (cls == RECOVERY_MOVED || cls == RECOVERY_ASK) {
                /* "MOVED 3999 127.0.0.1:6381": the address is the last
                 * word; without one the reply is not a redirect we can
                 * follow, so it is an answer */
                const char *end = s + len, *p = end;
                while (p > s && p[-1] != ' ') p--;
                if (p == s || !recovery_is_address(p, (size_t)(end - p))) return;
                recovery_set(out, cls, mode);
                out->target = p;
                out->target_len = (size_t)(end - p);
                return;
            }
            recovery_set(out, cls, mode);
            return;
        }
    }
}

void recovery_of_reply(const redisReply *r, int mode, recovery *out) {
    if (r == NULL || r->type != REDIS_REPLY_ERROR) {
        recovery_set(out, RECOVERY_NONE, mode);
        return;
    }
    recovery_of_error(r->str, r->len, mode, out);
}

void recovery_of_failure(int err, int sent, int mode, recovery *out) {
    int cls;
    switch (err) {
    case CONN_OK:
    case CONN_ENOMEM:
        cls = RECOVERY_NONE;
        break;
    case CONN_ECONNECT:
        cls = RECOVERY_UNSENT;
        break;
    case CONN_ETIMEOUT:
        cls = sent ? RECOVERY_TIMEOUT : RECOVERY_UNSENT;
        break;
    default:   /* CONN_ELOST, and a handshake the server refused (CONN_EREDIS) */
        cls = sent ? RECOVERY_RESET : RECOVERY_UNSENT;
        break;
    }
    recovery_set(out, cls, mode);
}

long recovery_pause_ms(int waits) {
    long ms = 5L * (waits > 0 ? waits : 1);
    return ms > 100 ? 100 : ms;
}

const char *recovery_name(int cls) {
    return cls >= 0 && cls < RECOVERY_CLASSES ? recovery_names[cls] : "none";
}
