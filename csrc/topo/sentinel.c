/*
 * sentinel.c: the master's address from the sentinels (see sentinel.h).
 */
#define _GNU_SOURCE
#include "topo/sentinel.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/deadline.h"
#include "base/monotime.h"
#include "base/proc_id.h"

#define SENTINEL_TRY_MS 1000     /* each sentinel gets at most this long */
#define SENTINEL_PAUSE_MS 100    /* before asking again after a doubt */
#define SENTINEL_GRACE_MS 100    /* the others' time, once a majority answered */
#define SENTINEL_MAX 64          /* sentinels asked (more are ignored) */

/* What one sentinel says of the master. */
typedef struct sentinel_view {
    char host[128];
    int port;
    long long epoch;        /* config-epoch; -1 when it did not say */
    int replicas;           /* num-slaves: the replicas it knows (-1: it did not say) */
    int followers;          /* of those, the ones that say they replicate from
                               it (role slave, its address) (-1: it did not say) */
    int eligible;           /* of those it knows, the ones Sentinel could
                               promote (not s_down or o_down: a sentinel's
                               link to a replica that is only "disconnected"
                               comes back in a moment, and a replica
                               promoted behind our back is that for a
                               moment: a promotion kills the other
                               sentinels' links), whoever they follow: one
                               promoted behind our back counts; and those it
                               does not list (replica-announced no: num-slaves
                               counts them, and Sentinel may promote one all
                               the same; whether it is up is not said)
                               (-1: unknown) */
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

/* ROLE on the named master: 1 master, 0 something else, -1 unreachable;
 * *connected: how many replicas it says follow it now. */
static int sentinel_confirm(const topo_src *src, sentinel_pool *pool, topo_node *master, int may_resolve,
                            int64_t deadline, int *connected, char *err, size_t errlen) {
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
        /* ["master", offset, [[ip, port, offset], ...]] */
        if (rc && r->elements >= 3 && r->element[2]->type == REDIS_REPLY_ARRAY)
            *connected = (int)r->element[2]->elements;
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
        } else if (sentinel_field_is(k, "num-slaves")) {
            v->replicas = atoi(val->str);
        } else if (sentinel_field_is(k, "flags")) {
            v->failover = strstr(val->str, "failover_in_progress") != NULL;
        }
    }
    return have_ip && have_port ? 0 : -1;
}

/* SENTINEL REPLICAS' entries into v (its num-slaves read already):
 * followers, those that are replicas of v's master and up (they report
 * the role of a replica and its address as their master's; not the old
 * master of a failover that Sentinel has not reconfigured yet: it still
 * reports itself a master, and follows nobody), and eligible, those
 * Sentinel could promote (not down, whatever they report, and those it
 * does not list). Both -1 when r is not the list (an ACL refused it). */
static void sentinel_count_replicas(const redisReply *r, sentinel_view *v) {
    size_t i, j;
    int listed = 0;
    v->followers = v->eligible = -1;
    if (r->type != REDIS_REPLY_ARRAY) return;
    v->followers = v->eligible = 0;
    for (i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        int slave = 0, host = 0, port = 0, down = 0;
        if (e->type != REDIS_REPLY_ARRAY) continue;
        listed++;
        for (j = 0; j + 1 < e->elements; j += 2) {
            const redisReply *k = e->element[j], *val = e->element[j + 1];
            if (val->type != REDIS_REPLY_STRING) continue;
            if (sentinel_field_is(k, "flags"))
                down = strstr(val->str, "s_down") || strstr(val->str, "o_down");
            else if (sentinel_field_is(k, "role-reported"))
                slave = val->len == 5 && memcmp(val->str, "slave", 5) == 0;
            else if (sentinel_field_is(k, "master-host"))
                host = val->len == strlen(v->host) && memcmp(val->str, v->host, val->len) == 0;
            else if (sentinel_field_is(k, "master-port"))
                port = atoi(val->str) == v->port;
        }
        /* (a dead replica's last report stays with Sentinel forever: it
         * follows nobody) */
        v->followers += slave && host && port && !down;
        v->eligible += !down;
    }
    if (v->replicas > listed) v->eligible += v->replicas - listed;
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

/* ---- one pass: every sentinel asked at once ---------------------------------- */

/* A hung sentinel (stopped, not dead: the kernel still accepts its TCP
 * connections) must cost a pass nothing: every sentinel is asked at once,
 * each on its own deadline, and the pass ends as soon as it can decide. */

enum { ASK_PENDING = -2, ASK_UNREACHABLE = -1, ASK_VIEW = 0, ASK_UNKNOWN = 1, ASK_ERROR = 2 };

/* One sentinel's exchange within a pass. */
typedef struct sentinel_ask {
    conn *c;
    conn **slot;            /* the pool's slot of c, or NULL: c is freed after */
    int state;              /* ASK_* */
    int got;                /* answers read: SENTINEL MASTER's, then REPLICAS' */
    int by_addr;            /* asked GET-MASTER-ADDR-BY-NAME (SENTINEL MASTER was refused) */
    redisReply *master;     /* SENTINEL MASTER's answer, kept until REPLICAS' comes */
    int64_t deadline;       /* us: its own */
    sentinel_view v;
    char err[CONN_ERRSTR_LEN];
} sentinel_ask;

static void ask_unreachable(sentinel_ask *a, const char *why) {
    snprintf(a->err, sizeof a->err, "%.190s", why);
    a->state = ASK_UNREACHABLE;
}

/* Queues `SENTINEL <sub> <master>` on a's connection. 0, or -1 (a failed). */
static int ask_send(const topo_src *src, sentinel_ask *a, const char *sub) {
    const char *argv[3] = {"SENTINEL", sub, src->master};
    size_t lens[3] = {8, strlen(sub), strlen(src->master)};
    if (conn_append(a->c, 3, argv, lens) != 0 || (!conn_connecting(a->c) && conn_flush_some(a->c) < 0)) {
        ask_unreachable(a, a->c->errstr);
        return -1;
    }
    return 0;
}

conn *sentinel_seed_conn(const topo_src *src, const topo_node *s, long timeout_ms) {
    conn_config cfg;
    conn *c;
    memset(&cfg, 0, sizeof cfg);
    cfg.host = s->host;
    cfg.port = s->port;
    cfg.username = (char *)src->sentinel_user;
    cfg.password = (char *)src->sentinel_pass;
    cfg.tls = src->sentinel_tls;
    cfg.connect_timeout_ms = timeout_ms;
    cfg.timeout_ms = timeout_ms;
    c = conn_new(&cfg);
    if (c == NULL) return NULL;
    c->may_resolve = 0;
    conn_set_addrs(c, &s->addrs);
    return c;
}

/* Starts asking seed i: its address (resolved as may_resolve allows, and
 * kept for the others), a connection (the pool's, else a new one), and
 * SENTINEL MASTER and SENTINEL REPLICAS queued on it. Never blocks but to
 * resolve a name. */
static void ask_start(const topo_src *src, sentinel_pool *pool, int i, int may_resolve, int64_t deadline,
                      sentinel_ask *a) {
    topo_node s;
    int64_t own = monotime_us() + (int64_t)sentinel_try_ms(src) * 1000;
    memset(a, 0, sizeof *a);
    a->state = ASK_PENDING;
    a->deadline = own < deadline ? own : deadline;
    /* (a shallow copy: the seeds live as long as the topology and are never
     * moved; only their addresses are filled in, under the mutex, by
     * whoever resolves them first) */
    pthread_mutex_lock(src->mu);
    s = src->seeds[i];
    pthread_mutex_unlock(src->mu);
    if (topo_node_resolve(&s, may_resolve, a->deadline, a->err, sizeof a->err) != 0) {
        a->state = ASK_UNREACHABLE;
        return;
    }
    pthread_mutex_lock(src->mu);
    if (src->seeds[i].addrs.n == 0) src->seeds[i].addrs = s.addrs;
    pthread_mutex_unlock(src->mu);
    a->slot = pool && i < pool->n ? &pool->seeds[i] : NULL;
    a->c = a->slot ? *a->slot : NULL;
    if (a->c == NULL) {
        a->c = sentinel_seed_conn(src, &s, sentinel_try_ms(src));
        if (a->c == NULL) {
            ask_unreachable(a, "out of memory");
            return;
        }
        if (a->slot) *a->slot = a->c;
    }
    conn_check_idle(a->c);   /* (closed by the sentinel since the last pass) */
    if (a->c->fd >= 0 && a->c->pid != proc_id()) conn_drop(a->c);
    if (a->c->fd < 0 && conn_start(a->c) < 0) {
        ask_unreachable(a, a->c->errstr);
        return;
    }
    if (ask_send(src, a, "MASTER") == 0) ask_send(src, a, "REPLICAS");
}

/* SENTINEL MASTER's answer (or GET-MASTER-ADDR-BY-NAME's) into a's state. */
static void ask_master(sentinel_ask *a, const redisReply *r) {
    int no_such = r->type == REDIS_REPLY_ERROR && r->str && strstr(r->str, "No such master") != NULL;
    if (no_such) {
        a->state = ASK_UNKNOWN;
    } else if (r->type == REDIS_REPLY_ERROR) {
        snprintf(a->err, sizeof a->err, "redis error: %.*s", (int)(r->len > 120 ? 120 : r->len), r->str);
        a->state = ASK_ERROR;
    } else if (a->by_addr) {
        a->state = sentinel_parse_addr(r, &a->v) == 0 ? ASK_VIEW : ASK_UNKNOWN;   /* nil: no such master */
    } else if (r->type == REDIS_REPLY_ARRAY && sentinel_parse_master(r, &a->v) == 0) {
        a->state = ASK_VIEW;
    } else {
        snprintf(a->err, sizeof a->err, "unexpected SENTINEL MASTER reply");
        a->state = ASK_ERROR;
    }
}

/* What sentinel a answered, r (taken): SENTINEL MASTER's answer is kept
 * until SENTINEL REPLICAS' comes (which needs the master's address). */
static void ask_answer(const topo_src *src, sentinel_ask *a, redisReply *r) {
    int first = a->got++ == 0;
    if (first) {
        a->master = r;
        return;
    }
    memset(&a->v, 0, sizeof a->v);
    a->v.epoch = -1;
    a->v.replicas = -1;
    a->v.followers = a->v.eligible = -1;
    if (a->by_addr) {
        ask_master(a, r);
    } else if (a->master->type == REDIS_REPLY_ERROR && !strstr(a->master->str, "No such master")) {
        /* (an ACL that allows only the address, or an old sentinel) */
        a->by_addr = 1;
        ask_send(src, a, "GET-MASTER-ADDR-BY-NAME");
    } else {
        ask_master(a, a->master);
        if (a->state == ASK_VIEW) sentinel_count_replicas(r, &a->v);
    }
    freeReplyObject(r);
}

/* Moves a's exchange on after poll said rev: connect, send, read. */
static void ask_pump(const topo_src *src, sentinel_ask *a, short rev) {
    conn *c = a->c;
    redisReply *r = NULL;
    int k;
    if (c->connecting) {
        if (!(rev & (POLLOUT | POLLERR | POLLHUP))) return;
        if (conn_connect_done(c) != 0) {
            ask_unreachable(a, c->errstr);
            return;
        }
    }
    if (rev & (POLLIN | POLLERR | POLLHUP)) {
        while ((k = conn_fill(c)) == 1) {}
        if (k < 0) {
            ask_unreachable(a, c->errstr);
            return;
        }
    }
    while (a->state == ASK_PENDING && (k = conn_reply(c, &r)) != 0) {
        if (k < 0) {
            ask_unreachable(a, c->errstr);
            return;
        }
        ask_answer(src, a, r);
    }
    if (a->state == ASK_PENDING && c->fd >= 0 && conn_flush_some(c) < 0) ask_unreachable(a, c->errstr);
}

/* What the sentinels said so far, counted (while a pass waits, and for
 * its verdict). */
typedef struct sentinel_tally {
    sentinel_view best;         /* the master named with the highest epoch */
    int have, pending, answered, unknown, views, failover, conflict;
    int eligible, followers, known;   /* the most any naming best says (-1: none) */
    char last[CONN_ERRSTR_LEN]; /* the last failure, for messages */
} sentinel_tally;

static void sentinel_tally_of(const sentinel_ask *asks, int n, sentinel_tally *t) {
    int i;
    memset(t, 0, sizeof *t);
    t->eligible = t->followers = t->known = -1;
    snprintf(t->last, sizeof t->last, "none answered in time");
    for (i = 0; i < n; i++) {
        const sentinel_ask *a = &asks[i];
        if (a->state == ASK_UNREACHABLE || a->state == ASK_ERROR) snprintf(t->last, sizeof t->last, "%s", a->err);
        if (a->state == ASK_PENDING) t->pending++;
        if (a->state < ASK_VIEW) continue;
        t->answered++;
        if (a->state == ASK_UNKNOWN) t->unknown++;
        if (a->state != ASK_VIEW) continue;
        t->views++;
        t->failover |= a->v.failover;
        if (!t->have || a->v.epoch > t->best.epoch) {
            t->best = a->v;
            t->have = 1;
            t->conflict = 0;
        } else if (a->v.epoch == t->best.epoch && (a->v.port != t->best.port || strcmp(a->v.host, t->best.host) != 0)) {
            t->conflict = 1;
        }
    }
    /* the most replicas any sentinel naming that master says could be
     * promoted, follow it, or are known: one sentinel's view may lag (a
     * replica it has not found yet, one it does not hear for a moment) */
    for (i = 0; t->have && i < n; i++) {
        const sentinel_view *v = &asks[i].v;
        if (asks[i].state != ASK_VIEW || v->port != t->best.port || strcmp(v->host, t->best.host) != 0) continue;
        if (v->eligible > t->eligible) t->eligible = v->eligible;
        if (v->followers > t->followers) t->followers = v->followers;
        if (v->replicas > t->known) t->known = v->replicas;
    }
}

/* Asks every sentinel at once and waits for their answers, each until its
 * own deadline: to the end, or until one reports a failover under way (a
 * doubt whatever the others say), or SENTINEL_GRACE_MS after a majority
 * answered (a slow one's answer would count, a hung one's never comes). */
static void sentinel_ask_all(const topo_src *src, sentinel_pool *pool, int may_resolve, int64_t deadline,
                             sentinel_ask *asks, int n) {
    struct pollfd pfd[SENTINEL_MAX];
    int which[SENTINEL_MAX];
    int64_t majority_at = 0;
    int i;
    for (i = 0; i < n && !deadline_passed(deadline); i++) ask_start(src, pool, i, may_resolve, deadline, &asks[i]);
    for (; i < n; i++) {   /* (never started: nothing of theirs to free below) */
        memset(&asks[i], 0, sizeof asks[i]);
        ask_unreachable(&asks[i], "timed out before it was asked");
    }
    for (;;) {
        sentinel_tally t;
        int64_t now = monotime_us(), until = deadline;
        int m = 0, timeout_ms;
        sentinel_tally_of(asks, n, &t);
        if (t.pending == 0 || t.failover || deadline_passed(deadline)) break;
        if (t.views >= n / 2 + 1) {
            if (majority_at == 0) majority_at = now;
            if (now >= majority_at + SENTINEL_GRACE_MS * 1000) break;
            until = majority_at + SENTINEL_GRACE_MS * 1000;
        }
        for (i = 0; i < n; i++) {
            sentinel_ask *a = &asks[i];
            if (a->state != ASK_PENDING) continue;
            if (now >= a->deadline || a->c->fd < 0) {
                if (a->c->fd >= 0) conn_fail_with(a->c, CONN_ETIMEOUT, a->c->connecting ? "failed" : "lost");
                ask_unreachable(a, a->c->errstr);
                continue;
            }
            if (a->deadline < until) until = a->deadline;
            which[m] = i;
            pfd[m].fd = a->c->fd;
            pfd[m].events = conn_poll_events(a->c);
            pfd[m++].revents = 0;
        }
        if (m == 0) continue;
        timeout_ms = (int)((until - now + 999) / 1000);
        if (poll(pfd, (nfds_t)m, timeout_ms > 0 ? timeout_ms : 0) < 0 && errno != EINTR) break;
        for (i = 0; i < m; i++)
            if (pfd[i].revents) ask_pump(src, &asks[which[i]], pfd[i].revents);
    }
    for (i = 0; i < n; i++) {
        sentinel_ask *a = &asks[i];
        /* (one still asked: its answer, if it ever comes, is no one's) */
        if (a->state == ASK_PENDING) {
            conn_fail_with(a->c, CONN_ETIMEOUT, "lost");
            ask_unreachable(a, a->c->errstr);
        }
        if (a->master) freeReplyObject(a->master);
        a->master = NULL;
        if (a->slot == NULL) conn_free(a->c);
        a->c = NULL;
    }
}

static void sentinel_oom(char *err, size_t errlen, const char **kind) {
    snprintf(err, errlen, "out of memory");
    *kind = "memory";
}

/* Whether the tally of n sentinels names a master to confirm: SENTINEL_OK,
 * else SENTINEL_DOUBT or SENTINEL_FAIL with err and kind. */
static int sentinel_verdict(const topo_src *src, const sentinel_tally *t, int n, char *err, size_t errlen,
                            const char **kind) {
    *kind = "connection";
    if (t->failover) {
        /* (whatever the others said: the one running it knows best) */
        snprintf(err, errlen, "failover in progress: %.80s", src->master);
        return SENTINEL_DOUBT;
    }
    if (t->answered == 0) {
        snprintf(err, errlen, "no sentinel reachable (last: %.150s)", t->last);
        return SENTINEL_FAIL;
    }
    if (!t->have && t->unknown == t->answered) {
        snprintf(err, errlen, "master name unknown: %.80s (the sentinels answered, none knows it)", src->master);
        *kind = "redis";
        return SENTINEL_FAIL;
    }
    if (!t->have) {
        snprintf(err, errlen, "%.190s", t->last);
        *kind = "redis";
        return SENTINEL_FAIL;
    }
    if (t->views < n / 2 + 1) {
        /* (a sentinel that does not know the name, or refused us, is no vote) */
        snprintf(err, errlen, "no sentinel majority: %d of %d named a master (last: %.120s)", t->views, n, t->last);
        return SENTINEL_FAIL;
    }
    if (t->conflict) {
        snprintf(err, errlen, "sentinels disagree on master: %.80s", src->master);
        return SENTINEL_DOUBT;
    }
    return SENTINEL_OK;
}

int sentinel_pass(const topo_src *src, sentinel_pool *pool, int may_resolve, int64_t deadline, topo_snap **out,
                  char *err, size_t errlen, const char **kind) {
    sentinel_ask asks[SENTINEL_MAX];
    sentinel_tally t;
    char where[160];
    int n, rc, confirmed, connected = 0, followers, eligible;
    topo_snap *snap;
    n = src->nseeds;   /* (fixed once the topology is set up) */
    if (n > SENTINEL_MAX) n = SENTINEL_MAX;
    sentinel_ask_all(src, pool, may_resolve, deadline, asks, n);
    sentinel_tally_of(asks, n, &t);
    if ((rc = sentinel_verdict(src, &t, n, err, errlen, kind)) != SENTINEL_OK) return rc;
    snap = topo_snap_new(1, 0);
    if (snap == NULL || (snap->nodes[0].host = strdup(t.best.host)) == NULL) {
        topo_snap_free(snap);
        sentinel_oom(err, errlen, kind);
        return SENTINEL_FAIL;
    }
    snap->nodes[0].port = t.best.port;
    snap->config_epoch = t.best.epoch;
    confirmed = sentinel_confirm(src, pool, &snap->nodes[0], may_resolve, deadline, &connected, t.last, sizeof t.last);
    if (confirmed == 1) {
        /* A failover could put a replica in its place once one follows it
         * (it says so to the sentinels, or the master lists it): then
         * every replica the sentinels could promote must have a renewal
         * (wd_ack.c says why all of them), num-slaves when they did not
         * list them; the topology keeps counting them once it has seen
         * one follow (topo_publish) */
        followers = connected > t.followers ? connected : t.followers;
        eligible = t.eligible < 0 ? t.known : t.eligible;   /* (not listed: num-slaves) */
        snap->nodes[0].replicas = followers <= 0 ? 0 : eligible > followers ? eligible : followers;
        /* (what keeps a nonzero count, topo_publish: a replica the
         * sentinels could promote, not merely one they list: the only
         * replica dead and marked down can be promoted by nobody) */
        snap->nodes[0].replicas_known = eligible;
        *out = snap;
        return SENTINEL_OK;
    }
    topo_node_describe(&snap->nodes[0], where, sizeof where);
    snprintf(err, errlen, "master not confirmed at %.60s: %.100s", where, t.last);
    *kind = strstr(t.last, "timed out") ? "timeout" : "connection";
    topo_snap_free(snap);
    return SENTINEL_DOUBT;
}

static void sentinel_sleep_ms(long ms) {
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000L;
    nanosleep(&ts, NULL);
}

/* The deadline ended a load whose passes found a doubt (why: the last
 * one's): that is what the caller hears, whatever the last pass found in
 * the time it had left. A pass begun a moment before the deadline asks
 * the sentinels with that moment for their answers, and "no sentinel
 * reachable (last: timed out)" said of sentinels that are all up, and a
 * failover under way, sent people looking for the wrong fault. */
static void sentinel_doubt_over(const char *why, const char *why_kind, char *err, size_t errlen, const char **kind) {
    snprintf(err, errlen, "no master confirmed yet (%.150s)", why);
    *kind = why_kind;
}

int sentinel_load(const topo_src *src, int may_resolve, int64_t deadline, topo_snap **out,
                  char *err, size_t errlen, const char **kind) {
    char doubt[CONN_ERRSTR_LEN] = "";
    const char *doubt_kind = "connection";
    for (;;) {
        long left;
        int v = sentinel_pass(src, NULL, may_resolve, deadline, out, err, errlen, kind);
        if (v == SENTINEL_OK) return 0;
        if (v == SENTINEL_FAIL) {
            if (doubt[0] && deadline_passed(deadline)) sentinel_doubt_over(doubt, doubt_kind, err, errlen, kind);
            return -1;
        }
        snprintf(doubt, sizeof doubt, "%s", err);
        doubt_kind = *kind;
        left = (long)((deadline - monotime_us()) / 1000);
        if (deadline_passed(deadline) || left <= 0) {
            sentinel_doubt_over(doubt, doubt_kind, err, errlen, kind);
            return -1;
        }
        sentinel_sleep_ms(left < SENTINEL_PAUSE_MS ? left : SENTINEL_PAUSE_MS);
    }
}
