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
 * through route_run (router.c).
 */
#include "topo/router.h"

#include <stdio.h>
#include <string.h>

#include "base/deadline.h"
#include "base/proc_id.h"
#include "exec/recovery.h"

/* What a refusal (of either request) asks for, as route_run would do it: a
 * new connection (READONLY: the node is a replica now), the map looked up
 * again. This fast path follows no redirect and waits out no refusal
 * itself: any that asks for more (ASK, TRYAGAIN, LOADING, CLUSTERDOWN)
 * marks the map stale too, so that the next request goes through
 * route_run, which knows the way. NOSCRIPT aside: the machine notes it. */
static void route_wait_recover(router *r, exec_conn *xc, const redisReply *x) {
    recovery rec;
    if (x == NULL || x->type != REDIS_REPLY_ERROR || r->t->mode == TOPO_SINGLE) return;
    recovery_of_reply(x, r->t->mode, &rec);
    if (rec.cls == RECOVERY_NONE || rec.cls == RECOVERY_NOSCRIPT) return;
    r->stale = 1;
    if (rec.todo & RECOVERY_DROP) conn_drop(xc->c);
}

/* The wait's replies: the BLPOP's within the wait's deadline, then the
 * attempt's, which Redis ran right after the BLPOP returned, within the
 * ordinary command timeout. The machine's step after the last. */
static int route_wait_read(router *r, exec_req *x, exec_conn *xc) {
    int step = EXEC_MORE;
    while (step == EXEC_MORE) {
        redisReply *reply = exec_conn_read(xc, x->deadline);
        if (reply == NULL) return exec_failed(x, xc, 1);
        step = exec_reply(x, xc, reply);
        if (x->st.pre_due == 0 && x->pre_reply != NULL && step == EXEC_MORE)
            x->deadline = deadline_in_ms(r->t->cfg.timeout_ms);
    }
    return step;
}

int route_wait_try(router *r, const char *key, size_t klen, const char *secs, size_t slen,
                   const script_def *s, int nargs, const char **args, const size_t *lens,
                   redisReply **woken, redisReply **attempt) {
    const char *bl[3];
    size_t bllen[3];
    exec_req x;
    int node, step;
    exec_conn *xc;
    *woken = *attempt = NULL;
    /* Sentinel: never. A BLPOP on a master that is demoted meanwhile ends
     * at its timeout there, and the attempt behind it would run on a node
     * the sentinels no longer name: the plain wait sends the attempt
     * through route_run, which goes only to a confirmed master. */
    if (r->t->mode == TOPO_SENTINEL) return 0;
    if (r->stale || topo_epoch(r->t) == 0 || nargs > SCRIPT_MAX_ARGS || router_sync(r) != 0) return 0;
    node = r->t->mode == TOPO_SINGLE ? 0 : topo_node_of(r->snap, key, klen);
    if (node < 0 || node >= r->nconns) return 0;
    xc = r->conns[node];
    if (xc != NULL) exec_conn_check_idle(xc);
    if (xc == NULL || xc->c->fd < 0 || xc->c->pid != proc_id()) {
        /* (an ordinary wait that ended at its caller's deadline closed it) */
        if ((xc = router_conn(r, node)) == NULL) return 0;
        if (conn_ensure(xc->c) != 0) {
            r->err = xc->c->err;
            snprintf(r->errstr, sizeof r->errstr, "%s", xc->c->errstr);
            if (r->t->mode != TOPO_SINGLE) r->stale = 1;
            return -2;
        }
    }
    /* (the deadline after any connect) on a connection where the script
     * has not run yet, EVAL, after a SCRIPT LOAD: put first, it never
     * waits behind the BLPOP */
    exec_init(&x, s, nargs, args, lens, key, klen, r->t->mode, EXEC_EVAL_FIRST, r->timeout_ms, DEADLINE_NONE);
    bl[0] = "BLPOP";
    bllen[0] = 5;
    bl[1] = key;
    bllen[1] = klen;
    bl[2] = secs;
    bllen[2] = slen;
    exec_set_pre(&x, 3, bl, bllen);
    step = exec_write(&x, xc) != 0 ? EXEC_FAIL : route_wait_read(r, &x, xc);
    *woken = exec_take_pre(&x);
    if (step == EXEC_FAIL && *woken == NULL) {
        exec_clear(&x);
        r->err = x.err;
        snprintf(r->errstr, sizeof r->errstr, "%s", x.errstr);
        if (r->t->mode != TOPO_SINGLE) r->stale = 1;
        return -1;
    }
    r->last_node = node;
    route_wait_recover(r, xc, *woken);
    if (step == EXEC_DONE) {
        *attempt = exec_take_answer(&x);
        if (xc->c->fd >= 0) route_wait_recover(r, xc, *attempt);
    } else if (step == EXEC_FAIL) {
        /* the BLPOP's reply came, the attempt's did not: it may have run */
        freeReplyObject(*woken);
        *woken = NULL;
        exec_clear(&x);
        r->err = x.err;
        snprintf(r->errstr, sizeof r->errstr, "%s", x.errstr);
        if (r->t->mode != TOPO_SINGLE) r->stale = 1;
        return -1;
    } else {
        /* refused, did not run (NOSCRIPT, a redirect, a pause): the wait
         * says so, and the next attempt goes the ordinary way */
        if (step != EXEC_SEND && r->t->mode != TOPO_SINGLE) r->stale = 1;
        exec_clear(&x);
        *attempt = NULL;
    }
    return 1;
}
