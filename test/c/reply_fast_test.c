/*
 * test/c/reply_fast_test.c: unit test of reply_fast.c and of conn.c's use
 * of it, against hiredis' own reader. No server: a conn adopts one end of
 * a socketpair, and this test writes Redis replies into the other end.
 *
 * Checks:
 * - each reply of a table (simple ones, and ones left to hiredis: nested
 *   arrays, RESP3 types, odd numbers, a CR alone, malformed ones) is
 *   measured as whole and simple exactly when it should be; no truncated
 *   beginning of it ever is, and one of a simple reply waits for more;
 * - a simple reply is built as hiredis builds it (type, integer, string
 *   bytes, elements, deeply);
 * - streams of thousands of random replies, written in random chunk sizes,
 *   come out of conn_reply (and conn_reply_int, asked at random) in order
 *   and equal to hiredis' parse of the same bytes, however the chunks cut
 *   them and whichever path (fast or hiredis) each one took.
 *
 * Run by `make ctest` (and `make test`, `make sanitize`); exits non-zero on
 * any failure.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <hiredis.h>

#include "check.h"
#include "conn_pair.h"
#include "exec/exec_conn.h"
#include "net/conn.h"
#include "net/reply_fast.h"
#include "reply_same.h"

/* hiredis' parse of one reply (NULL when it finds none or an error). */
static redisReply *hiredis_parse(const char *bytes, size_t len, int *error) {
    redisReader *rd = redisReaderCreate();
    void *rep = NULL;
    *error = 0;
    if (redisReaderFeed(rd, bytes, len) != REDIS_OK || redisReaderGetReply(rd, &rep) != REDIS_OK) *error = 1;
    redisReaderFree(rd);
    return rep;
}

struct sample {
    const char *bytes;
    int simple;   /* whole and simple: reply_fast_scan must measure it */
};

static const struct sample samples[] = {
    {":1\r\n", 1},
    {":0\r\n", 1},
    {":-2\r\n", 1},
    {":1700000000000000\r\n", 1},
    {":123456789012345678\r\n", 1},
    {":1234567890123456789\r\n", 0},   /* 19 digits: left to hiredis */
    {":-\r\n", 0},
    {":01\r\n", 0},                    /* leading zeros: hiredis refuses them */
    {":-0\r\n", 0},
    {"$05\r\nhello\r\n", 0},
    {"*02\r\n:1\r\n:2\r\n", 0},
    {":\r\n", 0},
    {":12a\r\n", 0},
    {":1\r", 0},
    {":1\n", 0},
    {"+OK\r\n", 1},
    {"+\r\n", 1},
    {"-NOSCRIPT No matching script. Please use EVAL.\r\n", 1},
    {"-MOVED 3999 127.0.0.1:6381\r\n", 1},
    {"+a\rb\r\n", 0},                  /* a CR alone */
    {"+a\nb\r\n", 0},                  /* an LF alone: hiredis judges it */
    {"$-1\r\n", 1},
    {"$0\r\n\r\n", 1},
    {"$5\r\nhello\r\n", 1},
    {"$5\r\nhe\r\nl\r\n", 1},           /* binary safe */
    {"$5\r\nhelloXY", 0},
    {"$-2\r\n", 0},
    {"$1234567890\r\n", 0},
    {"$1000000\r\n", 0},               /* 1 MB and up: hiredis' */
    {"+ok\r", 0},                      /* may still become simple */
    {"*-1\r\n", 1},
    {"*0\r\n", 1},
    {"*2\r\n:1\r\n:1700000000000001\r\n", 1},
    {"*3\r\n:1\r\n:17\r\n:2999\r\n", 1},
    {"*2\r\n:0\r\n:-2\r\n", 1},
    {"*3\r\n$3\r\nabc\r\n$-1\r\n+OK\r\n", 1},
    {"*2\r\n*1\r\n:1\r\n:2\r\n", 0},      /* nested */
    {"*100\r\n", 0},
    {"*1\r\n%1\r\n", 0},
    {"%1\r\n:1\r\n:2\r\n", 0},           /* RESP3 */
    {"_\r\n", 0},
    {",1.5\r\n", 0},
    {"#t\r\n", 0},
    {"", 0},
};

/* A status line longer than the fast path takes goes to hiredis, whole or not. */
static void test_long_line(void) {
    size_t n = REPLY_FAST_MAX_LINE + 10, i;
    char *b = malloc(n + 3);
    if (b == NULL) abort();
    b[0] = '+';
    for (i = 1; i < n; i++) b[i] = 'x';
    b[n] = '\r';
    b[n + 1] = '\n';
    CHECK(reply_fast_scan(b, n + 2) < 0, "a %zu-byte status line is left to hiredis", n);
    CHECK(reply_fast_scan(b, n - 1) < 0, "so is its beginning past the limit");
    free(b);
}

static void test_samples(void) {
    size_t i;
    for (i = 0; i < sizeof samples / sizeof samples[0]; i++) {
        const char *b = samples[i].bytes;
        size_t len = strlen(b), k, used = 0;
        long m = reply_fast_scan(b, len);
        CHECK(samples[i].simple ? m == (long)len : m <= 0, "sample %zu (%s): measured %ld", i, b, m);
        /* a beginning of a simple reply waits for more; of another, it may go to hiredis */
        for (k = 0; k < len; k++)
            CHECK(samples[i].simple ? reply_fast_scan(b, k) == 0 : reply_fast_scan(b, k) <= 0,
                  "sample %zu: prefix of %zu measured", i, k);
        if (m == (long)len && len > 0) {
            int error;
            redisReply *ours = reply_fast_build(b, len, &used), *theirs = hiredis_parse(b, len, &error);
            CHECK(ours && theirs && used == len && reply_same(ours, theirs), "sample %zu built unlike hiredis", i);
            if (b[0] == ':') {
                long long v = 0;
                CHECK(reply_fast_int(b, len, &v) == len && v == theirs->integer, "sample %zu: int", i);
            } else {
                long long v = 0;
                CHECK(reply_fast_int(b, len, &v) == 0, "sample %zu: not an int", i);
            }
            if (ours) freeReplyObject(ours);
            if (theirs) freeReplyObject(theirs);
        }
    }
}

/* ---- streams through a conn --------------------------------------------- */

/* Appends one random reply (simple or not) to buf. */
static size_t random_reply(char *buf, int depth) {
    uint64_t r = check_rand();
    size_t n = 0, i, k;
    switch (r % 9) {
    case 0: case 1: case 2:
        return (size_t)sprintf(buf, ":%lld\r\n", (long long)(check_rand() % 2000000000000000ULL) - 1000);
    case 3:
        return (size_t)sprintf(buf, "+%s\r\n", (r >> 8) % 2 ? "OK" : "QUEUED");
    case 4:
        return (size_t)sprintf(buf, "-ERR something %u\r\n", (unsigned)(r >> 8) % 100);
    case 5:
        if ((r >> 8) % 5 == 0) return (size_t)sprintf(buf, "$-1\r\n");
        k = (size_t)((r >> 12) % 300);
        n = (size_t)sprintf(buf, "$%zu\r\n", k);
        for (i = 0; i < k; i++) buf[n++] = (char)(check_rand() & 0xff);   /* CR and LF too */
        buf[n++] = '\r';
        buf[n++] = '\n';
        return n;
    case 6:
        return (size_t)sprintf(buf, ":%d\r\n", (int)((r >> 8) % 3));
    default:
        /* an array: flat (simple) or, sometimes, nested (hiredis') */
        k = (size_t)((r >> 8) % 5);
        if ((r >> 16) % 13 == 0) return (size_t)sprintf(buf, "*-1\r\n");
        n = (size_t)sprintf(buf, "*%zu\r\n", k);
        for (i = 0; i < k; i++) {
            if (depth < 2 && (check_rand() % 6) == 0) n += random_reply(buf + n, depth + 1);
            else n += (size_t)sprintf(buf + n, ":%u\r\n", (unsigned)(check_rand() % 100000));
        }
        return n;
    }
}

static void test_stream(int round) {
    enum { REPLIES = 3000 };
    size_t cap = REPLIES * 2048, len = 0, off = 0, i;
    char *stream = malloc(cap);
    redisReply **want = calloc(REPLIES, sizeof *want);
    redisReader *rd = redisReaderCreate();
    conn *c;
    exec_conn x;
    int peer, got = 0, fast_ints = 0;
    if (!stream || !want || !rd) abort();
    for (i = 0; i < REPLIES; i++) len += random_reply(stream + len, 0);
    if (redisReaderFeed(rd, stream, len) != REDIS_OK) abort();
    for (i = 0; i < REPLIES; i++) {
        void *rep = NULL;
        if (redisReaderGetReply(rd, &rep) != REDIS_OK || rep == NULL) abort();
        want[i] = rep;
    }
    redisReaderFree(rd);

    c = conn_pair(0, &peer);
    memset(&x, 0, sizeof x);
    x.c = c;
    x.gen = c->gen;
    /* some rounds begin with replies nobody waits for (a fan-out that had
     * enough): exec_conn_reply drops them first, and exec_conn_reply_int
     * must not hand one out meanwhile */
    if (round % 3 == 1) {
        exec_conn_give_up(&x, 5);
        got = 5;
    }

    while (got < REPLIES) {
        /* a chunk of 1 byte to 20 KB (the conn reads 16 KB at a time) */
        size_t chunk = off < len ? 1 + (size_t)(check_rand() % (check_rand() % 4 == 0 ? 20000 : 64)) : 0;
        if (chunk > len - off) chunk = len - off;
        if (chunk > 0) {
            ssize_t w = write(peer, stream + off, chunk);
            if (w <= 0) abort();
            off += (size_t)w;
            while (conn_fill(c) == 1) {}
        }
        for (;;) {
            redisReply *r = NULL;
            long long v;
            int k;
            if (got >= REPLIES) break;
            if (check_rand() % 2 && exec_conn_reply_int(&x, &v)) {
                fast_ints++;
                CHECK(want[got]->type == REDIS_REPLY_INTEGER && want[got]->integer == v,
                      "round %d: reply %d read as the integer %lld", round, got, v);
                got++;
                continue;
            }
            k = exec_conn_reply(&x, &r);
            CHECK(k >= 0, "round %d: conn_reply failed: %s", round, c->errstr);
            if (k <= 0) break;
            CHECK(reply_same(r, want[got]), "round %d: reply %d differs from hiredis'", round, got);
            freeReplyObject(r);
            got++;
        }
        if (chunk == 0 && got < REPLIES) {
            CHECK(0, "round %d: stream ended after %d of %d replies", round, got, REPLIES);
            break;
        }
    }
    CHECK(fast_ints > REPLIES / 20, "round %d: %d integers took the fast path", round, fast_ints);
    CHECK(c->fast_off == c->fast.len && !c->reader_holds, "round %d: bytes left over", round);
    conn_free(c);
    close(peer);
    for (i = 0; i < REPLIES; i++) freeReplyObject(want[i]);
    free(want);
    free(stream);
}

int main(void) {
    int round;
    check_rng = 0x9E3779B97F4A7C15ULL;   /* (this test's own sequence) */
    test_samples();
    test_long_line();
    for (round = 0; round < 12; round++) test_stream(round);
    return check_report("reply_fast_test");
}
