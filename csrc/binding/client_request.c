/*
 * client_request.c: a request that Lua drives, byte by byte: the driver of
 * exec.h's machine for nginx's cosockets (lua/redislock/cosocket.lua).
 *
 * The machine decides everything it decides for the native transport (the
 * node, what goes on the wire, what each reply means, redirects, NOSCRIPT,
 * pauses, the caps, a Sentinel doubt cast while a request ran), and the
 * topology is looked up here too (a Cluster's map asked of its nodes, a
 * Sentinel's master waited for from the follower thread); Lua only
 * connects where it is told, sends the bytes it is handed, hands back the
 * bytes it reads, and sleeps when told. The RESP is written and read here,
 * by the same code as everywhere else, on a detached conn (conn.h: no
 * socket of ours).
 *
 *   local rq = client:request(kind, timeout, until, ...)
 *     kind "script" (name, keys..., args...), "command" (name, args...),
 *     "wait" (key, seconds, script, keys..., args...: BLPOP with the
 *     attempt behind it);
 *     timeout: seconds for the request (0: none); until: the caller's own
 *     deadline on core.monotime's clock (nil: none)
 *   rq:then_wait(n, ms)   after the script's answer, WAIT n ms on the same
 *                         socket (lock:extend's, channel wait_next)
 *   act, a, b = rq:next()         where to go: "connect", host, port (port
 *       nil: a unix socket path) | "sleep", seconds, token (sleep, then
 *       next(token)) | "done" | "fail"
 *   bytes = rq:write(fresh)       this attempt's bytes for the socket Lua
 *       got (fresh: just made: its handshake alone; the attempt's bytes
 *       come from feed as "send" once the handshake's replies came)
 *   act, a = rq:feed(data)        bytes read: "more" | "send", bytes (more
 *       to send on the same socket) | any of next()'s
 *   act, a, b = rq:lost(sent)     the socket failed (sent: a byte may have
 *       gone; once the attempt's bytes were handed out, always): as next()
 *   (once per "connect": write, then feed until it says anything but
 *   "more" or "send", or lost; next only after "sleep", "done", "fail")
 *   rq:clean()                    the socket may go back to the pool
 *   rq:reloads()                  NOSCRIPT reloads it made (stats)
 *   rq:result()                   reply | nil, err, kind ("wait": true,
 *       woken, reply | ...; with then_wait: reply, acks)
 */
#include "binding/client_ud.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "binding/compat.h"
#include "binding/client.h"
#include "topo/cluster.h"
#include "base/deadline.h"
#include "exec/exec.h"
#include "exec/exec_conn.h"
#include "binding/luaval.h"
#include "topo/topo.h"
#include "cmd/wait_cmd.h"

#define REQUEST_MT "redislock.request"
#define REQUEST_MAX_ARGS (SCRIPT_MAX_ARGS + 3)
#define REQUEST_SENTINEL_POLL 0.005   /* seconds between looks at a master in doubt */

enum { RQ_ROUTE = 0, RQ_READ, RQ_WAIT, RQ_MAP, RQ_DONE, RQ_FAIL };

typedef struct request_ud {
    udata_tag tag;
    topo *t;                /* a reference; NULL once collected */
    exec_req x;
    exec_conn xc;           /* detached: the bytes go through Lua's socket */
    int state;
    int kind;               /* 's' script, 'c' command, 'w' wait */
    int map_next;           /* RQ_MAP: the next node asked for a Cluster's map
                               (the snapshot's nodes, then the seeds) */
    int map_then_done;      /* the map is looked up for the next request,
                               not this one (a wait's refused attempt) */
    topo_node map_at;       /* the node asked now */
    redisReply *map_slots;  /* its CLUSTER SLOTS reply, until CLUSTER NODES' */
    char map_last[CONN_ERRSTR_LEN]; /* why the last node asked could not say */
    uint64_t doubts;        /* topo_doubts() when this attempt was routed */
    int no_doubt;           /* a wait (BLPOP): its failures cast no doubt (it
                               writes no lease, and one that ends at the
                               caller's own deadline is no sign of a failing
                               master; the doubt would hold up every client
                               sharing the topology: router.h's no_doubt) */
    uint64_t epoch;         /* the snapshot it was routed by */
    int64_t look_until;     /* Sentinel: how long it waits for a master
                               confirmed (the connect timeout's, from the
                               first look; 0: not waiting) */
    int written;            /* this socket's bytes were handed out (rq:write) */
    int handshaking;        /* a fresh socket's handshake is under way: the
                               attempt's bytes wait for its replies (a
                               refused AUTH or SELECT must not let them run
                               as another user or on database 0) */
    int wait_n;             /* then_wait: WAIT n ms after the answer */
    long wait_ms;
    long long acks;         /* its answer (-1: none) */
    conn_counters net;      /* what its conn counted (NOSCRIPT reloads) */
    char *buf;              /* the arguments' bytes */
    const char *argv[REQUEST_MAX_ARGS];
    size_t lens[REQUEST_MAX_ARGS];
} request_ud;

static request_ud *request_check(lua_State *L) {
    request_ud *q = (request_ud *)luaL_checkudata(L, 1, REQUEST_MT);
    if (q->t == NULL || q->xc.c == NULL) luaL_error(L, "request: used after it was collected");
    return q;
}

static int request_gc(lua_State *L) {
    request_ud *q = (request_ud *)luaL_checkudata(L, 1, REQUEST_MT);
    exec_clear(&q->x);
    if (q->xc.c) conn_free(q->xc.c);
    q->xc.c = NULL;
    topo_node_clear(&q->map_at);
    if (q->map_slots) freeReplyObject(q->map_slots);
    q->map_slots = NULL;
    free(q->buf);
    q->buf = NULL;
    if (q->t) topo_release(q->t);
    q->t = NULL;
    return 0;
}

/* Copies n arguments into q's own buffer. */
static void request_args(lua_State *L, request_ud *q, int n, const char *const *argv, const size_t *lens) {
    size_t total = 0;
    int i;
    char *p;
    for (i = 0; i < n; i++) total += lens[i] + 1;
    q->buf = malloc(total ? total : 1);
    if (q->buf == NULL) luaL_error(L, "out of memory");
    for (p = q->buf, i = 0; i < n; i++) {
        memcpy(p, argv[i], lens[i]);
        p[lens[i]] = '\0';
        q->argv[i] = p;
        q->lens[i] = lens[i];
        p += lens[i] + 1;
    }
}

/* Pushes an action: what Lua does next. */
static int request_push(lua_State *L, request_ud *q, const char *act) {
    if (strcmp(act, "fail") == 0) q->state = RQ_FAIL;
    if (strcmp(act, "done") == 0) q->state = RQ_DONE;
    lua_pushstring(L, act);
    return 1;
}

static int request_fail(lua_State *L, request_ud *q) {
    exec_clear(&q->x);
    return request_push(L, q, "fail");
}

/* The node the bytes go to now, for the handshake and for messages. 0, or
 * -1 (out of memory). */
static int request_at(request_ud *q, const topo_node *n) {
    conn_config *cfg = &q->xc.c->cfg;
    char *host = n->host ? strdup(n->host) : NULL, *path = n->path ? strdup(n->path) : NULL;
    if ((n->host && !host) || (n->path && !path)) {
        free(host);
        free(path);
        return -1;
    }
    free(cfg->host);
    free(cfg->path);
    cfg->host = host;
    cfg->path = path;
    cfg->port = n->port;
    return 0;
}

/* Pushes "connect" to node n (as request_at, which it calls). */
static int request_connect(lua_State *L, request_ud *q, const topo_node *n, int state) {
    if (request_at(q, n) != 0) {
        exec_fail(&q->x, CONN_ENOMEM, "out of memory");
        return request_fail(L, q);
    }
    q->state = state;
    q->written = q->handshaking = 0;
    lua_pushliteral(L, "connect");
    if (n->path) {
        lua_pushstring(L, n->path);
        lua_pushnil(L);
    } else {
        lua_pushstring(L, n->host);
        lua_pushinteger(L, n->port);
    }
    return 3;
}

/* Tokens of a "sleep": what the next call to next() is after it. */
enum { RQ_AFTER_PAUSE = 1, RQ_AFTER_LOOK = 2 };

static int request_sleep(lua_State *L, double seconds, int token) {
    lua_pushliteral(L, "sleep");
    lua_pushnumber(L, seconds);
    lua_pushinteger(L, token);
    return 3;
}

/* ---- a Cluster's map, asked of its nodes over Lua's sockets --------------- */

static int request_route(lua_State *L, request_ud *q);

/* The next node to ask for the map: the snapshot's nodes, then the seeds
 * (cluster_load's order). "connect" there, or the request fails when none
 * is left ("cluster unreachable", as the native transport says it). */
static int request_map_next(lua_State *L, request_ud *q) {
    topo *t = q->t;
    topo_snap *s = topo_snap_get(t);
    int i = q->map_next++, have = 0, n = s ? s->nnodes : 0;
    topo_node_clear(&q->map_at);
    if (i < n) {
        have = topo_node_dup(&q->map_at, &s->nodes[i]) == 0;
    } else {
        pthread_mutex_lock(&t->mu);
        if (i - n < t->nseeds) have = topo_node_dup(&q->map_at, &t->seeds[i - n]) == 0;
        pthread_mutex_unlock(&t->mu);
    }
    if (s) topo_snap_put(t, s);
    if (have) return request_connect(L, q, &q->map_at, RQ_MAP);
    if (q->map_then_done) return request_push(L, q, "done");
    {
        char err[CONN_ERRSTR_LEN + 64];
        const char *last = q->map_last[0] ? q->map_last : "no node given";
        snprintf(err, sizeof err, "connection failed: cluster unreachable (asked %d node%s; last: %.140s)", i,
                 i == 1 ? "" : "s", last);
        exec_fail(&q->x, strstr(last, "redis error") ? CONN_EREDIS : strstr(last, "timed out") ? CONN_ETIMEOUT
                                                                                                : CONN_ECONNECT, err);
    }
    return request_fail(L, q);
}

/* Looks the map up before the next attempt (then_done: the request is
 * over: only for the next one's sake). */
static int request_map(lua_State *L, request_ud *q, int then_done) {
    q->map_next = 0;
    q->map_last[0] = '\0';
    q->map_then_done = then_done;
    q->x.st.refreshed = 1;
    return request_map_next(L, q);
}

/* The node asked could not say (its conn's errstr, or why). */
static int request_map_failed(lua_State *L, request_ud *q, const char *why) {
    snprintf(q->map_last, sizeof q->map_last, "%s", why);
    if (q->map_slots) freeReplyObject(q->map_slots);
    q->map_slots = NULL;
    return request_map_next(L, q);
}

/* CLUSTER NODES' reply r after CLUSTER SLOTS': the map published (the
 * watchdog follows), and on to the attempt. */
static int request_map_loaded(lua_State *L, request_ud *q, redisReply *r) {
    char err[CONN_ERRSTR_LEN];
    topo_snap *s = cluster_snap_of(q->map_slots, r, &q->map_at, err, sizeof err);
    int i;
    freeReplyObject(r);
    if (s == NULL) return request_map_failed(L, q, err);
    freeReplyObject(q->map_slots);
    q->map_slots = NULL;
    /* (the announced addresses: nothing is resolved in nginx's worker) */
    for (i = 0; i < s->nnodes; i++) topo_node_resolve(&s->nodes[i], 0, 0, err, sizeof err);
    topo_publish(q->t, s);
    q->state = RQ_ROUTE;
    if (q->map_then_done) return request_push(L, q, "done");
    return request_route(L, q);
}

/* ---- routing -------------------------------------------------------------- */

/* Sentinel: nothing goes to a master in doubt: "sleep" until the follower
 * thread confirms one (as router.c waits, within the connect timeout; not
 * counted as a try), or 0 when one is. */
static int request_look(lua_State *L, request_ud *q) {
    topo *t = q->t;
    if (t->mode != TOPO_SENTINEL || topo_confirmed(t)) {
        q->look_until = 0;
        return 0;
    }
    topo_follow(t);
    if (q->look_until == 0) q->look_until = deadline_in_ms(t->cfg.connect_timeout_ms);
    if (deadline_passed(q->x.deadline) || deadline_passed(q->look_until)) {
        exec_fail(&q->x, CONN_ETIMEOUT, EXEC_ERR_NO_MASTER);
        return request_fail(L, q);
    }
    return request_sleep(L, REQUEST_SENTINEL_POLL, RQ_AFTER_LOOK);
}

/* The node of the attempt in snapshot s: the ASK target's, or the key's;
 * -1 when there is none. */
static int request_node(request_ud *q, const topo_snap *s) {
    const char *target = exec_target(&q->x);
    topo_node ask;
    int i, node = -1;
    if (target == NULL) return q->x.key ? topo_node_of(s, q->x.key, q->x.klen) : 0;
    if (topo_node_parse(target, strlen(target), &ask) != 0) return -1;
    for (i = 0; i < s->nnodes && node < 0; i++)
        if (topo_node_same(&s->nodes[i], &ask)) node = i;
    topo_node_clear(&ask);
    return node;
}

/* Where the next attempt goes: "connect" to a node, or what to wait for. */
static int request_route(lua_State *L, request_ud *q) {
    exec_req *x = &q->x;
    topo *t = q->t;
    topo_snap *s;
    int node, k;
    if (exec_resolve(x)) {
        /* the map changed, or the master did: look again (Sentinel: nobody
         * writes to that master until the sentinels confirm one again) */
        if (q->epoch && !q->no_doubt) topo_doubt(t, q->epoch);
        /* (Cluster: unless another request published a newer map since
         * this one was routed, as topo_refresh's `seen`: one request of
         * the worker asks, not every one a MOVED reached) */
        if (t->mode == TOPO_CLUSTER && (q->epoch == 0 || topo_epoch(t) == q->epoch)) return request_map(L, q, 0);
        /* (the look below, or the map another request just published, is
         * this request's fresh one, as router_refresh's: a connect that
         * fails after it is final, exec_failed) */
        x->st.refreshed = 1;
    }
    if (t->mode == TOPO_SINGLE) {
        /* the address as given (nginx resolves a name, with its resolver) */
        topo_node n = {.host = t->cfg.host, .port = t->cfg.port, .path = t->cfg.path};
        return request_connect(L, q, &n, RQ_READ);
    }
    q->doubts = topo_doubts(t);   /* (before topo_confirmed: see topo.h) */
    if ((k = request_look(L, q)) != 0) return k;
    s = topo_snap_get(t);
    if (s == NULL) {
        if (t->mode == TOPO_CLUSTER && !x->st.refreshed) return request_map(L, q, 0);
        exec_fail(x, CONN_ECONNECT, "connection failed: no topology loaded");
        return request_fail(L, q);
    }
    node = request_node(q, s);
    if (node < 0) {
        topo_snap_put(t, s);
        if (!x->st.refreshed && t->mode == TOPO_CLUSTER) {
            x->st.asking = 0;
            return request_map(L, q, 0);
        }
        exec_fail(x, CONN_EREDIS, "redis error: CLUSTERDOWN no node serves this key's slot");
        return request_fail(L, q);
    }
    q->epoch = s->epoch;
    k = request_connect(L, q, &s->nodes[node], RQ_READ);
    topo_snap_put(t, s);
    return k;
}

/* The machine's step turned into Lua's next action. */
static int request_step(lua_State *L, request_ud *q, int step) {
    const char *p;
    size_t n;
    if (q->kind == 'w' && (step == EXEC_SEND || step == EXEC_ROUTE || step == EXEC_PAUSE)) {
        /* the attempt behind the BLPOP was refused and did not run: the
         * wait says so, and the next attempt goes the ordinary way (as
         * route_wait.c); a Cluster's refusal but NOSCRIPT has the map
         * looked up again first */
        redisReply *refused = exec_take_answer(&q->x);
        if (refused) freeReplyObject(refused);
        if (q->t->mode == TOPO_CLUSTER && step != EXEC_SEND && topo_epoch(q->t) == q->epoch)
            return request_map(L, q, 1);
        return request_push(L, q, "done");
    }
    switch (step) {
    case EXEC_MORE:
        lua_pushliteral(L, "more");
        return 1;
    case EXEC_SEND:
        if (exec_write(&q->x, &q->xc) != 0) return request_fail(L, q);
        n = conn_detach_take(q->xc.c, &p);
        lua_pushliteral(L, "send");
        lua_pushlstring(L, p, n);
        return 2;
    case EXEC_DONE:
        if (q->wait_n > 0 && q->x.answer && q->x.answer->type != REDIS_REPLY_ERROR) {
            if (wait_cmd_append(q->xc.c, q->wait_n, q->wait_ms) != 0) return request_fail(L, q);
            q->state = RQ_WAIT;
            n = conn_detach_take(q->xc.c, &p);
            lua_pushliteral(L, "send");
            lua_pushlstring(L, p, n);
            return 2;
        }
        return request_push(L, q, "done");
    case EXEC_PAUSE:
        q->state = RQ_ROUTE;
        return request_sleep(L, (double)exec_pause_ms(&q->x) / 1000.0, RQ_AFTER_PAUSE);
    case EXEC_ROUTE:
        q->state = RQ_ROUTE;
        if (exec_try(&q->x) == EXEC_FAIL) return request_fail(L, q);
        return request_route(L, q);
    default:
        return request_fail(L, q);
    }
}

/* rq:next([token]): where the next attempt goes; token: the third value of
 * the "sleep" just slept (after a pause: whether there is one more try;
 * after a look at the sentinels: no try is counted). */
static int meth_next(lua_State *L) {
    request_ud *q = request_check(L);
    lua_Integer token = luaL_optinteger(L, 2, 0);
    if (q->written && (q->state == RQ_READ || q->state == RQ_WAIT || q->state == RQ_MAP))
        return luaL_error(L, "request: next while its replies are awaited (feed or lost)");
    if (q->state == RQ_DONE) return request_push(L, q, "done");
    if (q->state == RQ_FAIL) return request_push(L, q, "fail");
    if (token == RQ_AFTER_PAUSE) {
        if (exec_after_pause(&q->x) == EXEC_DONE) return request_push(L, q, "done");
    } else if (token != RQ_AFTER_LOOK && exec_try(&q->x) == EXEC_FAIL) {
        return request_fail(L, q);
    }
    return request_route(L, q);
}

/* CLUSTER SLOTS and CLUSTER NODES, in one write (cluster_load's). */
static int request_map_write(request_ud *q) {
    const char *slots[2] = {"CLUSTER", "SLOTS"}, *nodes[2] = {"CLUSTER", "NODES"};
    size_t lens[2] = {7, 5};
    return conn_append(q->xc.c, 2, slots, lens) != 0 || conn_append(q->xc.c, 2, nodes, lens) != 0 ? -1 : 0;
}

/* This socket's attempt: the map's questions, or the request's bytes. */
static int request_queue(request_ud *q) {
    return q->state == RQ_MAP ? request_map_write(q) : exec_write(&q->x, &q->xc);
}

/* rq:write(fresh) -> bytes | nil (failed: next() says so). On a fresh
 * socket the bytes are its handshake alone: the attempt's follow once its
 * replies came (feed's "send"), as conn_ensure does before any request. */
static int meth_write(lua_State *L) {
    request_ud *q = request_check(L);
    const char *p;
    size_t n;
    int fresh = lua_toboolean(L, 2);
    if ((q->state != RQ_READ && q->state != RQ_MAP) || q->written)
        return luaL_error(L, "request: write without a connect");
    q->written = 1;
    q->handshaking = fresh;
    if (conn_detach_begin(q->xc.c, fresh) != 0 || (!fresh && request_queue(q) != 0)) {
        exec_fail(&q->x, CONN_ENOMEM, "out of memory");
        q->state = RQ_FAIL;
        lua_pushnil(L);
        return 1;
    }
    n = conn_detach_take(q->xc.c, &p);
    lua_pushlstring(L, p, n);
    return 1;
}

/* Lua's socket failed (err: its text, nginx's words: "timeout", "closed",
 * "connection refused", ...; sent: a byte may have gone): the request's
 * failure, as the machine says what it means. */
static int request_lost_step(lua_State *L, request_ud *q, int sent);

static int request_lost(lua_State *L, request_ud *q, const char *err, int sent) {
    conn *c = q->xc.c;
    int timeout = strcmp(err, "timeout") == 0, kind = timeout || strstr(err, "timed out") ? CONN_ETIMEOUT :
                                                      sent ? CONN_ELOST : CONN_ECONNECT;
    conn_fail(c, kind, sent ? "lost" : "failed", timeout ? "timed out" : err);
    if (q->state == RQ_MAP) return request_map_failed(L, q, c->errstr);
    if (q->state == RQ_WAIT) {
        /* the script ran (its answer came); its WAIT's did not */
        q->acks = -1;
        return request_push(L, q, "done");
    }
    return request_lost_step(L, q, sent);
}

/* The attempt's conn failed (its err, errstr): what the machine says. */
static int request_lost_step(lua_State *L, request_ud *q, int sent) {
    int step = exec_failed(&q->x, &q->xc, sent);
    q->state = RQ_ROUTE;
    if (step == EXEC_FAIL) {
        if (exec_resolve(&q->x) && q->epoch && !q->no_doubt) topo_doubt(q->t, q->epoch);
        return request_fail(L, q);
    }
    return request_step(L, q, step);
}

/* The conn failed reading (a protocol error, a refused handshake: its own
 * words), or closed: as Lua's socket failing. */
static int request_broke(lua_State *L, request_ud *q) {
    if (q->xc.c->err == 0) return request_lost(L, q, "closed", !q->handshaking);
    if (q->state == RQ_MAP) return request_map_failed(L, q, q->xc.c->errstr);
    if (q->state == RQ_WAIT) {
        q->acks = -1;
        return request_push(L, q, "done");
    }
    return request_lost_step(L, q, !q->handshaking);
}

/* rq:lost(sent, err) */
static int meth_lost(lua_State *L) {
    request_ud *q = request_check(L);
    if (q->state != RQ_READ && q->state != RQ_WAIT && q->state != RQ_MAP)
        return luaL_error(L, "request: lost without a connect");
    /* (the attempt's bytes handed out may have gone, whatever the driver
     * thinks; a handshake alone ran nothing of it) */
    return request_lost(L, q, luaL_optstring(L, 3, "closed"),
                        !q->handshaking && (lua_toboolean(L, 2) || q->written));
}

/* The WAIT's answer (then_wait). */
static int request_waited(lua_State *L, request_ud *q, redisReply *r) {
    q->acks = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return request_push(L, q, "done");
}

/* rq:feed(data) */
static int meth_feed(lua_State *L) {
    request_ud *q = request_check(L);
    size_t len;
    const char *data = luaL_checklstring(L, 2, &len);
    if ((q->state != RQ_READ && q->state != RQ_WAIT && q->state != RQ_MAP) || !q->written)
        return luaL_error(L, "request: nothing is being read");
    if (conn_detach_feed(q->xc.c, data, len) != 0) return request_lost(L, q, "out of memory", !q->handshaking);
    for (;;) {
        redisReply *r = NULL;
        int k = exec_conn_reply(&q->xc, &r), step;
        if (k < 0) return request_broke(L, q);
        if (k == 0) {
            if (q->handshaking && q->xc.c->hs_next >= q->xc.c->hs_n) {
                /* the handshake's replies came, all accepted: now the
                 * attempt's bytes, on the same socket */
                const char *p;
                size_t n;
                q->handshaking = 0;
                if (q->state == RQ_READ && q->t->mode == TOPO_SENTINEL && topo_doubts(q->t) != q->doubts) {
                    /* a doubt was cast while this socket was made (its
                     * connect, TLS, handshake): nothing of the request was
                     * sent, and nothing is to that master until the
                     * sentinels confirm one (the socket is clean) */
                    q->state = RQ_ROUTE;
                    if (exec_try(&q->x) == EXEC_FAIL) return request_fail(L, q);
                    return request_route(L, q);
                }
                if (request_queue(q) != 0) {
                    if (q->state == RQ_MAP) exec_fail(&q->x, CONN_ENOMEM, "out of memory");
                    return request_fail(L, q);
                }
                n = conn_detach_take(q->xc.c, &p);
                lua_pushliteral(L, "send");
                lua_pushlstring(L, p, n);
                return 2;
            }
            /* a reply still incomplete past the request's deadline: timed
             * out, however the bytes trickle (each one restarts the
             * driver's per-read timeout; the native driver's deadline is a
             * total, conn_read) */
            if ((q->state == RQ_READ || q->state == RQ_MAP) && deadline_passed(q->x.deadline))
                return request_lost(L, q, "timeout", !q->handshaking);
            lua_pushliteral(L, "more");
            return 1;
        }
        if (q->handshaking) {
            /* (nothing but the handshake was sent: cannot happen) */
            freeReplyObject(r);
            conn_fail(q->xc.c, CONN_ELOST, "failed", "protocol error");
            return request_broke(L, q);
        }
        if (q->state == RQ_WAIT) return request_waited(L, q, r);
        if (q->state == RQ_MAP) {
            if (q->map_slots == NULL) {
                q->map_slots = r;
                continue;
            }
            return request_map_loaded(L, q, r);
        }
        step = exec_reply(&q->x, &q->xc, r);
        if (step == EXEC_MORE) {
            if (q->kind == 'w' && q->x.st.pre_due == 0 && q->x.pre_reply != NULL)
                q->x.deadline = deadline_in_ms(q->t->cfg.timeout_ms);
            continue;
        }
        if (step != EXEC_FAIL && q->t->mode == TOPO_SENTINEL && topo_doubts(q->t) != q->doubts) {
            /* a doubt was cast while it ran: as route_read says (whatever
             * the reply asks next, nothing more goes to that master) */
            exec_clear(&q->x);
            exec_fail(&q->x, CONN_ELOST, "connection lost: the master came in doubt while the request ran "
                                         "(a failover may be under way)");
            return request_fail(L, q);
        }
        return request_step(L, q, step);
    }
}

/* rq:clean() -> whether the socket may go back to nginx's pool: every
 * reply it was sent for came, and nothing failed on it. */
static int meth_clean(lua_State *L) {
    request_ud *q = request_check(L);
    lua_pushboolean(L, q->xc.c->reader != NULL && q->x.st.due == 0 && q->state != RQ_WAIT &&
                           !(q->state == RQ_FAIL && q->x.err != CONN_EREDIS));
    return 1;
}

/* rq:then_wait(n, ms) */
static int meth_then_wait(lua_State *L) {
    request_ud *q = request_check(L);
    lua_Integer n = luaL_checkinteger(L, 2), ms = luaL_checkinteger(L, 3);
    if (n < 0 || n > 1000000) return luaL_argerror(L, 2, "replica count out of range");
    if (ms < 1 || ms > 86400000) return luaL_argerror(L, 3, "timeout out of range");
    q->wait_n = (int)n;
    q->wait_ms = (long)ms;
    return 0;
}

/* Pushes a failure: nil, err, kind. */
static int request_push_fail(lua_State *L, const request_ud *q) {
    lua_pushnil(L);
    lua_pushstring(L, q->x.errstr[0] ? q->x.errstr : "connection lost");
    lua_pushstring(L, conn_kind(q->x.err));
    return 3;
}

/* A wait's result, as client:blpop_script gives it (client_wait.c). */
static int request_wait_result(lua_State *L, request_ud *q) {
    redisReply *woken = exec_take_pre(&q->x), *attempt = q->state == RQ_DONE ? exec_take_answer(&q->x) : NULL;
    if (woken == NULL || q->state != RQ_DONE) {
        /* (the BLPOP's reply came and the attempt's did not: it may have run) */
        if (woken) freeReplyObject(woken);
        if (attempt) freeReplyObject(attempt);
        return request_push_fail(L, q);
    }
    return luaval_push_wait(L, woken, attempt);
}

/* rq:result() */
static int meth_result(lua_State *L) {
    request_ud *q = request_check(L);
    redisReply *r;
    int n;
    if (q->kind == 'w') return request_wait_result(L, q);
    if (q->state != RQ_DONE || (r = exec_take_answer(&q->x)) == NULL) return request_push_fail(L, q);
    if ((n = luaval_push_answer(L, r)) != 1 || q->wait_n <= 0) return n;
    if (q->acks < 0) lua_pushnil(L);
    else lua_pushinteger(L, (lua_Integer)q->acks);
    return 2;
}

/* client:request(kind, timeout, until, ...) -> rq */
static int meth_request(lua_State *L) {
    client_ud *u = client_check(L);
    const char *kind = luaL_checkstring(L, 2);
    lua_Number timeout = luaL_checknumber(L, 3);
    int64_t until = DEADLINE_NONE;
    const script_def *s = NULL;
    request_ud *q;
    conn_config cfg;
    int n, first = 5, mode = u->t->mode, skip = 0;
    const char *argv[REQUEST_MAX_ARGS];
    size_t lens[REQUEST_MAX_ARGS];
    if (!(timeout >= 0 && timeout <= 86400)) return luaL_argerror(L, 3, "timeout out of range");
    if (!lua_isnoneornil(L, 4)) {
        /* (as client:deadline: math.huge, or any t past 1e12 s, is none;
         * converting it to int64_t would be undefined) */
        lua_Number t = luaL_checknumber(L, 4);
        if (!(t >= 0)) return luaL_argerror(L, 4, "deadline out of range");
        until = t < 1e12 ? (int64_t)(t * 1e6) : DEADLINE_NONE;
    }
    n = luaval_args(L, first, argv, lens, REQUEST_MAX_ARGS);   /* (before the userdata is pushed) */
    q = (request_ud *)lua_newuserdata(L, sizeof *q);
    memset(q, 0, sizeof *q);
    q->acks = -1;
    luaL_getmetatable(L, REQUEST_MT);
    lua_setmetatable(L, -2);
    topo_retain(u->t);
    q->t = u->t;
    q->kind = kind[0];
    if (strcmp(kind, "wait") == 0) {
        /* (never under Sentinel: route_wait.c says why) */
        if (mode == TOPO_SENTINEL) return luaL_argerror(L, 2, "no wait with its attempt under Sentinel");
        skip = 2;   /* key, seconds: the BLPOP's */
        q->no_doubt = 1;
    } else if (strcmp(kind, "script") != 0 && strcmp(kind, "command") != 0) {
        return luaL_argerror(L, 2, "script, command or wait expected");
    }
    if (q->kind == 's' || q->kind == 'w') {
        size_t len;
        const char *name = luaL_checklstring(L, first + skip, &len);
        s = script_find_len(name, len);
        if (s == NULL) return luaL_argerror(L, first + skip, "no such script");
    }
    request_args(L, q, n, argv, lens);
    if (s) {
        /* [key seconds] name keys... args...: the script's own after its name */
        int own = n - skip - 1;
        int k;
        if (own < s->nkeys) return luaL_error(L, "script '%s' takes %d keys, got %d arguments", s->name, s->nkeys, own);
        if (own > SCRIPT_MAX_ARGS) return luaL_error(L, "too many arguments (at most %d)", SCRIPT_MAX_ARGS);
        k = script_first_key(s, own, q->argv + skip + 1, q->lens + skip + 1);
        if (s->nkeys < 0 && k < 0)
            return luaL_error(L, "script '%s' takes its key count first, then as many keys", s->name);
        exec_init(&q->x, s, own, q->argv + skip + 1, q->lens + skip + 1, k >= 0 ? q->argv[skip + 1 + k] : NULL,
                  k >= 0 ? q->lens[skip + 1 + k] : 0, mode, 0, (long)(timeout * 1000), until);
        if (skip) exec_set_pre(&q->x, 3, (const char *const[]){"BLPOP", q->argv[0], q->argv[1]},
                               (const size_t[]){5, q->lens[0], q->lens[1]});
    } else {
        if (n < 1) return luaL_argerror(L, first, "a command name expected");
        q->no_doubt = q->lens[0] == 5 && strncasecmp(q->argv[0], "BLPOP", 5) == 0;
        exec_init(&q->x, NULL, n, q->argv, q->lens, n > 1 ? q->argv[1] : NULL, n > 1 ? q->lens[1] : 0, mode, 0,
                  (long)(timeout * 1000), until);
    }
    /* the conn the bytes are written and read on: the node's settings for
     * the handshake, never TLS (nginx's socket does it), no native
     * commands (a pooled socket's handshake, which learns them, is not
     * seen again) */
    topo_node_config(u->t, &(topo_node){.port = u->t->cfg.port}, &cfg);
    cfg.host = cfg.path = NULL;
    cfg.tls = NULL;
    q->xc.c = conn_new(&cfg);
    if (q->xc.c == NULL) return luaL_error(L, "out of memory");
    q->xc.nat.off = 1;
    q->xc.c->counters = &q->net;
    q->state = RQ_ROUTE;
    return 1;
}

/* rq:reloads() -> scripts it sent again as EVAL after NOSCRIPT (the
 * transport's stats) */
static int meth_reloads(lua_State *L) {
    request_ud *q = request_check(L);
    lua_pushinteger(L, (lua_Integer)q->net.noscript_reloads);
    return 1;
}

static const luaL_Reg request_methods[] = {
    {"reloads", meth_reloads},
    {"next", meth_next},
    {"write", meth_write},
    {"feed", meth_feed},
    {"lost", meth_lost},
    {"clean", meth_clean},
    {"then_wait", meth_then_wait},
    {"result", meth_result},
    {NULL, NULL}
};

static const luaL_Reg request_meta[] = {
    {"__gc", request_gc},
    {NULL, NULL}
};

void client_request_register(lua_State *L) {
    luaL_newmetatable(L, REQUEST_MT);      /* mt */
    luaL_setfuncs(L, request_meta, 0);
    luaL_newlib(L, request_methods);       /* mt, methods */
    lua_setfield(L, -2, "__index");        /* mt */
    lua_pop(L, 1);                         /* */
}

const luaL_Reg client_request_methods[] = {
    {"request", meth_request},
    {NULL, NULL}
};
