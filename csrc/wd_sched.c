/*
 * wd_sched.c: what happens to an entry: which renewals are due, what an
 * answer (or its absence) means for the lease, and when a loss is final.
 * All with w->mu held.
 *
 * Renewal: each lock is renewed at a third of its ttl with the very `extend`
 * script that lock:extend sends. Locks due within half a renewal interval
 * of each other go out together, as one pipeline.
 *
 * Loss: "not held" from Redis is final at once. A renewal that gets no
 * answer is retried after ttl/10; the lock is declared lost when the lease
 * we know of ends on our monotonic clock (counted from when the last
 * successful renewal was queued, minus a drift margin), so we report before
 * another client can be granted the name.
 */
#include "wd_internal.h"

#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "lease.h"
#include "script.h"

#define WD_BATCH_MAX 1024       /* renewals queued per pass, to bound the mutex hold */

void wd_mark_lost(wd *w, wd_entry *e, int state) {
    if (e->state != WD_HELD) return;
    e->state = state;
    wd_heap_remove(&w->heap, e);
    w->stats.lost[state]++;
    wd_losses_push(&w->losses, e->id, state);
}

void wd_entry_free(wd *w, wd_entry *e) {
    wd_heap_remove(&w->heap, e);
    w->nentries--;
    free(e->key);
    free(e);
}

int64_t wd_retry_at(const wd_entry *e, int64_t now) {
    int64_t retry = e->ttl_ms / 10;
    if (retry < WD_RETRY_MIN_MS) retry = WD_RETRY_MIN_MS;
    return now + retry < e->lease_end ? now + retry : e->lease_end;
}

/* A renewal of e got no usable answer (no reply, its link dropped, or an
 * error reply): try again soon, or report the loss once the lease is over. */
void wd_apply_failure(wd *w, wd_entry *e, int64_t now) {
    e->queued = 0;
    if (e->orphaned) {
        wd_entry_free(w, e);
        return;
    }
    if (e->state != WD_HELD) return;
    e->failing = 1;
    e->raced = 0;
    w->stats.failures++;
    if (now >= e->lease_end) {
        wd_mark_lost(w, e, WD_UNREACHABLE);
        return;
    }
    e->next_at = wd_retry_at(e, now);
    e->slack = 0;
    wd_heap_push(&w->heap, e);
}

/* The link for e's key in the watchdog's snapshot, or NULL (no node
 * serves its slot: the map is being changed). */
wd_link *wd_route(wd *w, const wd_entry *e) {
    uint16_t node = 0;
    if (w->snap == NULL || w->nlinks == 0) return NULL;
    if (w->snap->slot_node) node = e->slot >= 0 ? w->snap->slot_node[e->slot] : TOPO_NO_NODE;
    return node < w->nlinks ? &w->links[node] : NULL;
}

/* Applies one renewal's answer. Returns 1 when the link must be dropped
 * (its node is a replica now), after the caller is done with this reply. */
int wd_apply_reply(wd *w, wd_link *l, const wd_req *req, const redisReply *r, int64_t now) {
    wd_entry *e = req->e;
    topo_node target;
    int redirect;
    e->queued = 0;
    e->last_done = now;
    if (e->orphaned) {
        wd_entry_free(w, e);
        return 0;
    }
    if (e->state != WD_HELD) return 0;
    if (!req->eval && script_is_noscript(r)) {
        /* The script cache was flushed (or this node never saw it: the
         * cache is per node): the script did not run, so EVAL runs it
         * exactly once, here. The lease still counts from the first send. */
        if (wd_link_queue(w, l, e, 1, req->asking, req->sent_at) != 0) wd_apply_failure(w, e, now);
        return 0;
    }
    memset(&target, 0, sizeof target);
    redirect = w->t->mode == TOPO_SINGLE ? CLUSTER_NONE : cluster_redirect_of(r, &target);
    if (redirect == CLUSTER_ASK) {
        /* the slot is moving: this one renewal goes to the new node */
        wd_link *to = wd_link_find(w, &target);
        topo_node_clear(&target);
        if (to && wd_link_open(to, now) == 0 && wd_link_queue(w, to, e, 0, 1, req->sent_at) == 0)
            return 0;
        w->want_refresh = 1;
        wd_apply_failure(w, e, now);
        return 0;
    }
    topo_node_clear(&target);
    if (redirect == CLUSTER_MOVED || redirect == CLUSTER_READONLY) {
        /* the map changed, or our master is a replica now: reload the
         * topology and renew on the right node */
        w->want_refresh = 1;
    }
    if (r->type != REDIS_REPLY_INTEGER) {
        wd_apply_failure(w, e, now);   /* a redis error: retried like an outage */
        return redirect == CLUSTER_READONLY;
    }
    if (r->integer != 1) {
        wd_mark_lost(w, e, WD_NOT_HELD);
        return 0;
    }
    e->failing = 0;
    if (e->raced) {
        /* lock:extend ran while this renewal was on the wire: Redis may have
         * run either PEXPIRE last, so count on the earlier end (wd_renewed
         * left it in lease_end), and renew at once with the new ttl: that
         * renewal, sent after both answers, settles it. */
        int64_t end = req->sent_at + req->ttl_ms - lease_drift_ms(req->ttl_ms);
        if (end < e->lease_end) e->lease_end = end;
        e->raced = 0;
        e->next_at = now;
        e->slack = 0;
    } else {
        e->lease_end = req->sent_at + req->ttl_ms - lease_drift_ms(req->ttl_ms);
        e->next_at = req->sent_at + e->ttl_ms / 3;
        e->slack = e->ttl_ms / 6;
    }
    wd_heap_push(&w->heap, e);
    return 0;
}

/* Queues the renewals due now (and those due within their slack, so locks
 * taken at about the same time share a round trip). Locks whose lease
 * already ran out are reported instead of renewed. */
void wd_collect(wd *w, int64_t now) {
    int n = 0;
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
        l = wd_route(w, e);
        if (l == NULL) {
            w->want_refresh = 1;
            wd_apply_failure(w, e, now);
            continue;
        }
        if (wd_link_open(l, now) != 0) {
            if (w->t->mode != TOPO_SINGLE) w->want_refresh = 1;
            wd_apply_failure(w, e, now);
            continue;
        }
        if (wd_link_queue(w, l, e, 0, 0, now) != 0) {
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
