/*
 * spin_poll.c: the baseline for bench/handoff.lua. The fastest possible
 * hand-rolled Redis lock on raw hiredis: spin on SET NX PX with no sleep at
 * all until it succeeds, release by compare-and-delete (EVAL).
 *
 * usage: spin_poll HOST PORT KEY ITERATIONS HOLD_MS PAUSE_MS START_AT
 *                  [COUNTER [TTL_MS]]
 *
 * HOST may also be a unix socket path (anything starting with '/'; PORT is
 * then ignored). START_AT is CLOCK_MONOTONIC seconds: every process sleeps
 * until then, so they all start contending together. COUNTER (default
 * KEY ":counter") is read and written inside the critical section, one GET and
 * one SET, exactly like tools/counter_worker.lua does, so that both sides of
 * the comparison send the same critical-section commands. TTL_MS (default
 * 10000) is the lease. HOLD_MS may be a range LO-HI: each hold is then drawn
 * uniformly from it (drand48, seeded from the pid).
 *
 * Each of the ITERATIONS loops:
 *   1. SET KEY token NX PX TTL_MS, again and again, until it answers OK;
 *   2. GET COUNTER, add one, SET COUNTER (the critical section's work), then
 *      stay HOLD_MS more (nanosleep);
 *   3. take t_released, release with a compare-and-delete EVAL;
 *   4. sleep PAUSE_MS outside the lock.
 * and records one line, printed to stdout at the end (so that no stdio work
 * happens while contending):
 *   hold <t_acquired> <t_released> <attempts>
 * with CLOCK_MONOTONIC seconds (shared by every process of the machine) and
 * the number of SET NX sent for that hold. Tokens are 128 bits from
 * getrandom(). Every command goes through redisCommandArgv (binary safe).
 * Exits non-zero on any failure (a connection error, a release that finds
 * the key gone or someone else's, a counter that is not a number).
 *
 * build: cc -O2 $(pkg-config --cflags hiredis) bench/spin_poll.c \
 *            $(pkg-config --libs hiredis) -o bench/out/spin_poll
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include <hiredis.h>

#include "bench_token.h"

static const char RELEASE_SCRIPT[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
    "  return redis.call('DEL', KEYS[1])\n"
    "end\n"
    "return 0\n";

typedef struct {
    double t_acquired, t_released;
    long attempts;
} hold_rec;

static double monotime(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(double ms) {
    struct timespec ts, rem;
    if (ms <= 0) return;
    ts.tv_sec = (time_t)(ms / 1000);
    ts.tv_nsec = (long)((ms - (double)ts.tv_sec * 1000) * 1e6);
    while (nanosleep(&ts, &rem) != 0 && errno == EINTR) ts = rem;
}

static void sleep_until(double t) {
    struct timespec ts;
    if (t <= monotime()) return;
    ts.tv_sec = (time_t)t;
    ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec >= 1000000000L) ts.tv_nsec = 999999999L;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

static void die(const char *what, redisContext *c) {
    fprintf(stderr, "spin_poll: %s%s%s\n", what, c && c->err ? ": " : "",
            c && c->err ? c->errstr : "");
    exit(1);
}

static redisReply *command(redisContext *c, int argc, const char **argv, const size_t *lens) {
    redisReply *r = redisCommandArgv(c, argc, argv, lens);
    if (!r) die("connection lost", c);
    if (r->type == REDIS_REPLY_ERROR) {
        fprintf(stderr, "spin_poll: redis error: %.*s\n", (int)r->len, r->str);
        exit(1);
    }
    return r;
}

int main(int argc, char **argv) {
    const char *host, *key, *counter;
    char counter_buf[512], ttl_buf[32], token[33], value_buf[32];
    long iterations, i, ttl_ms;
    double hold_ms, hold_hi, pause_ms, start_at;
    int port;
    char *end_arg;
    size_t key_len, counter_len;
    hold_rec *recs;
    redisContext *c;
    struct timeval tv = {10, 0};

    if (argc < 8 || argc > 10) {
        fprintf(stderr, "usage: %s HOST PORT KEY ITERATIONS HOLD_MS PAUSE_MS START_AT "
                        "[COUNTER [TTL_MS]]\n", argv[0]);
        return 2;
    }
    host = argv[1];
    port = atoi(argv[2]);
    key = argv[3];
    iterations = atol(argv[4]);
    hold_ms = strtod(argv[5], &end_arg);
    hold_hi = *end_arg == '-' ? atof(end_arg + 1) : hold_ms;
    srand48((long)getpid());
    pause_ms = atof(argv[6]);
    start_at = atof(argv[7]);
    if (argc > 8) {
        counter = argv[8];
    } else {
        snprintf(counter_buf, sizeof counter_buf, "%s:counter", key);
        counter = counter_buf;
    }
    ttl_ms = argc > 9 ? atol(argv[9]) : 10000;
    if (iterations < 1 || ttl_ms < 1) {
        fprintf(stderr, "spin_poll: ITERATIONS and TTL_MS must be positive\n");
        return 2;
    }
    snprintf(ttl_buf, sizeof ttl_buf, "%ld", ttl_ms);
    key_len = strlen(key);
    counter_len = strlen(counter);

    recs = calloc((size_t)iterations, sizeof *recs);
    if (!recs) die("out of memory", NULL);

    c = host[0] == '/' ? redisConnectUnixWithTimeout(host, tv) : redisConnectWithTimeout(host, port, tv);
    if (!c || c->err) die("connect failed", c);
    if (redisSetTimeout(c, tv) != REDIS_OK) die("set timeout failed", c);

    sleep_until(start_at);

    for (i = 0; i < iterations; i++) {
        const char *set_argv[6] = {"SET", key, token, "NX", "PX", ttl_buf};
        size_t set_lens[6] = {3, key_len, 32, 2, 2, strlen(ttl_buf)};
        const char *get_argv[2] = {"GET", counter};
        size_t get_lens[2] = {3, counter_len};
        const char *put_argv[3] = {"SET", counter, value_buf};
        size_t put_lens[3] = {3, counter_len, 0};
        const char *rel_argv[5] = {"EVAL", RELEASE_SCRIPT, "1", key, token};
        size_t rel_lens[5] = {4, sizeof RELEASE_SCRIPT - 1, 1, key_len, 32};
        redisReply *r;
        long attempts = 0, value = 0;
        int taken = 0;
        char *end;

        if (bench_token(token) != 0) die("getrandom failed", NULL);
        /* 1. spin: no sleep between attempts. */
        while (!taken) {
            attempts++;
            r = command(c, 6, set_argv, set_lens);
            taken = r->type == REDIS_REPLY_STATUS;  /* +OK; nil when busy */
            freeReplyObject(r);
        }
        recs[i].t_acquired = monotime();
        recs[i].attempts = attempts;

        /* 2. the critical section: GET, add one, SET, then hold. */
        r = command(c, 2, get_argv, get_lens);
        if (r->type == REDIS_REPLY_STRING) {
            value = strtol(r->str, &end, 10);
            if (end == r->str || *end != '\0') die("counter is not a number", NULL);
        } else if (r->type != REDIS_REPLY_NIL) {
            die("unexpected GET reply", NULL);
        }
        freeReplyObject(r);
        snprintf(value_buf, sizeof value_buf, "%ld", value + 1);
        put_lens[2] = strlen(value_buf);
        freeReplyObject(command(c, 3, put_argv, put_lens));
        sleep_ms(hold_ms + (hold_hi - hold_ms) * drand48());

        /* 3. release by compare-and-delete. */
        recs[i].t_released = monotime();
        r = command(c, 5, rel_argv, rel_lens);
        if (r->type != REDIS_REPLY_INTEGER || r->integer != 1) {
            die("release found the lock gone or taken by someone else", NULL);
        }
        freeReplyObject(r);

        /* 4. pause outside the lock. */
        sleep_ms(pause_ms);
    }
    redisFree(c);

    for (i = 0; i < iterations; i++) {
        printf("hold %.9f %.9f %ld\n", recs[i].t_acquired, recs[i].t_released, recs[i].attempts);
    }
    free(recs);
    return fflush(stdout) == 0 ? 0 : 1;
}
