/*
 * route_wait.c: a waiter's BLPOP and its next attempt, sent in one write
 * (router.h route_wait_try).
 *
 * A waiter woken by a release used to read the wakeup, then send its next
 * attempt: a round trip during which the releaser, looping, could take the
 * lock straight back. Queued behind the BLPOP on the same connection, the
 * attempt sits in the server's input buffer until the BLPOP returns, and
 * Redis runs it at once, before any client could answer the release: one
 * round trip fewer, and the race gone. The attempt is still an attempt by a
 * live client (a closed connection's input is never run), so a wakeup
 * remains a wakeup, not a grant: what a lock promises does not change.
 *
 * This is only the fast path. It sends nothing unless the map is current
 * and the key's node can be reached without asking anyone where it is;
 * everything that needs a topology refresh, a Sentinel or a redirect goes
 * through route_exec (router.c).
 */
#include "router.h"

#include <stdio.h>
#include <string.h>

#include "counters.h"
#include "deadline.h"
#include "proc_id.h"
#include "recovery.h"

static void route_wait_fail(router *r, const conn *c) {
    r->err = c->err;
    snprintf(r->errstr, sizeof r->errstr, "%s", c->errstr);
    if (r->t->mode != TOPO_SINGLE) r->stale = 1;
}

/* What a refusal (either reply) asks for, as route_exec would do it: a
 * new connection (READONLY: the node is a replica now), the map looked up
 * again. This fast path follows no redirect and waits out no refusal
 * itself: any that asks for more (ASK, TRYAGAIN, LOADING, CLUSTERDOWN)
 * marks the map stale too, so that the next request goes through
 * route_exec, which knows the way. NOSCRIPT aside: route_wait_note. */
static void route_wait_recover(router *r, conn *c, const redisReply *x) {
    recovery rec;
    if (x->type != REDIS_REPLY_ERROR || r->t->mode == TOPO_SINGLE) return;
    recovery_of_reply(x, r->t->mode, &rec);
    if (rec.cls == RECOVERY_NONE || rec.cls == RECOVERY_NOSCRIPT) return;
    r->stale = 1;
    if (rec.todo & RECOVERY_DROP) conn_drop(c);
}

/* Notes what the attempt's reply says of the connection: the script has
 * run on it, or its cache was flushed. */
static void route_wait_note(conn *c, const script_def *s, const redisReply *a) {
    uint64_t bit = script_bit(s);
    recovery rec;
    if (a->type != REDIS_REPLY_ERROR) {
        c->scripts_ran |= bit;
        return;
    }
    recovery_of_reply(a, TOPO_SINGLE, &rec);   /* (NOSCRIPT is the same in every mode) */
    if (rec.cls == RECOVERY_NOSCRIPT) {
        c->scripts_ran &= ~bit;
        conn_note_noscript(c);
    }
}

int route_wait_try(router *r, const char *key, size_t klen, const char *secs, size_t slen,
                   const script_def *s, int nargs, const char **args, const size_t *lens,
                   redisReply **woken, redisReply **attempt) {
    const char *bl[3];
    size_t bllen[3];
    int64_t deadline;
    int node, eval;
    conn *c;
    *woken = *attempt = NULL;
    /* Sentinel: never. A BLPOP on a master that is demoted meanwhile ends
     * at its timeout there, and the attempt behind it would run on a node
     * the sentinels no longer name: the plain wait sends the attempt
     * through route_exec, which goes only to a confirmed master. */
    if (r->t->mode == TOPO_SENTINEL) return 0;
    if (r->stale || topo_epoch(r->t) == 0 || nargs > SCRIPT_MAX_ARGS || router_sync(r) != 0) return 0;
    node = r->t->mode == TOPO_SINGLE ? 0 : topo_node_of(r->snap, key, klen);
    if (node < 0 || node >= r->nconns) return 0;
    c = r->conns[node];
    if (c != NULL) conn_check_idle(c);
    if (c == NULL || c->fd < 0 || c->pid != proc_id()) {
        /* (an ordinary wait that ended at its caller's deadline closed it) */
        if ((c = router_conn(r, node)) == NULL) return 0;
        if (conn_ensure(c) != 0) {
            route_wait_fail(r, c);
            return -2;
        }
    }
    deadline = deadline_in_ms(r->timeout_ms);   /* (after any connect) */

    /* on a connection where the script has not run yet, EVAL, after a
     * SCRIPT LOAD whose answer is skipped (script.h): put first, it never
     * waits behind the BLPOP */
    eval = !(c->scripts_ran & script_bit(s));
    if (eval && script_queue_load_skipped(c, s) < 0) goto failed;
    bl[0] = "BLPOP";
    bllen[0] = 5;
    bl[1] = key;
    bllen[1] = klen;
    bl[2] = secs;
    bllen[2] = slen;
    if (conn_append(c, 3, bl, bllen) != 0 || route_append(c, s, eval, nargs, args, lens) != 0)
        goto failed;
    *woken = conn_read(c, deadline);
    if (*woken == NULL) goto failed;
    r->last_node = node;
    /* Redis ran the attempt right after the BLPOP returned: its answer is
     * on its way, within the ordinary command timeout */
    *attempt = conn_read(c, deadline_in_ms(r->t->cfg.timeout_ms));
    if (*attempt == NULL) {
        freeReplyObject(*woken);
        *woken = NULL;
        goto failed;
    }
    route_wait_note(c, s, *attempt);
    route_wait_recover(r, c, *woken);
    if (c->fd >= 0) route_wait_recover(r, c, *attempt);
    return 1;

failed:
    route_wait_fail(r, c);
    return -1;
}
