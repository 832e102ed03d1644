/*
 * wd_link.c: the watchdog's connection to a node, driven by the thread's
 * event loop without ever blocking (see wd_internal.h). Renewals are queued
 * as pipelined requests; their replies come back in order and are matched
 * to the oldest request.
 *
 * Deadlines: each request's lock has its own lease end. When one passes
 * with the renewal unanswered, that lock is reported lost at that moment,
 * and the link is dropped (a connection that let a lease run out is not
 * worth waiting on); the other requests are retried on a fresh connection.
 * A connect is bounded by connect_timeout, a reply by timeout.
 */
#include "wd_internal.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lease.h"
#include "script.h"

static wd_req *wd_link_at(const wd_link *l, uint32_t i) {
    return &l->q[(l->head + i) % l->cap];
}

int wd_link_reserve(wd_link *l, uint32_t total) {
    uint32_t cap = l->cap ? l->cap : 64, i;
    wd_req *q;
    if (total <= l->cap) return 0;
    while (cap < total) {
        if (cap > UINT32_MAX / 2) return -1;
        cap *= 2;
    }
    q = malloc(cap * sizeof *q);
    if (q == NULL) return -1;
    for (i = 0; i < l->n; i++) q[i] = *wd_link_at(l, i);
    free(l->q);
    l->q = q;
    l->head = 0;
    l->cap = cap;
    return 0;
}

/* EVALSHA (or EVAL) extend 1 key token ttl, queued on the link's conn. */
int wd_link_queue(wd *w, wd_link *l, wd_entry *e, int eval, int64_t sent_at) {
    static const script_def *extend;
    const char *argv[6];
    size_t lens[6];
    char ttl[24];
    uint64_t from = l->c->queued_total;
    wd_req *req;
    if (extend == NULL) extend = script_find("extend");
    if (l->n >= l->cap) return -1;   /* reserved at watch: cannot happen */
    argv[0] = eval ? "EVAL" : "EVALSHA";
    lens[0] = eval ? 4 : 7;
    argv[1] = eval ? extend->source : extend->sha;
    lens[1] = eval ? extend->len : 40;
    argv[2] = "1";
    lens[2] = 1;
    argv[3] = e->key;
    lens[3] = e->klen;
    argv[4] = e->token;
    lens[4] = e->toklen;
    lens[5] = (size_t)snprintf(ttl, sizeof ttl, "%lld", (long long)e->ttl_ms);
    argv[5] = ttl;
    if (conn_append(l->c, 6, argv, lens) != 0) return -1;
    req = wd_link_at(l, l->n++);
    req->e = e;
    req->ttl_ms = e->ttl_ms;
    req->sent_at = sent_at;
    req->from = from;
    req->to = l->c->queued_total;
    req->eval = eval;
    e->queued = 1;
    e->flight_end = sent_at + e->ttl_ms - lease_drift_ms(e->ttl_ms);
    w->stats.renewals++;
    return 0;
}

/* Takes e's renewal back if not one byte of it was sent yet: it is at the
 * tail, among the unsent requests. One already (partly) sent stays queued. */
void wd_link_unqueue(wd_link *l, wd_entry *e) {
    uint32_t i = l->n, j;
    while (i > 0) {
        wd_req *req = wd_link_at(l, i - 1);
        uint64_t len;
        if (req->from < l->c->sent_total) return;
        if (req->e != e) {
            i--;
            continue;
        }
        len = req->to - req->from;
        if (conn_unqueue(l->c, req->from, req->to) != 0) return;
        for (j = i; j < l->n; j++) {
            wd_req *next = wd_link_at(l, j);
            next->from -= len;
            next->to -= len;
            *wd_link_at(l, j - 1) = *next;
        }
        l->n--;
        e->queued = 0;
        return;
    }
}

void wd_link_drop(wd *w, wd_link *l, int64_t now) {
    conn_drop(l->c);
    while (l->n > 0) {
        wd_entry *e = wd_link_at(l, 0)->e;
        l->head = (l->head + 1) % l->cap;
        l->n--;
        wd_apply_failure(w, e, now);
    }
    l->head = 0;
    l->revents = 0;
}

void wd_link_pump(wd *w, wd_link *l, int64_t now) {
    conn *c = l->c;
    short rev = l->revents;
    l->revents = 0;
    if (c->fd < 0) return;
    if (c->connecting) {
        if (!(rev & (POLLOUT | POLLERR | POLLHUP))) return;
        if (conn_connect_done(c) != 0) {
            wd_link_drop(w, l, now);
            return;
        }
    }
    if (rev & (POLLIN | POLLERR | POLLHUP)) {
        int k;
        while ((k = conn_fill(c)) == 1) {}
        if (k < 0) {
            wd_link_drop(w, l, now);
            return;
        }
    }
    for (;;) {
        redisReply *r = NULL;
        wd_req req;
        int k = conn_reply(c, &r);
        if (k < 0) {
            wd_link_drop(w, l, now);
            return;
        }
        if (k == 0) break;
        if (l->n == 0) {  /* a reply nobody asked for: the stream is confused */
            freeReplyObject(r);
            conn_fail_with(c, CONN_ELOST, "lost");
            wd_link_drop(w, l, now);
            return;
        }
        req = *wd_link_at(l, 0);
        l->head = (l->head + 1) % l->cap;
        l->n--;
        wd_apply_reply(w, l, &req, r, now);
        freeReplyObject(r);
    }
    if (c->fd >= 0 && conn_flush_some(c) < 0) wd_link_drop(w, l, now);
}

void wd_link_expire(wd *w, wd_link *l, int64_t now) {
    uint32_t i;
    int dead = 0;
    if (l->c->fd < 0) return;
    if (l->c->connecting && w->cfg.connect_timeout_ms > 0 &&
        now - l->since >= w->cfg.connect_timeout_ms) {
        conn_fail_with(l->c, CONN_ETIMEOUT, "failed");
        wd_link_drop(w, l, now);
        return;
    }
    for (i = 0; i < l->n; i++) {
        wd_entry *e = wd_link_at(l, i)->e;
        if (!e->orphaned && e->state == WD_HELD && now >= e->lease_end) {
            wd_mark_lost(w, e, WD_UNREACHABLE);
            dead = 1;
        }
    }
    if (!dead && l->n > 0 && w->cfg.timeout_ms > 0 &&
        now - wd_link_at(l, 0)->sent_at >= w->cfg.timeout_ms)
        dead = 1;
    if (dead) {
        conn_fail_with(l->c, CONN_ETIMEOUT, "lost");
        wd_link_drop(w, l, now);
    }
}

int64_t wd_link_next_deadline(const wd *w, const wd_link *l) {
    int64_t t = INT64_MAX;
    uint32_t i;
    if (l->c->fd < 0) return t;
    if (l->c->connecting && w->cfg.connect_timeout_ms > 0)
        t = l->since + w->cfg.connect_timeout_ms;
    for (i = 0; i < l->n; i++) {
        const wd_entry *e = wd_link_at(l, i)->e;
        if (!e->orphaned && e->state == WD_HELD && e->lease_end < t) t = e->lease_end;
    }
    if (l->n > 0 && w->cfg.timeout_ms > 0) {
        int64_t d = wd_link_at(l, 0)->sent_at + w->cfg.timeout_ms;
        if (d < t) t = d;
    }
    return t;
}

short wd_link_events(const wd_link *l) {
    if (l->c->fd < 0) return 0;
    if (l->c->connecting) return POLLOUT;
    return (short)(POLLIN | (l->c->out_off < l->c->out.len ? POLLOUT : 0));
}

void wd_link_free(wd_link *l) {
    conn_free(l->c);
    free(l->q);
    memset(l, 0, sizeof *l);
}
