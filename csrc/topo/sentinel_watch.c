/*
 * sentinel_watch.c: the follower thread of a Sentinel topology (see
 * sentinel_watch.h).
 */
#define _GNU_SOURCE
#include "sentinel_watch.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "deadline.h"
#include "monotime.h"
#include "proc_id.h"
#include "sentinel.h"

#define SW_INTERVAL_MS 1000     /* ask the sentinels at least this often */
#define SW_DOUBT_MS 100         /* ... and this often while in doubt */
#define SW_RESUBSCRIBE_MS 1000  /* a sentinel we could not subscribe to */
#define SW_SUB_TRY_MS 500       /* one subscribe exchange, at most */

/* The events of a failover, from its start to its end. Any of them makes
 * the thread ask at once; which one does not matter. */
static const char *sw_channels[] = {
    "SUBSCRIBE", "+try-failover", "+failover-state-send-slaveof-noone", "+promoted-slave",
    "+switch-master", "+failover-end", "-failover-abort-not-elected", "+odown"};
#define SW_NCHANNELS ((int)(sizeof sw_channels / sizeof *sw_channels) - 1)

struct sentinel_watch {
    topo_src src;           /* borrowed: the topology stops us before it goes */
    sentinel_watch_owner owner;
    pthread_t thread;
    pid_t pid;              /* the process the thread runs in */
    int wake_fd;            /* eventfd: a kick, or the stop */
    int stopping;           /* atomic */
    int nsubs;
    conn **subs;            /* per seed: its subscribed connection, or NULL */
    int64_t *retry_at;      /* per seed: when to try subscribing again (ms) */
    sentinel_pool *pool;    /* the passes' connections */
};

/* Subscribes to the failover events on seed i, within SW_SUB_TRY_MS. */
static void sw_subscribe_one(sentinel_watch *sw, int i, int64_t now) {
    const topo_src *src = &sw->src;
    topo_node s;
    conn_config cfg;
    conn *c = sw->subs[i];
    size_t lens[SW_NCHANNELS + 1];
    int64_t deadline;
    int k;
    sw->retry_at[i] = now + SW_RESUBSCRIBE_MS;
    if (c == NULL) {
        pthread_mutex_lock(src->mu);
        s = src->seeds[i];   /* shallow: seeds live as long as the topology */
        pthread_mutex_unlock(src->mu);
        if (s.addrs.n == 0) return;   /* not resolved yet (the thread may not) */
        memset(&cfg, 0, sizeof cfg);
        cfg.host = s.host;
        cfg.port = s.port;
        cfg.username = (char *)src->sentinel_user;
        cfg.password = (char *)src->sentinel_pass;
        cfg.tls = src->sentinel_tls;
        cfg.connect_timeout_ms = SW_SUB_TRY_MS;
        cfg.timeout_ms = SW_SUB_TRY_MS;
        c = conn_new(&cfg);
        if (c == NULL) return;
        c->may_resolve = 0;
        conn_set_addrs(c, &s.addrs);
        sw->subs[i] = c;
    }
    for (k = 0; k <= SW_NCHANNELS; k++) lens[k] = strlen(sw_channels[k]);
    if (conn_ensure(c) != 0 || conn_append(c, SW_NCHANNELS + 1, sw_channels, lens) != 0) {
        conn_drop(c);
        return;
    }
    deadline = deadline_in_ms(SW_SUB_TRY_MS);
    for (k = 0; k < SW_NCHANNELS; k++) {
        redisReply *r = conn_read(c, deadline);
        int ok = r && r->type == REDIS_REPLY_ARRAY;
        if (r) freeReplyObject(r);
        if (!ok) {
            conn_drop(c);
            return;
        }
    }
}

/* Reads what a subscribed connection has: 1 a message came (ask now), 0
 * nothing, -1 it failed (dropped; subscribe again later). */
static int sw_drain(conn *c) {
    int k, got = 0;
    while ((k = conn_fill(c)) == 1) {}
    for (;;) {
        redisReply *r = NULL;
        int n = conn_reply(c, &r);
        if (n <= 0) {
            if (n < 0 || k < 0) {
                conn_drop(c);
                return -1;
            }
            return got;
        }
        freeReplyObject(r);
        got = 1;
    }
}

/* Whether the owner asked the thread to end (the flag is read and written
 * only here and in sw_stop_flag: atomics, which helgrind cannot see, and
 * tools/helgrind.supp names these two functions). */
static __attribute__((noinline)) int sw_stopping(sentinel_watch *sw) {
    return __atomic_load_n(&sw->stopping, __ATOMIC_ACQUIRE);
}

static __attribute__((noinline)) void sw_stop_flag(sentinel_watch *sw) {
    __atomic_store_n(&sw->stopping, 1, __ATOMIC_RELEASE);
}

static void *sw_main(void *arg) {
    sentinel_watch *sw = arg;
    const sentinel_watch_owner *o = &sw->owner;
    struct pollfd *pfd = calloc((size_t)sw->nsubs + 1, sizeof *pfd);
    int *which = calloc((size_t)sw->nsubs + 1, sizeof *which);
    int64_t next = monotime_ms() + SW_INTERVAL_MS;
    int ask = o->epoch(o->ud) == 0 || !o->confirmed(o->ud);   /* (nginx: nothing loaded yet) */
    if (pfd == NULL || which == NULL) {
        free(pfd);
        free(which);
        return NULL;
    }
    while (!sw_stopping(sw)) {
        int64_t now = monotime_ms();
        int i, n = 0, timeout;
        for (i = 0; i < sw->nsubs; i++)
            if ((sw->subs[i] == NULL || sw->subs[i]->fd < 0) && now >= sw->retry_at[i]) {
                sw_subscribe_one(sw, i, now);
                now = monotime_ms();
            }
        if (ask || now >= next) {
            ask = 0;
            o->recheck(o->ud, sw->pool);
            now = monotime_ms();
            next = now + (o->confirmed(o->ud) ? SW_INTERVAL_MS : SW_DOUBT_MS);
        }
        pfd[n].fd = sw->wake_fd;
        pfd[n].events = POLLIN;
        pfd[n++].revents = 0;
        for (i = 0; i < sw->nsubs; i++)
            if (sw->subs[i] && sw->subs[i]->fd >= 0) {
                which[n] = i;
                pfd[n].fd = sw->subs[i]->fd;
                pfd[n].events = POLLIN;
                pfd[n++].revents = 0;
            }
        timeout = next > now ? (int)(next - now) : 0;
        if (poll(pfd, (nfds_t)n, timeout) < 0 && errno != EINTR) {
            struct timespec ts = {0, 10000000};   /* cannot happen with valid fds */
            nanosleep(&ts, NULL);
        }
        if (pfd[0].revents & POLLIN) {
            uint64_t counter;
            if (read(sw->wake_fd, &counter, sizeof counter) > 0) ask = 1;
        }
        for (i = 1; i < n; i++)
            if (pfd[i].revents && sw_drain(sw->subs[which[i]]) != 0) ask = 1;
    }
    free(pfd);
    free(which);
    return NULL;
}

static void sw_free(sentinel_watch *sw) {
    int i;
    for (i = 0; i < sw->nsubs; i++) conn_free(sw->subs[i]);
    free(sw->subs);
    free(sw->retry_at);
    sentinel_pool_free(sw->pool);
    if (sw->wake_fd >= 0) close(sw->wake_fd);
    free(sw);
}

sentinel_watch *sentinel_watch_start(const topo_src *src, const sentinel_watch_owner *owner) {
    sentinel_watch *sw = calloc(1, sizeof *sw);
    sigset_t all, old;
    int rc;
    if (sw == NULL) return NULL;
    sw->src = *src;
    sw->owner = *owner;
    sw->nsubs = src->nseeds;
    sw->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    sw->subs = calloc((size_t)(sw->nsubs > 0 ? sw->nsubs : 1), sizeof *sw->subs);
    sw->retry_at = calloc((size_t)(sw->nsubs > 0 ? sw->nsubs : 1), sizeof *sw->retry_at);
    sw->pool = sentinel_pool_new(sw->nsubs);
    if (sw->wake_fd < 0 || sw->subs == NULL || sw->retry_at == NULL || sw->pool == NULL) {
        sw_free(sw);
        return NULL;
    }
    sw->pid = proc_id();
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&sw->thread, NULL, sw_main, sw);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        sw_free(sw);
        return NULL;
    }
    return sw;
}

int sentinel_watch_ours(const sentinel_watch *sw) {
    return sw->pid == proc_id();
}

void sentinel_watch_kick(sentinel_watch *sw) {
    uint64_t one = 1;
    if (write(sw->wake_fd, &one, sizeof one) < 0) {
        /* saturated: it is being woken anyway */
    }
}

void sentinel_watch_stop(sentinel_watch *sw) {
    if (!sentinel_watch_ours(sw)) {
        sentinel_watch_abandon(sw);
        return;
    }
    sw_stop_flag(sw);
    sentinel_watch_kick(sw);
    pthread_join(sw->thread, NULL);
    sw_free(sw);
}

void sentinel_watch_abandon(sentinel_watch *sw) {
    sw_free(sw);
}
