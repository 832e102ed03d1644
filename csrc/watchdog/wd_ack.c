/*
 * wd_ack.c: a renewal earns credit only once a replica has it (see
 * wd_internal.h's wd_ack_*). All with w->mu held.
 *
 * Why. Under Sentinel (and Cluster) a failover promotes a replica, and
 * whatever the old master took after the replica stopped following it is
 * lost. The old master goes on answering as a master for seconds after the
 * promotion (until Sentinel demotes it), and a client that has not heard of
 * the failover yet (its sentinels slow, hung or unreachable) keeps renewing
 * there: each renewal answers 1, but the promoted replica never sees it, so
 * the key there runs out at the end of the last renewal it did see, and
 * another client is granted the name there while our held() says true.
 *
 * The rule: on a master a failover could replace (topo_node.replicas: a
 * Sentinel master once a replica was seen to follow it, counting every
 * replica the sentinels could promote; a Cluster master with replicas in
 * CLUSTER NODES), the renewals queued on a link are followed by one WAIT
 * (one for the whole batch: a round trip's cost, not one per lock), and a
 * renewal's answer is held here until that WAIT answers. It is credited
 * only when every one of those replicas (and at least the lock's
 * `replicas`) acknowledged it; otherwise it is a renewal that got no
 * usable answer (retried, and the lease runs out on our clock where it
 * ran out on the replicas'). So the lease we count on is never longer than
 * the one any replica that could be promoted holds.
 *
 * All of them, not one: once a replica has been promoted behind our back,
 * the others go on following the old master until Sentinel reconfigures
 * them (a second or more; forever if the failover's leader hangs), and
 * acknowledge what the new master never sees; no count short of every
 * replica that could be promoted tells that apart (the review of issue 29
 * showed grants to rivals with two replicas and one acknowledgement). The
 * price: a replica that stops following (dead, its link stalled) stops
 * every renewal on that master until it is back or the sentinels mark it
 * down (down-after-milliseconds), see docs/topology.md. A master with no
 * replica cannot be failed over to anything: nothing is waited for there
 * (and nothing is promised beyond that master's life).
 */
#include "watchdog/wd_internal.h"

#include <stdlib.h>

#define WD_ACK_MIN_MS 10      /* the shortest WAIT timeout */
#define WD_ACK_MAX_MS 500     /* the longest */

int wd_ack_needed(const wd *w, const wd_link *l) {
    return (w->t->mode == TOPO_SENTINEL || w->t->mode == TOPO_CLUSTER) && l->node.replicas != 0;
}

/* How long a WAIT for e's renewal may block its link: a tenth of its ttl
 * (its retry interval), within [WD_ACK_MIN_MS, WD_ACK_MAX_MS], and well
 * inside the link's reply timeout. */
static int64_t wd_ack_wait_ms(const wd *w, const wd_entry *e) {
    int64_t ms = e->ttl_ms / 10;
    if (ms < WD_ACK_MIN_MS) ms = WD_ACK_MIN_MS;
    if (ms > WD_ACK_MAX_MS) ms = WD_ACK_MAX_MS;
    if (w->cfg.timeout_ms > 0 && ms > w->cfg.timeout_ms / 2) ms = w->cfg.timeout_ms / 2;
    return ms > 0 ? ms : 1;   /* (WAIT's 0 is "forever") */
}

/* Acknowledgements a renewal of e on l needs: every replica a failover
 * could promote in l's node's place, and at least the lock's `replicas`. */
static int wd_ack_need(const wd_link *l, const wd_entry *e) {
    int n = e->replicas > l->node.replicas ? e->replicas : l->node.replicas;
    return n > 1 ? n : 1;
}

void wd_ack_queued(wd *w, wd_link *l, const wd_entry *e) {
    int64_t ms;
    if (!wd_ack_needed(w, l)) return;
    ms = wd_ack_wait_ms(w, e);
    if (l->unwaited == 0 || ms < l->wait_ms) l->wait_ms = ms;
    if (l->unwaited == 0 || wd_ack_need(l, e) > l->wait_need) l->wait_need = wd_ack_need(l, e);
    l->unwaited++;
}

int wd_ack_due(wd_link *l, int *need, int64_t *ms) {
    if (l->unwaited == 0) return 0;
    *need = l->wait_need;
    *ms = l->wait_ms;
    l->unwaited = 0;
    l->waits++;
    return 1;
}

int wd_ack_hold(wd *w, wd_link *l, const wd_req *req) {
    wd_acked *a;
    if (l->nheld == l->held_cap) {
        uint32_t cap = l->held_cap ? l->held_cap * 2 : 64;
        wd_acked *p = realloc(l->held, cap * sizeof *p);
        if (p == NULL) return -1;
        l->held = p;
        l->held_cap = cap;
    }
    if (l->waits == 0 && l->unwaited == 0) {
        /* No WAIT behind it: it was queued while its node needed none (the
         * node's replicas became known meanwhile). One goes now, behind its
         * answer (wd_link_pump seals at its end), so it covers it. */
        l->wait_ms = wd_ack_wait_ms(w, req->e);
        l->wait_need = wd_ack_need(l, req->e);
        l->unwaited = 1;
    }
    a = &l->held[l->nheld++];
    a->e = req->e;
    a->round = req->round;
    a->sent_at = req->sent_at;
    a->ttl_ms = req->ttl_ms;
    a->doubts = req->doubts;
    if (req->e->lease_end < l->end_lb) l->end_lb = req->e->lease_end;
    return 0;
}

void wd_ack_answer(wd *w, wd_link *l, const redisReply *r, int64_t now) {
    long long acks = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    uint32_t i, n = l->nheld;
    l->nheld = 0;
    if (r != NULL && l->waits > 0) l->waits--;
    for (i = 0; i < n; i++) {
        const wd_acked *a = &l->held[i];
        int ok = acks >= wd_ack_need(l, a->e);
        /* (a doubt cast since it was sent: as in wd_apply_answer) */
        if (w->t->mode == TOPO_SENTINEL && a->doubts != topo_doubts(w->t)) ok = 0;
        if (!ok) w->stats.unacked++;
        wd_outcome(w, a->e, ok ? 1 : -1, a->round, a->sent_at, a->ttl_ms, now);
    }
}

void wd_ack_fail_all(wd *w, wd_link *l, int64_t now) {
    wd_ack_answer(w, l, NULL, now);
    l->waits = 0;
}

void wd_ack_expire(wd *w, wd_link *l, int64_t now, int64_t *lb, int *dead) {
    uint32_t i;
    for (i = 0; i < l->nheld; i++) {
        wd_entry *e = l->held[i].e;
        if (e->orphaned || e->state != WD_HELD) continue;
        if (now >= e->lease_end) {
            wd_mark_lost(w, e, WD_UNREACHABLE);
            *dead = 1;
        } else if (e->lease_end < *lb) {
            *lb = e->lease_end;
        }
    }
}

void wd_ack_forget(wd *w, wd_link *l) {
    uint32_t i;
    for (i = 0; i < l->nheld; i++) {
        wd_entry *e = l->held[i].e;
        if (e->queued > 0) e->queued--;
        if (e->orphaned && e->queued == 0) wd_entry_free(w, e);
    }
    l->nheld = 0;
    l->unwaited = 0;
    l->waits = 0;
}
