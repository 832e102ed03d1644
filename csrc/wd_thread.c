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
#include "wd_internal.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "monotime.h"

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

static void *wd_main(void *arg) {
    wd *w = arg;
    struct pollfd *pfd;
    pthread_mutex_lock(&w->mu);
    /* links are fixed for a watchdog's life: sized once */
    pfd = calloc((size_t)w->nlinks + 1, sizeof *pfd);
    while (pfd != NULL && !w->stopping) {
        int64_t now = monotime_ms(), next;
        int i, timeout;
        wd_collect(w, now);
        for (i = 0; i < w->nlinks; i++) wd_link_pump(w, &w->links[i], now);
        now = monotime_ms();
        for (i = 0; i < w->nlinks; i++) wd_link_expire(w, &w->links[i], now);
        next = wd_next_wake(w);
        if (next <= now) continue;
        timeout = next == INT64_MAX ? -1 : (next - now > 86400000 ? 86400000 : (int)(next - now));
        pfd[0].fd = w->wake_fd;
        pfd[0].events = POLLIN;
        for (i = 0; i < w->nlinks; i++) {
            pfd[i + 1].fd = w->links[i].c->fd;
            pfd[i + 1].events = wd_link_events(&w->links[i]);
            pfd[i + 1].revents = 0;
        }
        w->wake_at = next;
        pthread_mutex_unlock(&w->mu);
        if (poll(pfd, (nfds_t)w->nlinks + 1, timeout) < 0 && errno != EINTR) {
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
        for (i = 0; i < w->nlinks; i++)
            if (pfd[i + 1].fd == w->links[i].c->fd) w->links[i].revents = pfd[i + 1].revents;
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
    w->pid = getpid();
    return 0;
}
