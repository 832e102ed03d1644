/*
 * wd_lease.c: what happens to an entry's lease: what one request's answer
 * (or its absence) means for it, when it is renewed next, and when a loss
 * is final. All with w->mu held. Nothing here sends or reads: the links
 * (wd_link.c) bring here what became of their requests, the scheduler
 * (wd_sched.c) what an answer said or what could not be sent.
 *
 * Renewal: a lock renewed is due again a third of its ttl after that
 * renewal was queued; at once where the Lua side's extend raced it
 * (wd_renewal_ok), within ttl/30 while a Redlock master is contested
 * (wd_contested).
 *
 * Loss: "not held" from Redis is final at once. A renewal that gets no
 * answer is retried after ttl/10; the lock is declared lost when the lease
 * we know of ends on our monotonic clock (counted from when the last
 * successful renewal was queued, minus a drift margin), so we report before
 * another client can be granted the name.
 */
#include "watchdog/wd_internal.h"

#include <stdlib.h>

#include "base/lease.h"

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
    free(e);   /* and its key, in the same block */
}

int64_t wd_retry_at(const wd_entry *e, int64_t now) {
    int64_t retry = e->ttl_ms / 10;
    if (retry < WD_RETRY_MIN_MS) retry = WD_RETRY_MIN_MS;
    return now + retry < e->lease_end ? now + retry : e->lease_end;
}

void wd_lease_lowered(wd *w, int64_t lease_end) {
    int i;
    for (i = 0; i < w->nlinks; i++)
        if (lease_end < w->links[i].end_lb) w->links[i].end_lb = lease_end;
}

/* How many nodes vote on a lock's renewal, and how many must agree. */
static int wd_voters(const wd *w) {
    return w->t->mode == TOPO_REDLOCK ? w->nlinks : 1;
}

/* How soon a contested Redlock lock is renewed again (wd_contested):
 * within ttl/30, at least WD_RETRY_MIN_MS. */
static int64_t wd_contest_at(const wd_entry *e, int64_t now) {
    int64_t in = e->ttl_ms / 30;
    return now + (in < WD_RETRY_MIN_MS ? WD_RETRY_MIN_MS : in);
}

/* Redlock: a master answered "someone else's" while the lock is held.
 * Most often a rival's attempt: it holds that one master for a moment, then
 * fails (no rival can have a majority while we do) and releases it. Our
 * lock then rests on one master fewer, and one more restart or eviction
 * could hand the majority to rivals that keep trying: the next round, which
 * takes the master back if it is free by then, comes within ttl/30 instead
 * of ttl/3, for as long as that goes on. (Two rivals looping on one name
 * keep a restarted master busy most of the time: at ttl/3, the few rounds
 * before the next fault often all met a rival there.) A round still open
 * is rescheduled when it ends (wd_outcome); one already ended (this
 * answer came after its quorum) now. */
void wd_contested(wd *w, wd_entry *e, int64_t now) {
    int64_t soon = wd_contest_at(e, now);
    if (e->orphaned || e->state != WD_HELD) return;
    e->contested = 1;
    if (e->heap_pos < 0 || e->next_at <= soon) return;
    wd_heap_remove(&w->heap, e);   /* (next_at changes only out of the heap) */
    e->next_at = soon;
    e->slack = 0;
    wd_heap_push(&w->heap, e);
}

/* A renewal that succeeded (a majority of masters, for Redlock), sent at
 * sent_at asking for ttl_ms. */
static void wd_renewal_ok(wd *w, wd_entry *e, int64_t sent_at, int64_t ttl_ms, int64_t now) {
    wd_heap_remove(&w->heap, e);   /* (next_at changes only out of the heap) */
    e->failing = 0;
    if (e->raced) {
        /* lock:extend ran while this renewal was on the wire: Redis may have
         * run either PEXPIRE last, so count on the earlier end (wd_renewed
         * left it in lease_end), and renew at once with the new ttl: that
         * renewal, sent after both answers, settles it. */
        int64_t end = sent_at + ttl_ms - lease_drift_ms(ttl_ms);
        if (end < e->lease_end) e->lease_end = end;
        e->raced = 0;
        e->next_at = now;
        e->slack = 0;
    } else {
        e->lease_end = sent_at + ttl_ms - lease_drift_ms(ttl_ms);
        e->next_at = sent_at + e->ttl_ms / 3;
        e->slack = e->ttl_ms / 6;
    }
    if (e->queued) wd_lease_lowered(w, e->lease_end);   /* (Redlock: still on other links) */
    wd_heap_push(&w->heap, e);
}

/* A renewal that got no usable answer: try again soon, or report the loss
 * once the lease is over. */
static void wd_renewal_failed(wd *w, wd_entry *e, int64_t now) {
    wd_note_renewal_failed(w, e, now);
    e->failing = 1;
    e->raced = 0;
    if (now >= e->lease_end) {
        wd_mark_lost(w, e, WD_UNREACHABLE);
        return;
    }
    wd_heap_remove(&w->heap, e);   /* (next_at changes only out of the heap) */
    e->next_at = wd_retry_at(e, now);
    e->slack = 0;
    wd_heap_push(&w->heap, e);
}

/* One request of e's renewal is done: outcome 1 renewed, 0 not held, -1
 * no usable answer (no reply, its link dropped, an error reply). With one
 * node that decides it; with Redlock's N masters the lock is lost as soon
 * as more than N - quorum say "not held" (then fewer than a majority held
 * our token with time left when the round reached them), and renewed once
 * a quorum renewed. */
void wd_outcome(wd *w, wd_entry *e, int outcome, uint32_t round, int64_t sent_at, int64_t ttl_ms,
                int64_t now) {
    int n, quorum, ok;
    if (e->queued > 0) e->queued--;
    if (outcome >= 0) e->last_done = now;
    if (e->orphaned) {
        if (e->queued == 0) wd_entry_free(w, e);
        return;
    }
    if (e->state != WD_HELD || round != e->round) return;   /* (a finished round's straggler) */
    if (outcome > 0) e->r_ok++;
    else if (outcome == 0) e->r_no++;
    else {
        e->r_fail++;
        w->stats.failures++;
    }
    n = wd_voters(w);
    quorum = n / 2 + 1;
    if (e->r_no > n - quorum) {
        e->r_ok = e->r_no = e->r_fail = 0;
        e->round++;
        wd_mark_lost(w, e, WD_NOT_HELD);
        return;
    }
    /* a quorum decides at once; otherwise wait for every answer (Redlock:
     * a stalled minority must not hold the others up) */
    if (e->queued > 0 && e->r_ok < quorum) return;
    ok = e->r_ok;
    e->r_ok = e->r_no = e->r_fail = 0;
    e->round++;
    if (ok >= quorum) {
        wd_renewal_ok(w, e, sent_at, ttl_ms, now);
    } else {
        wd_renewal_failed(w, e, now);
    }
    if (e->contested) wd_contested(w, e, now);   /* (seen while the round was open) */
}

/* A request of e's renewal got no usable answer. */
void wd_apply_failure(wd *w, wd_entry *e, int64_t now) {
    wd_outcome(w, e, -1, e->round, 0, 0, now);
}

/* Every held lock due now (a new master, a doubt lifted). */
void wd_renew_all_now(wd *w, int64_t now) {
    uint32_t k;
    for (k = 0; k < w->ids.cap; k++) {
        wd_entry *e = w->ids.vals[k];
        if (w->ids.keys[k] == 0 || e->state != WD_HELD || e->heap_pos < 0) continue;
        wd_heap_remove(&w->heap, e);
        e->next_at = now;
        e->slack = 0;
        wd_heap_push(&w->heap, e);
    }
}
