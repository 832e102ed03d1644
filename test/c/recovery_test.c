/*
 * test/c/recovery_test.c: unit test of recovery.c (what a refusal or a
 * failure asks for) and of script_append (the one builder of EVAL and
 * EVALSHA requests). No server: replies are RESP bytes written out here,
 * in Redis' own words (7.0), parsed by hiredis' reader as conn.c does;
 * requests are checked on the bytes a conn queues.
 *
 * Checks:
 * - every class, from its error reply, in every topology mode: the class
 *   and the exact set of things to do (the table recovery.h states);
 * - the first word decides, whole: a longer word, a word further in, a
 *   status or bulk reply with the same text, lower case, are answers;
 * - MOVED and ASK give the address (IPv4, IPv6, a name) as the last word,
 *   and are answers when it is missing or malformed;
 * - every failure (conn.h's kinds, sent or not) in every mode;
 * - the pause schedule; the names (distinct, lowercase);
 * - script_append's EVALSHA and EVAL bytes for every embedded script,
 *   with binary arguments, against RESP written out here; too many
 *   arguments refused.
 *
 * Run by `make ctest` (and `make test`, `make sanitize`); exits non-zero on
 * any failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis.h>

#include "check.h"
#include "parse_reply.h"
#include "net/conn.h"
#include "exec/recovery.h"
#include "cmd/script.h"
#include "topo/topo.h"

#define R RECOVERY_RETRY
#define RS RECOVERY_RESOLVE
#define D RECOVERY_DROP
#define A RECOVERY_ASKING
#define P RECOVERY_PAUSE
#define E RECOVERY_EVAL

static const char *const mode_names[4] = {"single", "sentinel", "cluster", "redlock"};

/* An error reply, in each mode: its class, todo per mode, and target. */
static const struct {
    const char *resp;
    int cls;
    unsigned todo[4];        /* single, sentinel, cluster, redlock */
    const char *target;      /* MOVED, ASK */
} replies[] = {
    {"-MOVED 3999 127.0.0.1:6381\r\n", RECOVERY_MOVED, {0, 0, R | RS, 0}, "127.0.0.1:6381"},
    {"-MOVED 0 [::1]:7000\r\n", RECOVERY_MOVED, {0, 0, R | RS, 0}, "[::1]:7000"},
    {"-MOVED 16383 redis-3.example:7003\r\n", RECOVERY_MOVED, {0, 0, R | RS, 0}, "redis-3.example:7003"},
    {"-ASK 3999 127.0.0.1:6382\r\n", RECOVERY_ASK, {0, 0, R | A, 0}, "127.0.0.1:6382"},
    {"-ASK 12 ::1:6382\r\n", RECOVERY_ASK, {0, 0, R | A, 0}, "::1:6382"},
    {"-TRYAGAIN Multiple keys request during rehashing of slot\r\n", RECOVERY_TRYAGAIN,
     {0, 0, R | P, 0}, NULL},
    {"-TRYAGAIN\r\n", RECOVERY_TRYAGAIN, {0, 0, R | P, 0}, NULL},
    {"-CLUSTERDOWN The cluster is down\r\n", RECOVERY_CLUSTERDOWN, {0, 0, 0, 0}, NULL},
    {"-CLUSTERDOWN Hash slot not served\r\n", RECOVERY_CLUSTERDOWN, {0, 0, 0, 0}, NULL},
    {"-READONLY You can't write against a read only replica.\r\n", RECOVERY_READONLY,
     {0, R | RS | D, R | RS | D, 0}, NULL},
    {"-READONLY You can't write against a read only replica. script: 8d1d, on @user_script:4.\r\n",
     RECOVERY_READONLY, {0, R | RS | D, R | RS | D, 0}, NULL},
    {"-MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.\r\n",
     RECOVERY_MASTERDOWN, {0, R | RS | D, R | RS | D, 0}, NULL},
    {"-LOADING Redis is loading the dataset in memory\r\n", RECOVERY_LOADING,
     {R | P, R | P | RS, R | P | RS, 0}, NULL},
    {"-NOSCRIPT No matching script. Please use EVAL.\r\n", RECOVERY_NOSCRIPT,
     {R | E, R | E, R | E, R | E}, NULL},
    /* answers: the first word must be one of ours, whole */
    {"-ERR wrong number of arguments for 'evalsha' command\r\n", RECOVERY_NONE, {0, 0, 0, 0}, NULL},
    {"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n", RECOVERY_NONE,
     {0, 0, 0, 0}, NULL},
    {"-NOPERM this user has no permissions to run the 'evalsha' command\r\n", RECOVERY_NONE,
     {0, 0, 0, 0}, NULL},
    {"-CROSSSLOT Keys in request don't hash to the same slot\r\n", RECOVERY_NONE, {0, 0, 0, 0}, NULL},
    {"-ERR Error running script: MOVED 1 127.0.0.1:1\r\n", RECOVERY_NONE, {0, 0, 0, 0}, NULL},
    {"-MOVEDX 3999 127.0.0.1:6381\r\n", RECOVERY_NONE, {0, 0, 0, 0}, NULL},
    {"-ASKING\r\n", RECOVERY_NONE, {0, 0, 0, 0}, NULL},
    {"-TRYAGAINLATER\r\n", RECOVERY_NONE, {0, 0, 0, 0}, NULL},
    {"-NOSCRIPTS\r\n", RECOVERY_NONE, {0, 0, 0, 0}, NULL},
    {"-loading the dataset\r\n", RECOVERY_NONE, {0, 0, 0, 0}, NULL},
    {"- LOADING\r\n", RECOVERY_NONE, {0, 0, 0, 0}, NULL},
    {"-\r\n", RECOVERY_NONE, {0, 0, 0, 0}, NULL},
    /* a redirect we cannot follow is an answer */
    {"-MOVED\r\n", RECOVERY_NONE, {0, 0, 0, 0}, NULL},
    {"-MOVED 3999\r\n", RECOVERY_NONE, {0, 0, 0, 0}, NULL},
    {"-ASK 3999 127.0.0.1\r\n", RECOVERY_NONE, {0, 0, 0, 0}, NULL},
    {"-ASK 3999 127.0.0.1:\r\n", RECOVERY_NONE, {0, 0, 0, 0}, NULL},
    {"-ASK 3999 :6379\r\n", RECOVERY_NONE, {0, 0, 0, 0}, NULL},
    {"-MOVED 3999 127.0.0.1:638x\r\n", RECOVERY_NONE, {0, 0, 0, 0}, NULL},
    {"-MOVED 3999 127.0.0.1:123456\r\n", RECOVERY_NONE, {0, 0, 0, 0}, NULL},
    {"-MOVED 3999 127.0.0.1:6381 \r\n", RECOVERY_NONE, {0, 0, 0, 0}, NULL},
    /* not errors: whatever their text */
    {"+MOVED 3999 127.0.0.1:6381\r\n", RECOVERY_NONE, {0, 0, 0, 0}, NULL},
    {"$8\r\nNOSCRIPT\r\n", RECOVERY_NONE, {0, 0, 0, 0}, NULL},
    {":1\r\n", RECOVERY_NONE, {0, 0, 0, 0}, NULL},
    {"$-1\r\n", RECOVERY_NONE, {0, 0, 0, 0}, NULL},
    {"*2\r\n-TRYAGAIN\r\n-LOADING x\r\n", RECOVERY_NONE, {0, 0, 0, 0}, NULL},
};

static void test_replies(void) {
    size_t i;
    int mode;
    for (i = 0; i < sizeof replies / sizeof replies[0]; i++) {
        redisReply *r = parse(replies[i].resp, strlen(replies[i].resp));
        for (mode = 0; mode < 4; mode++) {
            recovery rc;
            memset(&rc, 0xa5, sizeof rc);
            recovery_of_reply(r, mode, &rc);
            CHECK(rc.cls == replies[i].cls, "%s in %s: class %s, not %s", replies[i].resp,
                  mode_names[mode], recovery_name(rc.cls), recovery_name(replies[i].cls));
            CHECK(rc.todo == replies[i].todo[mode], "%s in %s: todo %#x, not %#x", replies[i].resp,
                  mode_names[mode], rc.todo, replies[i].todo[mode]);
            if (replies[i].target) {
                CHECK(rc.target != NULL && rc.target_len == strlen(replies[i].target) &&
                          memcmp(rc.target, replies[i].target, rc.target_len) == 0,
                      "%s: target %.*s", replies[i].resp, (int)rc.target_len, rc.target ? rc.target : "");
                /* a pointer into the reply, not a copy */
                CHECK(rc.target >= r->str && rc.target + rc.target_len == r->str + r->len,
                      "%s: target outside the text", replies[i].resp);
            } else {
                CHECK(rc.target == NULL && rc.target_len == 0, "%s: a target", replies[i].resp);
            }
            if (r->type == REDIS_REPLY_ERROR) {
                /* the text alone (what Lua hands core.recovery) says the same */
                recovery rt;
                recovery_of_error(r->str, r->len, mode, &rt);
                CHECK(rt.cls == rc.cls && rt.todo == rc.todo && rt.target == rc.target,
                      "%s: recovery_of_error differs", replies[i].resp);
            }
        }
        freeReplyObject(r);
    }
    {
        recovery rc;
        recovery_of_reply(NULL, TOPO_CLUSTER, &rc);
        CHECK(rc.cls == RECOVERY_NONE && rc.todo == 0, "NULL reply");
        recovery_of_error(NULL, 0, TOPO_CLUSTER, &rc);
        CHECK(rc.cls == RECOVERY_NONE && rc.todo == 0, "NULL text");
        /* an unknown mode asks for nothing */
        recovery_of_error("LOADING x", 9, 7, &rc);
        CHECK(rc.cls == RECOVERY_LOADING && rc.todo == 0, "mode 7: todo %#x", rc.todo);
        recovery_of_error("LOADING x", 9, -1, &rc);
        CHECK(rc.cls == RECOVERY_LOADING && rc.todo == 0, "mode -1: todo %#x", rc.todo);
        /* binary text: a NUL ends nothing */
        recovery_of_error("ASK 1 h\0st:1", 12, TOPO_CLUSTER, &rc);
        CHECK(rc.cls == RECOVERY_ASK && rc.target_len == 6, "binary ASK target");
    }
}

/* Rules a reader of recovery.h relies on, checked over the whole table. */
static void test_invariants(void) {
    int cls, mode;
    for (cls = 0; cls < RECOVERY_CLASSES; cls++)
        for (mode = 0; mode < 4; mode++) {
            recovery rc;
            unsigned t;
            if (cls >= RECOVERY_UNSENT) {
                static const int errs[] = {CONN_ECONNECT, CONN_ETIMEOUT, CONN_ELOST};
                recovery_of_failure(errs[cls - RECOVERY_UNSENT], cls != RECOVERY_UNSENT, mode, &rc);
            } else {
                /* (the first word of each class's reply above) */
                static const char *const words[] = {"ERR x", "MOVED 1 h:1", "ASK 1 h:1", "TRYAGAIN",
                                                    "CLUSTERDOWN x", "READONLY x", "MASTERDOWN x",
                                                    "LOADING x", "NOSCRIPT x"};
                recovery_of_error(words[cls], strlen(words[cls]), mode, &rc);
            }
            CHECK(rc.cls == cls, "class %d in %s: %s", cls, mode_names[mode], recovery_name(rc.cls));
            t = rc.todo;
            /* whatever is to be done before a retry comes with the retry,
             * but a lost request's fresh look (it is never sent again) */
            if (t & (RECOVERY_ASKING | RECOVERY_PAUSE | RECOVERY_EVAL | RECOVERY_DROP))
                CHECK(t & RECOVERY_RETRY, "%s in %s: %#x without retry", recovery_name(cls),
                      mode_names[mode], t);
            /* a single node has nothing to look up, nowhere to be redirected */
            if (mode == TOPO_SINGLE)
                CHECK(!(t & (RECOVERY_RESOLVE | RECOVERY_ASKING | RECOVERY_DROP)), "%s in single: %#x",
                      recovery_name(cls), t);
            /* a request that may have run is retried only where it is
             * idempotent (Redlock's, for their token: fanout.c) */
            if (cls == RECOVERY_TIMEOUT) CHECK(!(t & RECOVERY_RETRY), "timeout retried in %s", mode_names[mode]);
            if (cls == RECOVERY_RESET && mode != TOPO_REDLOCK)
                CHECK(!(t & RECOVERY_RETRY), "reset retried in %s", mode_names[mode]);
            /* the redirects are Cluster's */
            if (cls == RECOVERY_MOVED || cls == RECOVERY_ASK || cls == RECOVERY_TRYAGAIN)
                CHECK((t != 0) == (mode == TOPO_CLUSTER), "%s in %s: %#x", recovery_name(cls),
                      mode_names[mode], t);
            /* CLUSTERDOWN is a clear error everywhere */
            if (cls == RECOVERY_CLUSTERDOWN) CHECK(t == 0, "clusterdown in %s: %#x", mode_names[mode], t);
            /* NOSCRIPT: load and EVAL, in every mode, and nothing else */
            if (cls == RECOVERY_NOSCRIPT) CHECK(t == (R | E), "noscript in %s: %#x", mode_names[mode], t);
        }
}

static void test_failures(void) {
    static const struct {
        int err, sent, cls;
        unsigned todo[4];
    } f[] = {
        {CONN_ECONNECT, 0, RECOVERY_UNSENT, {0, R | RS, R | RS, R}},
        {CONN_ECONNECT, 1, RECOVERY_UNSENT, {0, R | RS, R | RS, R}},   /* refused: never sent */
        {CONN_ETIMEOUT, 0, RECOVERY_UNSENT, {0, R | RS, R | RS, R}},   /* connecting */
        {CONN_ETIMEOUT, 1, RECOVERY_TIMEOUT, {0, RS, RS, 0}},
        {CONN_ELOST, 0, RECOVERY_UNSENT, {0, R | RS, R | RS, R}},      /* in the handshake */
        {CONN_ELOST, 1, RECOVERY_RESET, {0, RS, RS, R}},
        {CONN_EREDIS, 0, RECOVERY_UNSENT, {0, R | RS, R | RS, R}},     /* AUTH refused */
        {CONN_ENOMEM, 0, RECOVERY_NONE, {0, 0, 0, 0}},
        {CONN_ENOMEM, 1, RECOVERY_NONE, {0, 0, 0, 0}},
        {CONN_OK, 1, RECOVERY_NONE, {0, 0, 0, 0}},
    };
    size_t i;
    int mode;
    for (i = 0; i < sizeof f / sizeof f[0]; i++)
        for (mode = 0; mode < 4; mode++) {
            recovery rc;
            recovery_of_failure(f[i].err, f[i].sent, mode, &rc);
            CHECK(rc.cls == f[i].cls && rc.todo == f[i].todo[mode] && rc.target == NULL,
                  "failure %d sent %d in %s: %s %#x", f[i].err, f[i].sent, mode_names[mode],
                  recovery_name(rc.cls), rc.todo);
        }
}

static void test_pause_and_names(void) {
    int i, j;
    CHECK(recovery_pause_ms(1) == 5, "first pause %ld", recovery_pause_ms(1));
    CHECK(recovery_pause_ms(2) == 10, "second pause %ld", recovery_pause_ms(2));
    CHECK(recovery_pause_ms(20) == 100, "20th pause %ld", recovery_pause_ms(20));
    CHECK(recovery_pause_ms(21) == 100, "21st pause %ld", recovery_pause_ms(21));
    CHECK(recovery_pause_ms(1000000) == 100, "a millionth pause %ld", recovery_pause_ms(1000000));
    CHECK(recovery_pause_ms(0) == 5 && recovery_pause_ms(-3) == 5, "pause before any wait");
    for (i = 1; i < 20; i++)
        CHECK(recovery_pause_ms(i + 1) > recovery_pause_ms(i), "pause %d does not grow", i);
    CHECK(strcmp(recovery_name(RECOVERY_NONE), "none") == 0, "none");
    CHECK(strcmp(recovery_name(RECOVERY_TRYAGAIN), "tryagain") == 0, "tryagain");
    CHECK(strcmp(recovery_name(RECOVERY_NOSCRIPT), "noscript") == 0, "noscript");
    CHECK(strcmp(recovery_name(-1), "none") == 0 && strcmp(recovery_name(RECOVERY_CLASSES), "none") == 0,
          "names out of range");
    for (i = 0; i < RECOVERY_CLASSES; i++) {
        const char *n = recovery_name(i);
        const char *p;
        for (p = n; *p; p++) CHECK(*p >= 'a' && *p <= 'z', "name %s", n);
        for (j = 0; j < i; j++) CHECK(strcmp(n, recovery_name(j)) != 0, "name %s twice", n);
    }
}

/* ---- script_append ------------------------------------------------------- */

/* "$<len>\r\n<bytes>\r\n" appended to buf at *n. */
static void bulk(char *buf, size_t *n, const char *p, size_t len) {
    *n += (size_t)sprintf(buf + *n, "$%zu\r\n", len);
    memcpy(buf + *n, p, len);
    *n += len;
    memcpy(buf + *n, "\r\n", 2);
    *n += 2;
}

static void test_builder(void) {
    static char want[200000];
    conn_config cfg;
    const char *args[SCRIPT_MAX_ARGS + 1];
    size_t lens[SCRIPT_MAX_ARGS + 1];
    size_t i, n;
    int k, eval;
    memset(&cfg, 0, sizeof cfg);
    cfg.path = (char *)"/nonexistent";   /* never connected: requests are only queued */
    for (k = 0; k <= SCRIPT_MAX_ARGS; k++) {
        static const char *const vals[] = {"{name}", "tok\r\nen", "", "30000", "a\0b"};
        static const size_t vlens[] = {6, 8, 0, 5, 3};
        args[k] = vals[k % 5];
        lens[k] = vlens[k % 5];
    }
    for (i = 0; i < script_count(); i++) {
        const script_def *s = script_at(i);
        for (eval = 0; eval <= 1; eval++) {
            /* (a variadic script: no count of its own; its call's first
             * argument is one) */
            int variadic = s->nkeys < 0;
            int nargs = (variadic ? 0 : s->nkeys) + (int)(i % 4);
            conn *c = conn_new(&cfg);
            char nk[16];
            if (c == NULL) abort();
            if (nargs > SCRIPT_MAX_ARGS) nargs = SCRIPT_MAX_ARGS;
            n = (size_t)sprintf(want, "*%d\r\n", nargs + (variadic ? 2 : 3));
            if (eval) {
                bulk(want, &n, "EVAL", 4);
                bulk(want, &n, s->source, s->len);
            } else {
                bulk(want, &n, "EVALSHA", 7);
                bulk(want, &n, s->sha, 40);
            }
            if (!variadic) bulk(want, &n, nk, (size_t)sprintf(nk, "%d", s->nkeys));
            for (k = 0; k < nargs; k++) bulk(want, &n, args[k], lens[k]);
            CHECK(script_append(c, s, eval, nargs, args, lens) == 0, "%s: append failed", s->name);
            CHECK(c->out.len == n && memcmp(c->out.p, want, n) == 0, "%s %s: bytes differ (%zu, %zu)",
                  s->name, eval ? "EVAL" : "EVALSHA", c->out.len, n);
            CHECK(c->queued_total == n, "%s: queued_total %llu", s->name,
                  (unsigned long long)c->queued_total);
            /* a second one goes after it */
            CHECK(script_append(c, s, eval, nargs, args, lens) == 0 && c->out.len == 2 * n &&
                      memcmp(c->out.p + n, want, n) == 0, "%s: second append", s->name);
            CHECK(script_append(c, s, eval, SCRIPT_MAX_ARGS + 1, args, lens) == -1 &&
                      c->out.len == 2 * n, "%s: too many arguments queued", s->name);
            conn_free(c);
        }
    }
}

int main(void) {
    test_replies();
    test_invariants();
    test_failures();
    test_pause_and_names();
    test_builder();
    return check_report("recovery_test");
}
