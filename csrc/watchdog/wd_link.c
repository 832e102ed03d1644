/*
 * wd_link.c: the watchdog's connection to a node, driven by the thread's
 * event loop without ever blocking (see wd_internal.h). Renewals are queued
 * as pipelined requests; their replies come back in order and are matched
 * to the oldest request, and each is handed up to the caller's apply
 * (wd_link_pump: the thread passes wd_apply_step and wd_apply_answer). A request that gets no
 * answer is reported down, to wd_outcome (wd_lease.c).
 *
 * Deadlines: each request's lock has its own lease end. When one passes
 * with the renewal unanswered, that lock is reported lost at that moment,
 * and the link is dropped (a connection that let a lease run out is not
 * worth waiting on); the other requests are retried on a fresh connection.
 * A connect is bounded by connect_timeout, a reply by timeout.
 */
#include "watchdog/wd_internal.h"
#include "base/resp.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/deadline.h"
#include "base/lease.h"
#include "base/monotime.h"
#include "cmd/native_cmd.h"
#include "cmd/native_detect.h"
#include "cmd/script.h"
#include "cmd/wait_cmd.h"
#include "base/reply_obj.h"

static wd_req *wd_link_at(const wd_link *l, uint32_t i) {
    return &l->q[(l->head + i) % l->cap];
}

/* Room for `total` answered renewals waiting for their WAIT (wd_ack.c). */
static int wd_link_reserve_held(wd_link *l, uint32_t total) {
    wd_acked *p;
    if (total <= l->held_cap) return 0;
    p = realloc(l->held, total * sizeof *p);
    if (p == NULL) return -1;
    l->held = p;
    l->held_cap = total;
    return 0;
}

int wd_link_reserve(wd_link *l, uint32_t total) {
    uint32_t cap = l->cap ? l->cap : 64, i;
    wd_req *q;
    if (wd_link_reserve_held(l, total) != 0) return -1;
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

/* A request could not be appended (out of memory): conn_append closed the
 * connection, so the requests still queued on the link will never be
 * answered; they fail now, as on any lost connection, so that the next
 * connection's answers are not matched to them. */
static int wd_link_queue_failed(wd *w, wd_link *l) {
    wd_link_drop(w, l, monotime_ms());
    return -1;
}

/* A set's renewal (e->nmore > 0): its variadic script (extend_all) takes
 * the key count, every key, the token and the ttl. */
static void wd_request_set(const wd *w, wd_entry *e, exec_req *x, wd_args *args) {
    int i, n = 0;
    (void)w;
    args->lens[n] = (size_t)snprintf(args->count_txt, sizeof args->count_txt, "%d", e->nmore + 1);
    args->argv[n++] = args->count_txt;
    args->argv[n] = e->key;
    args->lens[n++] = e->klen;
    for (i = 0; i < e->nmore; i++) {
        args->argv[n] = e->more[i];
        args->lens[n++] = e->more_lens[i];
    }
    args->argv[n] = e->token;
    args->lens[n++] = e->toklen;
    if (e->ttl_txt_of != e->ttl_ms) {
        e->ttl_txt_len = resp_i64(e->ttl_txt, (long long)e->ttl_ms);
        e->ttl_txt_of = e->ttl_ms;
    }
    args->argv[n] = e->ttl_txt;
    args->lens[n++] = e->ttl_txt_len;
    exec_init(x, e->renew, n, args->argv, args->lens, e->key, e->klen, w->t->mode, 0, 0, DEADLINE_NONE);
}

void wd_request(const wd *w, wd_entry *e, const script_def *script, exec_req *x, wd_args *args) {
    int nargs = 3;
    const script_def *renew = script;
    if (e->nmore > 0 && w->t->mode != TOPO_REDLOCK) {   /* (sent again: the same) */
        wd_request_set(w, e, x, args);
        return;
    }
    if (renew == NULL) renew = w->t->mode == TOPO_REDLOCK ? w->renew_script : e->renew ? e->renew : w->extend_script;
    /* the script's key and arguments: key token ttl [left] */
    args->argv[0] = e->key;
    args->lens[0] = e->klen;
    args->argv[1] = e->token;
    args->lens[1] = e->toklen;
    if (e->ttl_txt_of != e->ttl_ms) {
        e->ttl_txt_len = resp_i64(e->ttl_txt, (long long)e->ttl_ms);
        e->ttl_txt_of = e->ttl_ms;
    }
    args->argv[2] = e->ttl_txt;
    args->lens[2] = e->ttl_txt_len;
    if (renew == w->renew_script) {
        /* Where the master lacks our key, the script takes it back for
         * the validity left now. Only a held lock gets here (wd_collect:
         * its lease_end not passed, so the majority of the acquire or of
         * the last round holds it until then; wd_resend: held and not
         * unwatched), never one whose release was sent (redlock.lua
         * unwatches first, and an orphan is never sent again), and the
         * claim gives no more than that majority holds. Counted from now,
         * not from sent_at: a request sent again (NOSCRIPT) gets what is
         * left then. 0: nothing left, nothing taken back. */
        int64_t left = e->lease_end - monotime_ms();
        if (left < 1) left = 0;
        args->lens[3] = resp_i64(args->left_txt, (long long)left);
        args->argv[3] = args->left_txt;
        nargs = 4;
    }
    exec_init(x, renew, nargs, args->argv, args->lens, e->key, e->klen, w->t->mode, 0, 0, DEADLINE_NONE);
}

/* e's renewal (one attempt of exec.h's machine: the native command that does
 * what the script does, where the node has one; EVALSHA; SCRIPT LOAD + EVAL
 * after a NOSCRIPT, or EVALSHA behind a load still in flight; ASKING first
 * when the slot is being migrated to this node), queued on the link's conn.
 * Redlock: redlock_renew on every master, every round. */
int wd_link_queue(wd *w, wd_link *l, wd_entry *e, const exec_state *st, int64_t sent_at,
                  const struct script_def *script, uint32_t round) {
    exec_req x;
    wd_args args;
    uint64_t from;
    wd_req *req;
    wd_request(w, e, script, &x, &args);
    if (st) x.st = *st;
    /* room was reserved at watch; more when renewals go again (ASK) */
    if (l->n + 1 > l->cap && wd_link_reserve(l, l->n + 1) != 0) return -1;
    from = l->x->c->queued_total;
    if (exec_write(&x, l->x) != 0) return wd_link_queue_failed(w, l);
    req = wd_link_at(l, l->n++);
    memset(req, 0, sizeof *req);   /* (the slot may be a WAIT's old one, or malloc's) */
    req->e = e;
    req->ttl_ms = e->ttl_ms;
    req->sent_at = sent_at;
    req->from = from;
    req->to = l->x->c->queued_total;
    req->st = x.st;
    req->script = x.script;
    req->round = round;
    req->doubts = w->send_doubts;
    if (e->lease_end < l->end_lb) l->end_lb = e->lease_end;
    e->queued++;
    e->flight_end = sent_at + e->ttl_ms - lease_drift_ms(e->ttl_ms);
    w->stats.renewals++;
    wd_ack_queued(w, l, e);
    return 0;
}

/* Takes e's renewal back if not one byte of it was sent yet: it is at the
 * tail, among the unsent requests. One already (partly) sent stays queued. */
void wd_link_unqueue(wd_link *l, wd_entry *e) {
    uint32_t i = l->n, j;
    while (i > 0) {
        wd_req *req = wd_link_at(l, i - 1);
        uint64_t len;
        if (req->from < l->x->c->sent_total) return;
        if (req->e != e) {
            i--;
            continue;
        }
        len = req->to - req->from;
        if (conn_unqueue(l->x->c, req->from, req->to) != 0) return;
        if (req->st.load_due) exec_conn_loaded(l->x, req->script);   /* (its load went with it) */
        for (j = i; j < l->n; j++) {
            wd_req *next = wd_link_at(l, j);
            next->from -= len;
            next->to -= len;
            *wd_link_at(l, j - 1) = *next;
        }
        l->n--;
        e->queued--;
        return;
    }
}

void wd_link_drop(wd *w, wd_link *l, int64_t now) {
    /* Sentinel kills clients when it reconfigures a node, and a cluster
     * node that went away may have handed its slots over: look again */
    if (w->t->mode != TOPO_SINGLE && l->x->c->fd >= 0) w->want_refresh = 1;
    if (w->t->mode != TOPO_SINGLE && l->x->c->err == CONN_ECONNECT) w->want_refresh = 1;
    conn_drop(l->x->c);
    wd_ack_fail_all(w, l, now);
    l->unwaited = 0;
    while (l->n > 0) {
        wd_req req = *wd_link_at(l, 0);
        l->head = (l->head + 1) % l->cap;
        l->n--;
        if (req.e) wd_outcome(w, req.e, -1, req.round, 0, 0, now);   /* (WAITs: wd_ack_fail_all) */
    }
    l->end_lb = INT64_MAX;
    l->head = 0;
    l->revents = 0;
}

/* The WAIT behind the renewals queued on l since the last one, where they
 * wait for a replica (wd_ack.c). 0, or -1: out of memory, the link must
 * be dropped. */
static int wd_link_seal(wd *w, wd_link *l, int64_t now) {
    uint64_t from;
    wd_req *req;
    int need;
    int64_t ms;
    if (l->x->c->fd < 0 || !wd_ack_due(l, &need, &ms)) return 0;
    if (l->n + 1 > l->cap && wd_link_reserve(l, l->n + 1) != 0) return -1;
    from = l->x->c->queued_total;
    if (wait_cmd_append(l->x->c, need, ms) != 0) return -1;
    req = wd_link_at(l, l->n++);
    memset(req, 0, sizeof *req);
    req->wait = 1;
    req->sent_at = now;   /* (the reply timeout counts from here) */
    req->from = from;
    req->to = l->x->c->queued_total;
    w->stats.waits++;
    return 0;
}

/* One reply for the oldest request on l (taken: freed here, or handed on).
 * 0, or -1 when the link must be dropped. */
static int wd_link_reply(wd *w, wd_link *l, redisReply *r, int64_t now, const wd_appliers *apply) {
    wd_req *head = wd_link_at(l, 0), req;
    exec_req x;
    wd_args args;
    int step;
    if (head->wait) {
        req = *head;
        l->head = (l->head + 1) % l->cap;
        if (--l->n == 0 && l->nheld == 0) l->end_lb = INT64_MAX;   /* nothing in flight */
        wd_ack_answer(w, l, r, now);
        freeReplyObject(r);
        return 0;
    }
    wd_request(w, head->e, head->script, &x, &args);
    x.st = head->st;
    step = exec_reply(&x, l->x, r);
    head->st = x.st;
    if (step == EXEC_MORE) return 0;   /* (its SCRIPT LOAD's or ASKING's) */
    req = *head;
    l->head = (l->head + 1) % l->cap;
    if (--l->n == 0 && l->nheld == 0) l->end_lb = INT64_MAX;
    apply->step(w, l, &req, &x, step, now);
    exec_clear(&x);
    /* (a node that is a replica now: READONLY closed it) */
    return l->x->c->fd < 0 ? -1 : 0;
}

/* wd_link_reply for an integer v read in place. 0, or -1 as it says. */
static int wd_link_reply_int(wd *w, wd_link *l, long long v, int64_t now, const wd_appliers *apply) {
    redisReply *r = reply_obj_new(REDIS_REPLY_INTEGER);
    if (r == NULL) {
        conn_fail_with(l->x->c, CONN_ENOMEM, "lost");
        return -1;
    }
    r->integer = v;
    return wd_link_reply(w, l, r, now, apply);
}

void wd_link_pump(wd *w, wd_link *l, int64_t now, const wd_appliers *apply) {
    conn *c = l->x->c;
    short rev = l->revents;
    l->revents = 0;
    if (c->fd < 0) return;
    /* (what wd_collect queued: its WAIT, even while connecting) */
    if (wd_link_seal(w, l, now) != 0) {
        wd_link_drop(w, l, now);
        return;
    }
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
        long long v;
        int k;
        if (l->n > 0 && exec_answer_next(&wd_link_at(l, 0)->st) && exec_conn_reply_int(l->x, &v)) {
            /* the common answer, an integer, to a renewal: read in place,
             * nothing to free (exec_answer_next: the machine's say) */
            redisReply answer;
            wd_req req = *wd_link_at(l, 0);
            if (!exec_answer_int_ok(req.script, v)) {
                /* (not one of its answers: the machine fails it) */
                if (wd_link_reply_int(w, l, v, now, apply) != 0) {
                    wd_link_drop(w, l, now);
                    return;
                }
                continue;
            }
            exec_note_ran(l->x, req.script);
            l->head = (l->head + 1) % l->cap;
            if (--l->n == 0 && l->nheld == 0) l->end_lb = INT64_MAX;
            memset(&answer, 0, sizeof answer);
            answer.type = REDIS_REPLY_INTEGER;
            answer.integer = v;
            apply->answer(w, l, &req, &answer, now);
            continue;
        }
        k = exec_conn_reply(l->x, &r);
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
        if (wd_link_reply(w, l, r, now, apply) != 0) {
            wd_link_drop(w, l, now);
            return;
        }
    }
    /* (what was sent again above: its WAIT) */
    if (c->fd >= 0 && wd_link_seal(w, l, now) != 0) {
        wd_link_drop(w, l, now);
        return;
    }
    if (c->fd >= 0 && conn_flush_some(c) < 0) wd_link_drop(w, l, now);
}

void wd_link_expire(wd *w, wd_link *l, int64_t now) {
    uint32_t i;
    int dead = 0;
    if (l->x->c->fd < 0) return;
    /* (the TLS handshake too: a link that trickles it ends here) */
    if (conn_connecting(l->x->c) && w->cfg.connect_timeout_ms > 0 &&
        now - l->since >= w->cfg.connect_timeout_ms) {
        conn_fail_with(l->x->c, CONN_ETIMEOUT, "failed");
        wd_link_drop(w, l, now);
        return;
    }
    if (now >= l->end_lb) {
        /* the bound is reached: look at each, and make it exact again */
        int64_t lb = INT64_MAX;
        for (i = 0; i < l->n; i++) {
            wd_entry *e = wd_link_at(l, i)->e;
            if (e && !e->orphaned && e->state == WD_HELD) {
                if (now >= e->lease_end) {
                    wd_mark_lost(w, e, WD_UNREACHABLE);
                    dead = 1;
                } else if (e->lease_end < lb) {
                    lb = e->lease_end;
                }
            }
        }
        wd_ack_expire(w, l, now, &lb, &dead);
        l->end_lb = lb;
    }
    if (!dead && l->n > 0 && w->cfg.timeout_ms > 0 &&
        now - wd_link_at(l, 0)->sent_at >= w->cfg.timeout_ms)
        dead = 1;
    if (dead) {
        conn_fail_with(l->x->c, CONN_ETIMEOUT, "lost");
        wd_link_drop(w, l, now);
    }
}

int64_t wd_link_next_deadline(const wd *w, const wd_link *l) {
    int64_t t = INT64_MAX;
    if (l->x->c->fd < 0) return t;
    if (conn_connecting(l->x->c) && w->cfg.connect_timeout_ms > 0)
        t = l->since + w->cfg.connect_timeout_ms;
    if (l->n > 0 && l->end_lb < t) t = l->end_lb;
    if (l->n > 0 && w->cfg.timeout_ms > 0) {
        int64_t d = wd_link_at(l, 0)->sent_at + w->cfg.timeout_ms;
        if (d < t) t = d;
    }
    return t;
}

short wd_link_events(const wd_link *l) {
    return conn_poll_events(l->x->c);
}

void wd_link_free(wd_link *l) {
    exec_conn_free(l->x);
    free(l->q);
    free(l->held);
    topo_node_clear(&l->node);
    memset(l, 0, sizeof *l);
}

/* A conn for node n with the watchdog's settings: it never resolves a
 * name, it uses the address the topology resolved. */
exec_conn *wd_link_conn(wd *w, const topo_node *n) {
    conn_config cfg;
    exec_conn *x;
    topo_node_config(w->t, n, &cfg);
    x = exec_conn_new(&cfg, &w->t->xopts);
    if (x == NULL) return NULL;
    x->c->may_resolve = 0;
    x->c->counters = &w->net;
    if (n->addrs.n > 0) conn_set_addrs(x->c, &n->addrs);
    return x;
}

/* Starts connecting the link if it is down (the connect timeout counts from
 * now). 0, or -1 when even starting failed. */
int wd_link_open(wd_link *l, int64_t now) {
    if (l->x->c->fd >= 0) return 0;
    l->since = now;
    return conn_start(l->x->c) < 0 ? -1 : 0;
}

wd_link *wd_link_find(wd *w, const topo_node *n) {
    int i;
    for (i = 0; i < w->nlinks; i++)
        if (topo_node_same(&w->links[i].node, n)) return &w->links[i];
    return NULL;
}

/* Follows the topology: one link per node of the current snapshot, keeping
 * the links (their connections and requests) to nodes still there; the
 * requests of the others fail and are retried on their new node. 0, or -1
 * when out of memory (then the old links stay). */
int wd_links_sync(wd *w, int64_t now) {
    topo_snap *s;
    wd_link *links;
    int i, j;
    if (w->snap && w->snap->epoch == topo_epoch(w->t)) return 0;
    s = topo_snap_get(w->t);
    if (s == NULL) return -1;
    links = calloc((size_t)(s->nnodes > 0 ? s->nnodes : 1), sizeof *links);
    if (links == NULL) goto oom;
    /* first what may fail: links to nodes we have none to */
    for (i = 0; i < s->nnodes; i++) {
        wd_link *l = &links[i];
        if (wd_link_find(w, &s->nodes[i])) continue;
        if (topo_node_dup(&l->node, &s->nodes[i]) != 0) goto oom;
        l->x = wd_link_conn(w, &s->nodes[i]);
        if (l->x == NULL || wd_link_reserve(l, w->nentries * 2 + 5) != 0) goto oom;
        exec_conn_setup(l->x, s->slot_node, i);
    }
    /* then what cannot: moving the links we keep */
    for (i = 0; i < s->nnodes; i++) {
        wd_link *old;
        if (links[i].x) continue;
        old = wd_link_find(w, &s->nodes[i]);
        links[i] = *old;
        memset(old, 0, sizeof *old);
        /* (the same node, what the topology knows of it may be news: its
         * renewals wait for replicas from now on, or no more) */
        links[i].node.replicas = s->nodes[i].replicas;
        if (s->nodes[i].addrs.n > 0) conn_set_addrs(links[i].x->c, &s->nodes[i].addrs);
        exec_conn_setup(links[i].x, s->slot_node, i);
    }
    {
        /* (the nodes left behind are not a reason to look again) */
        int want = w->want_refresh;
        for (j = 0; j < w->nlinks; j++)
            if (w->links[j].x) {
                wd_link_drop(w, &w->links[j], now);
                wd_link_free(&w->links[j]);
            }
        w->want_refresh = want;
    }
    free(w->links);
    if (w->snap) {
        /* The topology changed (a failover, a resharding): renew every lock
         * at once on its node now. A new master has our keys only as they
         * were replicated when it took over, so a lease it lacks is
         * reported right away, not at the next renewal. */
        wd_renew_all_now(w, now);
        topo_snap_put(w->t, w->snap);
    }
    w->links = links;
    w->nlinks = s->nnodes;
    w->snap = s;
    return 0;
oom:
    if (links) {
        for (i = 0; i < s->nnodes; i++)
            wd_link_free(&links[i]);
        free(links);
    }
    topo_snap_put(w->t, s);
    return -1;
}
