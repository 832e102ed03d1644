/*
 * sentinel.c: the master's address from the sentinels (see sentinel.h).
 */
#define _GNU_SOURCE
#include "sentinel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "deadline.h"
#include "monotime.h"

#define SENTINEL_TRY_MS 1000     /* each sentinel gets at most this long */
#define SENTINEL_PAUSE_MS 100    /* before asking again when ROLE disagrees */

/* A blocking conn to node n with the given credentials, budgeted to end by
 * deadline (and by max_ms from now). NULL with err. */
static conn *sentinel_conn(const topo *t, topo_node *n, const char *user, const char *pass, int db,
                           int may_resolve, int64_t deadline, long max_ms, char *err, size_t errlen) {
    conn_config cfg;
    conn *c;
    long left_ms = (long)((deadline - monotime_us()) / 1000);
    if (left_ms > max_ms) left_ms = max_ms;
    if (left_ms < 1) left_ms = 1;
    if (topo_node_resolve(n, may_resolve, deadline, err, errlen) != 0) return NULL;
    memset(&cfg, 0, sizeof cfg);
    cfg.host = n->host;
    cfg.port = n->port;
    cfg.username = (char *)user;
    cfg.password = (char *)pass;
    cfg.db = db;
    cfg.connect_timeout_ms = left_ms;
    cfg.timeout_ms = left_ms;
    (void)t;
    c = conn_new(&cfg);
    if (c == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->may_resolve = 0;
    conn_set_addrs(c, &n->addrs);
    return c;
}

/* ROLE on the named master: 1 master, 0 something else, -1 unreachable. */
static int sentinel_confirm(const topo *t, topo_node *master, int64_t deadline, char *err, size_t errlen) {
    const char *argv[1] = {"ROLE"};
    size_t lens[1] = {4};
    redisReply *r;
    int rc = -1;
    conn *c = sentinel_conn(t, master, t->cfg.username, t->cfg.password, 0, 0, deadline,
                            t->cfg.connect_timeout_ms > 0 ? t->cfg.connect_timeout_ms : SENTINEL_TRY_MS,
                            err, errlen);
    if (c == NULL) return -1;
    r = conn_command(c, 1, argv, lens);
    if (r == NULL) {
        snprintf(err, errlen, "%s", c->errstr);
    } else if (r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
               r->element[0]->type == REDIS_REPLY_STRING) {
        rc = r->element[0]->len == 6 && memcmp(r->element[0]->str, "master", 6) == 0;
        if (!rc) snprintf(err, errlen, "it says it is a %.*s", (int)(r->element[0]->len > 20 ? 20 : r->element[0]->len),
                          r->element[0]->str);
    } else if (r->type == REDIS_REPLY_ERROR) {
        snprintf(err, errlen, "redis error: %.*s", (int)(r->len > 120 ? 120 : r->len), r->str);
    } else {
        snprintf(err, errlen, "unexpected ROLE reply");
    }
    if (r) freeReplyObject(r);
    conn_free(c);
    return rc;
}

/* Moves seed i to the front: the one that answered is asked first next time. */
static void sentinel_promote(topo *t, int i) {
    pthread_mutex_lock(&t->mu);
    if (i > 0 && i < t->nseeds) {
        topo_node first = t->seeds[i];
        memmove(&t->seeds[1], &t->seeds[0], (size_t)i * sizeof *t->seeds);
        t->seeds[0] = first;
    }
    pthread_mutex_unlock(&t->mu);
}

static void sentinel_sleep_ms(long ms) {
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000L;
    nanosleep(&ts, NULL);
}

int sentinel_load(topo *t, int may_resolve, int64_t deadline, topo_snap **out,
                  char *err, size_t errlen, const char **kind) {
    const char *argv[3] = {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", t->master};
    size_t lens[3] = {8, 23, strlen(t->master)};
    char last[CONN_ERRSTR_LEN] = "no sentinel given";
    char where[160];
    int answered = 0, unknown = 0, ever_answered = 0;
    for (;;) {
        int i, n;
        pthread_mutex_lock(&t->mu);
        n = t->nseeds;
        pthread_mutex_unlock(&t->mu);
        for (i = 0; i < n; i++) {
            topo_node s;
            conn *c;
            redisReply *r;
            topo_snap *snap;
            int confirmed;
            pthread_mutex_lock(&t->mu);
            s = t->seeds[i];                 /* a shallow copy: seeds live as long as t */
            pthread_mutex_unlock(&t->mu);
            if (deadline_passed(deadline)) break;
            c = sentinel_conn(t, &s, t->sentinel_user, t->sentinel_pass, 0, may_resolve, deadline,
                              SENTINEL_TRY_MS, last, sizeof last);
            if (c == NULL) continue;
            pthread_mutex_lock(&t->mu);
            if (t->seeds[i].addrs.n == 0) t->seeds[i].addrs = s.addrs;   /* resolved now */
            pthread_mutex_unlock(&t->mu);
            r = conn_command(c, 3, argv, lens);
            if (r == NULL) {
                topo_node_describe(&s, where, sizeof where);
                snprintf(last, sizeof last, "%.140s", c->errstr);
                conn_free(c);
                continue;
            }
            conn_free(c);
            answered++;
            ever_answered = 1;
            if (r->type == REDIS_REPLY_ERROR) {
                snprintf(last, sizeof last, "redis error: %.*s", (int)(r->len > 120 ? 120 : r->len), r->str);
                freeReplyObject(r);
                continue;
            }
            if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
                r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING) {
                unknown++;                   /* a nil reply: no such master */
                freeReplyObject(r);
                continue;
            }
            sentinel_promote(t, i);
            snap = topo_snap_new(1, 0);
            if (snap == NULL) {
                freeReplyObject(r);
                snprintf(err, errlen, "out of memory");
                *kind = "memory";
                return -1;
            }
            snap->nodes[0].host = strndup(r->element[0]->str, r->element[0]->len);
            snap->nodes[0].port = atoi(r->element[1]->str);
            freeReplyObject(r);
            if (snap->nodes[0].host == NULL) {
                topo_snap_free(snap);
                snprintf(err, errlen, "out of memory");
                *kind = "memory";
                return -1;
            }
            confirmed = sentinel_confirm(t, &snap->nodes[0], deadline, last, sizeof last);
            if (confirmed == 1) {
                *out = snap;
                return 0;
            }
            topo_node_describe(&snap->nodes[0], where, sizeof where);
            {
                char why[CONN_ERRSTR_LEN];
                snprintf(why, sizeof why, "%s", last);
                snprintf(last, sizeof last, "master not confirmed at %.60s: %.100s", where, why);
            }
            topo_snap_free(snap);
            break;   /* the sentinels are behind the failover: ask again after a pause */
        }
        if (deadline_passed(deadline)) break;
        if (answered == 0 && unknown == 0) break;            /* nobody there */
        if (answered > 0 && unknown == answered) break;     /* all say: no such name */
        {
            long left = (long)((deadline - monotime_us()) / 1000);
            if (left <= 0) break;
            sentinel_sleep_ms(left < SENTINEL_PAUSE_MS ? left : SENTINEL_PAUSE_MS);
        }
        answered = unknown = 0;
    }
    if (answered > 0 && unknown == answered) {
        snprintf(err, errlen, "master name unknown: %.80s (the sentinels answered, none knows it)", t->master);
        *kind = "redis";
    } else if (!ever_answered) {
        snprintf(err, errlen, "no sentinel reachable (last: %.150s)", last);
        *kind = "connection";
    } else {
        snprintf(err, errlen, "%.190s", last);
        *kind = strstr(last, "timed out") ? "timeout" : "connection";
    }
    return -1;
}
