/*
 * sentinel_watch.c: the follower thread of a Sentinel topology (see
 * sentinel_watch.h).
 */
#define _GNU_SOURCE
#include "topo/sentinel_watch.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/deadline.h"
#include "base/monotime.h"
#include "base/proc_id.h"
#include "topo/sentinel.h"

#define SW_INTERVAL_MS 1000     /* ask the sentinels at least this often */
#define SW_DOUBT_MS 100         /* ... and this often while in doubt */
#define SW_RESUBSCRIBE_MS 1000  /* a sentinel we could not subscribe to */
#define SW_SUB_TRY_MS 500       /* a subscription's connect and confirmation, at most */

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
    int64_t *sub_since;     /* per seed: when its subscription began (ms) */
    int *confirmed_subs;    /* per seed: channels it confirmed */
    sentinel_pool *pool;    /* the passes' connections */
};

/* Starts subscribing to the failover events on seed i, without blocking:
 * the connection's connect, its handshake and the SUBSCRIBE are moved on
 * by sw_pump as poll says, and given up after SW_SUB_TRY_MS (a sentinel
 * that is hung, not dead, accepts the TCP connection and never answers:
 * it must cost the thread nothing). */
static void sw_subscribe_one(sentinel_watch *sw, int i, int64_t now) {
    const topo_src *src = &sw->src;
    topo_node s;
    conn *c = sw->subs[i];
    size_t lens[SW_NCHANNELS + 1];
    int k;
    sw->retry_at[i] = now + SW_RESUBSCRIBE_MS;
    if (c == NULL) {
        pthread_mutex_lock(src->mu);
        s = src->seeds[i];   /* shallow: seeds live as long as the topology */
        pthread_mutex_unlock(src->mu);
        if (s.addrs.n == 0) return;   /* not resolved yet (the thread may not) */
        c = sentinel_seed_conn(src, &s, SW_SUB_TRY_MS);
        if (c == NULL) return;
        sw->subs[i] = c;
    }
    for (k = 0; k <= SW_NCHANNELS; k++) lens[k] = strlen(sw_channels[k]);
    sw->sub_since[i] = now;
    sw->confirmed_subs[i] = 0;
    if (conn_start(c) < 0 || conn_append(c, SW_NCHANNELS + 1, sw_channels, lens) != 0 ||
        (!conn_connecting(c) && conn_flush_some(c) < 0))
        conn_drop(c);
}

/* The word `n` (from 0) of text[0..len), or NULL; *wlen its length. */
static const char *sw_word(const char *text, size_t len, int n, size_t *wlen) {
    size_t i = 0;
    for (;;) {
        size_t from;
        while (i < len && text[i] == ' ') i++;
        if (i == len) return NULL;
        from = i;
        while (i < len && text[i] != ' ') i++;
        if (n-- == 0) {
            *wlen = i - from;
            return text + from;
        }
    }
}

/* Whether word n of an event's text is our master's name. */
static int sw_word_is_master(const sentinel_watch *sw, const redisReply *text, int n) {
    size_t wl, ml = strlen(sw->src.master);
    const char *w = sw_word(text->str, text->len, n, &wl);
    return w && wl == ml && memcmp(w, sw->src.master, ml) == 0;
}

/* Whether an event's text is about our master. Sentinel writes an
 * instance as "<type> <name> <ip> <port>", followed by " @ <master> <ip>
 * <port>" when it is not a master; +switch-master as "<master> <old ip>
 * <old port> <new ip> <new port>". A sentinel watching several masters
 * tells of all of them: the others' are no doubt about ours. */
static int sw_about_us(const sentinel_watch *sw, const redisReply *channel, const redisReply *text) {
    const char *w;
    size_t wl;
    int i;
    if (text->type != REDIS_REPLY_STRING) return 1;   /* (cannot tell: count it) */
    if (channel->type == REDIS_REPLY_STRING && channel->len == 14 && memcmp(channel->str, "+switch-master", 14) == 0)
        return sw_word_is_master(sw, text, 0);
    w = sw_word(text->str, text->len, 0, &wl);
    if (w && wl == 6 && memcmp(w, "master", 6) == 0) return sw_word_is_master(sw, text, 1);
    for (i = 0; (w = sw_word(text->str, text->len, i, &wl)) != NULL; i++)
        if (wl == 1 && *w == '@') return sw_word_is_master(sw, text, i + 1);
    return 1;
}

/* Moves subscription i on after poll said rev, and reads what came: 1 an
 * event of our master's failover (a doubt: ask now), 0 nothing of note,
 * -1 it failed (the caller drops it; subscribed again later). */
static int sw_pump(sentinel_watch *sw, int i, short rev) {
    conn *c = sw->subs[i];
    int k, got = 0;
    if (c->connecting) {
        if (!(rev & (POLLOUT | POLLERR | POLLHUP))) return 0;
        if (conn_connect_done(c) != 0) return -1;
    }
    if (rev & (POLLIN | POLLERR | POLLHUP)) {
        while ((k = conn_fill(c)) == 1) {}
        if (k < 0) return -1;
    }
    for (;;) {
        redisReply *r = NULL;
        const redisReply *kind;
        int n = conn_reply(c, &r);
        if (n < 0) return -1;
        if (n == 0) break;
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 || r->element[0]->type != REDIS_REPLY_STRING) {
            freeReplyObject(r);   /* (not what a subscriber gets) */
            return -1;
        }
        kind = r->element[0];
        if (kind->len == 9 && memcmp(kind->str, "subscribe", 9) == 0)
            sw->confirmed_subs[i]++;
        else if (kind->len == 7 && memcmp(kind->str, "message", 7) == 0 &&
                 sw_about_us(sw, r->element[1], r->element[2]))
            got = 1;
        freeReplyObject(r);
    }
    if (c->fd >= 0 && conn_flush_some(c) < 0) return -1;
    return got;
}

/* A subscription still not confirmed SW_SUB_TRY_MS after it began (a hung
 * sentinel) is given up: subscribed again later. */
static void sw_expire(sentinel_watch *sw, int64_t now) {
    int i;
    for (i = 0; i < sw->nsubs; i++) {
        conn *c = sw->subs[i];
        if (c && c->fd >= 0 && sw->confirmed_subs[i] < SW_NCHANNELS && now - sw->sub_since[i] >= SW_SUB_TRY_MS)
            conn_drop(c);
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
    pthread_setname_np(pthread_self(), "redislock-sen");   /* (for top -H, ps -L) */
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
        sw_expire(sw, now);
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
                pfd[n].events = conn_poll_events(sw->subs[i]);
                pfd[n++].revents = 0;
                if (sw->confirmed_subs[i] < SW_NCHANNELS && sw->sub_since[i] + SW_SUB_TRY_MS < next)
                    next = sw->sub_since[i] + SW_SUB_TRY_MS;   /* (sw_expire's moment) */
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
        for (i = 1; i < n; i++) {
            int got;
            if (!pfd[i].revents) continue;
            got = sw_pump(sw, which[i], pfd[i].revents);
            if (got < 0) {
                conn_drop(sw->subs[which[i]]);
            } else if (got > 0) {
                /* a failover of ours begins, or goes on: nothing is renewed
                 * or granted until a pass confirms a master again */
                o->doubt(o->ud);
                ask = 1;
            }
        }
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
    free(sw->sub_since);
    free(sw->confirmed_subs);
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
    sw->sub_since = calloc((size_t)(sw->nsubs > 0 ? sw->nsubs : 1), sizeof *sw->sub_since);
    sw->confirmed_subs = calloc((size_t)(sw->nsubs > 0 ? sw->nsubs : 1), sizeof *sw->confirmed_subs);
    sw->pool = sentinel_pool_new(sw->nsubs);
    if (sw->wake_fd < 0 || sw->subs == NULL || sw->retry_at == NULL || sw->sub_since == NULL ||
        sw->confirmed_subs == NULL || sw->pool == NULL) {
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
