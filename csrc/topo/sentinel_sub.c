/*
 * sentinel_sub.c: a master's failover events on every sentinel (see
 * sentinel_sub.h).
 */
#define _GNU_SOURCE
#include "topo/sentinel_sub.h"

#include <stdlib.h>
#include <string.h>

#include "topo/sentinel.h"

#define SW_RESUBSCRIBE_MS 1000  /* a sentinel we could not subscribe to */
#define SW_SUB_TRY_MS 500       /* a subscription's connect and confirmation, at most */

/* The events of a failover, from its start to its end. Any of them makes
 * the thread ask at once; which one does not matter. */
static const char *sw_channels[] = {
    "SUBSCRIBE", "+try-failover", "+failover-state-send-slaveof-noone", "+promoted-slave",
    "+switch-master", "+failover-end", "-failover-abort-not-elected", "+odown"};
#define SW_NCHANNELS ((int)(sizeof sw_channels / sizeof *sw_channels) - 1)

struct sentinel_subs {
    topo_src src;           /* borrowed: the topology frees us before it goes */
    int nsubs;
    conn **subs;            /* per seed: its subscribed connection, or NULL */
    int64_t *retry_at;      /* per seed: when to try subscribing again (ms) */
    int64_t *sub_since;     /* per seed: when its subscription began (ms) */
    int *confirmed_subs;    /* per seed: channels it confirmed */
};

/* Starts subscribing to the failover events on seed i, without blocking:
 * the connection's connect, its handshake and the SUBSCRIBE are moved on
 * by sw_pump as poll says, and given up after SW_SUB_TRY_MS (a sentinel
 * that is hung, not dead, accepts the TCP connection and never answers:
 * it must cost the thread nothing). */
static void sw_subscribe_one(sentinel_subs *sw, int i, int64_t now) {
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
static int sw_word_is_master(const sentinel_subs *sw, const redisReply *text, int n) {
    size_t wl, ml = strlen(sw->src.master);
    const char *w = sw_word(text->str, text->len, n, &wl);
    return w && wl == ml && memcmp(w, sw->src.master, ml) == 0;
}

/* Whether an event's text is about our master. Sentinel writes an
 * instance as "<type> <name> <ip> <port>", followed by " @ <master> <ip>
 * <port>" when it is not a master; +switch-master as "<master> <old ip>
 * <old port> <new ip> <new port>". A sentinel watching several masters
 * tells of all of them: the others' are no doubt about ours. */
static int sw_about_us(const sentinel_subs *sw, const redisReply *channel, const redisReply *text) {
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
static int sw_pump(sentinel_subs *sw, int i, short rev) {
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
static void sw_expire(sentinel_subs *sw, int64_t now) {
    int i;
    for (i = 0; i < sw->nsubs; i++) {
        conn *c = sw->subs[i];
        if (c && c->fd >= 0 && sw->confirmed_subs[i] < SW_NCHANNELS && now - sw->sub_since[i] >= SW_SUB_TRY_MS)
            conn_drop(c);
    }
}

int64_t sentinel_subs_tick(sentinel_subs *sw, int64_t now) {
    int64_t next = INT64_MAX;
    int i;
    for (i = 0; i < sw->nsubs; i++)
        if ((sw->subs[i] == NULL || sw->subs[i]->fd < 0) && now >= sw->retry_at[i]) sw_subscribe_one(sw, i, now);
    sw_expire(sw, now);
    for (i = 0; i < sw->nsubs; i++) {
        conn *c = sw->subs[i];
        int64_t at = c && c->fd >= 0 ? (sw->confirmed_subs[i] < SW_NCHANNELS ? sw->sub_since[i] + SW_SUB_TRY_MS
                                                                           : INT64_MAX)
                                     : sw->retry_at[i];
        if (at < next) next = at;
    }
    return next;
}

int sentinel_subs_poll_fds(const sentinel_subs *sw, struct pollfd *pfd, int max) {
    int i, n = 0;
    for (i = 0; i < sw->nsubs && n < max; i++)
        if (sw->subs[i] && sw->subs[i]->fd >= 0) {
            pfd[n].fd = sw->subs[i]->fd;
            pfd[n].events = conn_poll_events(sw->subs[i]);
            pfd[n++].revents = 0;
        }
    return n;
}

int sentinel_subs_read(sentinel_subs *sw, const struct pollfd *pfd, int n) {
    int i, k, got = 0;
    for (k = 0; k < n; k++) {
        if (!pfd[k].revents) continue;
        for (i = 0; i < sw->nsubs; i++) {
            int r;
            if (sw->subs[i] == NULL || sw->subs[i]->fd != pfd[k].fd) continue;
            r = sw_pump(sw, i, pfd[k].revents);
            if (r < 0) conn_drop(sw->subs[i]);
            else if (r > 0) got = 1;
            break;
        }
    }
    return got;
}

void sentinel_subs_free(sentinel_subs *sw) {
    int i;
    if (sw == NULL) return;
    for (i = 0; i < sw->nsubs; i++) conn_free(sw->subs[i]);
    free(sw->subs);
    free(sw->retry_at);
    free(sw->sub_since);
    free(sw->confirmed_subs);
    free(sw);
}

sentinel_subs *sentinel_subs_new(const topo_src *src) {
    sentinel_subs *sw = calloc(1, sizeof *sw);
    size_t n;
    if (sw == NULL) return NULL;
    sw->src = *src;
    sw->nsubs = src->nseeds;
    n = (size_t)(sw->nsubs > 0 ? sw->nsubs : 1);
    sw->subs = calloc(n, sizeof *sw->subs);
    sw->retry_at = calloc(n, sizeof *sw->retry_at);
    sw->sub_since = calloc(n, sizeof *sw->sub_since);
    sw->confirmed_subs = calloc(n, sizeof *sw->confirmed_subs);
    if (sw->subs == NULL || sw->retry_at == NULL || sw->sub_since == NULL || sw->confirmed_subs == NULL) {
        sentinel_subs_free(sw);
        return NULL;
    }
    return sw;
}
