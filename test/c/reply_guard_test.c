/*
 * test/c/reply_guard_test.c: unit test of reply_guard.c and of conn.c's
 * use of it, against hiredis' own reader. No server: a conn adopts one end
 * of a socketpair (or is detached, as the nginx transport's are), and this
 * test writes the "server's" bytes.
 *
 * Checks:
 * - a table of replies, fed whole and a byte at a time: the guard lets
 *   through what keeps the bounds (reply_guard.h) and refuses what breaks
 *   one, with why, at the same point however the bytes are cut;
 * - streams of random replies within the bounds (arrays nested 8 deep,
 *   thousands of elements, bulk strings of 100 KB), in random chunks, come
 *   out of conn_reply equal to hiredis' parse: the guard refuses none;
 * - a hostile reply (an array of 2^31 elements, a bulk of 10^12 bytes, a
 *   line that never ends, nesting 9 deep, RESP3, a TLS alert), alone or
 *   inside an array, after good replies: those come out, then the conn
 *   fails with a protocol error of kind "connection", at once (no reader
 *   ever saw the hostile header), on a socket and detached alike;
 * - a fuzz of reply shapes: valid streams with bytes flipped, lengths
 *   changed and headers spliced in; whatever conn_reply gives back equals
 *   hiredis' parse where the guard let the stream through, and is a
 *   protocol error where it did not; never a hang, never a big allocation.
 *
 * Run by `make ctest` (and `make test`, `make sanitize`).
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
#include "base/monotime.h"
#include "net/conn.h"
#include "net/reply_guard.h"
#include "reply_same.h"

/* ---- the guard alone --------------------------------------------------------- */

enum { WHOLE, MORE, REFUSED };

struct sample {
    const char *bytes;
    size_t len;         /* 0: strlen */
    int verdict;        /* WHOLE: accepted, back at a reply's start; MORE:
                           accepted, more to come; REFUSED */
    const char *why;    /* REFUSED: a part of the reason */
};

#define NEST8 "*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n"

static const struct sample samples[] = {
    {":1\r\n", 0, WHOLE, NULL},
    {"+OK\r\n", 0, WHOLE, NULL},
    {"-ERR x\r\n", 0, WHOLE, NULL},
    {"+a\rb\r\r\n", 0, WHOLE, NULL},
    {"+a\nb\r\n", 0, WHOLE, NULL},
    {"$3\r\nabc\r\n", 0, WHOLE, NULL},
    {"$4\r\na\r\nb\r\n", 0, WHOLE, NULL},
    {"$0\r\n\r\n", 0, WHOLE, NULL},
    {"$-1\r\n", 0, WHOLE, NULL},
    {"*-1\r\n", 0, WHOLE, NULL},
    {"*0\r\n", 0, WHOLE, NULL},
    {"*2\r\n:1\r\n$1\r\nx\r\n", 0, WHOLE, NULL},
    {"*2\r\n*0\r\n*1\r\n$-1\r\n", 0, WHOLE, NULL},
    {NEST8 ":1\r\n", 0, WHOLE, NULL},
    {"*2\r\n:1\r\n", 0, MORE, NULL},
    {"$5\r\nab", 0, MORE, NULL},
    {"+OK\r", 0, MORE, NULL},
    {"*1048576\r\n", 0, MORE, NULL},
    {"$536870912\r\n", 0, MORE, NULL},
    {NEST8 "*1\r\n:1\r\n", 0, REFUSED, "nested more than 8"},
    {"*2147483647\r\n", 0, REFUSED, "more than 1048576 elements"},
    {"*1048577\r\n", 0, REFUSED, "more than 1048576 elements"},
    {"*2\r\n:1\r\n*99999999\r\n", 0, REFUSED, "more than 1048576 elements"},
    {"$1000000000000\r\n", 0, REFUSED, "longer than 536870912 bytes"},
    {"$536870913\r\n", 0, REFUSED, "longer than 536870912 bytes"},
    {"$-2\r\n", 0, REFUSED, "not a number"},
    {"*-0\r\n", 0, REFUSED, "not a number"},
    {"$-1x\r\n", 0, REFUSED, "not a number"},
    {"$\r\n", 0, REFUSED, "not a number"},
    {"*\r\n", 0, REFUSED, "not a number"},
    {"$ 3\r\n", 0, REFUSED, "not a number"},
    {"$+3\r\n", 0, REFUSED, "not a number"},
    {"$3\rx", 0, REFUSED, "CR alone"},
    {"%1\r\n+a\r\n+b\r\n", 0, REFUSED, "unknown type"},
    {"_\r\n", 0, REFUSED, "unknown type"},
    {">2\r\n", 0, REFUSED, "unknown type"},
    {"\x15\x03\x03\x00\x02\x02\x46", 0, REFUSED, "unknown type"},
    {"\r\n", 0, REFUSED, "unknown type"},
    {"*1\r\n\0", 5, REFUSED, "unknown type"},
};

/* Feeds s to a fresh guard in chunks of `step` bytes (0: whole); *why:
 * why it refused; *kept: the bytes it let through. */
static int guard_run(const struct sample *s, size_t step, reply_guard *g, const char **why, size_t *kept) {
    size_t len = s->len ? s->len : strlen(s->bytes), off = 0;
    reply_guard_reset(g);
    *why = "";
    *kept = 0;
    while (off < len) {
        size_t n = step == 0 || step > len - off ? len - off : step, k = reply_guard_feed(g, s->bytes + off, n);
        *kept += k;
        if (k < n || reply_guard_refused(g)) {
            *why = reply_guard_refused(g);
            return *why ? REFUSED : -1;
        }
        off += n;
    }
    return reply_guard_refused(g) ? -1 : g->state == 0 && g->depth == 0 ? WHOLE : MORE;
}

static void test_samples(void) {
    size_t i, steps[] = {0, 1, 2, 3, 7};
    for (i = 0; i < sizeof samples / sizeof samples[0]; i++) {
        size_t k, kept0 = 0;
        for (k = 0; k < sizeof steps / sizeof steps[0]; k++) {
            reply_guard g;
            const char *why;
            size_t kept;
            int v = guard_run(&samples[i], steps[k], &g, &why, &kept);
            CHECK(v == samples[i].verdict, "sample %zu (%.20s) in chunks of %zu: verdict %d, want %d (%s)", i,
                  samples[i].bytes, steps[k], v, samples[i].verdict, why);
            if (v == REFUSED && samples[i].why)
                CHECK(strstr(why, samples[i].why) != NULL, "sample %zu: why '%s' lacks '%s'", i, why, samples[i].why);
            if (v == REFUSED)   /* (and it stays refused) */
                CHECK(reply_guard_feed(&g, ":1\r\n", 4) == 0, "sample %zu: fed after refusing", i);
            /* whole, what it lets through ends where the element that broke
             * a bound begins; in pieces, a beginning of that element's
             * line may have gone before it broke it, never its end (the
             * reader never reads that line) */
            if (k == 0) kept0 = kept;
            else if (v == REFUSED)
                CHECK(kept >= kept0 && memchr(samples[i].bytes + kept0, '\n', kept - kept0) == NULL,
                      "sample %zu: let %zu bytes through, whole %zu", i, kept, kept0);
        }
    }
}

/* A status line of n bytes: refused past the bound, in any chunks. */
static void test_lines(void) {
    size_t sizes[] = {100, 60000, REPLY_GUARD_MAX_LINE + 10, 1000000}, i;
    for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char *b = malloc(sizes[i] + 3);
        struct sample s;
        reply_guard g;
        const char *why;
        size_t kept;
        int v, v1;
        if (b == NULL) abort();
        memset(b, 'a', sizes[i]);
        b[0] = '-';
        memcpy(b + sizes[i], "\r\n", 3);
        s.bytes = b;
        s.len = sizes[i] + 2;
        v = guard_run(&s, 0, &g, &why, &kept);
        v1 = guard_run(&s, 4093, &g, &why, &kept);
        if (sizes[i] > REPLY_GUARD_MAX_LINE) {
            CHECK(v == REFUSED && v1 == REFUSED && strstr(why, "line longer"), "a line of %zu: %d %d %s", sizes[i],
                  v, v1, why);
        } else {
            CHECK(v == WHOLE && v1 == WHOLE, "a line of %zu: %d %d %s", sizes[i], v, v1, why);
        }
        free(b);
    }
}

/* ---- streams through a conn ---------------------------------------------------- */

/* One random reply within the bounds into buf (room enough: see callers). */
static size_t random_reply(char *buf, int depth) {
    uint64_t r = check_rand();
    size_t n, i, k;
    switch (r % 7) {
    case 0:
        return (size_t)sprintf(buf, ":%lld\r\n", (long long)(check_rand() % 2000000000000ULL) - 1000);
    case 1:
        return (size_t)sprintf(buf, "+%s\r\n", (r >> 8) % 2 ? "OK" : "a\rb");
    case 2:
        return (size_t)sprintf(buf, "-ERR something %u\r\n", (unsigned)(r >> 8) % 100);
    case 3:
        if ((r >> 8) % 5 == 0) return (size_t)sprintf(buf, "$-1\r\n");
        k = (r >> 12) % 50 == 0 ? (size_t)((r >> 20) % 100000) : (size_t)((r >> 12) % 300);
        n = (size_t)sprintf(buf, "$%zu\r\n", k);
        for (i = 0; i < k; i++) buf[n++] = (char)(check_rand() & 0xff);
        buf[n++] = '\r';
        buf[n++] = '\n';
        return n;
    default:
        /* an array: nested up to the bound, now and then long */
        if ((r >> 16) % 13 == 0) return (size_t)sprintf(buf, "*-1\r\n");
        k = depth < 2 && (r >> 24) % 40 == 0 ? 3000 : (size_t)((r >> 8) % 5);
        n = (size_t)sprintf(buf, "*%zu\r\n", k);
        for (i = 0; i < k; i++) {
            if (depth + 1 < REPLY_GUARD_MAX_DEPTH && k < 10 && check_rand() % 3 == 0)
                n += random_reply(buf + n, depth + 1);
            else
                n += (size_t)sprintf(buf + n, ":%u\r\n", (unsigned)(check_rand() % 100000));
        }
        return n;
    }
}

/* The room one random_reply may need, at most. */
#define REPLY_ROOM (4 * 1024 * 1024)

/* Writes stream[0..len) to the conn in random chunks (or, detached,
 * feeds it) and reads replies as they come, into got[] (at most max).
 * Returns how many; *failed: the conn failed (its errstr says why). */
static size_t pump(conn *c, int peer, const char *stream, size_t len, redisReply **got, size_t max, int *failed) {
    size_t off = 0, n = 0;
    *failed = 0;
    for (;;) {
        size_t chunk = off < len ? 1 + (size_t)(check_rand() % (check_rand() % 4 == 0 ? 20000 : 64)) : 0;
        if (chunk > len - off) chunk = len - off;
        if (chunk > 0 && peer >= 0) {
            ssize_t w = write(peer, stream + off, chunk);
            if (w <= 0) abort();
            off += (size_t)w;
            while (conn_fill(c) == 1) {}
        } else if (chunk > 0) {
            if (conn_detach_feed(c, stream + off, chunk) != 0) {
                *failed = 1;
                return n;
            }
            off += chunk;
        }
        for (;;) {
            redisReply *r = NULL;
            int k = conn_reply(c, &r);
            if (k < 0) {
                *failed = 1;
                return n;
            }
            if (k == 0) break;
            if (n < max) got[n++] = r;
            else freeReplyObject(r);
        }
        if (chunk == 0) return n;
    }
}

/* hiredis' parse of stream: the replies, at most max; *error: it refused. */
static size_t hiredis_all(const char *stream, size_t len, redisReply **want, size_t max, int *error) {
    redisReader *rd = redisReaderCreate();
    size_t n = 0;
    *error = 0;
    if (rd == NULL || redisReaderFeed(rd, stream, len) != REDIS_OK) abort();
    while (n < max) {
        void *rep = NULL;
        if (redisReaderGetReply(rd, &rep) != REDIS_OK) {
            *error = 1;
            break;
        }
        if (rep == NULL) break;
        want[n++] = rep;
    }
    redisReaderFree(rd);
    return n;
}

/* A conn to play the server to: on a socketpair (*peer: its other end),
 * or detached (*peer -1), already past a handshake. */
static conn *new_conn(int detached, int *peer) {
    conn *c;
    if (!detached) return conn_pair(0, peer);
    c = conn_pair(0, peer);
    close(*peer);
    *peer = -1;
    conn_drop(c);
    if (conn_detach_begin(c, 0) != 0) abort();
    return c;
}

static void free_all(redisReply **r, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) freeReplyObject(r[i]);
}

static void test_valid_streams(void) {
    enum { REPLIES = 400 };
    int round;
    redisReply **got = calloc(REPLIES, sizeof *got), **want = calloc(REPLIES, sizeof *want);
    char *stream = malloc((size_t)REPLIES * 8192 + REPLY_ROOM);
    if (!got || !want || !stream) abort();
    for (round = 0; round < 8; round++) {
        size_t len = 0, n, m, i;
        int peer, failed, error;
        conn *c = new_conn(round % 2, &peer);
        for (i = 0; i < REPLIES && len < (size_t)REPLIES * 8192; i++) len += random_reply(stream + len, 0);
        m = hiredis_all(stream, len, want, REPLIES, &error);
        n = pump(c, peer, stream, len, got, REPLIES, &failed);
        /* the conn fails where hiredis' reader refuses, after the same
         * replies: hiredis 1.x refuses a status with a lone \r in it ("+a\rb",
         * within the guard's bounds), 0.14 takes it */
        CHECK(error == failed, "round %d: hiredis %d, conn %d (%s)", round, error, failed, c->errstr);
        CHECK(n == m && (error || m == i), "round %d: %zu replies, hiredis %zu, sent %zu", round, n, m, i);
        for (i = 0; i < n && i < m; i++) CHECK(reply_same(got[i], want[i]), "round %d: reply %zu differs", round, i);
        free_all(got, n);
        free_all(want, m);
        conn_free(c);
        if (peer >= 0) close(peer);
    }
    free(got);
    free(want);
    free(stream);
}

static const char *const hostile[] = {
    "*2147483647\r\n",
    "*2147483647\r\n:1\r\n:2\r\n",
    "$1000000000000\r\n",
    "$1000000000000\r\nabcdef",
    "*4294967296\r\n",
    "*9223372036854775807\r\n",
    "$99999999999999999999999\r\n",
    NEST8 "*1\r\n:1\r\n",
    "%2\r\n+a\r\n:1\r\n+b\r\n:2\r\n",
    ",3.14\r\n",
    "\x15\x03\x03\x00\x02\x02\x46",
    "*3\r\n$-7\r\n",
};

/* good replies, a hostile one (alone, or as an array's second element),
 * good replies again: the first come out, then a protocol error, at once */
static void test_hostile(void) {
    size_t h;
    char *stream = malloc(1 << 20);
    redisReply *got[64];
    if (stream == NULL) abort();
    for (h = 0; h < sizeof hostile / sizeof hostile[0]; h++) {
        int detached;
        for (detached = 0; detached < 2; detached++) {
            size_t len = 0, n;
            int peer, failed, i;
            int64_t t0;
            conn *c = new_conn(detached, &peer);
            for (i = 0; i < 5; i++) len += (size_t)sprintf(stream + len, "*2\r\n:%d\r\n$2\r\nok\r\n", i);
            if (h % 2) len += (size_t)sprintf(stream + len, "*2\r\n:1\r\n");
            memcpy(stream + len, hostile[h], strlen(hostile[h]));
            len += strlen(hostile[h]);
            for (i = 0; i < 5; i++) len += (size_t)sprintf(stream + len, ":%d\r\n", i);
            t0 = monotime_us();
            n = pump(c, peer, stream, len, got, 64, &failed);
            CHECK(failed && n == 5, "hostile %zu (%s): %zu replies, failed %d", h, detached ? "detached" : "socket",
                  n, failed);
            CHECK(strstr(c->errstr, "protocol error") != NULL && c->err == CONN_ELOST &&
                  strcmp(conn_kind(c->err), "connection") == 0,
                  "hostile %zu: errstr '%s'", h, c->errstr);
            CHECK(monotime_us() - t0 < 200000, "hostile %zu: took %lld us", h, (long long)(monotime_us() - t0));
            free_all(got, n);
            conn_free(c);
            if (peer >= 0) close(peer);
        }
    }
    free(stream);
}

/* A valid stream, then mutated: a byte flipped, a length's digits
 * changed, a hostile header spliced in. */
static size_t mutate(char *stream, size_t len, size_t cap) {
    int k, edits = 1 + (int)(check_rand() % 4);
    for (k = 0; k < edits && len > 0; k++) {
        size_t at = (size_t)(check_rand() % len);
        switch (check_rand() % 4) {
        case 0:
            stream[at] = (char)(check_rand() & 0xff);
            break;
        case 1:
            stream[at] = "0123456789-\r\n*$+:"[check_rand() % 17];
            break;
        default: {
            const char *h = hostile[check_rand() % (sizeof hostile / sizeof hostile[0])];
            size_t hl = strlen(h);
            if (len + hl > cap) break;
            memmove(stream + at + hl, stream + at, len - at);
            memcpy(stream + at, h, hl);
            len += hl;
        }
        }
    }
    return len;
}

static void test_fuzz(void) {
    enum { REPLIES = 60, MAXGOT = 4096 };
    int round, refused = 0;
    size_t cap = (size_t)REPLIES * 4096 + REPLY_ROOM;
    char *stream = malloc(cap);
    redisReply **got = calloc(MAXGOT, sizeof *got), **want = calloc(MAXGOT, sizeof *want);
    int64_t t0 = monotime_us();
    if (!stream || !got || !want) abort();
    for (round = 0; round < 3000; round++) {
        size_t len = 0, n, m = 0, i, off = 0;
        int peer, failed, error = 0, guard_ok = 1;
        const char *why = "";
        reply_guard g;
        conn *c;
        for (i = 0; i < REPLIES && len < (size_t)REPLIES * 4096; i++) len += random_reply(stream + len, 5);
        len = mutate(stream, len, cap);
        /* (whether the guard lets the stream through, replies that are
         * simple included: then hiredis alone must agree with the conn) */
        reply_guard_reset(&g);
        while (guard_ok && off < len) {
            size_t k = len - off > 777 ? 777 : len - off;
            guard_ok = reply_guard_feed(&g, stream + off, k) == k;
            off += k;
            if (!guard_ok) why = reply_guard_refused(&g);
        }
        c = new_conn(round % 2, &peer);
        n = pump(c, peer, stream, len, got, MAXGOT, &failed);
        if (guard_ok) {
            m = hiredis_all(stream, len, want, MAXGOT, &error);
            CHECK(failed == error, "fuzz %d: conn failed %d (%s), hiredis %d", round, failed, c->errstr, error);
            CHECK(n == m, "fuzz %d: %zu replies, hiredis %zu", round, n, m);
            for (i = 0; i < n && i < m; i++) CHECK(reply_same(got[i], want[i]), "fuzz %d: reply %zu differs", round, i);
        } else {
            refused++;
            CHECK(failed && strstr(c->errstr, "protocol error") != NULL, "fuzz %d: refused by the guard (%s), conn: %s",
                  round, why, failed ? c->errstr : "no failure");
        }
        free_all(got, n);
        free_all(want, m);
        conn_free(c);
        if (peer >= 0) close(peer);
    }
    CHECK(refused > 300, "fuzz: only %d of the streams broke a bound", refused);
    CHECK(monotime_us() - t0 < 60000000, "fuzz: took %lld us", (long long)(monotime_us() - t0));
    free(got);
    free(want);
    free(stream);
}

int main(void) {
    check_rng = 0x243F6A8885A308D3ULL;   /* (this test's own sequence) */
    test_samples();
    test_lines();
    test_valid_streams();
    test_hostile();
    test_fuzz();
    return check_report("reply_guard_test");
}
