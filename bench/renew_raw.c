/*
 * renew_raw.c: the raw hiredis baseline of bench/renew.lua. Renews N held
 * locks with the very compare-and-expire script the watchdog sends
 * (lua/redislock/scripts/extend.lua, read from SCRIPT_FILE, loaded once
 * with SCRIPT LOAD), by EVALSHA:
 *
 *   EVALSHA <sha> 1 <key> <token> <ttl_ms>       for every key, every round
 *
 * usage: renew_raw HOST PORT SCRIPT_FILE N TTL_MS ROUNDS BATCH SERVER_PID [pipelined] [holder]
 *
 * (bench/server_instr.lua's words: "pipelined" runs only the pipelined
 * rounds; "holder" gives every key the holder record a redislock lock has
 * by default, "<key>:holder" = "<since> <token> <host>:<pid>" with the same
 * PX, which extend.lua renews beside the lock: without it that PEXPIRE
 * finds nothing.)
 *
 * Untimed set-up: SCRIPT LOAD, then SET key token PX TTL_MS for keys
 * "{renew:r1}" .. "{renew:rN}" (the shape of redislock's keys for names
 * "renew:l1" ...: the same lengths), each with its own 128-bit token,
 * and beside each its fence counter, "{renew:rN}:fence" with a number and
 * a day's PX: the keyspace a redislock holder leaves (twice N keys, all
 * with a ttl, three times N with "holder"), so that the server's lookups
 * cost the same on both sides.
 * Then ROUNDS rounds unpipelined (one EVALSHA, then its reply) and ROUNDS
 * rounds pipelined (BATCH appended, then their BATCH replies read, and so
 * on: the next batch goes out when the last one is answered). Every reply
 * must be 1 (renewed). Per round it prints
 *
 *   round <unpipelined|pipelined> wall_ns=W cpu_ns=C srv_ns=S n=N
 *
 * W on CLOCK_MONOTONIC, C this process's CPU time (CLOCK_PROCESS_CPUTIME_ID),
 * S the CPU time of redis-server's main thread (its schedstat) over the
 * round. The ttl argument is formatted once, before the loop: the least a
 * renewal loop can do. Exits non-zero on any failure.
 *
 * build: cc -O2 $(pkg-config --cflags hiredis) bench/renew_raw.c \
 *            $(pkg-config --libs hiredis) -o bench/out/renew_raw
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <hiredis.h>

#include "bench_token.h"

typedef struct {
    char key[32];
    size_t klen;
    char token[33];
} held;

static void die(const char *what, const redisContext *c) {
    fprintf(stderr, "renew_raw: %s%s%s\n", what, c && c->err ? ": " : "", c && c->err ? c->errstr : "");
    exit(1);
}

static long long clock_ns(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* On-CPU ns of redis-server's main thread, from its schedstat. */
static long long server_ns(const char *path) {
    long long ns = -1;
    FILE *f = fopen(path, "r");
    if (!f) die("cannot read the server's schedstat", NULL);
    if (fscanf(f, "%lld", &ns) != 1) die("cannot parse the server's schedstat", NULL);
    fclose(f);
    return ns;
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;
    if (!f) die("cannot open SCRIPT_FILE", NULL);
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)
        die("cannot size SCRIPT_FILE", NULL);
    buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) die("cannot read SCRIPT_FILE", NULL);
    fclose(f);
    buf[n] = '\0';
    *len = (size_t)n;
    return buf;
}

static void check_renewed(redisReply *r, const redisContext *c) {
    if (!r) die("connection lost", c);
    if (r->type != REDIS_REPLY_INTEGER || r->integer != 1) die("a renewal did not answer 1", NULL);
    freeReplyObject(r);
}

static void renew_argv(const held *h, const char *sha, const char *ttl, size_t ttl_len,
                       const char **argv, size_t *lens) {
    argv[0] = "EVALSHA";
    lens[0] = 7;
    argv[1] = sha;
    lens[1] = 40;
    argv[2] = "1";
    lens[2] = 1;
    argv[3] = h->key;
    lens[3] = h->klen;
    argv[4] = h->token;
    lens[4] = 32;
    argv[5] = ttl;
    lens[5] = ttl_len;
}

/* Appends SET <key>:holder "<since> <token> <host>:<pid>" PX <ttl>: the
 * record lib/record_holder.lua writes at a grant (since: the grant's time
 * in microseconds, 16 digits), so that extend.lua's second PEXPIRE finds a
 * key, as on redislock's locks. */
static void append_holder(redisContext *c, const held *h, const char *ttl, size_t ttl_len) {
    char hkey[48], value[160], host[64];
    const char *hv[5];
    size_t hl[5];
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    if (gethostname(host, sizeof host) != 0) strcpy(host, "localhost");
    host[sizeof host - 1] = '\0';
    hv[0] = "SET";
    hl[0] = 3;
    hv[1] = hkey;
    hl[1] = (size_t)snprintf(hkey, sizeof hkey, "%s:holder", h->key);
    hv[2] = value;
    hl[2] = (size_t)snprintf(value, sizeof value, "%lld%06ld %s %s:%ld", (long long)now.tv_sec,
                             now.tv_nsec / 1000, h->token, host, (long)getpid());
    hv[3] = "PX";
    hl[3] = 2;
    hv[4] = ttl;
    hl[4] = ttl_len;
    if (redisAppendCommandArgv(c, 5, hv, hl) != REDIS_OK) die("append failed", c);
}

int main(int argc, char **argv) {
    struct timeval tv = {30, 0};
    redisContext *c;
    held *keys;
    char sha[41], ttl[24], stat_path[64];
    const char *av[6];
    size_t lens[6], script_len, ttl_len;
    char *script;
    long n, i, j, rounds, batch, round, replies;
    int pipelined, only_pipelined = 0, holder = 0;

    for (i = 9; i < argc; i++) {
        if (strcmp(argv[i], "pipelined") == 0) only_pipelined = 1;
        else if (strcmp(argv[i], "holder") == 0) holder = 1;
        else argc = 0;
    }
    if (argc < 9) {
        fprintf(stderr, "usage: %s HOST PORT SCRIPT_FILE N TTL_MS ROUNDS BATCH SERVER_PID [pipelined] [holder]\n",
                argv[0]);
        return 2;
    }
    n = atol(argv[4]);
    rounds = atol(argv[6]);
    batch = atol(argv[7]);
    if (n < 1 || rounds < 1 || batch < 1 || atol(argv[5]) < 1) die("N, TTL_MS, ROUNDS and BATCH must be positive", NULL);
    ttl_len = (size_t)snprintf(ttl, sizeof ttl, "%ld", atol(argv[5]));
    snprintf(stat_path, sizeof stat_path, "/proc/%s/task/%s/schedstat", argv[8], argv[8]);
    script = read_file(argv[3], &script_len);
    keys = calloc((size_t)n, sizeof *keys);
    if (!keys) die("out of memory", NULL);

    c = redisConnectWithTimeout(argv[1], atoi(argv[2]), tv);
    if (!c || c->err) die("connect failed", c);
    if (redisSetTimeout(c, tv) != REDIS_OK) die("set timeout failed", c);
    av[0] = "SCRIPT";
    lens[0] = 6;
    av[1] = "LOAD";
    lens[1] = 4;
    av[2] = script;
    lens[2] = script_len;
    {
        redisReply *r = redisCommandArgv(c, 3, av, lens);
        if (!r) die("connection lost", c);
        if (r->type != REDIS_REPLY_STRING || r->len != 40) die("SCRIPT LOAD failed", NULL);
        memcpy(sha, r->str, 41);
        freeReplyObject(r);
    }

    /* the held locks, set pipelined (untimed) */
    for (i = 0; i < n; i++) {
        held *h = &keys[i];
        h->klen = (size_t)snprintf(h->key, sizeof h->key, "{renew:r%ld}", i + 1);
        if (bench_token(h->token) != 0) die("getrandom failed", NULL);
        av[0] = "SET";
        lens[0] = 3;
        av[1] = h->key;
        lens[1] = h->klen;
        av[2] = h->token;
        lens[2] = 32;
        av[3] = "PX";
        lens[3] = 2;
        av[4] = ttl;
        lens[4] = ttl_len;
        if (redisAppendCommandArgv(c, 5, av, lens) != REDIS_OK) die("append failed", c);
        {
            char fkey[48], fence[24];
            const char *fv[5];
            size_t fl[5];
            fv[0] = "SET";
            fl[0] = 3;
            fv[1] = fkey;
            fl[1] = (size_t)snprintf(fkey, sizeof fkey, "%s:fence", h->key);
            fv[2] = fence;
            fl[2] = (size_t)snprintf(fence, sizeof fence, "%ld", 1700000000000000L + i);
            fv[3] = "PX";
            fl[3] = 2;
            fv[4] = "86400000";
            fl[4] = 8;
            if (redisAppendCommandArgv(c, 5, fv, fl) != REDIS_OK) die("append failed", c);
        }
        if (holder) append_holder(c, h, ttl, ttl_len);
    }
    replies = (holder ? 3 : 2) * n;
    for (i = 0; i < replies; i++) {
        redisReply *r;
        if (redisGetReply(c, (void **)&r) != REDIS_OK || !r) die("connection lost", c);
        if (r->type != REDIS_REPLY_STATUS) die("SET failed", NULL);
        freeReplyObject(r);
    }

    for (pipelined = only_pipelined; pipelined <= 1; pipelined++) {
        for (round = 0; round < rounds; round++) {
            long long w0 = clock_ns(CLOCK_MONOTONIC), c0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
            long long s0 = server_ns(stat_path), w1, c1, s1;
            if (!pipelined) {
                for (i = 0; i < n; i++) {
                    renew_argv(&keys[i], sha, ttl, ttl_len, av, lens);
                    check_renewed(redisCommandArgv(c, 6, av, lens), c);
                }
            } else {
                for (i = 0; i < n; i += batch) {
                    long end = i + batch < n ? i + batch : n;
                    for (j = i; j < end; j++) {
                        renew_argv(&keys[j], sha, ttl, ttl_len, av, lens);
                        if (redisAppendCommandArgv(c, 6, av, lens) != REDIS_OK) die("append failed", c);
                    }
                    for (j = i; j < end; j++) {
                        redisReply *r;
                        if (redisGetReply(c, (void **)&r) != REDIS_OK) die("connection lost", c);
                        check_renewed(r, c);
                    }
                }
            }
            w1 = clock_ns(CLOCK_MONOTONIC);
            c1 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
            s1 = server_ns(stat_path);
            printf("round %s wall_ns=%lld cpu_ns=%lld srv_ns=%lld n=%ld\n", pipelined ? "pipelined" : "unpipelined",
                   w1 - w0, c1 - c0, s1 - s0, n);
        }
    }
    redisFree(c);
    free(keys);
    free(script);
    return 0;
}
