/*
 * wd_sched.c: which renewals are due, and sending them: on which link, and
 * sent again where an answer asks for it (NOSCRIPT, ASK, a refused native
 * command). What an answer, or its absence, means for the lease is
 * wd_lease.c's. All with w->mu held.
 *
 * Renewal: each lock is renewed at a third of its ttl with the very `extend`
 * script that lock:extend sends. Locks due within half a renewal interval
 * of each other go out together, as one pipeline. Redlock: redlock_renew
 * on every master, which also takes the key back where it is gone; a
 * master holding someone else's value brings the next round forward
 * (wd_contested).
 *
 * Answers: a link reads them in order and hands each, with its request,
 * to wd_apply_step (the thread's loop passes it to wd_link_pump), so the
 * links never call up into this file; what this file sends goes down to
 * them (wd_link_open, wd_link_queue).
 */
#include "watchdog/wd_internal.h"

#include <string.h>

#include "cmd/script.h"

#define WD_BATCH_MAX 1024       /* renewals queued per pass, to bound the mutex hold */

/* The link for e's key in the watchdog's snapshot, or NULL (no node
 * serves its slot: the map is being changed). */
wd_link *wd_route(wd *w, const wd_entry *e) {
    uint16_t node = 0;
    if (w->snap == NULL || w->nlinks == 0) return NULL;
    if (w->snap->slot_node) node = e->slot >= 0 ? w->snap->slot_node[e->slot] : TOPO_NO_NODE;
    return node < w->nlinks ? &w->links[node] : NULL;
}

/* req's renewal sent again on l (after NOSCRIPT as EVAL, after a native
 * command that did not run as the script, after ASK to the slot's new
 * node: st says which), its lease still counting from the first send and
 * its answer in req's round; when it cannot be sent, that is the
 * request's failure. 0 sent, -1 not. */
static int wd_resend(wd *w, wd_link *l, wd_entry *e, const exec_state *st, const wd_req *req, int64_t now) {
    e->queued--;
    w->send_doubts = req->doubts;   /* (a doubt since the first send voids it too) */
    if (l != NULL && wd_link_open(l, now) == 0 && wd_link_queue(w, l, e, st, req->sent_at, req->script, req->round) == 0)
        return 0;
    e->queued++;
    wd_outcome(w, e, -1, req->round, 0, 0, now);
    return -1;
}

/* What the machine (exec.h) says of a renewal it is done with: its answer
 * (wd_apply_answer), or again here (NOSCRIPT, a native command that did
 * not run), again on the slot's new node (ASK), or no usable answer (a
 * refusal to be waited out, TRYAGAIN or LOADING, is a renewal that failed:
 * tried again after ttl/10 while the lease lasts, the watchdog's own pause;
 * a redirect or a refused master reloads the topology). */
void wd_apply_step(wd *w, wd_link *l, const wd_req *req, exec_req *x, int step, int64_t now) {
    wd_entry *e = req->e;
    int live = !e->orphaned && e->state == WD_HELD;
    const char *target = exec_target(x);
    if (step == EXEC_DONE) {
        redisReply *r = exec_take_answer(x);
        wd_apply_answer(w, l, req, r, now);
        freeReplyObject(r);
        return;
    }
    if (step == EXEC_SEND && live) {
        wd_resend(w, l, e, &x->st, req, now);
        return;
    }
    if (step == EXEC_ROUTE && live && target) {
        /* the slot is moving: this one renewal goes to the new node */
        topo_node node;
        wd_link *to = NULL;
        if (topo_node_parse(target, strlen(target), &node) == 0) {
            to = wd_link_find(w, &node);
            topo_node_clear(&node);
        }
        if (wd_resend(w, to, e, &x->st, req, now) != 0) w->want_refresh = 1;
        return;
    }
    if (exec_resolve(x)) w->want_refresh = 1;
    wd_outcome(w, e, -1, req->round, 0, 0, now);
}

/* A renewal's answer: extend answers 1 (renewed) or 0; redlock_renew 1
 * (renewed), or "not held" in this round: 3 (the key was gone and is taken
 * back: renewed next round, it held nothing when this one reached it), 2
 * (gone, no validity left to take it back for), 0 (someone else's); an
 * error reply is no usable answer. */
void wd_apply_answer(wd *w, wd_link *l, const wd_req *req, const redisReply *r, int64_t now) {
    wd_entry *e = req->e;
    int outcome, contested = 0;
    if (r->type != REDIS_REPLY_INTEGER) {
        outcome = -1;
    } else if (w->t->mode == TOPO_REDLOCK) {
        outcome = r->integer == 1 ? 1 : 0;
        contested = r->integer == 0 && !e->orphaned;   /* (an orphan may be freed below) */
    } else {
        outcome = r->integer >= 1 ? 1 : 0;
    }
    if (w->t->mode == TOPO_SENTINEL && req->doubts != topo_doubts(w->t)) {
        /* A doubt was cast while it was on the wire (a failover began, a
         * connection failed): the master that answered may be one being
         * demoted, whose renewal the new master never sees. No credit
         * either way: the lease stands as it was, and the renewal is
         * tried again once the doubt is lifted. */
        outcome = -1;
        contested = 0;
    }
    if (outcome > 0 && wd_ack_needed(w, l)) {
        /* credited once the WAIT behind it says the replicas have it (wd_ack.c) */
        if (wd_ack_hold(w, l, req) == 0) return;
        outcome = -1;
    }
    wd_outcome(w, e, outcome, req->round, req->sent_at, req->ttl_ms, now);
    if (contested) wd_contested(w, e, now);
}

/* Queues the renewals due now (and those due within their slack, so locks
 * taken at about the same time share a round trip). Locks whose lease
 * already ran out are reported instead of renewed. */
void wd_collect(wd *w, int64_t now) {
    int n = 0;
    /* Sentinel: a master in doubt (a failover under way, its connection
     * failed) is not written to: what it grants or renews may be gone
     * when the sentinels name another (topo.h). The renewals due wait,
     * counted as failed, until the doubt is lifted (wd_main renews them
     * all then) or their lease ends. */
    int held_back;
    w->send_doubts = topo_doubts(w->t);   /* (first: see topo_doubts) */
    held_back = !topo_confirmed(w->t);
    while (n < WD_BATCH_MAX) {
        wd_entry *e = wd_heap_top(&w->heap);
        wd_link *l;
        if (e == NULL || e->next_at > now + e->slack) break;
        wd_heap_remove(&w->heap, e);
        if (e->pid != w->pid) continue;  /* the parent's, after a fork */
        if (now >= e->lease_end) {
            wd_mark_lost(w, e, e->failing ? WD_UNREACHABLE : WD_EXPIRED);
            continue;
        }
        if (e->hold_until && now >= e->hold_until) {
            wd_mark_lost(w, e, WD_MAX_HOLD);
            continue;
        }
        if (held_back) {
            e->queued++;
            wd_apply_failure(w, e, now);
            continue;
        }
        if (w->t->mode == TOPO_REDLOCK) {
            /* Redlock: on every master at once; unreachable ones answer
             * "no usable answer" right away */
            int i, failed = 0;
            e->r_ok = e->r_no = e->r_fail = 0;
            e->contested = 0;
            for (i = 0; i < w->nlinks; i++) {
                l = &w->links[i];
                if (wd_link_open(l, now) != 0 || wd_link_queue(w, l, e, NULL, now, NULL, e->round) != 0)
                    failed++;
            }
            e->queued += failed;   /* so the round ends with their answers */
            while (failed-- > 0) wd_apply_failure(w, e, now);
            n++;
            continue;
        }
        l = wd_route(w, e);
        if (l == NULL) {
            w->want_refresh = 1;
            e->queued++;
            wd_apply_failure(w, e, now);
            continue;
        }
        if (wd_link_open(l, now) != 0) {
            if (w->t->mode != TOPO_SINGLE) w->want_refresh = 1;
            e->queued++;
            wd_apply_failure(w, e, now);
            continue;
        }
        if (wd_link_queue(w, l, e, NULL, now, NULL, e->round) != 0) {
            e->queued++;
            wd_apply_failure(w, e, now);
            continue;
        }
        n++;
    }
    if (n > 0) {
        w->stats.round_trips++;
        w->stats.last_batch = (uint64_t)n;
    }
}
