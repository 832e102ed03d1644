/*
 * cycle_raw.c: the raw hiredis baseline of bench/cycle.lua and
 * bench/callgrind.lua. One uncontended lock cycle, the least a correct lock
 * can do, with the same per-cycle work as redislock inside the timer:
 *
 *   1. a fresh 128-bit token from getrandom(), as 32 hex digits (redislock
 *      draws one per acquire, csrc/base/token.c);
 *   2. SET key token NX PX 10000 (one round trip);
 *   3. release by compare-and-delete: EVALSHA of a script loaded once with
 *      SCRIPT LOAD before the loop (one round trip), as redislock sends its
 *      own scripts by EVALSHA.
 *
 * Every command goes through redisCommandArgv with explicit lengths (binary
 * safe, no format string to parse), as redislock hands hiredis an argv.
 *
 * usage: cycle_raw HOST PORT KEY ITERATIONS [quiet]
 *
 * Prints one line "cycle <ns>" per iteration (CLOCK_MONOTONIC around steps
 * 1-3), at the end, so that no stdio happens while measuring. With `quiet`
 * (bench/callgrind.lua) it neither reads the clock nor prints per cycle:
 * only "done N", so that an instruction count over N cycles holds nothing
 * but the cycles. Exits non-zero on any failure: a connection error, a SET
 * that is refused (the key is ours alone), a release that finds the key
 * gone.
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

static const char RELEASE_SCRIPT[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what, const redisContext *c) {
    fprintf(stderr, "cycle_raw: %s%s%s\n", what, c && c->err ? ": " : "", c && c->err ? c->errstr : "");
    exit(1);
}

/* SCRIPT LOAD: the release script's SHA1 (40 hex digits) into sha. */
static void load_script(redisContext *c, char sha[41]) {
    const char *argv[3] = {"SCRIPT", "LOAD", RELEASE_SCRIPT};
    size_t lens[3] = {6, 4, sizeof RELEASE_SCRIPT - 1};
    redisReply *r = redisCommandArgv(c, 3, argv, lens);
    if (!r) die("connection lost", c);
    if (r->type != REDIS_REPLY_STRING || r->len != 40) die("SCRIPT LOAD failed", NULL);
    memcpy(sha, r->str, 41);
    freeReplyObject(r);
}

/* One cycle: token, SET NX PX, EVALSHA compare-and-delete. */
static void cycle(redisContext *c, const char *key, size_t klen, const char *sha) {
    char token[33];
    const char *set_argv[6] = {"SET", key, token, "NX", "PX", "10000"};
    size_t set_lens[6] = {3, klen, 32, 2, 2, 5};
    const char *rel_argv[5] = {"EVALSHA", sha, "1", key, token};
    size_t rel_lens[5] = {7, 40, 1, klen, 32};
    redisReply *r;
    if (bench_token(token) != 0) die("getrandom failed", NULL);
    r = redisCommandArgv(c, 6, set_argv, set_lens);
    if (!r) die("connection lost", c);
    if (r->type != REDIS_REPLY_STATUS) die("SET NX refused: the key is not ours alone", NULL);
    freeReplyObject(r);
    r = redisCommandArgv(c, 5, rel_argv, rel_lens);
    if (!r) die("connection lost", c);
    if (r->type != REDIS_REPLY_INTEGER || r->integer != 1) die("release found the key gone", NULL);
    freeReplyObject(r);
}

int main(int argc, char **argv) {
    struct timeval tv = {10, 0};
    redisContext *c;
    long long *ns = NULL;
    long i, iterations;
    const char *key;
    size_t klen;
    char sha[41];
    int quiet;

    if (argc != 5 && !(argc == 6 && strcmp(argv[5], "quiet") == 0)) {
        fprintf(stderr, "usage: %s HOST PORT KEY ITERATIONS [quiet]\n", argv[0]);
        return 2;
    }
    quiet = argc == 6;
    key = argv[3];
    klen = strlen(key);
    iterations = atol(argv[4]);
    if (iterations < 1) die("ITERATIONS must be positive", NULL);
    if (!quiet) {
        ns = calloc((size_t)iterations, sizeof *ns);
        if (!ns) die("out of memory", NULL);
    }
    c = redisConnectWithTimeout(argv[1], atoi(argv[2]), tv);
    if (!c || c->err) die("connect failed", c);
    if (redisSetTimeout(c, tv) != REDIS_OK) die("set timeout failed", c);
    load_script(c, sha);

    if (quiet) {
        for (i = 0; i < iterations; i++) cycle(c, key, klen, sha);
        printf("done %ld\n", iterations);
    } else {
        struct timespec cpu0, cpu1;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu0);
        for (i = 0; i < iterations; i++) {
            long long t0 = now_ns();
            cycle(c, key, klen, sha);
            ns[i] = now_ns() - t0;
        }
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu1);
        for (i = 0; i < iterations; i++) printf("cycle %lld\n", ns[i]);
        /* the loop's CPU time (bench/cycle.lua's client column) */
        printf("cpu_ns %lld\n", (long long)(cpu1.tv_sec - cpu0.tv_sec) * 1000000000LL +
               (cpu1.tv_nsec - cpu0.tv_nsec));
    }
    redisFree(c);
    free(ns);
    return 0;
}
