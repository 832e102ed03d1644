/*
 * router.c: a thread's connections to a topology's nodes, and running one
 * request on the right node (see router.h).
 */
#define _GNU_SOURCE
#include "router.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "deadline.h"
#include "monotime.h"
#include "native_cmd.h"
#include "native_detect.h"
#include "recovery.h"

#define ROUTE_MAX_TRIES 8        /* redirects and refreshes per command */

router *router_new(topo *t, int may_resolve) {
    router *r = calloc(1, sizeof *r);
    if (r == NULL) return NULL;
    topo_retain(t);
    r->t = t;
    r->may_resolve = may_resolve;
    r->timeout_ms = t->cfg.timeout_ms;
    r->call_deadline = DEADLINE_NONE;
    r->last_node = -1;
    return r;
}

void router_drop(router *r) {
    int i;
    for (i = 0; i < r->nconns; i++)
        if (r->conns[i]) conn_drop(r->conns[i]);
}

static void router_clear(router *r) {
    int i;
    for (i = 0; i < r->nconns; i++) conn_free(r->conns[i]);
    free(r->conns);
    r->conns = NULL;
    r->nconns = 0;
    if (r->snap) topo_snap_put(r->t, r->snap);
    r->snap = NULL;
}

void router_free(router *r) {
    if (r == NULL) return;
    router_clear(r);
    topo_release(r->t);
    free(r);
}

const char *router_kind(const router *r) {
    return conn_kind(r->err);
}

static void router_fail(router *r, int err, const char *msg) {
    r->err = err;
    snprintf(r->errstr, sizeof r->errstr, "%s", msg);
}

static void router_fail_conn(router *r, const conn *c) {
    router_fail(r, c->err, c->errstr);
}

/* What a failure or a refusal says to do (recovery.h) asks to look the
 * topology up again: so before the next request. Sentinel: and nobody
 * writes to that master until the sentinels confirm one again
 * (topo_doubt). */
static void router_suspect(router *r, const recovery *rec) {
    if (!(rec->todo & RECOVERY_RESOLVE) || r->err == CONN_EINTR) return;   /* (EINTR: ours, not the node's) */
    r->stale = 1;
    if (r->snap) topo_doubt(r->t, r->snap->epoch);
}

/* Loads or reloads the topology, within the connect timeout. */
static int router_refresh(router *r, uint64_t seen) {
    char err[CONN_ERRSTR_LEN];
    const char *kind = "connection";
    int64_t deadline = deadline_in_ms(r->t->cfg.connect_timeout_ms);
    if (topo_refresh(r->t, seen, r->may_resolve, deadline, err, sizeof err, &kind) != 0) {
        router_fail(r, strcmp(kind, "timeout") == 0 ? CONN_ETIMEOUT :
                       strcmp(kind, "redis") == 0 ? CONN_EREDIS :
                       strcmp(kind, "memory") == 0 ? CONN_ENOMEM : CONN_ECONNECT, err);
        return -1;
    }
    return 0;
}

int router_sync(router *r) {
    topo_snap *s;
    conn **conns;
    int i, j;
    if (topo_epoch(r->t) == 0 && router_refresh(r, 0) != 0) return -1;
    topo_follow(r->t);   /* Sentinel: the thread that follows it */
    if (r->snap && r->snap->epoch == topo_epoch(r->t)) return 0;
    s = topo_snap_get(r->t);
    conns = calloc((size_t)(s->nnodes > 0 ? s->nnodes : 1), sizeof *conns);
    if (conns == NULL) {
        topo_snap_put(r->t, s);
        router_fail(r, CONN_ENOMEM, "out of memory");
        return -1;
    }
    /* keep the connections to nodes that are still there */
    for (i = 0; i < s->nnodes; i++)
        for (j = 0; r->snap && j < r->nconns; j++)
            if (r->conns[j] && topo_node_same(&s->nodes[i], &r->snap->nodes[j])) {
                conns[i] = r->conns[j];
                r->conns[j] = NULL;
                if (s->nodes[i].addrs.n > 0) conn_set_addrs(conns[i], &s->nodes[i].addrs);
                native_conn_setup(conns[i], s->slot_node, i);   /* its slots may differ now */
                break;
            }
    router_clear(r);
    r->snap = s;
    r->conns = conns;
    r->nconns = s->nnodes;
    return 0;
}

conn *router_conn(router *r, int i) {
    conn_config cfg;
    const topo_node *n = &r->snap->nodes[i];
    conn *c = r->conns[i];
    if (c) return c;
    topo_node_config(r->t, n, &cfg);
    c = conn_new(&cfg);
    if (c == NULL) return NULL;
    /* a name it may resolve again at each connect (and so follow a DNS
     * change); without that right, the address the topology resolved */
    c->may_resolve = r->may_resolve && n->host != NULL;
    if (n->addrs.n > 0) conn_set_addrs(c, &n->addrs);
    c->probe = r->probe;
    c->counters = &r->net;
    native_conn_setup(c, r->snap->slot_node, i);
    conn_set_spin(c, r->spin_us);
    r->conns[i] = c;
    return c;
}

/* Index of node n in the router's snapshot, or -1. */
static int router_find(const router *r, const topo_node *n) {
    int i;
    for (i = 0; i < r->snap->nnodes; i++)
        if (topo_node_same(&r->snap->nodes[i], n)) return i;
    return -1;
}

/* What a request sent after a pause must have left of its command
 * deadline for its reply. With less, the call stops after the pause. */
#define ROUTER_LAST_SEND_MS 20

/* The pause before the waits-th retry of a refusal that asks for one
 * (recovery_pause_ms), never past `until` (the caller's deadline, or the
 * command's). Returns 1 when the call must stop there with the refusal as
 * its answer: `until` is over, or what is left of the command's deadline
 * is too little for another request's reply (a timeout there would drop a
 * healthy connection and report it lost). */
static int router_pause(int waits, int64_t until, int64_t deadline) {
    int64_t ms = recovery_pause_ms(waits), left;
    struct timespec ts;
    if (until == DEADLINE_NONE && waits > 200) return 1;   /* no deadline at all: ~20 s */
    if (deadline_passed(until)) return 1;
    if (until != DEADLINE_NONE) {
        left = (until - monotime_us()) / 1000;
        if (left < ms) ms = left > 0 ? left : 0;
    }
    ts.tv_sec = (time_t)(ms / 1000);
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    nanosleep(&ts, NULL);
    return deadline_passed(until) ||
           (deadline != DEADLINE_NONE && deadline - monotime_us() < ROUTER_LAST_SEND_MS * 1000);
}

/* EVAL[SHA] s nkeys args..., or argv as given when s is NULL. */
int route_append(conn *c, const script_def *s, int use_eval, int argc,
                 const char **argv, const size_t *lens) {
    if (s == NULL) return conn_append(c, argc, argv, lens);
    return script_append(c, s, use_eval, argc, argv, lens);
}

/* Where the node has a native command that does what script s does
 * (native_cmd.h), it goes instead of the script. Its answer becomes the
 * script's integer, or, when it gave none (an error: it did not run), the
 * script runs after all; a command the node refuses outright is not tried
 * again on this connection. Returns 1 when `reply` is final, 0 when the
 * script must run now (reply freed). */
static int route_native_reply(conn *c, unsigned op, redisReply *reply) {
    long long v;
    switch (native_reply(op, reply, &v)) {
    case NATIVE_MAPPED:
        native_reply_set_int(reply, v);
        return 1;
    case NATIVE_UNSUPPORTED:
        c->native &= ~op;
        break;
    default:
        break;
    }
    freeReplyObject(reply);
    return 0;
}

static redisReply *route_exec(router *r, const char *key, size_t klen, const script_def *s,
                              int argc, const char **argv, const size_t *lens) {
    uint64_t doubts = 0;    /* topo_doubts() when the request was sent */
    int64_t deadline = deadline_in_ms(r->timeout_ms);
    /* how long a refusal that did not run may be waited out (router.h):
     * the caller's deadline, taken once, within the command's */
    int64_t until = deadline_min(deadline, r->call_deadline);
    topo_node ask;           /* where an ASK sent us; valid when have_ask (not
                                zeroed up front: it is large, and rarely used) */
    int have_ask = 0;
    int asking = 0, use_eval = 0, tries = 0, refreshed = 0, waits = 0, scripted = 0;
    redisReply *reply = NULL;
    r->call_deadline = DEADLINE_NONE;
    if (topo_epoch(r->t) == 0) refreshed = 1;   /* router_sync loads it now */
    while (reply == NULL) {
        int node;
        conn *c;
        recovery rec;
        native_cmd native;
        if (++tries > ROUTE_MAX_TRIES) {
            router_fail(r, CONN_EREDIS, "redis error: too many redirects (the cluster is resharding?)");
            break;
        }
        if (r->stale) {
            if (router_refresh(r, r->snap ? r->snap->epoch : 0) != 0) break;
            r->stale = 0;
            refreshed = 1;
        }
        if (router_sync(r) != 0) break;
        node = asking ? router_find(r, &ask) : key ? topo_node_of(r->snap, key, klen) : 0;
        if (node < 0) {
            if (!refreshed) {
                r->stale = 1;
                asking = 0;
                continue;
            }
            router_fail(r, CONN_EREDIS, "redis error: CLUSTERDOWN no node serves this key's slot");
            break;
        }
        c = router_conn(r, node);
        if (c == NULL) {
            router_fail(r, CONN_ENOMEM, "out of memory");
            break;
        }
        conn_check_idle(c);
        doubts = topo_doubts(r->t);   /* (before topo_confirmed: see topo.h) */
        /* Sentinel: every reconnect asks the sentinels where the master is
         * (once a call), and every request while the master is in doubt
         * waits for a confirmed one, whatever this call did before (a
         * LOADING retry, an EVAL after NOSCRIPT) */
        if (r->t->mode == TOPO_SENTINEL && (!topo_confirmed(r->t) || (c->fd < 0 && !refreshed))) {
            if (deadline_passed(deadline)) {
                router_fail(r, CONN_ETIMEOUT, "connection lost: timed out (no master confirmed by the sentinels)");
                break;
            }
            r->stale = 1;
            tries--;
            continue;
        }
        if (conn_ensure(c) != 0) {
            /* not sent: after a refresh the node may be another one (once) */
            router_fail_conn(r, c);
            recovery_of_failure(c->err, 0, r->t->mode, &rec);
            router_suspect(r, &rec);
            if (!(rec.todo & RECOVERY_RETRY) || refreshed || deadline_passed(deadline) || r->err == CONN_EINTR) break;
            if (!(rec.todo & RECOVERY_RESOLVE)) refreshed = 1;   /* (nothing to look up: still once) */
            continue;
        }
        native.op = 0;
        if (s != NULL && !use_eval && !scripted)
            native_build(c->native, s, argc, argv, lens, &native);
        /* an EVAL goes after a SCRIPT LOAD (script.h), and before the
         * ASKING, which holds for the next command only */
        if ((use_eval && script_queue_load_skipped(c, s) < 0) ||
            (asking && conn_append(c, 1, (const char *[]){"ASKING"}, (const size_t[]){6}) != 0) ||
            (native.op ? conn_append(c, native.argc, native.argv, native.lens)
                       : route_append(c, s, use_eval, argc, argv, lens)) != 0) {
            router_fail_conn(r, c);
            break;
        }
        if (asking) {
            redisReply *ok = conn_read(c, deadline);
            if (ok == NULL) {
                router_fail_conn(r, c);
                recovery_of_failure(c->err, 1, r->t->mode, &rec);
                router_suspect(r, &rec);
                break;
            }
            freeReplyObject(ok);
        }
        reply = conn_read(c, deadline);
        if (reply == NULL) {
            /* sent, maybe run: never again; but look again next time */
            router_fail_conn(r, c);
            recovery_of_failure(c->err, 1, r->t->mode, &rec);
            router_suspect(r, &rec);
            break;
        }
        if (r->t->mode == TOPO_SENTINEL && topo_doubts(r->t) != doubts) {
            /* a doubt was cast while it ran (a failover began, a
             * connection of ours failed): what the master answered may be
             * lost with it. It ran, or did not: the caller's to sort out,
             * as after any lost reply. */
            freeReplyObject(reply);
            reply = NULL;
            router_fail(r, CONN_ELOST, "connection lost: the master came in doubt while the request ran "
                                       "(a failover may be under way)");
            break;
        }
        r->last_node = node;
        if (native.op && !route_native_reply(c, native.op, reply)) {
            /* it did not run: the script, here and now (after ASKING
             * again, if that is how we got here), and for the rest of
             * this call */
            reply = NULL;
            scripted = 1;
            tries--;
            continue;
        }
        recovery_of_reply(reply, r->t->mode, &rec);
        if (!(rec.todo & RECOVERY_RETRY)) continue;   /* the answer, as Redis gave it */
        if (rec.todo & RECOVERY_EVAL) {
            if (s == NULL || use_eval) continue;      /* not ours to load: an answer */
            /* the script cache is per node: EVAL it here (after ASKING
             * again, if that is how we got here), loaded first */
            freeReplyObject(reply);
            reply = NULL;
            use_eval = 1;
            conn_note_noscript(c);
            tries--;
            continue;
        }
        if (rec.todo & RECOVERY_ASKING) {
            topo_node target;
            memset(&target, 0, sizeof target);
            if (topo_node_parse(rec.target, rec.target_len, &target) != 0) continue;   /* an answer */
            if (have_ask) topo_node_clear(&ask);
            ask = target;
            have_ask = asking = 1;
        }
        if (rec.todo & RECOVERY_PAUSE) {
            /* it did not run, and may once the node is ready (a slot
             * being migrated, a dataset being loaded): wait, more each
             * time, until the caller's deadline, without counting it as
             * a redirect; then Redis' refusal is the answer */
            waits++;
            tries--;
            if (router_pause(waits, until, deadline)) break;
        }
        freeReplyObject(reply);
        reply = NULL;
        if (rec.todo & RECOVERY_DROP) conn_drop(c);   /* its node is a replica now */
        if ((rec.todo & RECOVERY_RESOLVE) && !((rec.todo & RECOVERY_PAUSE) && waits > 1)) {
            /* the map changed, or the master did: look again, and go
             * where it says (a later ASK says where again) */
            router_suspect(r, &rec);
            refreshed = 0;
            asking = 0;
        }
        if (deadline_passed(deadline)) {
            router_fail(r, CONN_ETIMEOUT, "connection lost: timed out (following redirects)");
            break;
        }
    }
    if (have_ask) topo_node_clear(&ask);
    return reply;
}

redisReply *route_command(router *r, const char *key, size_t klen,
                          int argc, const char **argv, const size_t *lens) {
    return route_exec(r, key, klen, NULL, argc, argv, lens);
}

redisReply *route_script(router *r, const script_def *s, int nargs,
                         const char **args, const size_t *lens) {
    if (nargs > SCRIPT_MAX_ARGS) {
        r->call_deadline = DEADLINE_NONE;
        router_fail(r, CONN_ENOMEM, "too many script arguments");
        return NULL;
    }
    return route_exec(r, s->nkeys > 0 ? args[0] : NULL, s->nkeys > 0 ? lens[0] : 0, s,
                      nargs, args, lens);
}
