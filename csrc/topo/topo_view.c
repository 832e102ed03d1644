/*
 * topo_view.c: what a topology shows now (see topo.h): its nodes' settings,
 * the published snapshot and its epoch, the doubts cast on a Sentinel
 * master and their confirmation, the listeners told of a change, and the
 * loads that refresh it (Sentinel in sentinel.c, Cluster in cluster.c,
 * told what they need of the topology: topo_src). The topology's thread
 * (topo_thread.c) and the object (topo.c) both build on this file; it
 * calls neither.
 */
#define _GNU_SOURCE
#include "topo/topo_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/cluster.h"
#include "base/deadline.h"
#include "topo/sentinel.h"
#include "base/slot.h"

/* ---- nodes ----------------------------------------------------------------- */

void topo_node_config(const topo *t, const topo_node *n, conn_config *out) {
    *out = t->cfg;
    out->host = n->host;
    out->port = n->port;
    out->path = n->path;
    if (n->own_auth) {
        out->username = n->username;
        out->password = n->password;
        out->db = n->db;
        out->tls = n->tls;
    }
    if (t->mode == TOPO_CLUSTER) out->db = 0;
}

int topo_add_seed(topo *t, const topo_node *n) {
    topo_node *seeds = realloc(t->seeds, (size_t)(t->nseeds + 1) * sizeof *seeds);
    if (seeds == NULL) return -1;
    t->seeds = seeds;
    if (topo_node_dup(&t->seeds[t->nseeds], n) != 0) return -1;
    t->nseeds++;
    return 0;
}

/* ---- snapshots ---------------------------------------------------------------- */

/* Same nodes (in order) and, for a cluster, the same slot map. */
static int topo_snap_same(const topo_snap *a, const topo_snap *b) {
    int i;
    if (a == NULL || b == NULL || a->nnodes != b->nnodes) return 0;
    for (i = 0; i < a->nnodes; i++)
        if (!topo_node_same(&a->nodes[i], &b->nodes[i]) || a->nodes[i].replicas != b->nodes[i].replicas ||
            a->nodes[i].addrs.n != b->nodes[i].addrs.n ||
            (a->nodes[i].addrs.n > 0 &&
             memcmp(&a->nodes[i].addrs, &b->nodes[i].addrs, sizeof a->nodes[i].addrs) != 0))
            return 0;
    if ((a->slot_node == NULL) != (b->slot_node == NULL)) return 0;
    return a->slot_node == NULL ||
           memcmp(a->slot_node, b->slot_node, SLOT_COUNT * sizeof *a->slot_node) == 0;
}

topo_snap *topo_snap_get(topo *t) {
    topo_snap *s;
    pthread_mutex_lock(&t->mu);
    s = t->cur;
    if (s) s->refs++;
    pthread_mutex_unlock(&t->mu);
    return s;
}

void topo_snap_put(topo *t, topo_snap *s) {
    int last;
    if (s == NULL) return;
    pthread_mutex_lock(&t->mu);
    last = --s->refs == 0;
    pthread_mutex_unlock(&t->mu);
    if (last) topo_snap_free(s);
}

uint64_t topo_epoch(const topo *t) {
    return __atomic_load_n(&t->epoch, __ATOMIC_ACQUIRE);
}

static void topo_notify(topo *t) {   /* with t->mu held */
    const topo_listener *l;
    for (l = t->listeners; l; l = l->next) l->fn(l->arg);
}

/* Publishes s (taking it). Sentinel: the master is confirmed too, unless a
 * doubt was cast after the load that found it began (doubts != gen); and
 * an answer older than the current one never replaces it: a load that
 * began before the one now published (the Lua thread's, slowed by a ROLE,
 * while the follower thread saw the failover), or that the sentinels gave
 * with a lower config-epoch, is dropped. */
void topo_publish_as(topo *t, topo_snap *s, uint64_t gen) {
    topo_snap *old;
    int last = 0, changed = 1;
    pthread_mutex_lock(&t->mu);
    old = t->cur;
    if (t->mode == TOPO_SENTINEL && old && old->nnodes == 1 && s->nnodes == 1 &&
        topo_node_same(&old->nodes[0], &s->nodes[0]) && old->nodes[0].replicas != 0 &&
        s->nodes[0].replicas == 0 && s->nodes[0].replicas_known != 0) {
        /* Once a replica was seen to follow this master, its renewals
         * wait for one as long as the sentinels list any replica of it:
         * after a failover the old master's replica follows it no more
         * (it was promoted), and sentinels that have not heard of the
         * failover may say so before they say anything else. A new
         * master starts from what is seen of it (the old master the
         * sentinels list as its replica follows nobody until Sentinel
         * reconfigures it). */
        s->nodes[0].replicas = old->nodes[0].replicas;
    }
    if (t->mode == TOPO_SENTINEL && old &&
        (s->load_seq < old->load_seq ||
         (s->config_epoch >= 0 && old->config_epoch >= 0 && s->config_epoch < old->config_epoch) ||
         t->doubts != gen)) {
        pthread_mutex_unlock(&t->mu);
        topo_snap_free(s);
        return;
    }
    if (old && topo_snap_same(old, s)) {
        old->load_seq = s->load_seq;   /* (the newest load that saw it) */
        changed = 0;
        topo_snap_free(s);
    } else {
        s->epoch = (old ? old->epoch : 0) + 1;
        s->refs = 1;            /* the topology's own */
        t->cur = s;
        __atomic_store_n(&t->epoch, s->epoch, __ATOMIC_RELEASE);
        if (old) t->refreshes++;
        if (old) last = --old->refs == 0;
    }
    if (t->mode == TOPO_SENTINEL && !t->confirmed && t->doubts == gen) {
        __atomic_store_n(&t->confirmed, 1, __ATOMIC_RELEASE);
        __atomic_store_n(&t->confirms, t->confirms + 1, __ATOMIC_RELEASE);
        changed = 1;
    }
    if (changed) topo_notify(t);
    pthread_mutex_unlock(&t->mu);
    if (last) topo_snap_free(old);
}

void topo_publish(topo *t, topo_snap *s) {
    uint64_t gen;
    pthread_mutex_lock(&t->mu);
    gen = t->doubts;
    s->load_seq = ++t->loads;
    pthread_mutex_unlock(&t->mu);
    topo_publish_as(t, s, gen);
}

int topo_confirmed(const topo *t) {
    return t->mode != TOPO_SENTINEL || __atomic_load_n(&t->confirmed, __ATOMIC_ACQUIRE);
}

uint64_t topo_confirms(const topo *t) {
    return __atomic_load_n(&t->confirms, __ATOMIC_ACQUIRE);
}

uint64_t topo_doubts(const topo *t) {
    return __atomic_load_n(&t->doubts, __ATOMIC_ACQUIRE);
}

void topo_doubt_locked(topo *t, uint64_t epoch) {
    if (epoch == 0 || epoch == t->epoch) {
        /* confirmed cleared before doubts grows: a reader that takes
         * topo_doubts() and then sees topo_confirmed() true has a count a
         * doubt cast now would move (topo.h) */
        int was = t->confirmed;
        __atomic_store_n(&t->confirmed, 0, __ATOMIC_SEQ_CST);
        __atomic_store_n(&t->doubts, t->doubts + 1, __ATOMIC_SEQ_CST);
        if (was) topo_notify(t);
    }
}

void topo_doubt_as(topo *t, uint64_t epoch) {
    if (t->mode != TOPO_SENTINEL) return;
    pthread_mutex_lock(&t->mu);
    topo_doubt_locked(t, epoch);
    pthread_mutex_unlock(&t->mu);
}

int topo_add_listener(topo *t, void (*fn)(void *), void *arg) {
    topo_listener *l = malloc(sizeof *l);
    if (l == NULL) return -1;
    l->fn = fn;
    l->arg = arg;
    pthread_mutex_lock(&t->mu);
    l->next = t->listeners;
    t->listeners = l;
    pthread_mutex_unlock(&t->mu);
    return 0;
}

void topo_remove_listener(topo *t, void (*fn)(void *), void *arg) {
    topo_listener **p, *gone = NULL;
    pthread_mutex_lock(&t->mu);
    for (p = &t->listeners; *p; p = &(*p)->next)
        if ((*p)->fn == fn && (*p)->arg == arg) {
            gone = *p;
            *p = gone->next;
            break;
        }
    pthread_mutex_unlock(&t->mu);
    free(gone);
}

void topo_src_of(topo *t, topo_src *src) {
    src->mu = &t->mu;
    src->cfg = &t->cfg;
    src->seeds = t->seeds;
    src->nseeds = t->nseeds;
    src->master = t->master;
    src->sentinel_user = t->sentinel_user;
    src->sentinel_pass = t->sentinel_pass;
    src->sentinel_tls = t->sentinel_tls;
}

/* Single mode: the configured endpoint, (re)resolved. */
static int topo_load_single(topo *t, int may_resolve, int64_t deadline, char *err, size_t errlen,
                            const char **kind) {
    topo_snap *s = topo_snap_new(1, 0);
    topo_node *n;
    if (s == NULL) {
        snprintf(err, errlen, "out of memory");
        *kind = "memory";
        return -1;
    }
    n = &s->nodes[0];
    n->port = t->cfg.port;
    if ((t->cfg.path && !(n->path = strdup(t->cfg.path))) ||
        (t->cfg.host && !(n->host = strdup(t->cfg.host)))) {
        topo_snap_free(s);
        snprintf(err, errlen, "out of memory");
        *kind = "memory";
        return -1;
    }
    if (topo_node_resolve(n, may_resolve, deadline, err, errlen) != 0) {
        char why[160];
        snprintf(why, sizeof why, "%s", err);
        snprintf(err, errlen, "connection failed: %s", why);
        *kind = strstr(why, "timed out") ? "timeout" : "connection";
        topo_snap_free(s);
        return -1;
    }
    topo_publish(t, s);
    return 0;
}

/* Redlock: the masters as configured; one that cannot be resolved now stays
 * (it counts as a master that does not answer). */
static int topo_load_redlock(topo *t, int may_resolve, int64_t deadline, char *err, size_t errlen,
                             const char **kind) {
    topo_snap *s = topo_snap_new(t->nseeds, 0);
    int i;
    if (s == NULL) {
        snprintf(err, errlen, "out of memory");
        *kind = "memory";
        return -1;
    }
    for (i = 0; i < t->nseeds; i++) {
        char ignore[CONN_ERRSTR_LEN];
        topo_node n;
        pthread_mutex_lock(&t->mu);
        n = t->seeds[i];     /* shallow: seeds live as long as t */
        pthread_mutex_unlock(&t->mu);
        if (topo_node_dup(&s->nodes[i], &n) != 0) {
            topo_snap_free(s);
            snprintf(err, errlen, "out of memory");
            *kind = "memory";
            return -1;
        }
        topo_node_resolve(&s->nodes[i], may_resolve, deadline, ignore, sizeof ignore);
    }
    topo_publish(t, s);
    return 0;
}

int topo_refresh(topo *t, uint64_t seen, int may_resolve, int64_t deadline,
                 char *err, size_t errlen, const char **kind) {
    topo_snap *s = NULL, *cur;
    topo_src src;
    uint64_t gen, seq;
    int rc;
    /* someone else just did it (Sentinel: and the master is confirmed) */
    if (topo_epoch(t) != seen && topo_confirmed(t)) return 0;
    *kind = "connection";
    for (;;) {
        pthread_mutex_lock(&t->mu);
        gen = t->doubts;
        seq = ++t->loads;
        topo_src_of(t, &src);
        pthread_mutex_unlock(&t->mu);
        switch (t->mode) {
        case TOPO_SENTINEL:
            rc = sentinel_load(&src, may_resolve, deadline, &s, err, errlen, kind);
            break;
        case TOPO_CLUSTER:
            cur = topo_snap_get(t);   /* (its nodes are asked first) */
            rc = cluster_load(&src, cur, may_resolve, deadline, &s, err, errlen, kind);
            topo_snap_put(t, cur);
            break;
        case TOPO_REDLOCK:
            return topo_load_redlock(t, may_resolve, deadline, err, errlen, kind);
        default:
            return topo_load_single(t, may_resolve, deadline, err, errlen, kind);
        }
        if (rc != 0) {
            pthread_mutex_lock(&t->mu);
            t->refresh_failures++;
            pthread_mutex_unlock(&t->mu);
            return -1;
        }
        s->load_seq = seq;
        topo_publish_as(t, s, gen);
        /* Sentinel: a doubt cast while we asked (a failover began), or a
         * newer answer published meanwhile, wins over ours: ask again */
        if (topo_confirmed(t)) return 0;
        if (deadline_passed(deadline)) {
            snprintf(err, errlen, "no master confirmed yet (failover in progress: %.80s)", t->master);
            *kind = "timeout";
            return -1;
        }
    }
}
