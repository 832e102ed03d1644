/*
 * wd_thread.c: the renewal thread, an event loop.
 *
 * Shape (after jemalloc's background_thread.c): created with every signal
 * masked (signals are the host's), stopped by setting a flag, waking it and
 * joining. It sleeps in poll(2) on its links' sockets and an eventfd that
 * the Lua side writes when it has something earlier for it, or to stop it:
 * so a stop never waits for a stalled Redis, and a new lock never waits for
 * the thread's current sleep. Each pass: queue the renewals due, move bytes
 * on every link without blocking, apply the answers, report the leases that
 * ended unanswered, then sleep until the next of those moments.
 */
#define _GNU_SOURCE
#include "base/proc_id.h"
#include "watchdog/wd_internal.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/monotime.h"

void wd_wake(wd *w) {
    uint64_t one = 1;
    if (w->wake_fd >= 0 && write(w->wake_fd, &one, sizeof one) < 0) {
        /* counter saturated: the thread is being woken anyway */
    }
}

/* The next moment the thread must act without being woken: a renewal due,
 * a lease ending with its renewal unanswered, a connect or reply timeout. */
static int64_t wd_next_wake(const wd *w) {
    const wd_entry *top = wd_heap_top(&w->heap);
    int64_t t = top ? top->next_at : INT64_MAX;
    int i;
    for (i = 0; i < w->nlinks; i++) {
        int64_t d = wd_link_next_deadline(w, &w->links[i]);
        if (d < t) t = d;
    }
    return t;
}

/* The earliest lease end of a held lock: a refresh may not outlast it. */
static int64_t wd_earliest_end(const wd *w) {
    int64_t t = INT64_MAX;
    uint32_t i;
    for (i = 0; i < w->ids.cap; i++) {
        const wd_entry *e = w->ids.vals[i];
        if (w->ids.keys[i] != 0 && e->state == WD_HELD && e->pid == w->pid && e->lease_end < t)
            t = e->lease_end;
    }
    return t;
}

/* A redirect or a refused master asked for it: the topology is looked up
 * again. Sentinel and Cluster: by the topology's own thread, while the
 * renewals go on (we are woken when it publishes). Otherwise (no such
 * thread could start; a single node or Redlock's masters, which need no
 * network), here, without the mutex, by the earliest of the connect
 * timeout and the first lease end, so that a slow node never delays a
 * loss report past it. */
static void wd_refresh(wd *w, int64_t now) {
    uint64_t seen = w->snap ? w->snap->epoch : 0;
    int64_t end = wd_earliest_end(w), until = now + (w->cfg.connect_timeout_ms > 0 ? w->cfg.connect_timeout_ms : 2000);
    char err[CONN_ERRSTR_LEN];
    const char *kind;
    if (end < until) until = end;
    w->want_refresh = 0;
    if (w->t->mode == TOPO_SENTINEL && topo_following(w->t)) {
        /* the topology's thread asks the sentinels; we are woken when it
         * knows (never blocked here meanwhile: renewals go on) */
        topo_doubt(w->t, seen);
        return;
    }
    if (topo_load_async(w->t)) return;   /* Cluster: the same, for the map */
    if (until <= now) return;
    pthread_mutex_unlock(&w->mu);
    topo_refresh(w->t, seen, 0, until * 1000, err, sizeof err, &kind);
    pthread_mutex_lock(&w->mu);
}

/* What the links do with what they read (wd_sched.c). */
static const wd_appliers wd_apply = {wd_apply_step, wd_apply_answer};

static void *wd_main(void *arg) {
    wd *w = arg;
    struct pollfd *pfd = NULL;
    int npfd = 0;
    pthread_setname_np(pthread_self(), "redislock-wd");   /* (for top -H, ps -L, /proc/PID/task/TID/comm) */
    pthread_mutex_lock(&w->mu);
    while (!w->stopping) {
        int64_t now = monotime_ms(), next;
        int i, timeout;
        if (w->want_refresh) {
            wd_refresh(w, now);
            continue;
        }
        wd_links_sync(w, now);
        if (topo_confirms(w->t) != w->confirms_seen) {
            /* a doubt was lifted: renew what waited for it, now; but not
             * more than once per WD_RENEW_ALL_MS, should our renewals fail
             * on a master the sentinels confirm (each failure casts a doubt
             * that the next pass lifts) */
            w->confirms_seen = topo_confirms(w->t);
            if (now >= w->renew_all_after) {
                w->renew_all_after = now + WD_RENEW_ALL_MS;
                wd_renew_all_now(w, now);
            }
        }
        if (npfd < w->nlinks + 1) {
            struct pollfd *p = realloc(pfd, (size_t)(w->nlinks + 1) * sizeof *p);
            if (p == NULL) {
                /* cannot happen but for memory exhaustion: try again soon */
                struct timespec ts = {0, 10000000};
                pthread_mutex_unlock(&w->mu);
                nanosleep(&ts, NULL);
                pthread_mutex_lock(&w->mu);
                continue;
            }
            pfd = p;
            npfd = w->nlinks + 1;
        }
        wd_collect(w, now);
        for (i = 0; i < w->nlinks; i++) wd_link_pump(w, &w->links[i], now, &wd_apply);
        now = monotime_ms();
        for (i = 0; i < w->nlinks; i++) wd_link_expire(w, &w->links[i], now);
        if (w->want_refresh) continue;
        next = wd_next_wake(w);
        if (next <= now) continue;
        timeout = next == INT64_MAX ? -1 : (next - now > 86400000 ? 86400000 : (int)(next - now));
        pfd[0].fd = w->wake_fd;
        pfd[0].events = POLLIN;
        pfd[0].revents = 0;
        for (i = 0; i < w->nlinks; i++) {
            pfd[i + 1].fd = w->links[i].x->c->fd;
            pfd[i + 1].events = wd_link_events(&w->links[i]);
            pfd[i + 1].revents = 0;
        }
        {
            int n = w->nlinks;
            w->wake_at = next;
            pthread_mutex_unlock(&w->mu);
            if (poll(pfd, (nfds_t)n + 1, timeout) < 0 && errno != EINTR) {
                /* cannot happen with valid fds; do not spin on it */
                struct timespec ts = {0, 10000000};
                nanosleep(&ts, NULL);
            }
            pthread_mutex_lock(&w->mu);
            w->wake_at = 0;
            if (pfd[0].revents & POLLIN) {
                uint64_t counter;
                if (read(w->wake_fd, &counter, sizeof counter) < 0) { /* EAGAIN */ }
            }
            /* (the links may have changed meanwhile: match by fd) */
            for (i = 0; i < n && i < w->nlinks; i++)
                if (pfd[i + 1].fd == w->links[i].x->c->fd) w->links[i].revents = pfd[i + 1].revents;
        }
    }
    pthread_mutex_unlock(&w->mu);
    free(pfd);
    return NULL;
}

int wd_thread_start(wd *w, char *errbuf, size_t errlen) {
    sigset_t all, old;
    int rc;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    w->stopping = 0;
    w->wake_at = 0;  /* the new thread looks at the heap before it sleeps */
    rc = pthread_create(&w->thread, NULL, wd_main, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        snprintf(errbuf, errlen, "watchdog thread could not start: %s", strerror(rc));
        return -1;
    }
    w->running = 1;
    w->pid = proc_id();
    return 0;
}
