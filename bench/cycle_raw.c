/*
 * cycle_raw.c: the raw hiredis baseline of bench/cycle.lua. One uncontended
 * lock cycle, the least a correct lock can do: SET key token NX PX ttl (one
 * round trip), then release by compare-and-delete (EVAL, one round trip).
 *
 * usage: cycle_raw HOST PORT KEY ITERATIONS
 *
 * Prints one line "cycle <ns>" per iteration (CLOCK_MONOTONIC around the two
 * round trips), at the end, so that no stdio happens while measuring. Tokens
 * are 128 bits from getrandom(). Exits non-zero on any failure: a connection
 * error, a SET that is refused (the key is ours alone), a release that finds
 * the key gone.
 *
 * build: cc -O2 $(pkg-config --cflags hiredis) bench/cycle_raw.c \
 *            $(pkg-config --libs hiredis) -o bench/out/cycle_raw
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <hiredis.h>

#include "bench_token.h"

#define RELEASE_SCRIPT \
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what, const redisContext *c) {
    fprintf(stderr, "cycle_raw: %s%s%s\n", what, c && c->err ? ": " : "", c && c->err ? c->errstr : "");
    exit(1);
}

int main(int argc, char **argv) {
    struct timeval tv = {10, 0};
    redisContext *c;
    long long *ns;
    long i, iterations;
    const char *key;
    char token[33];

    if (argc != 5) {
        fprintf(stderr, "usage: %s HOST PORT KEY ITERATIONS\n", argv[0]);
        return 2;
    }
    key = argv[3];
    iterations = atol(argv[4]);
    if (iterations < 1) die("ITERATIONS must be positive", NULL);
    ns = calloc((size_t)iterations, sizeof *ns);
    if (!ns) die("out of memory", NULL);
    c = redisConnectWithTimeout(argv[1], atoi(argv[2]), tv);
    if (!c || c->err) die("connect failed", c);
    if (redisSetTimeout(c, tv) != REDIS_OK) die("set timeout failed", c);

    for (i = 0; i < iterations; i++) {
        redisReply *r;
        long long t0;
        if (bench_token(token) != 0) die("getrandom failed", NULL);
        t0 = now_ns();
        r = redisCommand(c, "SET %s %s NX PX 10000", key, token);
        if (!r) die("connection lost", c);
        if (r->type != REDIS_REPLY_STATUS) die("SET NX refused: the key is not ours alone", NULL);
        freeReplyObject(r);
        r = redisCommand(c, "EVAL %s 1 %s %s", RELEASE_SCRIPT, key, token);
        if (!r) die("connection lost", c);
        if (r->type != REDIS_REPLY_INTEGER || r->integer != 1) die("release found the key gone", NULL);
        freeReplyObject(r);
        ns[i] = now_ns() - t0;
    }
    for (i = 0; i < iterations; i++) printf("cycle %lld\n", ns[i]);
    redisFree(c);
    free(ns);
    return 0;
}
