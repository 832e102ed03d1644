/*
 * script_load.c: the requests that run a script: EVALSHA or EVAL (script.h);
 * the SCRIPT LOAD queued before every EVAL is exec_conn.c's.
 *
 * EVAL alone would re-cache the script too, but Redis 8 evicts the scripts
 * EVAL created once there are more than 500 of them (least recently used
 * first), while one created by SCRIPT LOAD stays until SCRIPT FLUSH. On a
 * server shared with clients that EVAL a new script per call, ours would
 * be evicted again and again: every eviction a NOSCRIPT round trip, and in
 * a Redlock fan-out a late NOSCRIPT that is dropped (fanout.c). The EVAL
 * after the load still runs the script whatever the load answered, so a
 * node that refuses SCRIPT LOAD (an ACL, a renamed command) costs nothing
 * but the refusal, once per connection (conn_note_dropped).
 */
#include "cmd/script.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


int script_append(conn *c, const script_def *s, int eval, int nargs, const char **args,
                  const size_t *lens) {
    const char *argv[SCRIPT_MAX_ARGS + 3];
    size_t alens[SCRIPT_MAX_ARGS + 3];
    char nkeys[16];
    int i, pre = s->nkeys < 0 ? 2 : 3;   /* (variadic: the count is args[0]) */
    if (nargs < 0 || nargs > SCRIPT_MAX_ARGS) return -1;
    if (!eval)   /* the hot path: "EVALSHA sha nkeys" in RESP, made at build time */
        return conn_append_pre(c, (size_t)nargs + (size_t)pre, s->evalsha, s->evalsha_len, nargs, args, lens);
    argv[0] = "EVAL";
    alens[0] = 4;
    argv[1] = s->source;
    alens[1] = s->len;
    if (pre == 3) {
        alens[2] = (size_t)snprintf(nkeys, sizeof nkeys, "%d", s->nkeys);
        argv[2] = nkeys;
    }
    for (i = 0; i < nargs; i++) {
        argv[pre + i] = args[i];
        alens[pre + i] = lens[i];
    }
    return conn_append(c, nargs + pre, argv, alens);
}

int script_first_key(const script_def *s, int nargs, const char **args, const size_t *lens) {
    char buf[8];
    long n;
    char *end;
    if (s->nkeys >= 0) return s->nkeys > 0 && nargs > 0 ? 0 : -1;
    if (nargs < 1 || lens[0] == 0 || lens[0] >= sizeof buf) return -1;
    memcpy(buf, args[0], lens[0]);
    buf[lens[0]] = '\0';
    n = strtol(buf, &end, 10);
    if (*end != '\0' || n < 1 || n > nargs - 1) return -1;
    return 1;
}
