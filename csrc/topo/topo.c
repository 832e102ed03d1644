/*
 * topo.c: a topology, the object (see topo.h): made, shared by reference,
 * freed; and its own thread, asked to follow (Sentinel), to load a map
 * (Cluster) or to look again when a doubt is cast. What it shows (its
 * snapshots, epochs, doubts and loads) is topo_view.c's; the thread,
 * which follows the sentinels and loads maps in its own time, is
 * topo_thread.c. Both are below this file.
 */
#define _GNU_SOURCE
#include "topo/topo_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/secret.h"

/* ---- its thread --------------------------------------------------------------- */

/* The doubt, and the thread asked to look now. */
void topo_doubt(topo *t, uint64_t epoch) {
    if (t->mode != TOPO_SENTINEL) return;
    pthread_mutex_lock(&t->mu);
    topo_doubt_locked(t, epoch);
    topo_thread_kick(t);
    pthread_mutex_unlock(&t->mu);
}

void topo_follow(topo *t) {
    if (t->mode != TOPO_SENTINEL || topo_thread_ours(t)) return;   /* (every request asks) */
    pthread_mutex_lock(&t->mu);
    topo_thread_ensure(t);   /* (none when it cannot start: errors still tell) */
    pthread_mutex_unlock(&t->mu);
}

int topo_following(const topo *t) {
    return t->mode == TOPO_SENTINEL && topo_thread_ours(t);
}

int topo_load_async(topo *t) {
    if (t->mode != TOPO_CLUSTER) return 0;
    pthread_mutex_lock(&t->mu);
    topo_thread_ensure(t);
    topo_thread_kick(t);
    pthread_mutex_unlock(&t->mu);
    return topo_thread_ours(t);
}

/* ---- the object ------------------------------------------------------------------ */

topo *topo_new(int mode, const conn_config *cfg, const char *const *seeds, int nseeds,
               const char *master, const char *sentinel_user, const char *sentinel_pass,
               char *err, size_t errlen) {
    topo *t = calloc(1, sizeof *t);
    int i;
    if (t == NULL) goto nomem;
    pthread_mutex_init(&t->mu, NULL);
    t->mode = mode;
    t->refs = 1;
    topo_list_add(t);
    if (conn_config_copy(&t->cfg, cfg) != 0) goto nomem;
    if (nseeds > 0) {
        t->seeds = calloc((size_t)nseeds, sizeof *t->seeds);
        if (t->seeds == NULL) goto nomem;
        for (i = 0; i < nseeds; i++) {
            if (topo_node_parse(seeds[i], strlen(seeds[i]), &t->seeds[i]) != 0) {
                snprintf(err, errlen, "bad address '%.80s' (host:port expected)", seeds[i]);
                t->nseeds = i;
                topo_release(t);
                return NULL;
            }
        }
        t->nseeds = nseeds;
    }
    if ((master && !(t->master = strdup(master))) ||
        (sentinel_user && !(t->sentinel_user = strdup(sentinel_user))) ||
        (sentinel_pass && !(t->sentinel_pass = strdup(sentinel_pass))))
        goto nomem;
    return t;
nomem:
    snprintf(err, errlen, "out of memory");
    if (t) topo_release(t);
    return NULL;
}

void topo_set_sentinel_tls(topo *t, tls_ctx *x) {
    tls_ctx_retain(x);
    tls_ctx_release(t->sentinel_tls);
    t->sentinel_tls = x;
}

void topo_retain(topo *t) {
    pthread_mutex_lock(&t->mu);
    t->refs++;
    pthread_mutex_unlock(&t->mu);
}

void topo_release(topo *t) {
    int i, last;
    pthread_mutex_lock(&t->mu);
    last = --t->refs == 0;
    pthread_mutex_unlock(&t->mu);
    if (!last) return;
    topo_list_remove(t);
    topo_thread_stop(t);   /* (it holds no reference) */
    secret_free(t->share_key);
    while (t->listeners) {   /* (each watchdog removes its own: none left) */
        topo_listener *l = t->listeners;
        t->listeners = l->next;
        free(l);
    }
    if (t->cur && --t->cur->refs == 0) topo_snap_free(t->cur);
    for (i = 0; i < t->nseeds; i++) topo_node_clear(&t->seeds[i]);
    free(t->seeds);
    free(t->master);
    secret_free(t->sentinel_pass);
    free(t->sentinel_user);
    tls_ctx_release(t->sentinel_tls);
    conn_config_free(&t->cfg);
    pthread_mutex_destroy(&t->mu);
    free(t);
}
