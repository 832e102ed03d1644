/*
 * topo_share.c: every topology of the process in one list, for two things.
 *
 * Sharing: clients configured the same (the same mode, nodes, sentinels,
 * master, credentials, TLS files, timeouts) share one topology, so that a
 * process with many of them follows the sentinels once (one thread, one
 * subscription and one pass connection per sentinel) and loads a Cluster's
 * map once. Sentinel and Cluster only: a single node or Redlock's masters
 * have nothing to follow. The key is the binding's (client_connect.c): a
 * string that differs whenever anything the topology holds would.
 *
 * Fork: before fork every topology's mutex is taken (pthread_atfork), so
 * the child gets them in a known state, never one held by a thread that
 * does not exist there. Lock order: the watchdogs' mutexes, then the
 * topologies' (a watchdog reads its topology with its own mutex held),
 * then the connection registry's (a topology's thread makes connections
 * with its topology's mutex held): wd_fork.c registers its handlers after
 * these, and these after conn_fork.c's (prepare handlers run in reverse).
 */
#define _GNU_SOURCE
#include "topo/topo_internal.h"

#include <stdlib.h>
#include <string.h>

#include "base/secret.h"

static pthread_mutex_t share_mu = PTHREAD_MUTEX_INITIALIZER;
static topo *share_head;   /* every topology (next_topo) */
static pthread_once_t share_once = PTHREAD_ONCE_INIT;

static void share_prepare(void) {
    topo *t;
    pthread_mutex_lock(&share_mu);
    for (t = share_head; t; t = t->next_topo) pthread_mutex_lock(&t->mu);
}

static void share_parent(void) {
    topo *t;
    for (t = share_head; t; t = t->next_topo) pthread_mutex_unlock(&t->mu);
    pthread_mutex_unlock(&share_mu);
}

/* (the thread is gone: topo_thread_ensure notices by its pid) */
static void share_child(void) {
    share_parent();
}

static void share_register(void) {
    conn_fork_init();
    pthread_atfork(share_prepare, share_parent, share_child);
}

void topo_fork_init(void) {
    pthread_once(&share_once, share_register);
}

void topo_list_add(topo *t) {
    topo_fork_init();
    pthread_mutex_lock(&share_mu);
    t->next_topo = share_head;
    share_head = t;
    pthread_mutex_unlock(&share_mu);
}

void topo_list_remove(topo *t) {
    topo **p;
    pthread_mutex_lock(&share_mu);
    for (p = &share_head; *p; p = &(*p)->next_topo)
        if (*p == t) {
            *p = t->next_topo;
            break;
        }
    pthread_mutex_unlock(&share_mu);
}

/* (a topology whose last reference is gone is never handed out again:
 * topo_release is freeing it) */
topo *topo_shared(const char *key) {
    topo *t, *found = NULL;
    pthread_mutex_lock(&share_mu);
    for (t = share_head; t && !found; t = t->next_topo) {
        pthread_mutex_lock(&t->mu);
        if (t->share_key && t->refs > 0 && strcmp(t->share_key, key) == 0) {
            t->refs++;
            found = t;
        }
        pthread_mutex_unlock(&t->mu);
    }
    pthread_mutex_unlock(&share_mu);
    return found;
}

int topo_share(topo *t, const char *key) {
    char *k = strdup(key);
    if (k == NULL) return -1;
    pthread_mutex_lock(&share_mu);
    pthread_mutex_lock(&t->mu);
    secret_free(t->share_key);
    t->share_key = k;
    pthread_mutex_unlock(&t->mu);
    pthread_mutex_unlock(&share_mu);
    return 0;
}
