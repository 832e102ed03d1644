/*
 * watchdog.c: the watchdog's API for the Lua side (see watchdog.h). The
 * thread is in wd_thread.c, the connections in wd_link.c, the renewal
 * policy in wd_sched.c (what is sent when) and wd_lease.c (what its answer
 * means), on_event's events in wd_events.c, fork handling in wd_fork.c.
 */
#define _GNU_SOURCE
#include "base/proc_id.h"
#include "watchdog/wd_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/monotime.h"
#include "cmd/native_detect.h"
#include "cmd/script.h"
#include "base/slot.h"

/* The topology changed (a new master, a doubt cast or lifted): the thread
 * looks at once. Called under the topology's mutex, from any thread. */
static void wd_topo_changed(void *arg) {
    wd_wake(arg);
}

wd *wd_new(topo *t, char *errbuf, size_t errlen) {
    wd *w = calloc(1, sizeof *w);
    if (w == NULL) goto nomem;
    w->losses.efd = -1;
    if (conn_config_copy(&w->cfg, &t->cfg) != 0) goto nomem;
    w->extend_script = script_find("extend");
    w->renew_script = script_find("redlock_renew");
    if (w->extend_script == NULL || w->renew_script == NULL) {
        snprintf(errbuf, errlen, "a renewal script is not embedded (build/scripts_gen.h)");
        goto fail;
    }
    if (wd_losses_init(&w->losses) != 0) {
        snprintf(errbuf, errlen, "cannot make an eventfd: %s", strerror(errno));
        goto fail;
    }
    topo_retain(t);
    w->t = t;
    w->refs = 1;
    w->pid = proc_id();
    pthread_mutex_init(&w->mu, NULL);
    wd_events_init(w);
    wd_fork_register(w);
    w->confirms_seen = topo_confirms(t);
    if (topo_add_listener(t, wd_topo_changed, w) != 0) {
        wd_release(w);
        snprintf(errbuf, errlen, "out of memory");
        return NULL;
    }
    return w;
nomem:
    snprintf(errbuf, errlen, "out of memory");
fail:
    if (w) {
        wd_losses_free(&w->losses);
        conn_config_free(&w->cfg);
        free(w);
    }
    return NULL;
}

void wd_retain(wd *w) {
    pthread_mutex_lock(&w->mu);
    w->refs++;
    pthread_mutex_unlock(&w->mu);
}

/* No longer driven by the renewal thread, if this process's drives it:
 * never waits for the network, the wakeup ends the thread's poll at once. */
static void wd_join(wd *w) {
    int ours;
    pthread_mutex_lock(&w->mu);
    ours = w->running && w->pid == proc_id();
    w->running = 0;
    pthread_mutex_unlock(&w->mu);
    if (ours) wd_runner_leave(w);
}

void wd_stop(wd *w) {
    pthread_mutex_lock(&w->mu);
    w->stopped = 1;
    pthread_mutex_unlock(&w->mu);
    wd_join(w);
}

void wd_release(wd *w) {
    int last, i;
    uint32_t k;
    pthread_mutex_lock(&w->mu);
    last = --w->refs == 0;
    pthread_mutex_unlock(&w->mu);
    if (!last) return;
    topo_remove_listener(w->t, wd_topo_changed, w);
    wd_join(w);
    wd_fork_unregister(w);
    /* orphans live only in the links' queues, the others in the map */
    for (i = 0; i < w->nlinks; i++) {
        wd_link *l = &w->links[i];
        for (k = 0; k < l->n; k++) {
            wd_entry *e = l->q[(l->head + k) % l->cap].e;
            /* (a Redlock orphan is queued on several links: the last frees it) */
            if (e && e->orphaned && --e->queued == 0) wd_entry_free(w, e);
        }
        for (k = 0; k < l->nheld; k++) {
            wd_entry *e = l->held[k].e;
            if (e->orphaned && --e->queued == 0) wd_entry_free(w, e);
        }
        wd_link_free(l);
    }
    for (k = 0; k < w->ids.cap; k++)
        if (w->ids.keys[k] != 0) wd_entry_free(w, w->ids.vals[k]);
    free(w->links);
    if (w->snap) topo_snap_put(w->t, w->snap);
    topo_release(w->t);
    wd_idmap_free(&w->ids);
    wd_heap_free(&w->heap);
    wd_losses_free(&w->losses);
    evq_free(&w->events);
    conn_config_free(&w->cfg);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

/* Makes and checks a connection for the thread now, from the calling
 * thread (which may wait: it is taking a lock), if the thread has none to
 * the node of the key: a wrong password, an ACL, fd exhaustion or a bad
 * socket path then fails the acquire with its real cause, instead of
 * showing up later as a fresh lock lost "unreachable". */
static int wd_check_path(wd *w, const char *key, size_t klen, char *errbuf, size_t errlen) {
    topo_snap *s;
    /* Redlock: the acquire's own majority just proved the path, and a
     * minority of masters may be down for good; the thread connects to
     * each master itself */
    if (w->t->mode == TOPO_REDLOCK) return 0;
    s = topo_snap_get(w->t);
    topo_node node;
    wd_link *l;
    exec_conn *x;
    int i, down;
    if (s == NULL) {
        snprintf(errbuf, errlen, "no topology loaded");
        return -1;
    }
    i = topo_node_of(s, key, klen);
    if (i < 0) {
        topo_snap_put(w->t, s);
        snprintf(errbuf, errlen, "no node serves this key's slot");
        return -1;
    }
    pthread_mutex_lock(&w->mu);
    if (wd_links_sync(w, monotime_ms()) != 0) {
        pthread_mutex_unlock(&w->mu);
        topo_snap_put(w->t, s);
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    l = wd_link_find(w, &s->nodes[i]);
    down = l == NULL || l->x->c->fd < 0;
    pthread_mutex_unlock(&w->mu);
    if (!down) {
        topo_snap_put(w->t, s);
        return 0;
    }
    node = s->nodes[i];                      /* a shallow copy: s is held */
    x = wd_link_conn(w, &node);
    if (x == NULL) {
        topo_snap_put(w->t, s);
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    exec_conn_setup(x, s->slot_node, i);
    if (conn_ensure(x->c) != 0) {
        snprintf(errbuf, errlen, "%s", x->c->errstr);
        exec_conn_free(x);
        topo_snap_put(w->t, s);
        return -1;
    }
    pthread_mutex_lock(&w->mu);
    l = w->inherited ? NULL : wd_link_find(w, &node);
    if (l && l->x->c->fd < 0 && l->n == 0) {
        exec_conn *old = l->x;
        conn_note_replaced(x->c, old->c);   /* counters.h */
        l->x = x;
        x = old;
    }
    pthread_mutex_unlock(&w->mu);
    topo_snap_put(w->t, s);
    exec_conn_free(x);
    return 0;
}

/* Whether w may watch a lock now (not closed; its eventfds made). 0, or
 * -1 with errbuf. */
static int wd_watch_check(wd *w, char *errbuf, size_t errlen) {
    const char *why = NULL;
    pthread_mutex_lock(&w->mu);
    wd_adopt_after_fork(w);
    if (w->stopped) why = "client closed";
    else if (w->losses.efd < 0) why = "cannot make an eventfd: Too many open files";
    pthread_mutex_unlock(&w->mu);
    if (why == NULL) return 0;
    snprintf(errbuf, errlen, "%s", why);
    return -1;
}

/* A new entry for a held lock (one block: the entry, then its key, then
 * a set's other keys), or NULL. */
static wd_entry *wd_entry_new(const wd *w, const char *key, size_t klen, const wd_keys *more,
                              const char *token, size_t toklen, int64_t ttl_ms, int64_t lease_end_ms) {
    int64_t now, by_ttl, by_lease;
    size_t total = klen, at;
    int i, n = more ? more->n : 0;
    wd_entry *e;
    for (i = 0; i < n; i++) total += more->lens[i];
    e = calloc(1, sizeof *e + (total ? total : 1));
    if (e == NULL) return NULL;
    e->key = (char *)(e + 1);
    memcpy(e->key, key, klen);
    e->klen = klen;
    for (i = 0, at = klen; i < n; i++) {
        memcpy(e->key + at, more->keys[i], more->lens[i]);
        e->more[i] = e->key + at;
        e->more_lens[i] = more->lens[i];
        at += more->lens[i];
    }
    e->nmore = n;
    memcpy(e->token, token, toklen);
    e->toklen = toklen;
    e->ttl_ms = ttl_ms;
    e->lease_end = lease_end_ms;
    /* Renew at a third of the ttl, or sooner when the lease we start from
     * is shorter than the ttl (a lock handed over with a short lease). */
    now = monotime_ms();
    by_ttl = now + ttl_ms / 3;
    by_lease = now + (lease_end_ms - now) / 3;
    e->next_at = by_lease < by_ttl ? by_lease : by_ttl;
    e->slack = (e->next_at - now) / 2;
    e->pid = proc_id();
    e->state = WD_HELD;
    e->heap_pos = -1;
    e->slot = w->t->mode == TOPO_CLUSTER ? slot_of(key, klen) : -1;
    return e;
}

/* Room for everything one more lock may need later, so that nothing after
 * it is watched (a renewal, a loss report) can fail for lack of memory.
 * Under w->mu. 0, or -1. */
static int wd_reserve_one(wd *w) {
    int i;
    if (wd_idmap_reserve(&w->ids) != 0 || wd_heap_reserve(&w->heap, w->nentries + 1) != 0 ||
        wd_losses_reserve(&w->losses, w->nentries + 1) != 0)
        return -1;
    for (i = 0; i < w->nlinks; i++)
        /* each lock: its renewal and an ASKING; a SCRIPT LOAD of each of
         * the 4 renewal scripts (wd_link_queue); two WAITs (wd_ack.c) */
        if (wd_link_reserve(&w->links[i], (w->nentries + 1) * 2 + 6) != 0) return -1;
    return 0;
}

int wd_watch(wd *w, const char *key, size_t klen, const wd_keys *more, const char *token, size_t toklen,
             int64_t ttl_ms, int64_t lease_end_ms, int64_t hold_until_ms,
             const struct script_def *renew, uint64_t *id, char *errbuf, size_t errlen) {
    wd_entry *e;
    if (toklen >= WD_TOKEN_MAX) {
        snprintf(errbuf, errlen, "token too long");
        return -1;
    }
    if (more && (more->n < 0 || more->n > WD_SET_MAX - 1 || w->t->mode == TOPO_REDLOCK)) {
        snprintf(errbuf, errlen, "a set of %d keys cannot be renewed together here", more->n + 1);
        return -1;
    }
    if (wd_watch_check(w, errbuf, errlen) != 0 || wd_check_path(w, key, klen, errbuf, errlen) != 0) return -1;
    e = wd_entry_new(w, key, klen, more, token, toklen, ttl_ms, lease_end_ms);
    if (e == NULL) {
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    e->hold_until = hold_until_ms;
    e->renew = renew;
    pthread_mutex_lock(&w->mu);
    e->id = wd_ids_next();
    if (e->id == 0) {
        snprintf(errbuf, errlen, "out of lock ids");
        goto fail;
    }
    if (wd_reserve_one(w) != 0) {
        snprintf(errbuf, errlen, "out of memory");
        goto fail;
    }
    if (w->stopped) {
        snprintf(errbuf, errlen, "client closed");
        goto fail;
    }
    /* (the thread's round for w waits for w->mu: it sees the entry) */
    if (!w->running && wd_thread_start(w, errbuf, errlen) != 0) goto fail;
    wd_idmap_put(&w->ids, e->id, e);
    w->nentries++;
    w->stats.watched++;
    wd_heap_push(&w->heap, e);
    /* Usually no wakeup: after a release the thread still sleeps until that
     * lock's renewal time, and a lock taken again with the same ttl is due
     * later. Sparing it keeps the thread off the hand-over's path. */
    wd_wake_by(w, e->next_at);
    *id = e->id;
    pthread_mutex_unlock(&w->mu);
    return 0;
fail:
    pthread_mutex_unlock(&w->mu);
    free(e);
    return -1;
}

void wd_set_replicas(wd *w, uint64_t id, int replicas) {
    wd_entry *e;
    pthread_mutex_lock(&w->mu);
    e = wd_idmap_get(&w->ids, id);
    if (e != NULL) e->replicas = replicas;
    pthread_mutex_unlock(&w->mu);
}

void wd_unwatch(wd *w, uint64_t id) {
    wd_entry *e;
    pthread_mutex_lock(&w->mu);
    e = wd_idmap_get(&w->ids, id);
    if (e != NULL) {
        wd_idmap_del(&w->ids, id);
        w->stats.watched--;
        wd_heap_remove(&w->heap, e);
        /* In a fork child the parent's requests were forgotten: not queued. */
        if (e->queued) {
            int i;
            for (i = 0; i < w->nlinks && e->queued; i++) wd_link_unqueue(&w->links[i], e);
        }
        if (e->queued)
            e->orphaned = 1;   /* already on the wire: freed at its answer */
        else
            wd_entry_free(w, e);
    }
    pthread_mutex_unlock(&w->mu);
}

int wd_status(wd *w, uint64_t id, int64_t *lease_end_ms) {
    wd_entry *e;
    int state;
    pthread_mutex_lock(&w->mu);
    e = wd_idmap_get(&w->ids, id);
    if (e == NULL) {
        state = WD_STOPPED;
    } else if (e->pid != proc_id()) {
        state = WD_FORKED;
    } else {
        state = e->state;
        if (lease_end_ms) *lease_end_ms = e->lease_end;
        /* Judged now, not at the thread's next pass: a paused or starved
         * thread must not make a dead lease look alive. And final: a
         * renewal answered later must not bring the lock back, since the
         * caller may already have acted on its loss. */
        if (state == WD_HELD && monotime_ms() >= e->lease_end) {
            state = w->stopped ? WD_STOPPED : e->failing || e->queued ? WD_UNREACHABLE : WD_EXPIRED;
            wd_mark_lost(w, e, state);
        }
    }
    pthread_mutex_unlock(&w->mu);
    return state;
}

void wd_renewed(wd *w, uint64_t id, int64_t ttl_ms, int64_t lease_end_ms, int64_t sent_ms) {
    wd_entry *e;
    pthread_mutex_lock(&w->mu);
    e = wd_idmap_get(&w->ids, id);
    if (e != NULL && e->state == WD_HELD && e->pid == proc_id()) {
        /* A renewal of ours was on the wire while the Lua side's extend
         * was, or was answered after that extend was sent: Redis may have
         * run either PEXPIRE last, so count on the earlier of the two ends
         * until a renewal sent after both settles it. */
        int raced = e->queued || e->last_done >= sent_ms;
        if (raced) {
            int64_t ours = e->queued ? e->flight_end : e->lease_end;
            if (ours < lease_end_ms) lease_end_ms = ours;
        }
        e->ttl_ms = ttl_ms;
        e->lease_end = lease_end_ms;
        e->failing = 0;
        if (e->queued) {
            /* in flight: the links' bounds come down to it, and the thread
             * wakes for it if it sleeps past it (its loss is due then) */
            wd_lease_lowered(w, lease_end_ms);
            wd_wake_by(w, lease_end_ms);
            e->raced = 1;   /* wd_renewal_ok renews at once */
        } else {
            int64_t now = monotime_ms();
            wd_heap_remove(&w->heap, e);
            e->next_at = raced ? now : now + ttl_ms / 3;
            e->slack = raced ? 0 : ttl_ms / 6;
            wd_heap_push(&w->heap, e);
            wd_wake_by(w, e->next_at);
        }
    }
    pthread_mutex_unlock(&w->mu);
}

int wd_take_losses(wd *w, uint64_t *ids, int *states, int max) {
    int n;
    pthread_mutex_lock(&w->mu);
    wd_adopt_after_fork(w);
    n = wd_losses_take(&w->losses, ids, states, max);
    pthread_mutex_unlock(&w->mu);
    return n;
}

int wd_events_enable(wd *w) {
    int rc;
    pthread_mutex_lock(&w->mu);
    rc = evq_enable(&w->events);
    pthread_mutex_unlock(&w->mu);
    return rc;
}

int wd_take_events(wd *w, ev *out, int max) {
    unsigned n;
    pthread_mutex_lock(&w->mu);
    wd_adopt_after_fork(w);
    n = evq_take(&w->events, out, max > 0 ? (unsigned)max : 0);
    pthread_mutex_unlock(&w->mu);
    return (int)n;
}

int wd_fd(wd *w) {
    int fd;
    pthread_mutex_lock(&w->mu);
    wd_adopt_after_fork(w);
    fd = w->losses.efd;
    pthread_mutex_unlock(&w->mu);
    if (fd < 0) errno = EMFILE;
    return fd;
}

void wd_get_stats(wd *w, wd_stats *out) {
    pthread_mutex_lock(&w->mu);
    *out = w->stats;
    out->noscript_reloads = w->net.noscript_reloads;
    out->reconnects = w->net.reconnects;
    out->events_dropped = w->events.dropped;
    pthread_mutex_unlock(&w->mu);
}

const char *wd_state_name(int state) {
    static const char *const names[WD_STATE_COUNT] = {
        "held", "not held", "unreachable", "expired", "max_hold", "forked", "stopped"
    };
    return state >= 0 && state < WD_STATE_COUNT ? names[state] : "unknown";
}
