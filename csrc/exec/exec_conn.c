/*
 * exec_conn.c: a data node's connection as the request layer knows it
 * (see exec_conn.h).
 */
#define _GNU_SOURCE
#include "exec/exec_conn.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/monotime.h"

exec_conn *exec_conn_new(const conn_config *cfg, const exec_opts *opts) {
    exec_conn *x = calloc(1, sizeof *x);
    if (x == NULL) return NULL;
    x->c = conn_new(cfg);
    if (x->c == NULL) {
        free(x);
        return NULL;
    }
    if (opts) {
        x->nat.off = opts->no_native;
        x->nat.assume = opts->native_assume;
    }
    x->gen = x->c->gen;
    return x;
}

void exec_conn_free(exec_conn *x) {
    if (x == NULL) return;
    conn_free(x->c);
    free(x);
}

void exec_conn_setup(exec_conn *x, const uint16_t *slot_node, int node) {
    native_conn_setup(x->c, &x->nat, slot_node, node);
}

void exec_conn_sync(exec_conn *x) {
    if (x->gen == x->c->gen) return;
    x->gen = x->c->gen;
    x->scripts_ran = 0;       /* the next connection may be to another server */
    x->no_script_load = 0;
    x->loading = 0;
    x->skip = 0;
    x->skip_since = 0;
}

int exec_conn_reply(exec_conn *x, redisReply **r) {
    exec_conn_sync(x);
    for (;;) {
        int k = conn_reply(x->c, r);
        if (k != 1 || x->skip == 0) return k;
        if (--x->skip == 0) x->skip_since = 0;
        exec_conn_note_dropped(x, *r);
        freeReplyObject(*r);
        *r = NULL;
    }
}

redisReply *exec_conn_read(exec_conn *x, int64_t deadline) {
    exec_conn_sync(x);
    for (;;) {
        redisReply *r = conn_read(x->c, deadline);
        exec_conn_sync(x);   /* (a failed read dropped it) */
        if (r == NULL || x->skip == 0) return r;
        if (--x->skip == 0) x->skip_since = 0;
        exec_conn_note_dropped(x, r);
        freeReplyObject(r);
    }
}

int exec_conn_reply_int(exec_conn *x, long long *v) {
    exec_conn_sync(x);
    return x->skip == 0 && conn_reply_int(x->c, v);
}

void exec_conn_give_up(exec_conn *x, int n) {
    exec_conn_sync(x);
    if (n <= 0) return;
    if (x->skip == 0) x->skip_since = monotime_us();
    x->skip += n;
}

/* "NOPERM ... 'script|load' ..." (an ACL; Redis 6 names 'script'), "ERR
 * unknown command 'SCRIPT'" (renamed away) or "ERR unknown subcommand 'LOAD'":
 * the node will not load scripts for us. Any other dropped answer (a
 * fan-out's late one) is no news. */
void exec_conn_note_dropped(exec_conn *x, const redisReply *r) {
    if (r->type != REDIS_REPLY_ERROR || r->str == NULL) return;
    if (r->len >= 6 && memcmp(r->str, "NOPERM", 6) == 0) {
        if (strcasestr(r->str, "'script|load'") || strcasestr(r->str, "'script'")) x->no_script_load = 1;
    } else if (strncasecmp(r->str, "ERR unknown command 'script'", 28) == 0 ||
               strncasecmp(r->str, "ERR unknown subcommand 'load'", 29) == 0) {
        x->no_script_load = 1;
    }
}

int exec_conn_queue_load(exec_conn *x, const script_def *s, int skipped) {
    const char *argv[3];
    size_t lens[3];
    exec_conn_sync(x);
    if (x->no_script_load) return 0;
    argv[0] = "SCRIPT";
    lens[0] = 6;
    argv[1] = "LOAD";
    lens[1] = 4;
    argv[2] = s->source;
    lens[2] = s->len;
    if (conn_append(x->c, 3, argv, lens) != 0) return -1;
    if (skipped) exec_conn_give_up(x, 1);
    else x->loading |= script_bit(s);
    return 1;
}

void exec_conn_loaded(exec_conn *x, const script_def *s) {
    x->loading &= ~script_bit(s);
}

void exec_conn_check_idle(exec_conn *x) {
    exec_conn_sync(x);
    if (x->skip == 0) conn_check_idle(x->c);
}
