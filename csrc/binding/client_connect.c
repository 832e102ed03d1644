/*
 * client_connect.c: core.connect, which reads the config table once (every
 * field checked here, with the field's name in the error: the hot path
 * checks nothing again), builds the client's topology and router, and
 * connects and checks a node before returning, so that a wrong address or
 * password is reported at connect, not at the first lock.
 */
#define _GNU_SOURCE
#include "binding/client.h"
#include "binding/client_ud.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lauxlib.h"
#include "binding/compat.h"
#include "net/conn.h"
#include "topo/router.h"
#include "topo/topo.h"
#include "base/deadline.h"

#define CLIENT_MAX_SEEDS 64

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

/* The TLS settings of the table field `key` of the table at t (connect's
 * `tls`, or a Redlock master's), named `name` in errors ("tls",
 * "nodes[2].tls": redislock.lua says which argument that was): NULL when
 * absent; raises when a field is wrong, a file cannot be used, or this
 * build has no TLS. Every field is read before anything is made, so
 * nothing leaks when one raises. unix: the endpoint is a unix socket (no
 * host name to check). */
static tls_ctx *client_opt_tls(lua_State *L, int t, const char *key, const char *name, int unix) {
    tls_opts o;
    tls_ctx *x;
    char err[CONN_ERRSTR_LEN];
    int top = lua_gettop(L), tt;
    lua_getfield(L, t, key);
    if (lua_isnil(L, -1)) {
        lua_settop(L, top);
        return NULL;
    }
    if (lua_type(L, -1) != LUA_TTABLE)
        luaL_error(L, "bad config field '%s' (table expected, got %s)", name, luaL_typename(L, -1));
    tt = lua_gettop(L);
    memset(&o, 0, sizeof o);
    o.ca = client_opt_string(L, tt, "ca");
    o.cert = client_opt_string(L, tt, "cert");
    o.key = client_opt_string(L, tt, "key");
    o.server_name = client_opt_string(L, tt, "server_name");
    lua_getfield(L, tt, "verify");
    if (!lua_isnil(L, -1) && lua_type(L, -1) != LUA_TBOOLEAN)
        luaL_error(L, "bad config field '%s.verify' (boolean expected, got %s)", name, luaL_typename(L, -1));
    o.verify = lua_isnil(L, -1) || lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (o.server_name && o.server_name[0] == '\0')
        luaL_error(L, "bad config field '%s.server_name' (non-empty string expected)", name);
    if (unix && o.verify && o.server_name == NULL)
        luaL_error(L, "bad config field '%s' (over a unix socket, tls.server_name names the certificate"
                   " to expect; or verify = false)", name);
    x = tls_ctx_new(&o, err, sizeof err);
    lua_settop(L, top);
    if (x == NULL) luaL_error(L, "bad config field '%s' (%s)", name, err);
    return x;
}

/* Redlock: the masters of config field `nodes`, each a table of host=,
 * port=, path=, username=, password=, db=, tls=, added to t. Returns how many. */
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
        {
            /* (made last, released at once: topo_add_seed keeps its own) */
            int rc;
            char name[32];
            snprintf(name, sizeof name, "nodes[%d].tls", i);
            node.tls = client_opt_tls(L, top, "tls", name, node.path != NULL);
            rc = topo_add_seed(t, &node);
            tls_ctx_release(node.tls);
            if (rc != 0) luaL_error(L, "out of memory");
        }
        lua_settop(L, top - 1);   /* the strings were copied */
        n++;
    }
    lua_pop(L, 1);
    return n;
}

/* core.connect{host=, port=, path=, username=, password=, db=,
 *              connect_timeout=, timeout=, lazy=, probe=, native_commands=,
 *              mode = "single" | "sentinel" | "cluster", seeds = {...},
 *              master=, sentinel_username=, sentinel_password=,
 *              tls = {ca=, cert=, key=, server_name=, verify=}, sentinel_tls=}
 *   -> client | nil, err, kind
 * Timeouts are in seconds. Loads the topology and connects and checks a
 * node (AUTH, SELECT, PING) at once, all within connect_timeout, so that a
 * wrong address or password, or a listener that does not answer, is
 * reported here, not at the first lock; lazy = true does not (a client that
 * only hosts the watchdog). probe = true also reads INFO memory.
 * native_commands = false: never detect nor use native compare commands
 * (native_cmd.h), on any of the client's connections; native_assume = bits
 * (the specs' build only: Makefile TESTING_SRCS) claims those NATIVE_*
 * features on every connection, to drive the fallback paths on a server
 * that lacks them. seeds: the
 * sentinels, or the cluster's seed nodes, as "host:port". tls: every
 * connection over TLS (tls.h), the sentinels' too unless sentinel_tls =
 * false; a Redlock master's own tls= table is its own (none: plain). */
/* What core.connect's table says, checked (raises on a bad field). */
typedef struct client_opts {
    conn_config cfg;
    const char *seeds[CLIENT_MAX_SEEDS], *master, *suser, *spass;
    int nseeds, mode, lazy, probe, sentinel_tls;
    exec_opts xo;
} client_opts;

static int client_opt_flag(lua_State *L, int idx, const char *name) {
    int v;
    lua_getfield(L, idx, name);
    v = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return v;
}

static int client_opt_mode(lua_State *L, int idx) {
    const char *name = client_opt_string(L, idx, "mode");
    if (name == NULL || strcmp(name, "single") == 0) return TOPO_SINGLE;
    if (strcmp(name, "sentinel") == 0) return TOPO_SENTINEL;
    if (strcmp(name, "cluster") == 0) return TOPO_CLUSTER;
    if (strcmp(name, "redlock") == 0) return TOPO_REDLOCK;
    return luaL_error(L, "bad config field 'mode' (single, sentinel, cluster or redlock expected)");
}

static void client_read_opts(lua_State *L, client_opts *o) {
    conn_config *cfg = &o->cfg;
    memset(o, 0, sizeof *o);
    cfg->host = (char *)client_opt_string(L, 1, "host");
    cfg->path = (char *)client_opt_string(L, 1, "path");
    cfg->username = (char *)client_opt_string(L, 1, "username");
    cfg->password = (char *)client_opt_string(L, 1, "password");
    cfg->port = (int)client_opt_number(L, 1, "port", 6379, 1, 65535);
    cfg->db = (int)client_opt_number(L, 1, "db", 0, 0, 1 << 20);
    cfg->connect_timeout_ms = (long)(client_opt_number(L, 1, "connect_timeout", 2, 0.001, 86400) * 1000);
    cfg->timeout_ms = (long)(client_opt_number(L, 1, "timeout", 2, 0, 86400) * 1000);
    o->mode = client_opt_mode(L, 1);
    o->master = client_opt_string(L, 1, "master");
    o->suser = client_opt_string(L, 1, "sentinel_username");
    o->spass = client_opt_string(L, 1, "sentinel_password");
    o->nseeds = client_opt_seeds(L, 1, "seeds", o->seeds, CLIENT_MAX_SEEDS);
    if (cfg->host == NULL && cfg->path == NULL) cfg->host = (char *)"127.0.0.1";
    if (cfg->username != NULL && cfg->password == NULL)
        luaL_error(L, "bad config field 'username' (a password is required with it)");
    if (cfg->path != NULL && cfg->path[0] == '\0') luaL_error(L, "bad config field 'path' (non-empty string expected)");
    if (cfg->host != NULL && cfg->host[0] == '\0') luaL_error(L, "bad config field 'host' (non-empty string expected)");
    if (o->mode != TOPO_SINGLE && o->mode != TOPO_REDLOCK && o->nseeds == 0)
        luaL_error(L, "bad config field 'seeds' (at least one host:port expected)");
    if (o->mode == TOPO_SENTINEL && o->master == NULL)
        luaL_error(L, "bad config field 'master' (the master's name expected)");
    if (o->mode == TOPO_CLUSTER && cfg->db != 0) luaL_error(L, "bad config field 'db' (a cluster has only database 0)");
    o->lazy = client_opt_flag(L, 1, "lazy");
    o->probe = client_opt_flag(L, 1, "probe");
    lua_getfield(L, 1, "native_commands");   /* false: scripts only, no detection */
    o->xo.no_native = lua_type(L, -1) == LUA_TBOOLEAN && !lua_toboolean(L, -1);
    lua_pop(L, 1);
#ifdef REDISLOCK_TESTING
    o->xo.native_assume = (unsigned)client_opt_number(L, 1, "native_assume", 0, 0, 31);
#endif
    lua_getfield(L, 1, "sentinel_tls");   /* false: the sentinels in plain TCP */
    if (!lua_isnil(L, -1) && lua_type(L, -1) != LUA_TBOOLEAN)
        luaL_error(L, "bad config field 'sentinel_tls' (boolean expected, got %s)", luaL_typename(L, -1));
    o->sentinel_tls = lua_isnil(L, -1) || lua_toboolean(L, -1);
    lua_pop(L, 1);
}

/* The share key as it is built (malloc'd: wiped and freed once copied). */
typedef struct keybuf {
    char *p;
    size_t len, cap;
    int oom;
} keybuf;

static void keybuf_put(keybuf *k, const char *s, size_t n) {
    if (k->oom) return;
    if (k->len + n + 1 > k->cap) {
        size_t cap = (k->len + n + 1) * 2;
        char *p = malloc(cap);
        if (p == NULL) {
            k->oom = 1;
            return;
        }
        if (k->p) {
            memcpy(p, k->p, k->len);
            explicit_bzero(k->p, k->cap);   /* (it may hold a password) */
            free(k->p);
        }
        k->p = p;
        k->cap = cap;
    }
    memcpy(k->p + k->len, s, n);
    k->len += n;
    k->p[k->len] = '\0';
}

/* Adds s to the key, its length first (nothing can run into the next). */
static void client_key_add(keybuf *k, const char *s) {
    char n[24];
    keybuf_put(k, n, (size_t)snprintf(n, sizeof n, "%zu:", s ? strlen(s) : (size_t)0));
    if (s) keybuf_put(k, s, strlen(s));
    keybuf_put(k, s ? ";" : "-", 1);
}

/* A TLS file as the key names it: its path, size and times of change, and
 * which file it is (a rotated certificate is another topology's, read
 * anew). The status change time too: unlike the modification time, no
 * copy that keeps times (cp -p, rsync -t, tar) can set it back, and a new
 * file moved into place has another inode. */
static void client_key_file(keybuf *k, const char *path) {
    struct stat st;
    char buf[160];
    client_key_add(k, path);
    if (path == NULL || stat(path, &st) != 0) return;
    snprintf(buf, sizeof buf, "%lld.%lld.%ld.%lld.%ld.%llu.%llu", (long long)st.st_size,
             (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec, (long long)st.st_ctim.tv_sec,
             (long)st.st_ctim.tv_nsec, (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
    client_key_add(k, buf);
}

/* The TLS fields of config field `tls` (ca, cert, key, server_name: NULL
 * when absent), as client_opt_tls checks them; *has: a table was given;
 * *verify its verify. The strings live in the config table. */
static void client_key_tls(lua_State *L, const char *tls[4], int *has, int *verify) {
    static const char *const fields[] = {"ca", "cert", "key", "server_name"};
    int i, top = lua_gettop(L);
    lua_getfield(L, 1, "tls");
    *has = lua_type(L, -1) == LUA_TTABLE;
    *verify = 1;
    /* (what client_opt_tls refuses is refused here too: a shared topology
     * must never stand for a config that would not have been accepted, a
     * `tls = true` read as no TLS) */
    if (!*has && !lua_isnil(L, -1))
        luaL_error(L, "bad config field 'tls' (table expected, got %s)", luaL_typename(L, -1));
    for (i = 0; i < 4; i++) tls[i] = *has ? client_opt_string(L, top + 1, fields[i]) : NULL;
    if (*has) {
        lua_getfield(L, top + 1, "verify");
        if (!lua_isnil(L, -1) && lua_type(L, -1) != LUA_TBOOLEAN)
            luaL_error(L, "bad config field 'tls.verify' (boolean expected, got %s)", luaL_typename(L, -1));
        *verify = lua_isnil(L, -1) || lua_toboolean(L, -1);
    }
    lua_settop(L, top);
}

/* Pushes the key of the topology o describes (topo_share.c): everything
 * it holds, TLS files by name, size and time of change; a userdata (a
 * Lua string could not be wiped: it holds the passwords), NUL-terminated,
 * which client_wipe_key clears once the topology is found or shared. */
static char *client_push_share_key(lua_State *L, const client_opts *o) {
    const conn_config *c = &o->cfg;
    const char *tls[4];
    char num[160], *out;
    int i, has_tls, verify;
    keybuf k = {NULL, 0, 0, 0};
    client_key_tls(L, tls, &has_tls, &verify);
    snprintf(num, sizeof num, "%d %d %d %ld %ld %d %d %u %d %d", o->mode, c->port, c->db, c->connect_timeout_ms,
             c->timeout_ms, o->sentinel_tls, o->xo.no_native, o->xo.native_assume, has_tls, verify);
    client_key_add(&k, num);
    client_key_add(&k, c->host);
    client_key_add(&k, c->path);
    client_key_add(&k, c->username);
    client_key_add(&k, c->password);
    client_key_add(&k, o->master);
    client_key_add(&k, o->suser);
    client_key_add(&k, o->spass);
    for (i = 0; i < o->nseeds; i++) client_key_add(&k, o->seeds[i]);
    for (i = 0; i < 3; i++) client_key_file(&k, tls[i]);
    client_key_add(&k, tls[3]);
    if (k.oom) {
        if (k.p) explicit_bzero(k.p, k.cap);
        free(k.p);
        luaL_error(L, "out of memory");
    }
    out = lua_newuserdata(L, k.len + 1);   /* (cannot fail but by raising: k.p freed first) */
    memcpy(out, k.p, k.len + 1);
    explicit_bzero(k.p, k.cap);
    free(k.p);
    return out;
}

/* The first node connected and checked (AUTH, SELECT, PING): 1 (the
 * client on the stack), or nil, err, kind with u closed. */
static int client_check_first(lua_State *L, client_ud *u) {
    conn *c = NULL;
    exec_conn *xc;
    int64_t deadline = deadline_in_ms(u->t->cfg.connect_timeout_ms);   /* (the whole connect's) */
    int shared = topo_epoch(u->t) != 0;   /* loaded by a client before this one */
    if (router_sync(u->r) == 0 && (xc = router_conn(u->r, 0)) != NULL && conn_ensure(c = xc->c) == 0) return 1;
    /* Sentinel: a shared topology's master that does not answer may be one
     * a failover left behind (loaded before it, not yet followed past it):
     * the sentinels are asked again, once, and their master tried, in what
     * is left of the connect timeout; tried again only if they give a new
     * snapshot (the old connection then freed: its error is not read
     * after); else their answer is the error */
    if (c && shared && u->t->mode == TOPO_SENTINEL && !deadline_passed(deadline)) {
        uint64_t seen = u->r->snap ? u->r->snap->epoch : 0;
        if (router_reload(u->r, deadline) != 0) {
            c = NULL;
        } else if (u->r->snap && u->r->snap->epoch != seen) {
            c = NULL;   /* (freed with the old snapshot; no connection: the router's error) */
            if ((xc = router_conn(u->r, 0)) != NULL && conn_ensure_by(c = xc->c, deadline) == 0) return 1;
        }
    }
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

int client_global_connect(lua_State *L) {
    client_opts o;
    client_ud *u;
    char *key = NULL;
    char err[CONN_ERRSTR_LEN];
    luaL_checktype(L, 1, LUA_TTABLE);
    client_read_opts(L, &o);
    /* Closed-state userdata first: if anything below raises, __gc is safe. */
    u = client_push_closed(L);
    /* Sentinel and Cluster: one topology for every client configured the
     * same (topo_share.c); the key stays on the stack until it is shared */
    if (o.mode == TOPO_SENTINEL || o.mode == TOPO_CLUSTER) {
        key = client_push_share_key(L, &o);
        u->t = topo_shared(key);
    } else {
        lua_pushnil(L);
    }
    if (u->t == NULL) {
        /* the last of what may raise: the context is released on every
         * path below (Redlock: each master's own, read with it) */
        o.cfg.tls = o.mode == TOPO_REDLOCK ? NULL : client_opt_tls(L, 1, "tls", "tls", o.cfg.path != NULL);
        u->t = topo_new(o.mode, &o.cfg, o.seeds, o.nseeds, o.master, o.suser, o.spass, err, sizeof err);
        if (u->t && o.sentinel_tls) topo_set_sentinel_tls(u->t, o.cfg.tls);
        tls_ctx_release(o.cfg.tls);   /* (the topology has its own) */
        if (u->t == NULL) return luaL_error(L, "bad config field 'seeds' (%s)", err);
        u->t->xopts = o.xo;
        if (key && topo_share(u->t, key) != 0) return luaL_error(L, "out of memory");
    }
    if (key) explicit_bzero(key, strlen(key));
    lua_pop(L, 1);   /* (the key: the client is on top again) */
    if (o.mode == TOPO_REDLOCK && client_opt_nodes(L, 1, u->t) < 1)
        return luaL_error(L, "bad config field 'nodes' (at least one master expected)");
    u->r = router_new(u->t, 1);
    if (u->r == NULL) return luaL_error(L, "out of memory");
    u->r->probe = o.probe;
    if (o.lazy) return 1;  /* connects at its first command, if any */
    if (o.mode == TOPO_REDLOCK) {
        /* independent masters: the policy (redlock.lua) checks a majority */
        if (router_sync(u->r) != 0) return client_result(L, u, NULL);
        return 1;
    }
    return client_check_first(L, u);
}
