/*
 * wd_fork.c: watchdogs across fork().
 *
 * pthread_atfork handlers keep the mutexes consistent: before fork every
 * watchdog's mutex is taken, and the renewal thread's list's, so the child
 * gets them in a known state. In the child the thread does not exist; the
 * child handler only resets state and closes the parent's eventfds (the links' sockets are closed by conn_fork.c's
 * own handler). The child's first call then cleans up the rest, and its
 * first watched lock starts a new thread with new connections. Locks
 * registered by the parent are never renewed or reported by the child
 * (their pid differs).
 */
#include "watchdog/wd_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

static pthread_mutex_t wd_registry_mu = PTHREAD_MUTEX_INITIALIZER;
static wd *wd_registry;
static pthread_once_t wd_atfork_once = PTHREAD_ONCE_INIT;

static void wd_atfork_prepare(void) {
    wd *w;
    pthread_mutex_lock(&wd_registry_mu);
    for (w = wd_registry; w; w = w->next_wd) pthread_mutex_lock(&w->mu);
    wd_runner_lock();   /* (after every w->mu: wd_watch takes it under one) */
}

static void wd_atfork_parent(void) {
    wd *w;
    wd_runner_unlock();
    for (w = wd_registry; w; w = w->next_wd) pthread_mutex_unlock(&w->mu);
    pthread_mutex_unlock(&wd_registry_mu);
}

/* No allocation here, and only close(2): what is safe in a fork child. */
static void wd_atfork_child(void) {
    wd *w;
    wd_runner_forked();
    wd_runner_unlock();
    for (w = wd_registry; w; w = w->next_wd) {
        w->running = 0;
        w->inherited = 1;
        if (w->losses.efd >= 0) close(w->losses.efd);
        w->losses.efd = -1;
        w->losses.n = 0;  /* the parent's reports are not ours */
        w->events.n = 0;  /* nor its events */
        pthread_mutex_unlock(&w->mu);
    }
    pthread_mutex_unlock(&wd_registry_mu);
}

static void wd_atfork_register(void) {
    /* the topologies' handlers first (and conn_fork.c's before theirs):
     * prepare handlers run in reverse order, so ours take the watchdog
     * mutexes before the topologies' and the connection registry's are
     * taken, the order the thread takes them in */
    topo_fork_init();
    pthread_atfork(wd_atfork_prepare, wd_atfork_parent, wd_atfork_child);
}

void wd_fork_register(wd *w) {
    pthread_once(&wd_atfork_once, wd_atfork_register);
    pthread_mutex_lock(&wd_registry_mu);
    w->next_wd = wd_registry;
    wd_registry = w;
    pthread_mutex_unlock(&wd_registry_mu);
}

void wd_fork_unregister(wd *w) {
    wd **p;
    pthread_mutex_lock(&wd_registry_mu);
    for (p = &wd_registry; *p; p = &(*p)->next_wd)
        if (*p == w) {
            *p = w->next_wd;
            break;
        }
    pthread_mutex_unlock(&wd_registry_mu);
}

/* Lua side, with w->mu held, in a fork child: forget the parent's
 * requests (their entries are the parent's) and make our own eventfds. */
void wd_adopt_after_fork(wd *w) {
    int i;
    if (!w->inherited) return;
    w->inherited = 0;
    for (i = 0; i < w->nlinks; i++) {
        wd_link *l = &w->links[i];
        while (l->n > 0) {
            wd_entry *e = l->q[l->head].e;
            l->head = (l->head + 1) % l->cap;
            l->n--;
            if (e == NULL) continue;      /* a WAIT */
            if (e->queued > 0) e->queued--;
            if (e->orphaned && e->queued == 0) wd_entry_free(w, e);
        }
        l->head = 0;
        wd_ack_forget(w, l);
        conn_drop(l->x->c);
    }
    w->losses.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}
