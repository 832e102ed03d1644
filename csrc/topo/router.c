/*
 * router.c: a thread's connections to a topology's nodes, and running one
 * request on the right node (see router.h).
 */
#define _GNU_SOURCE
#include "topo/router.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/deadline.h"
#include "base/monotime.h"

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
        if (r->conns[i]) conn_drop(r->conns[i]->c);
}

static void router_clear(router *r) {
    int i;
    for (i = 0; i < r->nconns; i++) exec_conn_free(r->conns[i]);
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

/* Loads or reloads the topology, by deadline. */
static int router_refresh_by(router *r, uint64_t seen, int64_t deadline) {
    char err[CONN_ERRSTR_LEN];
    const char *kind = "connection";
    if (topo_refresh(r->t, seen, r->may_resolve, deadline, err, sizeof err, &kind) != 0) {
        router_fail(r, strcmp(kind, "timeout") == 0 ? CONN_ETIMEOUT :
                       strcmp(kind, "redis") == 0 ? CONN_EREDIS :
                       strcmp(kind, "memory") == 0 ? CONN_ENOMEM : CONN_ECONNECT, err);
        return -1;
    }
    return 0;
}

/* ... within the connect timeout. */
static int router_refresh(router *r, uint64_t seen) {
    return router_refresh_by(r, seen, deadline_in_ms(r->t->cfg.connect_timeout_ms));
}

int router_reload(router *r, int64_t deadline) {
    uint64_t seen = r->snap ? r->snap->epoch : 0;
    if (seen && !r->no_doubt) topo_doubt(r->t, seen);
    if (router_refresh_by(r, seen, deadline) != 0) return -1;
    return router_sync(r);
}

int router_sync(router *r) {
    topo_snap *s;
    exec_conn **conns;
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
                if (s->nodes[i].addrs.n > 0) conn_set_addrs(conns[i]->c, &s->nodes[i].addrs);
                exec_conn_setup(conns[i], s->slot_node, i);   /* its slots may differ now */
                break;
            }
    router_clear(r);
    r->snap = s;
    r->conns = conns;
    r->nconns = s->nnodes;
    return 0;
}

exec_conn *router_conn(router *r, int i) {
    conn_config cfg;
    const topo_node *n = &r->snap->nodes[i];
    exec_conn *x = r->conns[i];
    conn *c;
    if (x) return x;
    topo_node_config(r->t, n, &cfg);
    x = exec_conn_new(&cfg, &r->t->xopts);
    if (x == NULL) {
        router_fail(r, CONN_ENOMEM, "out of memory");
        return NULL;
    }
    c = x->c;
    /* a name it may resolve again at each connect (and so follow a DNS
     * change); without that right, the address the topology resolved */
    c->may_resolve = r->may_resolve && n->host != NULL;
    if (n->addrs.n > 0) conn_set_addrs(c, &n->addrs);
    c->probe = r->probe;
    c->counters = &r->net;
    exec_conn_setup(x, r->snap->slot_node, i);
    conn_set_spin(c, r->spin_us);
    r->conns[i] = x;
    return x;
}

/* Index of node n in the router's snapshot, or -1. */
static int router_find(const router *r, const topo_node *n) {
    int i;
    for (i = 0; i < r->snap->nnodes; i++)
        if (topo_node_same(&r->snap->nodes[i], n)) return i;
    return -1;
}

/* Sleeps the pause before the next attempt (exec_pause_ms: never past the
 * caller's deadline). */
static void router_sleep_ms(long ms) {
    struct timespec ts;
    if (ms <= 0) return;
    ts.tv_sec = (time_t)(ms / 1000);
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    nanosleep(&ts, NULL);
}

/* The node of x's next attempt in r's snapshot: where an ASK sent it, or
 * its key's; -1 when none serves it (a fresh look first, once), with
 * *step EXEC_ROUTE to look, or EXEC_FAIL. */
static int route_node(router *r, exec_req *x, int *step) {
    const char *target = exec_target(x);
    int node;
    if (target) {
        topo_node ask;
        if (topo_node_parse(target, strlen(target), &ask) != 0) {
            *step = exec_fail(x, CONN_EREDIS, "redis error: ASK to an address that does not parse");
            return -1;
        }
        node = router_find(r, &ask);
        topo_node_clear(&ask);
    } else {
        node = x->key ? topo_node_of(r->snap, x->key, x->klen) : 0;
    }
    if (node >= 0) return node;
    if (!x->st.refreshed) {
        r->stale = 1;
        x->st.asking = 0;
        *step = EXEC_ROUTE;
    } else {
        *step = exec_fail(x, CONN_EREDIS, "redis error: CLUSTERDOWN no node serves this key's slot");
    }
    return -1;
}

/* What the machine found asks of the topology: a fresh look before the next
 * request; Sentinel: nobody writes to that master until the sentinels
 * confirm one again (topo_doubt). */
static void route_suspect(router *r, exec_req *x) {
    if (!exec_resolve(x)) return;
    r->stale = 1;
    if (r->snap && !r->no_doubt) topo_doubt(r->t, r->snap->epoch);
}

/* One attempt's replies, read in turn until the machine says what next. */
static int route_read(router *r, exec_req *x, exec_conn *xc, int node, uint64_t doubts) {
    int step = EXEC_MORE;
    while (step == EXEC_MORE) {
        redisReply *reply = exec_conn_read(xc, x->deadline);
        if (reply == NULL) {
            /* sent, maybe run: never again (exec_failed); but look again
             * next time */
            step = exec_failed(x, xc, 1);
            route_suspect(r, x);
            return step;
        }
        step = exec_reply(x, xc, reply);
    }
    if (r->t->mode == TOPO_SENTINEL && topo_doubts(r->t) != doubts) {
        /* a doubt was cast while it ran (a failover began, a connection of
         * ours failed): what the master answered may be lost with it. It
         * ran, or did not: the caller's to sort out, as after any lost
         * reply. Whatever the reply asks next (an EVAL after NOSCRIPT, the
         * script after a native command): nothing more goes to that
         * master in this call. */
        exec_clear(x);
        return exec_fail(x, CONN_ELOST, "connection lost: the master came in doubt while the request ran "
                                        "(a failover may be under way)");
    }
    if (step == EXEC_DONE) r->last_node = node;
    if (step != EXEC_PAUSE) route_suspect(r, x);   /* (a pause: once it is over, route_run) */
    return step;
}

/* Routes, connects and sends one attempt of x, and reads it out. */
static int route_attempt(router *r, exec_req *x) {
    int node, step = EXEC_ROUTE;
    exec_conn *xc;
    uint64_t doubts;
    if (r->stale) {
        if (router_refresh(r, r->snap ? r->snap->epoch : 0) != 0) return exec_fail(x, r->err, r->errstr);
        r->stale = 0;
        x->st.refreshed = 1;
    }
    if (router_sync(r) != 0) return exec_fail(x, r->err, r->errstr);
    node = route_node(r, x, &step);
    if (node < 0) return step;
    xc = router_conn(r, node);
    if (xc == NULL) return exec_fail(x, CONN_ENOMEM, "out of memory");
    exec_conn_check_idle(xc);
    doubts = topo_doubts(r->t);   /* (before topo_confirmed: see topo.h) */
    /* Sentinel: every reconnect asks the sentinels where the master is
     * (once a call), and every request while the master is in doubt waits
     * for a confirmed one, whatever this call did before (a LOADING retry,
     * an EVAL after NOSCRIPT) */
    if (r->t->mode == TOPO_SENTINEL && (!topo_confirmed(r->t) || (xc->c->fd < 0 && !x->st.refreshed))) {
        if (deadline_passed(x->deadline))
            return exec_fail(x, CONN_ETIMEOUT, EXEC_ERR_NO_MASTER);
        r->stale = 1;
        x->st.tries--;   /* (not a redirect) */
        return EXEC_ROUTE;
    }
    if (conn_ensure(xc->c) != 0) {
        /* not sent: after a refresh the node may be another one (once) */
        step = exec_failed(x, xc, 0);
        route_suspect(r, x);
        return step;
    }
    for (;;) {
        if (exec_write(x, xc) != 0) return EXEC_FAIL;
        step = route_read(r, x, xc, node, doubts);
        if (step != EXEC_SEND) return step;   /* (SEND: the same node, now) */
    }
}

redisReply *route_run(router *r, exec_req *x) {
    int step = EXEC_ROUTE;
    if (topo_epoch(r->t) == 0) x->st.refreshed = 1;   /* router_sync loads it now */
    while (step != EXEC_DONE && step != EXEC_FAIL) {
        if (step == EXEC_PAUSE) {
            router_sleep_ms(exec_pause_ms(x));
            if ((step = exec_after_pause(x)) == EXEC_DONE) break;
            route_suspect(r, x);   /* (the call goes on: look again first, as before the pause) */
        } else if ((step = exec_try(x)) == EXEC_FAIL) {
            break;
        }
        step = route_attempt(r, x);
    }
    if (step == EXEC_FAIL) {
        exec_clear(x);
        router_fail(r, x->err, x->errstr);
        return NULL;
    }
    return exec_take_answer(x);
}

redisReply *route_command(router *r, const char *key, size_t klen,
                          int argc, const char **argv, const size_t *lens) {
    exec_req x;
    exec_init(&x, NULL, argc, argv, lens, key, klen, r->t->mode, 0, r->timeout_ms, r->call_deadline);
    r->call_deadline = DEADLINE_NONE;
    return route_run(r, &x);
}

redisReply *route_script(router *r, const script_def *s, int nargs,
                         const char **args, const size_t *lens) {
    exec_req x;
    int k;
    if (nargs > SCRIPT_MAX_ARGS) {
        r->call_deadline = DEADLINE_NONE;
        router_fail(r, CONN_ENOMEM, "too many script arguments");
        return NULL;
    }
    k = script_first_key(s, nargs, args, lens);
    exec_init(&x, s, nargs, args, lens, k >= 0 ? args[k] : NULL, k >= 0 ? lens[k] : 0, r->t->mode, 0,
              r->timeout_ms, r->call_deadline);
    r->call_deadline = DEADLINE_NONE;
    return route_run(r, &x);
}
