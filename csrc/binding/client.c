/*
 * client.c: the Lua userdata around a client's connections.
 *
 * Modelled on liolib's file handles: the userdata is created "closed" before
 * anything that can fail, so __gc is always safe; close is idempotent and is
 * also __gc and __close; using a closed client raises a clear error. The
 * userdata holds pointers to malloc'd C state rather than the state itself,
 * because other C owners (the watchdog) need it to outlive the Lua value.
 *
 * A client has a topology (topo.c: one node, a Sentinel-resolved master, or
 * a Cluster's slot map), shared with its watchdog and its wait client, and
 * a router of its own (router.c: this thread's connections to the nodes).
 *
 * Runtime failures return nil, err, kind; wrong arguments raise via
 * luaL_argerror.
 */
#include "binding/client.h"
#include "binding/client_ud.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lauxlib.h"
#include "binding/compat.h"
#include "net/conn.h"
#include "base/deadline.h"
#include "base/intr.h"
#include "binding/luaval.h"
#include "topo/router.h"
#include "cmd/script.h"
#include "topo/topo.h"
#include "binding/watch.h"
#include "watchdog/watchdog.h"

/* ---- interrupts (intr.h) ---------------------------------------------- */

/* The hooks on the calling state and on its main thread when the call
 * began. lua.c sets its SIGINT hook on the main thread; a wait inside a
 * coroutine then gives up too, and returns "interrupted" (the hook raises
 * once the main thread runs). */
static __thread struct {
    lua_State *main;
    lua_Hook hook, main_hook;
    int mask, main_mask;
} client_intr;

static int client_intr_check(void *ud) {
    lua_State *L = (lua_State *)ud;
    if (lua_gethook(L) != client_intr.hook || lua_gethookmask(L) != client_intr.mask) return 1;
    return client_intr.main != NULL && (lua_gethook(client_intr.main) != client_intr.main_hook ||
                                        lua_gethookmask(client_intr.main) != client_intr.main_mask);
}

void client_intr_arm(lua_State *L) {
    client_intr.hook = lua_gethook(L);
    client_intr.mask = lua_gethookmask(L);
    client_intr.main = NULL;
#if LUA_VERSION_NUM >= 502
    if (lua_pushthread(L) == 0) {   /* L is a coroutine: its main thread too */
        lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
        client_intr.main = lua_tothread(L, -1);
        lua_pop(L, 1);
        client_intr.main_hook = lua_gethook(client_intr.main);
        client_intr.main_mask = lua_gethookmask(client_intr.main);
    }
    lua_pop(L, 1);
#endif
    intr_arm(client_intr_check, L);
}

/* client:wait_client() -> a client on the same topology with connections
 * of its own (for blocking waits), connected lazily | nil, err, "memory" */
static int meth_wait_client(lua_State *L) {
    client_ud *u = client_check(L), *w;
    w = client_push_closed(L);
    w->r = router_new(u->t, 1);
    if (w->r == NULL) {
        lua_pushnil(L);
        lua_pushliteral(L, "memory: out of memory (the wait connection)");
        lua_pushliteral(L, "memory");
        return 3;
    }
    w->r->no_doubt = 1;   /* (router.h: its BLPOPs write no lease) */
    topo_retain(u->t);
    w->t = u->t;
    return 1;
}

/* ---- arguments and replies ------------------------------------------- */

/* core.number_arg(x) -> the string a command argument x is sent as: the one
 * rule, for transports that write their own requests (cosocket.lua). */
int client_global_number_arg(lua_State *L) {
    luaL_checknumber(L, 1);
    lua_settop(L, 1);
    luaval_number_arg(L, 1);
    return 1;
}

int client_result(lua_State *L, client_ud *u, redisReply *r) {
    if (r == NULL) {
        lua_pushnil(L);
        lua_pushstring(L, u->r->errstr);
        lua_pushstring(L, router_kind(u->r));
        return 3;
    }
    return luaval_push_answer(L, r);
}

/* ---- methods ------------------------------------------------------------- */

const script_def *client_script_args(lua_State *L, int name_idx, const char **argv, size_t *lens,
                                     int *n) {
    size_t len;
    const char *name = luaL_checklstring(L, name_idx, &len);
    const script_def *s = script_find_len(name, len);
    if (s == NULL) luaL_argerror(L, name_idx, "no such script");
    *n = luaval_args(L, name_idx + 1, argv, lens, SCRIPT_MAX_ARGS);
    if (*n < s->nkeys)
        luaL_error(L, "script '%s' takes %d keys, got %d arguments", s->name, s->nkeys, *n);
    if (s->nkeys < 0 && script_first_key(s, *n, argv, lens) < 0)
        luaL_error(L, "script '%s' takes its key count first, then as many keys", s->name);
    return s;
}

/* client:script(name, keys..., args...) -> reply | nil, err
 * Runs one of the embedded scripts (EVALSHA, EVAL on NOSCRIPT). */
static int meth_script(lua_State *L) {
    const char *argv[SCRIPT_MAX_ARGS];
    size_t lens[SCRIPT_MAX_ARGS];
    client_ud *u = client_check(L);
    int n;
    const script_def *s = client_script_args(L, 2, argv, lens, &n);
    redisReply *r;
    client_intr_arm(L);
    r = route_script(u->r, s, n, argv, lens);
    intr_disarm();
    return client_result(L, u, r);
}

/* client:command(name, args...) -> reply | nil, err, kind
 * Any Redis command, binary safe, on the node of its first argument taken
 * as a key (Cluster; elsewhere there is one node). Nil replies come back as
 * false. */
#define CLIENT_MAX_COMMAND_ARGS 64
static int meth_command(lua_State *L) {
    const char *argv[CLIENT_MAX_COMMAND_ARGS];
    size_t lens[CLIENT_MAX_COMMAND_ARGS];
    client_ud *u = client_check(L);
    int n;
    redisReply *r;
    luaL_checkstring(L, 2);
    n = luaval_args(L, 2, argv, lens, CLIENT_MAX_COMMAND_ARGS);
    client_intr_arm(L);
    r = route_command(u->r, n > 1 ? argv[1] : NULL, n > 1 ? lens[1] : 0, n, argv, lens);
    intr_disarm();
    return client_result(L, u, r);
}

/* The watchdog, made on first use, on the client's topology (its own
 * connections: a connection is not thread-safe; the addresses the
 * topology resolved: the watchdog thread never resolves a name). NULL with
 * a message in err. */
static wd *client_wd(client_ud *u, char *err, size_t errlen) {
    if (router_sync(u->r) != 0) {
        snprintf(err, errlen, "%s", u->r->errstr);
        return NULL;
    }
    if (u->wd == NULL) u->wd = wd_new(u->t, err, errlen);
    client_events_follow(u);
    return u->wd;
}

/* A set's keys (a list of 2 to WD_SET_MAX strings at idx) as its first
 * key and the rest, in out (kept alive by the list on the stack). */
static void watch_set_keys(lua_State *L, int idx, const char **key, size_t *klen, wd_keys *out,
                           const char **more, size_t *lens) {
    int i, n = (int)lua_rawlen(L, idx);
    if (n < 2 || n > WD_SET_MAX) luaL_argerror(L, idx, "2 to 16 keys expected");
    for (i = 1; i <= n; i++) {
        size_t len;
        const char *k;
        lua_rawgeti(L, idx, i);
        k = lua_tolstring(L, -1, &len);
        if (k == NULL || lua_type(L, -1) != LUA_TSTRING) luaL_argerror(L, idx, "keys must be strings");
        lua_pop(L, 1);   /* (the list keeps it) */
        if (i == 1) {
            *key = k;
            *klen = len;
        } else {
            more[i - 2] = k;
            lens[i - 2] = len;
        }
    }
    out->n = n - 1;
    out->keys = more;
    out->lens = lens;
}

/* client:watch(key, token, ttl, lease_end [, hold_until [, renew [, spare]]])
 *   -> watch, id | nil, err
 * Registers a held lock with the watchdog. Seconds; lease_end and hold_until
 * on the monotonic clock (core.monotime). renew: the embedded script that
 * renews it (default "extend"; "extend_grant" for a reentrant lock or
 * writer, whose grant it renews with the key; "zset_renew" for a reader or a
 * permit; "rw_renew_reentrant" for a reentrant reader, with its counts).
 * key may be a list of keys, a set's (client:acquire_all): renewed together
 * by a variadic renew script ("extend_all"), one registration for all.
 * spare: an unwatched handle that nothing uses any more, bound to the new
 * lock instead of a new one (the hot path's: no allocation, nothing for the
 * collector); anything else is ignored. */
static int meth_watch(lua_State *L) {
    client_ud *u = client_check(L);
    size_t klen = 0, toklen;
    const char *key = NULL;
    const char *more_keys[WD_SET_MAX - 1];
    size_t more_lens[WD_SET_MAX - 1];
    wd_keys more, *set = NULL;
    const char *token;
    if (lua_type(L, 2) == LUA_TTABLE) {
        watch_set_keys(L, 2, &key, &klen, &more, more_keys, more_lens);
        set = &more;
    } else {
        key = luaL_checklstring(L, 2, &klen);
    }
    token = luaL_checklstring(L, 3, &toklen);
    lua_Number ttl = luaL_checknumber(L, 4);
    lua_Number end = luaL_checknumber(L, 5);
    lua_Number hold = luaL_optnumber(L, 6, 0);
    const char *renew_name = luaL_optstring(L, 7, "extend");
    const script_def *renew = script_find(renew_name);
    char err[CONN_ERRSTR_LEN];
    uint64_t id;
    if (renew == NULL || renew->nkeys != (set ? -1 : 1)) return luaL_argerror(L, 7, "no such renewal script");
    if (!(ttl >= 0.001 && ttl < 1e10)) return luaL_argerror(L, 4, "ttl out of range");
    if (!(end >= 0 && end < 1e12)) return luaL_argerror(L, 5, "lease end out of range");
    if (!(hold >= 0 && hold < 1e12)) return luaL_argerror(L, 6, "hold end out of range");
    /* a spare handle (argument 8) is bound anew rather than a new one made */
    if (lua_gettop(L) < 8 || !watch_push_spare(L, 8)) watch_push_unbound(L);
    if (client_wd(u, err, sizeof err) == NULL ||
        wd_watch(u->wd, key, klen, set, token, toklen, (int64_t)(ttl * 1000 + 0.5),
                 (int64_t)(end * 1000), (int64_t)(hold * 1000), renew, &id, err, sizeof err) != 0) {
        lua_pushnil(L);
        lua_pushstring(L, err);
        return 2;
    }
    watch_bind(L, -1, u->wd, id);
    lua_pushinteger(L, (lua_Integer)id);   /* its id, as loss reports name it */
    return 2;
}

/* client:losses() -> { id, state, id, state, ... } | nil
 * Drains the watchdog's loss reports (and its fd). */
static int meth_losses(lua_State *L) {
    uint64_t ids[64];
    int states[64], n, i, k = 0;
    client_ud *u = (client_ud *)udata_check(L, 1, UDATA_CLIENT, sizeof(client_ud), CLIENT_MT);
    if (u->wd == NULL) return 0;
    while ((n = wd_take_losses(u->wd, ids, states, 64)) > 0) {
        if (k == 0) lua_newtable(L);
        for (i = 0; i < n; i++) {
            lua_pushinteger(L, (lua_Integer)ids[i]);
            lua_rawseti(L, -2, ++k);
            lua_pushstring(L, wd_state_name(states[i]));
            lua_rawseti(L, -2, ++k);
        }
    }
    return k > 0 ? 1 : 0;
}

/* client:fd() -> an fd that is readable while loss reports are pending,
 * or nil, err when none could be made (then no lock can be watched either). */
static int meth_fd(lua_State *L) {
    client_ud *u = client_check(L);
    char err[CONN_ERRSTR_LEN];
    int fd;
    if (client_wd(u, err, sizeof err) == NULL) {
        lua_pushnil(L);
        lua_pushstring(L, err);
        return 2;
    }
    fd = wd_fd(u->wd);
    if (fd < 0) {
        lua_pushnil(L);
        lua_pushfstring(L, "cannot make an eventfd: %s", strerror(errno));
        return 2;
    }
    lua_pushinteger(L, fd);
    return 1;
}

/* client:server_info() -> { maxmemory_policy = "noeviction" | nil,
 *                            info_error = "NOPERM ..." | nil,
 *                            native = { delifeq = bool, ... } | nil,
 *                            native_nodes = { ["host:port"] = {...} } | nil }
 * What the connect's INFO memory said (probe = true), and the native
 * compare commands the connected nodes have (client_native.c). */
static int meth_server_info(lua_State *L) {
    client_ud *u = client_check(L);
    const conn_info *info = NULL;
    int i;
    for (i = 0; i < u->r->nconns && info == NULL; i++)
        if (u->r->conns[i] && (u->r->conns[i]->c->info.maxmemory_policy[0] || u->r->conns[i]->c->info.info_error[0]))
            info = &u->r->conns[i]->c->info;
    lua_createtable(L, 0, 2);
    if (info && info->maxmemory_policy[0]) {
        lua_pushstring(L, info->maxmemory_policy);
        lua_setfield(L, -2, "maxmemory_policy");
    }
    if (info && info->info_error[0]) {
        lua_pushstring(L, info->info_error);
        lua_setfield(L, -2, "info_error");
    }
    client_native_info(L, u);
    return 1;
}

/* client:stats() -> { renewals=, round_trips=, failures=, watched=,
 *                     last_batch=, lost = { ["not held"]=n, ... },
 *                     topology_changes=, topology_failures=, reconnects=,
 *                     noscript_reloads=, events_dropped=,
 *                     renewal_waits=, renewals_unacked= } */
static int meth_stats(lua_State *L) {
    client_ud *u = (client_ud *)luaL_checkudata(L, 1, CLIENT_MT);
    wd_stats s;
    int i;
    memset(&s, 0, sizeof s);
    if (u->wd != NULL) wd_get_stats(u->wd, &s);
    lua_createtable(L, 0, 8);
    if (u->t) {
        pthread_mutex_lock(&u->t->mu);
        lua_pushinteger(L, (lua_Integer)u->t->refreshes);
        lua_setfield(L, -2, "topology_changes");
        lua_pushinteger(L, (lua_Integer)u->t->refresh_failures);
        lua_setfield(L, -2, "topology_failures");
        pthread_mutex_unlock(&u->t->mu);
    }
#define STAT(name) lua_pushinteger(L, (lua_Integer)s.name); lua_setfield(L, -2, #name)
    STAT(renewals);
    STAT(round_trips);
    STAT(failures);
    STAT(watched);
    STAT(last_batch);
#undef STAT
    /* the renewals that waited for a replica, and those none acknowledged */
    lua_pushinteger(L, (lua_Integer)s.waits);
    lua_setfield(L, -2, "renewal_waits");
    lua_pushinteger(L, (lua_Integer)s.unacked);
    lua_setfield(L, -2, "renewals_unacked");
    client_push_net_stats(L, u, &s);
    lua_createtable(L, 0, WD_STATE_COUNT);
    for (i = 1; i < WD_STATE_COUNT; i++) {
        lua_pushinteger(L, (lua_Integer)s.lost[i]);
        lua_setfield(L, -2, wd_state_name(i));
    }
    lua_setfield(L, -2, "lost");
    return 1;
}

/* client:set_timeout(seconds): the per-command timeout from now on (0 waits
 * forever). A blocking wait (BLPOP) needs one longer than its own. */
static int meth_set_timeout(lua_State *L) {
    client_ud *u = client_check(L);
    lua_Number t = luaL_checknumber(L, 2);
    if (!(t >= 0 && t <= 86400)) return luaL_argerror(L, 2, "timeout out of range");
    u->r->timeout_ms = (long)(t * 1000);
    return 0;
}

/* client:deadline(t): the caller's own deadline for the next script or
 * command call only (t on core.monotime's clock; nil or math.huge: none,
 * as for wait = math.huge): a refusal
 * that did not run (TRYAGAIN, LOADING) is waited out until t at most, and
 * then is that call's answer; each request still gets the whole timeout
 * for its reply (router.h). An acquire passes the end of its `wait`. */
static int meth_deadline(lua_State *L) {
    client_ud *u = client_check(L);
    lua_Number t;
    if (lua_isnoneornil(L, 2)) {
        u->r->call_deadline = DEADLINE_NONE;
        return 0;
    }
    t = luaL_checknumber(L, 2);
    if (!(t >= 0)) return luaL_argerror(L, 2, "deadline out of range");
    u->r->call_deadline = t < 1e12 ? (int64_t)(t * 1e6) : DEADLINE_NONE;
    return 0;
}

/* client:set_spin(seconds): from now on each command polls for its reply
 * this long before sleeping in the kernel (0, the default, never polls). For
 * a connection that waits for wakeups: see conn_spin. At most 1 s. */
static int meth_set_spin(lua_State *L) {
    client_ud *u = client_check(L);
    lua_Number t = luaL_checknumber(L, 2);
    if (!(t >= 0 && t <= 1)) return luaL_argerror(L, 2, "spin out of range");
    {
        int i;
        u->r->spin_us = (long)(t * 1e6);
        for (i = 0; i < u->r->nconns; i++)
            if (u->r->conns[i]) conn_set_spin(u->r->conns[i]->c, u->r->spin_us);
    }
    return 0;
}

/* client:close() -> true. Idempotent; also __gc and __close. Stops and
 * joins the watchdog thread; watch handles keep its memory alive. */
static int meth_close(lua_State *L) {
    client_ud *u = (client_ud *)luaL_checkudata(L, 1, CLIENT_MT);
    if (u->wd != NULL) {
        wd_stop(u->wd);
        wd_release(u->wd);
        u->wd = NULL;
    }
    if (u->r != NULL) {
        router_free(u->r);
        u->r = NULL;
    }
    if (u->t != NULL) {
        topo_release(u->t);
        u->t = NULL;
    }
    client_events_free(u);
    lua_pushboolean(L, 1);
    return 1;
}

/* __gc: close, then untag (udata.h). */
static int meth_gc(lua_State *L) {
    meth_close(L);
    udata_untag(L, 1, UDATA_CLIENT, sizeof(client_ud));
    return 0;
}

static int meth_closed(lua_State *L) {
    client_ud *u = (client_ud *)luaL_checkudata(L, 1, CLIENT_MT);
    lua_pushboolean(L, u->t == NULL);
    return 1;
}

/* Names the endpoint, never the password. */
static int meth_tostring(lua_State *L) {
    client_ud *u = (client_ud *)luaL_checkudata(L, 1, CLIENT_MT);
    static const char *const modes[] = {"", "sentinel ", "cluster ", "redlock "};
    char where[160];
    if (u->t == NULL) {
        lua_pushstring(L, "redislock.client (closed)");
        return 1;
    }
    if (u->t->mode == TOPO_SINGLE) {
        topo_node n;
        memset(&n, 0, sizeof n);
        n.host = u->t->cfg.host;
        n.port = u->t->cfg.port;
        n.path = u->t->cfg.path;
        topo_node_describe(&n, where, sizeof where);
    } else if (u->t->nseeds > 0) {
        topo_node_describe(&u->t->seeds[0], where, sizeof where);
    } else {
        snprintf(where, sizeof where, "?");
    }
    lua_pushfstring(L, "redislock.client (%s%s)", modes[u->t->mode], where);
    return 1;
}

static const luaL_Reg client_methods[] = {
    {"script", meth_script},
    {"command", meth_command},
    {"wait_client", meth_wait_client},
    {"watch", meth_watch},
    {"losses", meth_losses},
    {"fd", meth_fd},
    {"server_info", meth_server_info},
    {"stats", meth_stats},
    {"set_timeout", meth_set_timeout},
    {"set_spin", meth_set_spin},
    {"deadline", meth_deadline},
    {"close", meth_close},
    {"closed", meth_closed},
    {NULL, NULL}
};

static const luaL_Reg client_meta[] = {
    {"__gc", meth_gc},
    {"__close", meth_close},
    {"__tostring", meth_tostring},
    {NULL, NULL}
};

void client_register(lua_State *L) {
    watch_register(L);
    client_request_register(L);
    luaL_newmetatable(L, CLIENT_MT);     /* mt */
    luaL_setfuncs(L, client_meta, 0);
    luaL_newlib(L, client_methods);      /* mt, methods */
    luaL_setfuncs(L, client_quorum_methods, 0);
    luaL_setfuncs(L, client_topo_methods, 0);
    luaL_setfuncs(L, client_request_methods, 0);
    luaL_setfuncs(L, client_wait_methods, 0);
    luaL_setfuncs(L, client_events_methods, 0);
    lua_setfield(L, -2, "__index");      /* mt */
    lua_pop(L, 1);                       /* */
}
