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
#define SENTINEL_PAUSE_MS 100    /* before asking again after a doubt */

/* What one sentinel says of the master. */
typedef struct sentinel_view {
    char host[128];
    int port;
    long long epoch;        /* config-epoch; -1 when it did not say */
    int failover;           /* it reports a failover in progress */
} sentinel_view;

/* How long one exchange with a sentinel or the master may take. */
static long sentinel_try_ms(const topo_src *src) {
    long ms = src->cfg->connect_timeout_ms;
    return ms > 0 && ms < SENTINEL_TRY_MS ? ms : SENTINEL_TRY_MS;
}

struct sentinel_pool {
    int n;
    conn **seeds;           /* per seed, or NULL */
    conn *role;             /* to the last master asked ROLE */
    topo_node role_node;
};

sentinel_pool *sentinel_pool_new(int nseeds) {
    sentinel_pool *p = calloc(1, sizeof *p);
    if (p == NULL) return NULL;
    p->n = nseeds;
    p->seeds = calloc((size_t)(nseeds > 0 ? nseeds : 1), sizeof *p->seeds);
    if (p->seeds == NULL) {
        free(p);
        return NULL;
    }
    return p;
}

void sentinel_pool_free(sentinel_pool *p) {
    int i;
    if (p == NULL) return;
    for (i = 0; i < p->n; i++) conn_free(p->seeds[i]);
    free(p->seeds);
    conn_free(p->role);
    topo_node_clear(&p->role_node);
    free(p);
}

/* Gives back a conn from sentinel_conn: kept in its pool slot, else freed. */
static void sentinel_done(conn *c, conn **slot) {
    if (slot == NULL) conn_free(c);
}

/* A blocking conn to node n with the given credentials and TLS settings,
 * budgeted to end by deadline (and by max_ms from now): the one in *slot when there is one (a
 * pool's), else a new one (kept in *slot when slot is given). NULL with err. */
static conn *sentinel_conn(topo_node *n, const char *user, const char *pass, tls_ctx *tls, int may_resolve,
                           int64_t deadline, long max_ms, conn **slot, char *err, size_t errlen) {
    conn_config cfg;
    conn *c;
    long left_ms = (long)((deadline - monotime_us()) / 1000);
    if (left_ms > max_ms) left_ms = max_ms;
    if (left_ms < 1) left_ms = 1;
    if (slot && *slot) {
        /* (resolved even for a pooled conn: n may be a new snapshot's node,
         * whose addresses the watchdog thread, which never resolves, uses) */
        if (topo_node_resolve(n, may_resolve, deadline, err, errlen) != 0) return NULL;
        conn_set_timeouts(*slot, left_ms, left_ms);
        return *slot;
    }
    memset(&cfg, 0, sizeof cfg);
    cfg.username = (char *)user;
    cfg.password = (char *)pass;
    cfg.tls = tls;
    c = topo_node_conn(n, &cfg, may_resolve, deadline, max_ms, err, errlen);
    if (c && slot) *slot = c;
    return c;
}

/* ROLE on the named master: 1 master, 0 something else, -1 unreachable. */
static int sentinel_confirm(const topo_src *src, sentinel_pool *pool, topo_node *master, int may_resolve,
                            int64_t deadline, char *err, size_t errlen) {
    const char *argv[1] = {"ROLE"};
    size_t lens[1] = {4};
    redisReply *r;
    int rc = -1;
    conn **slot = NULL, *c;
    if (pool) {
        if (pool->role && !topo_node_same(&pool->role_node, master)) {
            conn_free(pool->role);
            pool->role = NULL;
            topo_node_clear(&pool->role_node);
        }
        if (pool->role == NULL) {
            topo_node_clear(&pool->role_node);   /* (the last connect failed before a conn) */
            if (topo_node_dup(&pool->role_node, master) != 0) pool = NULL;
        }
        if (pool) slot = &pool->role;
    }
    c = sentinel_conn(master, src->cfg->username, src->cfg->password, src->cfg->tls, may_resolve, deadline,
                      sentinel_try_ms(src), slot,
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
    sentinel_done(c, slot);
    return rc;
}

static int sentinel_field_is(const redisReply *k, const char *name) {
    size_t n = strlen(name);
    return k->type == REDIS_REPLY_STRING && k->len == n && memcmp(k->str, name, n) == 0;
}

/* SENTINEL MASTER's flat list of fields into v. 0, or -1 when it lacks
 * the address. */
static int sentinel_parse_master(const redisReply *r, sentinel_view *v) {
    size_t i;
    int have_ip = 0, have_port = 0;
    for (i = 0; i + 1 < r->elements; i += 2) {
        const redisReply *k = r->element[i], *val = r->element[i + 1];
        if (val->type != REDIS_REPLY_STRING) continue;
        if (sentinel_field_is(k, "ip") && val->len > 0 && val->len < sizeof v->host) {
            memcpy(v->host, val->str, val->len);
            v->host[val->len] = '\0';
            have_ip = 1;
        } else if (sentinel_field_is(k, "port")) {
            v->port = atoi(val->str);
            have_port = v->port > 0 && v->port <= 65535;
        } else if (sentinel_field_is(k, "config-epoch")) {
            v->epoch = strtoll(val->str, NULL, 10);
        } else if (sentinel_field_is(k, "flags")) {
            v->failover = strstr(val->str, "failover_in_progress") != NULL;
        }
    }
    return have_ip && have_port ? 0 : -1;
}

/* GET-MASTER-ADDR-BY-NAME's [host, port] into v (no epoch). 0, or -1. */
static int sentinel_parse_addr(const redisReply *r, sentinel_view *v) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING ||
        r->element[0]->len == 0 || r->element[0]->len >= sizeof v->host)
        return -1;
    memcpy(v->host, r->element[0]->str, r->element[0]->len);
    v->host[r->element[0]->len] = '\0';
    v->port = atoi(r->element[1]->str);
    v->epoch = -1;
    return v->port > 0 && v->port <= 65535 ? 0 : -1;
}

enum { ASK_UNREACHABLE = -1, ASK_VIEW = 0, ASK_UNKNOWN = 1, ASK_ERROR = 2 };

/* Asks sentinel s what it knows of the master: ASK_VIEW with *v, ASK_UNKNOWN
 * (it knows no master by that name), ASK_ERROR (an error reply, in err) or
 * ASK_UNREACHABLE (err). */
static int sentinel_ask(const topo_src *src, topo_node *s, int may_resolve, int64_t deadline, conn **slot,
                        sentinel_view *v, char *err, size_t errlen) {
    const char *argv[3] = {"SENTINEL", "MASTER", src->master};
    size_t lens[3] = {8, 6, strlen(src->master)};
    redisReply *r;
    int rc;
    conn *c = sentinel_conn(s, src->sentinel_user, src->sentinel_pass, src->sentinel_tls, may_resolve, deadline,
                            sentinel_try_ms(src), slot, err, errlen);
    if (c == NULL) return ASK_UNREACHABLE;
    memset(v, 0, sizeof *v);
    v->epoch = -1;
    r = conn_command(c, 3, argv, lens);
    if (r != NULL && r->type == REDIS_REPLY_ERROR && strstr(r->str, "No such master") == NULL) {
        /* (an ACL that allows only the address, or an old sentinel) */
        argv[1] = "GET-MASTER-ADDR-BY-NAME";
        lens[1] = 23;
        freeReplyObject(r);
        r = conn_command(c, 3, argv, lens);
        if (r != NULL && r->type != REDIS_REPLY_ERROR) {
            rc = sentinel_parse_addr(r, v) == 0 ? ASK_VIEW : ASK_UNKNOWN;   /* nil: no such master */
            freeReplyObject(r);
            sentinel_done(c, slot);
            return rc;
        }
    }
    if (r == NULL) {
        snprintf(err, errlen, "%.140s", c->errstr);
        rc = ASK_UNREACHABLE;
    } else if (r->type == REDIS_REPLY_ERROR && strstr(r->str, "No such master") != NULL) {
        rc = ASK_UNKNOWN;
    } else if (r->type == REDIS_REPLY_ERROR) {
        snprintf(err, errlen, "redis error: %.*s", (int)(r->len > 120 ? 120 : r->len), r->str);
        rc = ASK_ERROR;
    } else if (r->type == REDIS_REPLY_ARRAY && sentinel_parse_master(r, v) == 0) {
        rc = ASK_VIEW;
    } else {
        snprintf(err, errlen, "unexpected SENTINEL MASTER reply");
        rc = ASK_ERROR;
    }
    if (r) freeReplyObject(r);
    sentinel_done(c, slot);
    return rc;
}

static void sentinel_oom(char *err, size_t errlen, const char **kind) {
    snprintf(err, errlen, "out of memory");
    *kind = "memory";
}

int sentinel_pass(const topo_src *src, sentinel_pool *pool, int may_resolve, int64_t deadline, topo_snap **out,
                  char *err, size_t errlen, const char **kind) {
    sentinel_view best, v;
    char last[CONN_ERRSTR_LEN] = "no sentinel given";
    char where[160];
    int i, n, answered = 0, unknown = 0, views = 0, failover = 0, conflict = 0, have = 0, confirmed;
    topo_snap *snap;
    n = src->nseeds;   /* (read under the mutex, by whoever filled in src) */
    memset(&best, 0, sizeof best);
    for (i = 0; i < n && !deadline_passed(deadline); i++) {
        topo_node s;
        int rc;
        /* A shallow copy: the seeds live as long as the topology and are
         * never moved (the order is the user's); only their addresses are
         * filled in, under the mutex, by whoever resolves them first. */
        pthread_mutex_lock(src->mu);
        s = src->seeds[i];
        pthread_mutex_unlock(src->mu);
        rc = sentinel_ask(src, &s, may_resolve, deadline, pool && i < pool->n ? &pool->seeds[i] : NULL, &v,
                          last, sizeof last);
        if (s.addrs.n > 0) {
            pthread_mutex_lock(src->mu);
            if (src->seeds[i].addrs.n == 0) src->seeds[i].addrs = s.addrs;
            pthread_mutex_unlock(src->mu);
        }
        if (rc == ASK_UNREACHABLE) continue;
        answered++;
        if (rc == ASK_UNKNOWN) unknown++;
        if (rc != ASK_VIEW) continue;
        views++;
        failover |= v.failover;
        if (!have || v.epoch > best.epoch) {
            best = v;
            have = 1;
            conflict = 0;
        } else if (v.epoch == best.epoch && (v.port != best.port || strcmp(v.host, best.host) != 0)) {
            conflict = 1;
        }
    }
    *kind = "connection";
    if (answered == 0) {
        snprintf(err, errlen, "no sentinel reachable (last: %.150s)", last);
        return SENTINEL_FAIL;
    }
    if (!have && unknown == answered) {
        snprintf(err, errlen, "master name unknown: %.80s (the sentinels answered, none knows it)", src->master);
        *kind = "redis";
        return SENTINEL_FAIL;
    }
    if (!have) {
        snprintf(err, errlen, "%.190s", last);
        *kind = "redis";
        return SENTINEL_FAIL;
    }
    if (views < n / 2 + 1) {
        /* (a sentinel that does not know the name, or refused us, is no vote) */
        snprintf(err, errlen, "no sentinel majority: %d of %d named a master (last: %.120s)", views, n, last);
        return SENTINEL_FAIL;
    }
    if (failover || conflict) {
        snprintf(err, errlen, "%s: %.80s", failover ? "failover in progress" : "sentinels disagree on master",
                 src->master);
        return SENTINEL_DOUBT;
    }
    snap = topo_snap_new(1, 0);
    if (snap == NULL || (snap->nodes[0].host = strdup(best.host)) == NULL) {
        topo_snap_free(snap);
        sentinel_oom(err, errlen, kind);
        return SENTINEL_FAIL;
    }
    snap->nodes[0].port = best.port;
    snap->config_epoch = best.epoch;
    confirmed = sentinel_confirm(src, pool, &snap->nodes[0], may_resolve, deadline, last, sizeof last);
    if (confirmed == 1) {
        *out = snap;
        return SENTINEL_OK;
    }
    topo_node_describe(&snap->nodes[0], where, sizeof where);
    snprintf(err, errlen, "master not confirmed at %.60s: %.100s", where, last);
    *kind = strstr(last, "timed out") ? "timeout" : "connection";
    topo_snap_free(snap);
    return SENTINEL_DOUBT;
}

static void sentinel_sleep_ms(long ms) {
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000L;
    nanosleep(&ts, NULL);
}

int sentinel_load(const topo_src *src, int may_resolve, int64_t deadline, topo_snap **out,
                  char *err, size_t errlen, const char **kind) {
    for (;;) {
        long left;
        int v = sentinel_pass(src, NULL, may_resolve, deadline, out, err, errlen, kind);
        if (v == SENTINEL_OK) return 0;
        if (v == SENTINEL_FAIL) return -1;
        left = (long)((deadline - monotime_us()) / 1000);
        if (deadline_passed(deadline) || left <= 0) return -1;
        sentinel_sleep_ms(left < SENTINEL_PAUSE_MS ? left : SENTINEL_PAUSE_MS);
    }
}
