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

#include "cluster.h"
#include "deadline.h"
#include "monotime.h"
#include "native_cmd.h"
#include "native_detect.h"

#define ROUTE_MAX_TRIES 8        /* redirects and refreshes per command */

router *router_new(topo *t, int may_resolve) {
    router *r = calloc(1, sizeof *r);
    if (r == NULL) return NULL;
    topo_retain(t);
    r->t = t;
    r->may_resolve = may_resolve;
    r->timeout_ms = t->cfg.timeout_ms;
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

/* A connection to a node failed, or a node refused to be written to: look
 * again before the next request. Sentinel: nobody writes to that master
 * until the sentinels confirm one again (topo_doubt). */
static void router_suspect(router *r) {
    if (r->t->mode == TOPO_SINGLE || r->err == CONN_EINTR) return;   /* (ours, not the node's) */
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

/* What a request sent after a pause must have left of its deadline for
 * its reply. With less, the call stops after the pause. */
#define ROUTER_LAST_SEND_MS 20

/* Sleeps 5 ms per try, at most 100 ms, never past deadline. Returns 1 when
 * what is left after the sleep is too little for another request's reply
 * (a timeout there would drop a healthy connection and report it lost):
 * the caller stops with what it has. */
static int router_pause(int tries, int64_t deadline) {
    int64_t ms = 5 * (int64_t)tries, left = (deadline - monotime_us()) / 1000;
    struct timespec ts;
    if (ms > 100) ms = 100;
    if (deadline != DEADLINE_NONE && left < ms) ms = left > 0 ? left : 0;
    ts.tv_sec = (time_t)(ms / 1000);
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    nanosleep(&ts, NULL);
    return deadline != DEADLINE_NONE && deadline - monotime_us() < ROUTER_LAST_SEND_MS * 1000;
}

/* EVAL[SHA] s nkeys args..., or argv as given when s is NULL. */
int route_append(conn *c, const script_def *s, int use_eval, int argc,
                        const char **argv, const size_t *lens) {
    const char *full[SCRIPT_MAX_ARGS + 3];
    size_t flens[SCRIPT_MAX_ARGS + 3];
    char nkeys[16];
    int i;
    if (s == NULL) return conn_append(c, argc, argv, lens);
    if (argc > SCRIPT_MAX_ARGS) return -1;
    if (!use_eval)   /* the hot path: "EVALSHA sha nkeys" precomputed */
        return conn_append_pre(c, (size_t)argc + 3, s->evalsha, s->evalsha_len, argc, argv, lens);
    full[0] = use_eval ? "EVAL" : "EVALSHA";
    flens[0] = use_eval ? 4 : 7;
    full[1] = use_eval ? s->source : s->sha;
    flens[1] = use_eval ? s->len : 40;
    flens[2] = (size_t)snprintf(nkeys, sizeof nkeys, "%d", s->nkeys);
    full[2] = nkeys;
    for (i = 0; i < argc; i++) {
        full[3 + i] = argv[i];
        flens[3 + i] = lens[i];
    }
    return conn_append(c, argc + 3, full, flens);
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
    int64_t deadline = deadline_in_ms(r->timeout_ms);
    topo_node ask;           /* where an ASK sent us; valid when have_ask (not
                                zeroed up front: it is large, and rarely used) */
    int have_ask = 0;
    int asking = 0, use_eval = 0, tries = 0, refreshed = 0, waits = 0, scripted = 0;
    redisReply *reply = NULL;
    if (topo_epoch(r->t) == 0) refreshed = 1;   /* router_sync loads it now */
    while (reply == NULL) {
        int node, redirect;
        conn *c;
        topo_node target;
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
        /* Sentinel: every reconnect asks the sentinels where the master is,
         * and so does every request while the master is in doubt */
        if ((c->fd < 0 || !topo_confirmed(r->t)) && r->t->mode == TOPO_SENTINEL && !refreshed) {
            r->stale = 1;
            tries--;
            continue;
        }
        if (conn_ensure(c) != 0) {
            /* not sent: after a refresh the node may be another one */
            router_fail_conn(r, c);
            router_suspect(r);
            if (r->t->mode == TOPO_SINGLE || refreshed || deadline_passed(deadline) || r->err == CONN_EINTR) break;
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
                router_suspect(r);
                break;
            }
            freeReplyObject(ok);
        }
        reply = conn_read(c, deadline);
        if (reply == NULL) {
            /* sent, maybe run: never again; but look again next time */
            router_fail_conn(r, c);
            router_suspect(r);
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
        memset(&target, 0, sizeof target);
        redirect = r->t->mode == TOPO_SINGLE ? CLUSTER_NONE : cluster_redirect_of(reply, &target);
        if (redirect == CLUSTER_NONE) {
            if (s != NULL && !use_eval && script_is_noscript(reply)) {
                /* the script cache is per node: EVAL it here (after ASKING
                 * again, if that is how we got here), loaded first */
                freeReplyObject(reply);
                reply = NULL;
                use_eval = 1;
                conn_note_noscript(c);
                tries--;
            }
            continue;
        }
        if (redirect == CLUSTER_DOWN) {
            topo_node_clear(&target);
            continue;   /* a clear error, in Redis' own words */
        }
        if (redirect == CLUSTER_TRYAGAIN)
            snprintf(r->errstr, sizeof r->errstr, "redis error: %.*s",
                     (int)(reply->len > 150 ? 150 : reply->len), reply->str);
        freeReplyObject(reply);
        reply = NULL;
        switch (redirect) {
        case CLUSTER_MOVED:
            topo_node_clear(&target);
            r->stale = 1;
            refreshed = 0;
            asking = 0;
            break;
        case CLUSTER_ASK:
            if (have_ask) topo_node_clear(&ask);
            ask = target;
            have_ask = asking = 1;
            break;
        case CLUSTER_TRYAGAIN:
            /* a multi-key request in a slot being migrated: it did not
             * run; wait (more each time) until the move ends or the
             * deadline passes, without counting it as a redirect */
            waits++;
            if (router_pause(waits, deadline)) deadline = monotime_us();
            tries--;
            if (deadline == DEADLINE_NONE && waits > 200) deadline = monotime_us();
            break;
        case CLUSTER_READONLY:
            /* a failover made our master a replica: find the new one */
            conn_drop(c);
            router_suspect(r);
            refreshed = 0;
            break;
        default:
            break;
        }
        if (deadline_passed(deadline)) {
            if (redirect == CLUSTER_TRYAGAIN)
                r->err = CONN_EREDIS;   /* errstr: Redis' TRYAGAIN */
            else
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
        router_fail(r, CONN_ENOMEM, "too many script arguments");
        return NULL;
    }
    return route_exec(r, s->nkeys > 0 ? args[0] : NULL, s->nkeys > 0 ? lens[0] : 0, s,
                      nargs, args, lens);
}
