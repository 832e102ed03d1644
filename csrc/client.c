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
#include "client.h"
#include "client_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lauxlib.h"
#include "compat.h"
#include "conn.h"
#include "deadline.h"
#include "fanout.h"
#include "luaval.h"
#include "monotime.h"
#include "router.h"
#include "script.h"
#include "slot.h"
#include "topo.h"
#include "watch.h"
#include "watchdog.h"

#define CLIENT_MAX_SEEDS 64

static int client_result(lua_State *L, client_ud *u, redisReply *r);

client_ud *client_check(lua_State *L) {
    client_ud *u = (client_ud *)udata_check(L, 1, UDATA_CLIENT, sizeof(client_ud), CLIENT_MT);
    if (u->t == NULL) luaL_error(L, "attempt to use a closed redislock client");
    return u;
}

/* Pushes a closed-state client userdata (safe to collect whatever follows). */
static client_ud *client_push_closed(lua_State *L) {
    return (client_ud *)udata_new(L, sizeof(client_ud), UDATA_CLIENT, CLIENT_MT);
}

/* ---- reading the config table ------------------------------------------ */

static const char *client_opt_string(lua_State *L, int t, const char *key) {
    const char *s;
    size_t len;
    lua_getfield(L, t, key);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return NULL;
    }
    if (lua_type(L, -1) != LUA_TSTRING)
        luaL_error(L, "bad config field '%s' (string expected, got %s)", key, luaL_typename(L, -1));
    /* Left on the stack so that it stays alive until connect returns, even
     * if an __index metamethod made it up. These go to C strings (a host
     * name, AUTH): an embedded NUL would silently cut them, so refuse it. */
    s = lua_tolstring(L, -1, &len);
    if (strlen(s) != len)
        luaL_error(L, "bad config field '%s' (contains a NUL byte)", key);
    return s;
}

static lua_Number client_opt_number(lua_State *L, int t, const char *key,
                                    lua_Number dflt, lua_Number lo, lua_Number hi) {
    lua_Number n;
    lua_getfield(L, t, key);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return dflt;
    }
    if (lua_type(L, -1) != LUA_TNUMBER)
        luaL_error(L, "bad config field '%s' (number expected, got %s)", key, luaL_typename(L, -1));
    n = lua_tonumber(L, -1);
    lua_pop(L, 1);
    if (!(n >= lo && n <= hi)) /* also rejects NaN */
        luaL_error(L, "bad config field '%s' (out of range)", key);
    return n;
}

/* The "host:port" strings of the array field `key`, kept on the stack. */
static int client_opt_seeds(lua_State *L, int t, const char *key, const char **out, int max) {
    int n = 0, i;
    lua_getfield(L, t, key);
    if (lua_isnil(L, -1)) return 0;
    if (lua_type(L, -1) != LUA_TTABLE)
        luaL_error(L, "bad config field '%s' (table expected, got %s)", key, luaL_typename(L, -1));
    for (i = 1; i <= max + 1; i++) {
        size_t len;
        lua_rawgeti(L, -1, i);
        if (lua_isnil(L, -1)) {
            lua_pop(L, 1);
            break;
        }
        if (i > max) luaL_error(L, "bad config field '%s' (at most %d addresses)", key, max);
        if (lua_type(L, -1) != LUA_TSTRING)
            luaL_error(L, "bad config field '%s' (strings expected)", key);
        out[n] = lua_tolstring(L, -1, &len);
        if (strlen(out[n]) != len) luaL_error(L, "bad config field '%s' (contains a NUL byte)", key);
        n++;
        lua_insert(L, -2);   /* keep the string below the table */
    }
    return n;
}

/* Redlock: the masters of config field `nodes`, each a table of host=,
 * port=, path=, username=, password=, db=, added to t. Returns how many. */
static int client_opt_nodes(lua_State *L, int idx, topo *t) {
    int i, n = 0;
    lua_getfield(L, idx, "nodes");
    if (lua_type(L, -1) != LUA_TTABLE) luaL_error(L, "bad config field 'nodes' (table expected)");
    for (i = 1; i <= 64; i++) {
        topo_node node;
        int top;
        lua_rawgeti(L, -1, i);
        if (lua_isnil(L, -1)) {
            lua_pop(L, 1);
            break;
        }
        if (lua_type(L, -1) != LUA_TTABLE) luaL_error(L, "bad config field 'nodes' (tables expected)");
        top = lua_gettop(L);
        memset(&node, 0, sizeof node);
        node.own_auth = 1;
        node.host = (char *)client_opt_string(L, top, "host");
        node.path = (char *)client_opt_string(L, top, "path");
        node.username = (char *)client_opt_string(L, top, "username");
        node.password = (char *)client_opt_string(L, top, "password");
        node.port = (int)client_opt_number(L, top, "port", 6379, 1, 65535);
        node.db = (int)client_opt_number(L, top, "db", 0, 0, 1 << 20);
        if (node.host == NULL && node.path == NULL) node.host = (char *)"127.0.0.1";
        if (topo_add_seed(t, &node) != 0) luaL_error(L, "out of memory");
        lua_settop(L, top - 1);   /* the strings were copied */
        n++;
    }
    lua_pop(L, 1);
    return n;
}

/* core.connect{host=, port=, path=, username=, password=, db=,
 *              connect_timeout=, timeout=, lazy=, probe=, native_commands=,
 *              mode = "single" | "sentinel" | "cluster", seeds = {...},
 *              master=, sentinel_username=, sentinel_password=}
 *   -> client | nil, err, kind
 * Timeouts are in seconds. Loads the topology and connects and checks a
 * node (AUTH, SELECT, PING) at once, all within connect_timeout, so that a
 * wrong address or password, or a listener that does not answer, is
 * reported here, not at the first lock; lazy = true does not (a client that
 * only hosts the watchdog). probe = true also reads INFO memory.
 * native_commands = false: never detect nor use native compare commands
 * (native_cmd.h), on any of the client's connections; native_assume = bits
 * (tests only) claims those NATIVE_* features on every connection, to
 * drive the fallback paths on a server that lacks them. seeds: the
 * sentinels, or the cluster's seed nodes, as "host:port". */
int client_global_connect(lua_State *L) {
    conn_config cfg;
    client_ud *u;
    const char *seeds[CLIENT_MAX_SEEDS], *mode_name, *master, *suser, *spass;
    char err[CONN_ERRSTR_LEN];
    int lazy, probe, mode, nseeds;
    luaL_checktype(L, 1, LUA_TTABLE);
    memset(&cfg, 0, sizeof cfg);
    cfg.host = (char *)client_opt_string(L, 1, "host");
    cfg.path = (char *)client_opt_string(L, 1, "path");
    cfg.username = (char *)client_opt_string(L, 1, "username");
    cfg.password = (char *)client_opt_string(L, 1, "password");
    cfg.port = (int)client_opt_number(L, 1, "port", 6379, 1, 65535);
    cfg.db = (int)client_opt_number(L, 1, "db", 0, 0, 1 << 20);
    cfg.connect_timeout_ms = (long)(client_opt_number(L, 1, "connect_timeout", 2, 0.001, 86400) * 1000);
    cfg.timeout_ms = (long)(client_opt_number(L, 1, "timeout", 2, 0, 86400) * 1000);
    mode_name = client_opt_string(L, 1, "mode");
    master = client_opt_string(L, 1, "master");
    suser = client_opt_string(L, 1, "sentinel_username");
    spass = client_opt_string(L, 1, "sentinel_password");
    nseeds = client_opt_seeds(L, 1, "seeds", seeds, CLIENT_MAX_SEEDS);
    if (cfg.host == NULL && cfg.path == NULL) cfg.host = (char *)"127.0.0.1";
    if (cfg.username != NULL && cfg.password == NULL)
        luaL_error(L, "bad config field 'username' (a password is required with it)");
    if (cfg.path != NULL && cfg.path[0] == '\0')
        luaL_error(L, "bad config field 'path' (non-empty string expected)");
    if (cfg.host != NULL && cfg.host[0] == '\0')
        luaL_error(L, "bad config field 'host' (non-empty string expected)");
    if (mode_name == NULL || strcmp(mode_name, "single") == 0) mode = TOPO_SINGLE;
    else if (strcmp(mode_name, "sentinel") == 0) mode = TOPO_SENTINEL;
    else if (strcmp(mode_name, "cluster") == 0) mode = TOPO_CLUSTER;
    else if (strcmp(mode_name, "redlock") == 0) mode = TOPO_REDLOCK;
    else return luaL_error(L, "bad config field 'mode' (single, sentinel, cluster or redlock expected)");
    if (mode != TOPO_SINGLE && mode != TOPO_REDLOCK && nseeds == 0)
        luaL_error(L, "bad config field 'seeds' (at least one host:port expected)");
    if (mode == TOPO_SENTINEL && master == NULL)
        luaL_error(L, "bad config field 'master' (the master's name expected)");
    if (mode == TOPO_CLUSTER && cfg.db != 0)
        luaL_error(L, "bad config field 'db' (a cluster has only database 0)");
    lua_getfield(L, 1, "lazy");
    lazy = lua_toboolean(L, -1);
    lua_pop(L, 1);
    lua_getfield(L, 1, "probe");
    probe = lua_toboolean(L, -1);
    lua_pop(L, 1);
    lua_getfield(L, 1, "native_commands");   /* false: scripts only, no detection */
    cfg.no_native = lua_type(L, -1) == LUA_TBOOLEAN && !lua_toboolean(L, -1);
    lua_pop(L, 1);
    cfg.native_assume = (unsigned)client_opt_number(L, 1, "native_assume", 0, 0, 31);   /* tests */

    /* Closed-state userdata first: if anything below raises, __gc is safe. */
    u = client_push_closed(L);
    u->t = topo_new(mode, &cfg, seeds, nseeds, master, suser, spass, err, sizeof err);
    if (u->t == NULL) return luaL_error(L, "bad config field 'seeds' (%s)", err);
    if (mode == TOPO_REDLOCK && client_opt_nodes(L, 1, u->t) < 1)
        return luaL_error(L, "bad config field 'nodes' (at least one master expected)");
    u->r = router_new(u->t, 1);
    if (u->r == NULL) return luaL_error(L, "out of memory");
    u->r->probe = probe;
    if (lazy) return 1;  /* connects at its first command, if any */
    if (mode == TOPO_REDLOCK) {
        /* independent masters: the policy (redlock.lua) checks a majority */
        if (router_sync(u->r) != 0) return client_result(L, u, NULL);
        return 1;
    }
    {
        conn *c = NULL;
        int ok = router_sync(u->r) == 0 && (c = router_conn(u->r, 0)) != NULL && conn_ensure(c) == 0;
        if (!ok) {
            lua_pushnil(L);
            if (c && c->err) {
                lua_pushstring(L, c->errstr);
                lua_pushstring(L, conn_kind(c->err));
            } else {
                lua_pushstring(L, u->r->errstr);
                lua_pushstring(L, router_kind(u->r));
            }
            router_free(u->r);
            topo_release(u->t);
            u->r = NULL;
            u->t = NULL;
            return 3;
        }
    }
    return 1;
}

/* client:wait_client() -> a client on the same topology with connections
 * of its own (for blocking waits), connected lazily. */
static int meth_wait_client(lua_State *L) {
    client_ud *u = client_check(L), *w;
    w = client_push_closed(L);
    w->r = router_new(u->t, 1);
    if (w->r == NULL) return luaL_error(L, "out of memory");
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

/* Pushes the Lua result of a command: the reply, or nil, err, kind (kind:
 * "connection", "timeout", "redis", "memory": callers branch on it, never
 * on the message's text). Frees r. */
static int client_result(lua_State *L, client_ud *u, redisReply *r) {
    if (r == NULL) {
        lua_pushnil(L);
        lua_pushstring(L, u->r->errstr);
        lua_pushstring(L, router_kind(u->r));
        return 3;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        lua_pushnil(L);
        lua_pushfstring(L, "redis error: %s", r->str ? r->str : "");
        lua_pushliteral(L, "redis");
        freeReplyObject(r);
        return 3;
    }
    luaval_push_reply(L, r, 0);
    freeReplyObject(r);
    return 1;
}

/* ---- methods ------------------------------------------------------------- */

/* client:script(name, keys..., args...) -> reply | nil, err
 * Runs one of the embedded scripts (EVALSHA, EVAL on NOSCRIPT). */
static int meth_script(lua_State *L) {
    const char *argv[SCRIPT_MAX_ARGS];
    size_t lens[SCRIPT_MAX_ARGS];
    client_ud *u = client_check(L);
    size_t len;
    const char *name = luaL_checklstring(L, 2, &len);
    const script_def *s = script_find_len(name, len);
    int n;
    if (s == NULL) return luaL_argerror(L, 2, "no such script");
    n = luaval_args(L, 3, argv, lens, SCRIPT_MAX_ARGS);
    if (n < s->nkeys)
        return luaL_error(L, "script '%s' takes %d keys, got %d arguments", s->name, s->nkeys, n);
    return client_result(L, u, route_script(u->r, s, n, argv, lens));
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
    luaL_checkstring(L, 2);
    n = luaval_args(L, 2, argv, lens, CLIENT_MAX_COMMAND_ARGS);
    return client_result(L, u, route_command(u->r, n > 1 ? argv[1] : NULL, n > 1 ? lens[1] : 0,
                                             n, argv, lens));
}

/* Enough answers for a quorum decision: yes (1, or {1, ...}) reached the
 * quorum, or so many said no (anything else) that it never can. */
static int client_quorum_enough(const fanout_result *res, int n, void *ud) {
    int quorum = *(const int *)ud, yes = 0, no = 0, i;
    if (quorum <= 0) return 0;
    for (i = 0; i < n; i++) {
        const redisReply *r = res[i].reply;
        if (!res[i].done) continue;
        if (r && ((r->type == REDIS_REPLY_INTEGER && r->integer >= 1) ||
                  (r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
                   r->element[0]->type == REDIS_REPLY_INTEGER && r->element[0]->integer == 1)))
            yes++;
        else
            no++;
    }
    return yes >= quorum || no > n - quorum;
}

/* client:fanout(timeout, quorum, name, keys..., args...) -> { result... }
 * Redlock: runs the embedded script `name` on every master at once (see
 * fanout.c), waiting at most `timeout` seconds, or until a quorum of
 * "yes" (or so many "no" that no quorum can come) when quorum > 0. One
 * result per master, in order: { ok = reply } or { err = msg, kind = k }. */
static int meth_fanout(lua_State *L) {
    const char *argv[SCRIPT_MAX_ARGS];
    size_t lens[SCRIPT_MAX_ARGS];
    client_ud *u = client_check(L);
    lua_Number timeout = luaL_checknumber(L, 2);
    int quorum = (int)luaL_checkinteger(L, 3), n, i, nargs;
    size_t len;
    const char *name = luaL_checklstring(L, 4, &len);
    const script_def *s = script_find_len(name, len);
    fanout_result *res;
    if (!(timeout > 0 && timeout <= 86400)) return luaL_argerror(L, 2, "timeout out of range");
    if (s == NULL) return luaL_argerror(L, 4, "no such script");
    nargs = luaval_args(L, 5, argv, lens, SCRIPT_MAX_ARGS);
    if (nargs < s->nkeys)
        return luaL_error(L, "script '%s' takes %d keys, got %d arguments", s->name, s->nkeys, nargs);
    if (router_sync(u->r) != 0) return client_result(L, u, NULL);
    n = u->r->nconns;
    res = (fanout_result *)lua_newuserdata(L, (size_t)(n ? n : 1) * sizeof *res);
    if (fanout_script(u->r, s, nargs, argv, lens, deadline_in_ms((long)(timeout * 1000)),
                      client_quorum_enough, &quorum, res) < 0) {
        lua_pushnil(L);
        lua_pushliteral(L, "out of memory");
        return 2;
    }
    lua_createtable(L, n, 0);
    for (i = 0; i < n; i++) {
        lua_createtable(L, 0, 2);
        if (res[i].reply && res[i].reply->type != REDIS_REPLY_ERROR) {
            luaval_push_reply(L, res[i].reply, 0);
            lua_setfield(L, -2, "ok");
        } else if (res[i].reply) {
            lua_pushfstring(L, "redis error: %s", res[i].reply->str ? res[i].reply->str : "");
            lua_setfield(L, -2, "err");
            lua_pushliteral(L, "redis");
            lua_setfield(L, -2, "kind");
        } else {
            lua_pushstring(L, res[i].errstr[0] ? res[i].errstr : "no answer");
            lua_setfield(L, -2, "err");
            lua_pushstring(L, conn_kind(res[i].err));
            lua_setfield(L, -2, "kind");
        }
        lua_rawseti(L, -2, i + 1);
    }
    fanout_free(res, n);
    return 1;
}

/* client:replicas(n, timeout_seconds) -> acks | nil, err, kind
 * WAIT n timeout on the connection of the last command (where the write
 * that must reach the replicas was made). */
static int meth_replicas(lua_State *L) {
    client_ud *u = client_check(L);
    lua_Number n = luaL_checknumber(L, 2), t = luaL_checknumber(L, 3);
    char nbuf[24], tbuf[24];
    const char *argv[3];
    size_t lens[3];
    conn *c;
    redisReply *r;
    if (!(n >= 0 && n <= 1e6)) return luaL_argerror(L, 2, "replica count out of range");
    if (!(t >= 0 && t <= 86400)) return luaL_argerror(L, 3, "timeout out of range");
    if (u->r->last_node < 0 || u->r->snap == NULL || u->r->last_node >= u->r->nconns ||
        (c = u->r->conns[u->r->last_node]) == NULL || c->fd < 0) {
        lua_pushnil(L);
        lua_pushliteral(L, "connection lost: the write's connection is gone");
        lua_pushliteral(L, "connection");
        return 3;
    }
    argv[0] = "WAIT";
    lens[0] = 4;
    argv[1] = nbuf;
    lens[1] = (size_t)snprintf(nbuf, sizeof nbuf, "%d", (int)n);
    argv[2] = tbuf;
    lens[2] = (size_t)snprintf(tbuf, sizeof tbuf, "%ld", (long)(t * 1000));
    if (conn_append(c, 3, argv, lens) != 0) return client_result(L, u, NULL);
    /* Redis answers WAIT at its own timeout: give the socket a little more */
    r = conn_read(c, deadline_in_ms((long)(t * 1000) + (u->r->timeout_ms > 0 ? u->r->timeout_ms : 2000)));
    if (r == NULL) {
        u->r->err = c->err;
        snprintf(u->r->errstr, sizeof u->r->errstr, "%s", c->errstr);
    }
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

/* client:watch(key, token, ttl, lease_end [, hold_until [, renew [, spare]]])
 *   -> watch, id | nil, err
 * Registers a held lock with the watchdog. Seconds; lease_end and hold_until
 * on the monotonic clock (core.monotime). renew: the embedded script that
 * renews it (default "extend"; "zset_renew" for a reader or a permit).
 * spare: an unwatched handle that nothing uses any more, bound to the new
 * lock instead of a new one (the hot path's: no allocation, nothing for the
 * collector); anything else is ignored. */
static int meth_watch(lua_State *L) {
    client_ud *u = client_check(L);
    size_t klen, toklen;
    const char *key = luaL_checklstring(L, 2, &klen);
    const char *token = luaL_checklstring(L, 3, &toklen);
    lua_Number ttl = luaL_checknumber(L, 4);
    lua_Number end = luaL_checknumber(L, 5);
    lua_Number hold = luaL_optnumber(L, 6, 0);
    const char *renew_name = luaL_optstring(L, 7, "extend");
    const script_def *renew = script_find(renew_name);
    char err[CONN_ERRSTR_LEN];
    uint64_t id;
    if (renew == NULL || renew->nkeys != 1) return luaL_argerror(L, 7, "no such renewal script");
    if (!(ttl >= 0.001 && ttl < 1e10)) return luaL_argerror(L, 4, "ttl out of range");
    if (!(end >= 0 && end < 1e12)) return luaL_argerror(L, 5, "lease end out of range");
    if (!(hold >= 0 && hold < 1e12)) return luaL_argerror(L, 6, "hold end out of range");
    /* a spare handle (argument 8) is bound anew rather than a new one made */
    if (lua_gettop(L) < 8 || !watch_push_spare(L, 8)) watch_push_unbound(L);
    if (client_wd(u, err, sizeof err) == NULL ||
        wd_watch(u->wd, key, klen, token, toklen, (int64_t)(ttl * 1000 + 0.5),
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
        if (u->r->conns[i] && (u->r->conns[i]->info.maxmemory_policy[0] || u->r->conns[i]->info.info_error[0]))
            info = &u->r->conns[i]->info;
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
 *                     noscript_reloads=, events_dropped= } */
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
            if (u->r->conns[i]) conn_set_spin(u->r->conns[i], u->r->spin_us);
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
    {"replicas", meth_replicas},
    {"fanout", meth_fanout},
    {"wait_client", meth_wait_client},
    {"watch", meth_watch},
    {"losses", meth_losses},
    {"fd", meth_fd},
    {"server_info", meth_server_info},
    {"stats", meth_stats},
    {"set_timeout", meth_set_timeout},
    {"set_spin", meth_set_spin},
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
    luaL_newmetatable(L, CLIENT_MT);     /* mt */
    luaL_setfuncs(L, client_meta, 0);
    luaL_newlib(L, client_methods);      /* mt, methods */
    luaL_setfuncs(L, client_topo_methods, 0);
    luaL_setfuncs(L, client_events_methods, 0);
    lua_setfield(L, -2, "__index");      /* mt */
    lua_pop(L, 1);                       /* */
}
