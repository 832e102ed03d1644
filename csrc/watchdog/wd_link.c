/*
 * wd_link.c: the watchdog's connection to a node, driven by the thread's
 * event loop without ever blocking (see wd_internal.h). Renewals are queued
 * as pipelined requests; their replies come back in order and are matched
 * to the oldest request, and each is handed up to the caller's apply
 * (wd_link_pump: the thread passes wd_apply_reply). A request that gets no
 * answer is reported down, to wd_outcome (wd_lease.c).
 *
 * Deadlines: each request's lock has its own lease end. When one passes
 * with the renewal unanswered, that lock is reported lost at that moment,
 * and the link is dropped (a connection that let a lease run out is not
 * worth waiting on); the other requests are retried on a fresh connection.
 * A connect is bounded by connect_timeout, a reply by timeout.
 */
#include "wd_internal.h"
#include "resp.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lease.h"
#include "monotime.h"
#include "native_cmd.h"
#include "native_detect.h"
#include "script.h"

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

/* EVALSHA (or EVAL) extend 1 key token ttl (script_append), queued on the link's conn,
 * after an ASKING when the slot is being migrated to this node; or the
 * native command that does what the script does, where the node has one
 * (native_cmd.h; known once the link's handshake was read). Redlock:
 * redlock_renew 1 key token ttl left, on every master, every round. */
int wd_link_queue(wd *w, wd_link *l, wd_entry *e, int how, int asking, int64_t sent_at,
                  const struct script_def *script, uint32_t round) {
    const char *argv[4];
    size_t lens[4];
    char left_txt[24];
    uint64_t from;
    wd_req *req;
    const script_def *renew;
    native_cmd nc;
    int eval = how & WD_SEND_EVAL, nargs = 3;
    renew = e->renew ? e->renew : w->extend_script;
    if (script != NULL)
        renew = script;   /* sent again as it was (after NOSCRIPT) */
    else if (w->t->mode == TOPO_REDLOCK)
        renew = w->renew_script;
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
        lens[3] = resp_i64(left_txt, (long long)left);
        argv[3] = left_txt;
        nargs = 4;
    }
    /* room was reserved at watch; a SCRIPT LOAD and an ASKING may need more */
    if (l->n + 3 > l->cap && wd_link_reserve(l, l->n + 3) != 0) return -1;
    if (eval && !(l->loading & script_bit(renew))) {
        /* the EVAL goes after a SCRIPT LOAD (script.h), whose answer is
         * dropped like an ASKING's: a request with no entry. (With one
         * in flight already, the EVAL runs after it anyway.) */
        int k;
        from = l->c->queued_total;
        if ((k = script_queue_load(l->c, renew)) < 0) return wd_link_queue_failed(w, l);
        if (k == 1) {
            req = wd_link_at(l, l->n++);
            memset(req, 0, sizeof *req);
            req->sent_at = sent_at;
            req->from = from;
            req->to = l->c->queued_total;
            req->script = renew;
            l->loading |= script_bit(renew);
        }
    }
    if (asking) {
        static const char *ask[1] = {"ASKING"};
        static const size_t ask_len[1] = {6};
        from = l->c->queued_total;
        if (conn_append(l->c, 1, ask, ask_len) != 0) return wd_link_queue_failed(w, l);
        req = wd_link_at(l, l->n++);
        memset(req, 0, sizeof *req);
        req->sent_at = sent_at;   /* the reply timeout counts from here too */
        req->from = from;
        req->to = l->c->queued_total;
    }
    from = l->c->queued_total;
    /* the script's key and arguments: key token ttl [left] */
    argv[0] = e->key;
    lens[0] = e->klen;
    argv[1] = e->token;
    lens[1] = e->toklen;
    if (e->ttl_txt_of != e->ttl_ms) {
        e->ttl_txt_len = resp_i64(e->ttl_txt, (long long)e->ttl_ms);
        e->ttl_txt_of = e->ttl_ms;
    }
    lens[2] = e->ttl_txt_len;
    argv[2] = e->ttl_txt;
    nc.op = 0;
    if (!(how & (WD_SEND_EVAL | WD_SEND_SCRIPT | WD_SEND_AFTER_LOAD)))
        native_build(l->c->native, renew, nargs, argv, lens, &nc);
    if (nc.op ? conn_append(l->c, nc.argc, nc.argv, nc.lens) : script_append(l->c, renew, eval, nargs, argv, lens))
        return wd_link_queue_failed(w, l);
    req = wd_link_at(l, l->n++);
    memset(req, 0, sizeof *req);   /* (the slot may be a WAIT's old one, or malloc's) */
    req->e = e;
    req->ttl_ms = e->ttl_ms;
    req->sent_at = sent_at;
    req->from = from;
    req->to = l->c->queued_total;
    req->eval = eval;
    req->after_load = (how & WD_SEND_AFTER_LOAD) != 0;
    req->native = nc.op;
    req->asking = asking;
    req->script = renew;
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
        uint32_t first;
        if (req->from < l->c->sent_total) return;
        if (req->e != e) {
            i--;
            continue;
        }
        /* with the ASKING queued just before it, if any */
        first = i - 1;
        if (req->asking && first > 0 && wd_link_at(l, first - 1)->e == NULL &&
            wd_link_at(l, first - 1)->from >= l->c->sent_total)
            first--;
        len = req->to - wd_link_at(l, first)->from;
        if (conn_unqueue(l->c, wd_link_at(l, first)->from, req->to) != 0) return;
        for (j = i; j < l->n; j++) {
            wd_req *next = wd_link_at(l, j);
            next->from -= len;
            next->to -= len;
            *wd_link_at(l, first + (j - i)) = *next;
        }
        l->n -= i - first;
        e->queued--;
        return;
    }
}

void wd_link_drop(wd *w, wd_link *l, int64_t now) {
    /* Sentinel kills clients when it reconfigures a node, and a cluster
     * node that went away may have handed its slots over: look again */
    if (w->t->mode != TOPO_SINGLE && l->c->fd >= 0) w->want_refresh = 1;
    if (w->t->mode != TOPO_SINGLE && l->c->err == CONN_ECONNECT) w->want_refresh = 1;
    conn_drop(l->c);
    l->loading = 0;
    wd_ack_fail_all(w, l, now);
    l->unwaited = 0;
    while (l->n > 0) {
        wd_req req = *wd_link_at(l, 0);
        l->head = (l->head + 1) % l->cap;
        l->n--;
        if (req.e) wd_outcome(w, req.e, -1, req.round, 0, 0, now);
    }
    l->end_lb = INT64_MAX;
    l->head = 0;
    l->revents = 0;
}

/* The WAIT behind the renewals queued on l since the last one, where they
 * wait for a replica (wd_ack.c). 0, or -1: out of memory, the link must
 * be dropped. */
static int wd_link_seal(wd *w, wd_link *l, int64_t now) {
    char n_txt[24], ms_txt[24];
    const char *argv[3];
    size_t lens[3];
    uint64_t from;
    wd_req *req;
    int need;
    int64_t ms;
    if (l->c->fd < 0 || !wd_ack_due(l, &need, &ms)) return 0;
    if (l->n + 1 > l->cap && wd_link_reserve(l, l->n + 1) != 0) return -1;
    argv[0] = "WAIT";
    lens[0] = 4;
    argv[1] = n_txt;
    lens[1] = resp_i64(n_txt, need);
    argv[2] = ms_txt;
    lens[2] = resp_i64(ms_txt, ms);
    from = l->c->queued_total;
    if (conn_append(l->c, 3, argv, lens) != 0) return -1;
    req = wd_link_at(l, l->n++);
    memset(req, 0, sizeof *req);
    req->wait = 1;
    req->sent_at = now;   /* (the reply timeout counts from here) */
    req->from = from;
    req->to = l->c->queued_total;
    w->stats.waits++;
    return 0;
}

void wd_link_pump(wd *w, wd_link *l, int64_t now, wd_apply_fn apply) {
    conn *c = l->c;
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
        redisReply *r = NULL, answer;
        wd_req req;
        long long v;
        int drop, k, fast = conn_reply_int(c, &v);
        if (fast) {
            /* the common answer, an integer: read in place, nothing to free */
            memset(&answer, 0, sizeof answer);
            answer.type = REDIS_REPLY_INTEGER;
            answer.integer = v;
            r = &answer;
            k = 1;
        } else {
            k = conn_reply(c, &r);
        }
        if (k < 0) {
            wd_link_drop(w, l, now);
            return;
        }
        if (k == 0) break;
        if (l->n == 0) {  /* a reply nobody asked for: the stream is confused */
            if (!fast) freeReplyObject(r);
            conn_fail_with(c, CONN_ELOST, "lost");
            wd_link_drop(w, l, now);
            return;
        }
        req = *wd_link_at(l, 0);
        l->head = (l->head + 1) % l->cap;
        if (--l->n == 0 && l->nheld == 0) l->end_lb = INT64_MAX;   /* nothing in flight or held */
        /* (no e: an ASKING's +OK, a SCRIPT LOAD's answer, or a WAIT's) */
        if (req.wait) {
            wd_ack_answer(w, l, r, now);
        } else if (req.e == NULL) {
            if (req.script != NULL) l->loading &= ~script_bit(req.script);
            conn_note_dropped(c, r);
        }
        drop = req.e && apply(w, l, &req, r, now);
        if (!fast) freeReplyObject(r);
        if (drop) {
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
    if (l->c->fd < 0) return;
    /* (the TLS handshake too: a link that trickles it ends here) */
    if (conn_connecting(l->c) && w->cfg.connect_timeout_ms > 0 &&
        now - l->since >= w->cfg.connect_timeout_ms) {
        conn_fail_with(l->c, CONN_ETIMEOUT, "failed");
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
        conn_fail_with(l->c, CONN_ETIMEOUT, "lost");
        wd_link_drop(w, l, now);
    }
}

int64_t wd_link_next_deadline(const wd *w, const wd_link *l) {
    int64_t t = INT64_MAX;
    if (l->c->fd < 0) return t;
    if (conn_connecting(l->c) && w->cfg.connect_timeout_ms > 0)
        t = l->since + w->cfg.connect_timeout_ms;
    if (l->n > 0 && l->end_lb < t) t = l->end_lb;
    if (l->n > 0 && w->cfg.timeout_ms > 0) {
        int64_t d = wd_link_at(l, 0)->sent_at + w->cfg.timeout_ms;
        if (d < t) t = d;
    }
    return t;
}

short wd_link_events(const wd_link *l) {
    return conn_poll_events(l->c);
}

void wd_link_free(wd_link *l) {
    conn_free(l->c);
    free(l->q);
    free(l->held);
    topo_node_clear(&l->node);
    memset(l, 0, sizeof *l);
}

/* A conn for node n with the watchdog's settings: it never resolves a
 * name, it uses the address the topology resolved. */
conn *wd_link_conn(wd *w, const topo_node *n) {
    conn_config cfg;
    conn *c;
    topo_node_config(w->t, n, &cfg);
    c = conn_new(&cfg);
    if (c == NULL) return NULL;
    c->may_resolve = 0;
    c->counters = &w->net;
    if (n->addrs.n > 0) conn_set_addrs(c, &n->addrs);
    return c;
}

/* Starts connecting the link if it is down (the connect timeout counts from
 * now). 0, or -1 when even starting failed. */
int wd_link_open(wd_link *l, int64_t now) {
    if (l->c->fd >= 0) return 0;
    l->since = now;
    return conn_start(l->c) < 0 ? -1 : 0;
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
        l->c = wd_link_conn(w, &s->nodes[i]);
        if (l->c == NULL || wd_link_reserve(l, w->nentries * 2 + 5) != 0) goto oom;
        native_conn_setup(l->c, s->slot_node, i);
    }
    /* then what cannot: moving the links we keep */
    for (i = 0; i < s->nnodes; i++) {
        wd_link *old;
        if (links[i].c) continue;
        old = wd_link_find(w, &s->nodes[i]);
        links[i] = *old;
        memset(old, 0, sizeof *old);
        /* (the same node, what the topology knows of it may be news: its
         * renewals wait for replicas from now on, or no more) */
        links[i].node.replicas = s->nodes[i].replicas;
        if (s->nodes[i].addrs.n > 0) conn_set_addrs(links[i].c, &s->nodes[i].addrs);
        native_conn_setup(links[i].c, s->slot_node, i);
    }
    {
        /* (the nodes left behind are not a reason to look again) */
        int want = w->want_refresh;
        for (j = 0; j < w->nlinks; j++)
            if (w->links[j].c) {
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
