/*
 * conn_handshake.c: what every new connection says first (see conn.h),
 * queued ahead of any request: AUTH, SELECT, PING, and for some
 * connections INFO memory and the requests of a layer above (conn_hook:
 * the native command detection); and what their replies mean. Settings are re-applied on every connect, so a reconnected
 * conn is indistinguishable from the first one.
 */
#define _GNU_SOURCE
#include "net/conn.h"

#include <stdio.h>
#include <string.h>

#include "net/counters.h"
#include "net/conn_internal.h"

enum { HS_AUTH = 1, HS_SELECT, HS_PING, HS_INFO, HS_HOOK };   /* HS_HOOK + i: the hook's i-th */

/* Queues AUTH, SELECT, PING (which proves the server answers and that we
 * may use it: a missing password fails here with NOAUTH, within the connect
 * deadline), for a probing conn INFO memory and, where a hook is set, its
 * requests (their replies never fail the handshake: see
 * conn_handshake_reply). */
int conn_queue_handshake(conn *c) {
    const char *argv[3];
    size_t lens[3];
    int argc;
    c->hs_n = c->hs_next = 0;
    if (c->cfg.password) {
        argc = 0;
        argv[argc] = "AUTH"; lens[argc++] = 4;
        if (c->cfg.username) {
            argv[argc] = c->cfg.username; lens[argc++] = strlen(c->cfg.username);
        }
        argv[argc] = c->cfg.password; lens[argc++] = strlen(c->cfg.password);
        if (conn_queue(c, argc, argv, lens) != 0) return -1;
        c->hs_kind[c->hs_n++] = HS_AUTH;
    }
    if (c->cfg.db > 0) {
        char db[24];
        int n = snprintf(db, sizeof db, "%d", c->cfg.db);
        argv[0] = "SELECT"; lens[0] = 6;
        argv[1] = db; lens[1] = (size_t)n;
        if (conn_queue(c, 2, argv, lens) != 0) return -1;
        c->hs_kind[c->hs_n++] = HS_SELECT;
    }
    argv[0] = "PING"; lens[0] = 4;
    if (conn_queue(c, 1, argv, lens) != 0) return -1;
    c->hs_kind[c->hs_n++] = HS_PING;
    if (c->probe) {
        argv[0] = "INFO"; lens[0] = 4;
        argv[1] = "memory"; lens[1] = 6;
        if (conn_queue(c, 2, argv, lens) != 0) return -1;
        c->hs_kind[c->hs_n++] = HS_INFO;
    }
    if (c->hook) {
        int i, n = c->hook->queue(c, c->hook_ud);
        if (n < 0 || c->hs_n + n > (int)sizeof c->hs_kind) return -1;
        for (i = 0; i < n; i++) c->hs_kind[c->hs_n++] = (unsigned char)(HS_HOOK + i);
    }
    return 0;
}

int conn_hook_queue(conn *c, int argc, const char **argv, const size_t *lens) {
    return conn_queue(c, argc, argv, lens);
}

/* INFO memory's maxmemory_policy, or why it could not be read (an ACL user
 * without +info): not a reason to refuse the connection. */
static void conn_read_info(conn *c, const redisReply *r) {
    conn_info *in = &c->info;
    memset(in, 0, sizeof *in);
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(in->info_error, sizeof in->info_error, "%.*s", (int)r->len, r->str);
    } else if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) {
        const char *p = memmem(r->str, r->len, "maxmemory_policy:", 17);
        if (p) {
            size_t i = 0;
            p += 17;
            while (p + i < r->str + r->len && p[i] != '\r' && p[i] != '\n' &&
                   i + 1 < sizeof in->maxmemory_policy) {
                in->maxmemory_policy[i] = p[i];
                i++;
            }
            in->maxmemory_policy[i] = '\0';
        } else {
            snprintf(in->info_error, sizeof in->info_error, "INFO memory has no maxmemory_policy");
        }
    }
}

/* The reply r to the next handshake request: INFO and the hook's never
 * fail the handshake; an error to AUTH, SELECT or PING does (Redis' own
 * words in errstr; they never contain our arguments). Frees r. 0, or -1
 * with the connection dropped. */
int conn_handshake_reply(conn *c, redisReply *r) {
    int kind = c->hs_kind[c->hs_next++];
    if (kind == HS_INFO) {
        conn_read_info(c, r);
    } else if (kind >= HS_HOOK) {
        if (c->hook) c->hook->reply(c, c->hook_ud, kind - HS_HOOK, r);
    } else if (r->type == REDIS_REPLY_ERROR) {
        c->err = CONN_EREDIS;
        snprintf(c->errstr, sizeof c->errstr, "redis error: %.*s",
                 (int)(r->len < 160 ? r->len : 160), r->str);
        freeReplyObject(r);
        conn_drop(c);
        return -1;
    }
    freeReplyObject(r);
    if (c->hs_next == c->hs_n) conn_note_up(c);   /* counters.h */
    return 0;
}
