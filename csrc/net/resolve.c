/*
 * resolve.c: getaddrinfo on a thread, waited for against a deadline.
 *
 * The job is shared by the caller and the lookup thread and freed by
 * whichever lets go of it last (a reference count under the job's mutex), so
 * a caller that gave up never waits for, and never leaks, the lookup.
 */
#define _GNU_SOURCE
#include "net/resolve.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/deadline.h"

typedef struct resolve_job {
    pthread_mutex_t mu;
    pthread_cond_t done_cv;
    int refs;
    int done;
    int rc;                 /* getaddrinfo's result */
    int sys_errno;          /* its errno, for EAI_SYSTEM */
    char port[8];
    sock_addrs addrs;
    char host[];            /* a copy: the caller's string may be gone */
} resolve_job;

static void resolve_unref(resolve_job *j) {
    int last;
    pthread_mutex_lock(&j->mu);
    last = --j->refs == 0;
    pthread_mutex_unlock(&j->mu);
    if (!last) return;
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->done_cv);
    free(j);
}

static void *resolve_main(void *arg) {
    resolve_job *j = arg;
    struct addrinfo hints, *res = NULL, *ai;
    sock_addrs out;
    int rc, sys_errno = 0;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    memset(&out, 0, sizeof out);
    rc = getaddrinfo(j->host, j->port, &hints, &res);
    if (rc == EAI_SYSTEM) sys_errno = errno;
    if (rc == 0) {
        for (ai = res; ai && out.n < SOCK_MAX_ADDRS; ai = ai->ai_next) {
            if (ai->ai_addrlen > sizeof out.a[0].ss) continue;
            memcpy(&out.a[out.n].ss, ai->ai_addr, ai->ai_addrlen);
            out.a[out.n].len = ai->ai_addrlen;
            out.n++;
        }
        freeaddrinfo(res);
        if (out.n == 0) rc = EAI_NONAME;
    }
    pthread_mutex_lock(&j->mu);
    j->addrs = out;
    j->rc = rc;
    j->sys_errno = sys_errno;
    j->done = 1;
    pthread_cond_signal(&j->done_cv);
    pthread_mutex_unlock(&j->mu);
    resolve_unref(j);
    return NULL;
}

static resolve_job *resolve_job_new(const char *host, int port) {
    size_t len = strlen(host);
    pthread_condattr_t attr;
    resolve_job *j = calloc(1, sizeof *j + len + 1);
    if (j == NULL) return NULL;
    memcpy(j->host, host, len + 1);
    snprintf(j->port, sizeof j->port, "%d", port);
    j->refs = 2;
    pthread_mutex_init(&j->mu, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&j->done_cv, &attr);
    pthread_condattr_destroy(&attr);
    return j;
}

/* A detached thread with every signal blocked: signals are the host's. */
static int resolve_spawn(resolve_job *j) {
    pthread_attr_t attr;
    pthread_t t;
    sigset_t all, old;
    int rc;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    /* getaddrinfo needs far less than the default 8 MB of address space */
    pthread_attr_setstacksize(&attr, 256 * 1024);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&t, &attr, resolve_main, j);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    return rc;
}

int resolve_host(const char *host, int port, int64_t deadline, sock_addrs *out,
                 char *err, size_t errlen) {
    resolve_job *j;
    int rc, done, sys_errno;
    if (sock_numeric(host, port, out)) return 0;
    j = resolve_job_new(host, port);
    if (j == NULL) {
        snprintf(err, errlen, "cannot resolve %.80s: out of memory", host);
        return -1;
    }
    rc = resolve_spawn(j);
    if (rc != 0) {
        free(j);
        snprintf(err, errlen, "cannot resolve %.80s: no thread (%s)", host, strerror(rc));
        return -1;
    }
    pthread_mutex_lock(&j->mu);
    while (!j->done) {
        struct timespec ts;
        if (deadline == DEADLINE_NONE) {
            pthread_cond_wait(&j->done_cv, &j->mu);
            continue;
        }
        if (deadline_passed(deadline)) break;
        ts.tv_sec = (time_t)(deadline / 1000000);
        ts.tv_nsec = (long)(deadline % 1000000) * 1000;
        pthread_cond_timedwait(&j->done_cv, &j->mu, &ts);
    }
    done = j->done;
    rc = j->rc;
    sys_errno = j->sys_errno;
    if (done && rc == 0) *out = j->addrs;
    pthread_mutex_unlock(&j->mu);
    resolve_unref(j);
    if (!done) {
        snprintf(err, errlen, "resolving %.80s timed out", host);
        return -1;
    }
    if (rc != 0) {
        snprintf(err, errlen, "cannot resolve %.80s: %s", host,
                 rc == EAI_SYSTEM ? strerror(sys_errno) : gai_strerror(rc));
        return -1;
    }
    return 0;
}
