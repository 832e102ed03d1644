/*
 * test/c/script_answer_test.c: unit test of script_answer.c and of the
 * request machine's use of it (exec.c). No server, no Lua: replies are
 * written out as RESP here and parsed by hiredis.
 *
 * Checks:
 * - every embedded script has a shape, and every shape is well formed;
 * - each script's answers, as its header comment lists them, fit; replies
 *   of other shapes (+OK where an array is expected, an array of one, an
 *   integer out of the script's set, nil, a string) do not; an error
 *   reply always does (it is Redis' refusal, the caller's to read);
 * - the machine: a request for a script given a reply of its shape is
 *   EXEC_DONE with that reply as the answer; given any other, EXEC_FAIL of
 *   kind "redis" ("protocol error"), the reply never handed out; an
 *   integer read in place is an answer only when exec_answer_int_ok says so;
 * - a fuzz of reply shapes: thousands of random replies to random scripts;
 *   whatever the machine hands out as an answer fits the script's shape.
 *
 * Run by `make ctest` (and `make test`, `make sanitize`).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis.h>

#include "check.h"
#include "conn_pair.h"
#include "parse_reply.h"
#include "cmd/script.h"
#include "cmd/script_answer.h"
#include "exec/exec.h"

struct case_ {
    const char *script;
    const char *reply;   /* RESP */
    int fits;
};

static const struct case_ cases[] = {
    {"acquire", "*2\r\n:1\r\n:1700000000000000\r\n", 1},
    {"acquire", "*2\r\n:0\r\n:-2\r\n", 1},
    {"acquire", "*4\r\n:0\r\n:5000\r\n$6\r\nweb-3 \r\n:12\r\n", 1},
    {"acquire", "-ERR something\r\n", 1},
    {"acquire", "-NOSCRIPT x\r\n", 1},
    {"acquire", "+OK\r\n", 0},
    {"acquire", ":1\r\n", 0},
    {"acquire", "*1\r\n:1\r\n", 0},
    {"acquire", "*2\r\n:2\r\n:1\r\n", 0},
    {"acquire", "*2\r\n+OK\r\n:1\r\n", 0},
    {"acquire", "*2\r\n:1\r\n$1\r\n7\r\n", 0},
    {"acquire", "*3\r\n:1\r\n:7\r\n:1\r\n", 0},
    {"acquire", "*4\r\n:1\r\n:7\r\n$1\r\nx\r\n:1\r\n", 0},
    {"acquire", "*4\r\n:0\r\n:7\r\n:1\r\n:1\r\n", 0},
    {"acquire", "$-1\r\n", 0},
    {"acquire", "*-1\r\n", 0},
    {"acquire", "*0\r\n", 0},
    {"acquire", "$2\r\nOK\r\n", 0},
    {"acquire_all", "*2\r\n:1\r\n*2\r\n:7\r\n:8\r\n", 1},
    {"acquire_all", "*3\r\n:0\r\n:2\r\n:900\r\n", 1},
    {"acquire_all", "*5\r\n:0\r\n:2\r\n:900\r\n$1\r\nx\r\n:12\r\n", 1},
    {"acquire_all", "*2\r\n:1\r\n:7\r\n", 0},
    {"acquire_fair", "*3\r\n:1\r\n:7\r\n:900\r\n", 1},
    {"acquire_fair", "*2\r\n:0\r\n:-2\r\n", 1},
    {"acquire_fair", "*4\r\n:0\r\n:5000\r\n$1\r\nx\r\n:12\r\n", 0},
    {"acquire_reentrant", "*3\r\n:1\r\n:7\r\n:2\r\n", 1},
    {"acquire_reentrant", "*2\r\n:1\r\n:7\r\n", 0},
    {"adopt", "*1\r\n:0\r\n", 1},
    {"adopt", "*2\r\n:1\r\n:9\r\n", 1},
    {"adopt", "*1\r\n:1\r\n", 0},
    {"extend", ":1\r\n", 1},
    {"extend", ":0\r\n", 1},
    {"extend", ":7\r\n", 0},
    {"extend", ":-1\r\n", 0},
    {"extend", "+OK\r\n", 0},
    {"extend", "$-1\r\n", 0},
    {"extend", "*1\r\n:1\r\n", 0},
    {"extend_grant", ":1\r\n", 1},
    {"extend_grant", ":0\r\n", 1},
    {"extend_grant", ":2\r\n", 0},
    {"release", ":1\r\n", 1},
    {"release", ":2\r\n", 0},
    {"release_reentrant", ":2\r\n", 1},
    {"redlock_renew", ":3\r\n", 1},
    {"redlock_renew", ":4\r\n", 0},
    {"redlock_acquire", "*1\r\n:1\r\n", 1},
    {"redlock_acquire", "*1\r\n:0\r\n", 0},
    {"fenced_get", "*2\r\n:1\r\n$-1\r\n", 1},
    {"fenced_get", "*2\r\n:1\r\n$3\r\nabc\r\n", 1},
    {"fenced_get", "*1\r\n:0\r\n", 1},
    {"fenced_get", "*2\r\n:1\r\n:3\r\n", 0},
    {"fenced_set", ":12\r\n", 1},
    {"fenced_set", "+OK\r\n", 0},
    {"inspect", "*7\r\n$-1\r\n:-2\r\n$-1\r\n$-1\r\n$-1\r\n$-1\r\n:0\r\n", 1},
    {"inspect", "*7\r\n$3\r\ntok\r\n:900\r\n$2\r\n17\r\n$1\r\nl\r\n$2\r\n12\r\n:3\r\n:1\r\n", 1},
    {"inspect", "*6\r\n$-1\r\n:-2\r\n$-1\r\n$-1\r\n$-1\r\n$-1\r\n", 0},
    {"rw_inspect", "*11\r\n:-2\r\n$-1\r\n$-1\r\n$-1\r\n:0\r\n:0\r\n*0\r\n:0\r\n:0\r\n:0\r\n:0\r\n", 1},
    {"rw_inspect", "*11\r\n:-2\r\n$-1\r\n$-1\r\n$-1\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n", 0},
    {"rw_inspect", "*9\r\n:-2\r\n$-1\r\n$-1\r\n$-1\r\n:0\r\n:0\r\n*0\r\n:0\r\n:0\r\n", 0},
    {"rw_write_reentrant", "*3\r\n:1\r\n:7\r\n:2\r\n", 1},
    {"rw_write_reentrant", "*2\r\n:0\r\n:-3\r\n", 1},
    {"rw_release_reentrant", ":2\r\n", 1},
    {"rw_break", ":1\r\n", 1},
    {"sem_inspect", "*4\r\n:-1\r\n:0\r\n*4\r\n$-1\r\n$-1\r\n$-1\r\n:5\r\n:0\r\n", 1},
    {"sem_limit", "*2\r\n:3\r\n:0\r\n", 1},
    {"rw_read", "*1\r\n:1\r\n", 1},
    {"rw_read", "*2\r\n:0\r\n:100\r\n", 1},
    {"rw_read", "*2\r\n:1\r\n:100\r\n", 0},
    {"dequeue", ":1\r\n", 1},
    {"dequeue", ":0\r\n", 0},
    {"redlock_ping", ":1\r\n", 1},
    {"zset_renew", ":0\r\n", 1},
    {"rw_renew_reentrant", ":1\r\n", 1},
    {"rw_renew_reentrant", "*1\r\n:1\r\n", 0},
    {"extend_all", ":1\r\n", 1},
    {"extend_all", ":2\r\n", 0},
    {"sem_release", ":0\r\n", 1},
    {"sem_release", "*1\r\n:1\r\n", 0},
};

/* Every shape: forms of one code or a bracketed list of codes, by '|'. */
static int shape_well_formed(const char *shape) {
    const char *p = shape;
    if (*p == '\0') return 0;
    while (*p) {
        if (*p == '[') {
            p++;
            while (*p && *p != ']') {
                if (!strchr("isnja0123456789", *p)) return 0;
                p++;
            }
            if (*p++ != ']') return 0;
        } else {
            if (!strchr("isnja0123456789", *p)) return 0;
            p++;
        }
        if (*p == '|') {
            p++;
            if (*p == '\0') return 0;
        } else if (*p != '\0') {
            return 0;
        }
    }
    return 1;
}

static void test_table(void) {
    size_t i;
    for (i = 0; i < script_count(); i++) {
        const script_def *s = script_at(i);
        const char *shape = script_answer_shape(s);
        CHECK(shape != NULL, "script %s has no answer shape (csrc/cmd/script_answer.c)", s->name);
        if (shape) CHECK(shape_well_formed(shape), "script %s: shape '%s'", s->name, shape);
        CHECK(script_index(s) == i, "script %s: index %zu", s->name, script_index(s));
    }
}

static void test_cases(void) {
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const script_def *s = script_find(cases[i].script);
        redisReply *r = parse(cases[i].reply, strlen(cases[i].reply));
        CHECK(s != NULL, "no script %s", cases[i].script);
        if (s) {
            CHECK(script_answer_ok(s, r) == cases[i].fits, "case %zu: %s answered %.30s: fits %d", i, s->name,
                  cases[i].reply, !cases[i].fits);
            if (r->type == REDIS_REPLY_INTEGER)
                CHECK(script_answer_int_ok(s, r->integer) == cases[i].fits, "case %zu: in place", i);
        }
        freeReplyObject(r);
    }
}

/* The machine on one request for s given r (taken): the step; *answer the
 * answer it hands out (the caller frees it), or NULL. */
static int machine(const script_def *s, redisReply *r, redisReply **answer, char *errstr, size_t errlen) {
    exec_req x;
    exec_conn xc;
    const char *args[8] = {"k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8"};
    size_t lens[8] = {2, 2, 2, 2, 2, 2, 2, 2};
    /* (a variadic script: its key count first, then one key) */
    const char *vargs[2] = {"1", "k1"};
    size_t vlens[2] = {1, 2};
    int peer, step;
    memset(&xc, 0, sizeof xc);
    xc.c = conn_pair(0, &peer);
    xc.gen = xc.c->gen;
    if (s->nkeys < 0)
        exec_init(&x, s, 2, vargs, vlens, "k1", 2, 0, 0, 1000, 0);
    else
        exec_init(&x, s, s->nkeys > 8 ? 8 : s->nkeys, args, lens, "k1", 2, 0, 0, 1000, 0);
    if (exec_write(&x, &xc) != 0) abort();
    step = exec_reply(&x, &xc, r);
    *answer = step == EXEC_DONE ? exec_take_answer(&x) : NULL;
    snprintf(errstr, errlen, "%s", step == EXEC_FAIL ? x.errstr : "");
    if (step == EXEC_FAIL) CHECK(x.err == CONN_EREDIS, "%s: failed with kind %s", s->name, conn_kind(x.err));
    exec_clear(&x);
    conn_free(xc.c);
    close(peer);
    return step;
}

static void test_machine(void) {
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const script_def *s = script_find(cases[i].script);
        redisReply *answer;
        char err[CONN_ERRSTR_LEN];
        int step;
        if (s == NULL || strncmp(cases[i].reply, "-NOSCRIPT", 9) == 0) continue;
        step = machine(s, parse(cases[i].reply, strlen(cases[i].reply)), &answer, err, sizeof err);
        if (cases[i].fits) {
            CHECK(step == EXEC_DONE && answer != NULL, "case %zu: step %d (%s)", i, step, err);
        } else {
            CHECK(step == EXEC_FAIL && answer == NULL, "case %zu: step %d", i, step);
            CHECK(strncmp(err, "redis error: protocol error: ", 29) == 0 && strstr(err, s->name) != NULL,
                  "case %zu: errstr '%s'", i, err);
        }
        if (answer) freeReplyObject(answer);
    }
    CHECK(exec_answer_int_ok(script_find("extend"), 1) && !exec_answer_int_ok(script_find("extend"), 5),
          "extend's integers in place");
    CHECK(exec_answer_int_ok(NULL, 5), "a plain command's integer in place");
}

/* A random reply: mostly near a script's shapes, often off them. */
static size_t random_reply(char *buf, int depth) {
    uint64_t r = check_rand();
    size_t n, i, k;
    switch (r % 8) {
    case 0:
    case 1:
        return (size_t)sprintf(buf, ":%d\r\n", (int)(check_rand() % 6) - 2);
    case 2:
        return (size_t)sprintf(buf, "+OK\r\n");
    case 3:
        return (size_t)sprintf(buf, (r >> 8) % 2 ? "$-1\r\n" : "$3\r\nabc\r\n");
    case 4:
        return (size_t)sprintf(buf, "-ERR x\r\n");
    default:
        k = (size_t)((r >> 8) % 10);
        n = (size_t)sprintf(buf, "*%zu\r\n", k);
        for (i = 0; i < k; i++) n += depth < 2 ? random_reply(buf + n, depth + 1) : (size_t)sprintf(buf + n, ":1\r\n");
        return n;
    }
}

static void test_fuzz(void) {
    int round, done = 0, failed = 0;
    char buf[65536];
    for (round = 0; round < 20000; round++) {
        const script_def *s = script_at((size_t)(check_rand() % script_count()));
        size_t len = random_reply(buf, 0);
        redisReply *answer, *copy = parse(buf, len);
        char err[CONN_ERRSTR_LEN];
        int step, fits = script_answer_ok(s, copy);
        step = machine(s, parse(buf, len), &answer, err, sizeof err);
        if (step == EXEC_DONE) {
            done++;
            CHECK(fits && answer && script_answer_ok(s, answer), "fuzz %d: %s handed out %.40s", round, s->name, buf);
        } else {
            failed += step == EXEC_FAIL;
            CHECK(step == EXEC_FAIL && !fits, "fuzz %d: %s: step %d for %.40s", round, s->name, step, buf);
        }
        if (answer) freeReplyObject(answer);
        freeReplyObject(copy);
    }
    CHECK(done > 1000 && failed > 1000, "fuzz: %d answers, %d refused", done, failed);
}

int main(void) {
    check_rng = 0x13198A2E03707344ULL;   /* (this test's own sequence) */
    test_table();
    test_cases();
    test_machine();
    test_fuzz();
    return check_report("script_answer_test");
}
