/*
 * client_topo.c: the client's topology, for transports that talk to the
 * nodes themselves (the nginx cosocket transport): they ask where a key
 * lives, and feed what they learn (a CLUSTER SLOTS reply, the master the
 * sentinels named) back to the one C parser and the one topology the
 * watchdog thread routes by.
 */
#include "client_ud.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h"
#include "client.h"
#include "cluster.h"
#include "conn.h"
#include "intr.h"
#include "luaval.h"
#include "sentinel_watch.h"

/* client:topology() -> mode ("single", "sentinel", "cluster"), { seeds... }
 * What this client routes by, for a transport that talks to the nodes
 * itself and feeds what it learns back (load_slots, set_master). */
static int meth_topology(lua_State *L) {
    static const char *const modes[] = {"single", "sentinel", "cluster", "redlock"};
    client_ud *u = client_check(L);
    char buf[160];
    int i;
    lua_pushstring(L, modes[u->t->mode]);
    lua_createtable(L, u->t->nseeds, 0);
    pthread_mutex_lock(&u->t->mu);
    for (i = 0; i < u->t->nseeds; i++) {
        topo_node_describe(&u->t->seeds[i], buf, sizeof buf);
        lua_pushstring(L, buf);
        lua_rawseti(L, -2, i + 1);
    }
    pthread_mutex_unlock(&u->t->mu);
    if (u->t->master) {
        lua_pushstring(L, u->t->master);
        return 3;
    }
    return 2;
}

/* client:route(key) -> host, port, epoch | path, nil, epoch | nil (no
 * topology loaded yet, a Sentinel master in doubt, or no node serves the
 * key's slot). epoch names the snapshot, for client:doubt. */
static int meth_route(lua_State *L) {
    client_ud *u = client_check(L);
    size_t klen;
    const char *key = luaL_optlstring(L, 2, "", &klen);
    topo_snap *s;
    int i;
    if (!topo_confirmed(u->t)) return 0;
    s = topo_snap_get(u->t);
    if (s == NULL) return 0;
    i = topo_node_of(s, key, klen);
    if (i < 0) {
        topo_snap_put(u->t, s);
        return 0;
    }
    if (s->nodes[i].path) {
        lua_pushstring(L, s->nodes[i].path);
        lua_pushnil(L);
    } else {
        lua_pushstring(L, s->nodes[i].host);
        lua_pushinteger(L, s->nodes[i].port);
    }
    lua_pushinteger(L, (lua_Integer)s->epoch);
    topo_snap_put(u->t, s);
    return 3;
}

/* client:follow() -> true | false
 * Sentinel: makes sure the follower thread runs (csrc/topo/sentinel_watch.h) and
 * asks it to look now; the caller then waits for client:route to answer.
 * The one implementation of whom to trust, for transports that cannot
 * block (nginx): false when no such thread can run here. */
static int meth_follow(lua_State *L) {
    client_ud *u = client_check(L);
    if (u->t->mode != TOPO_SENTINEL) return luaL_error(L, "not a sentinel client");
    topo_follow(u->t);
    pthread_mutex_lock(&u->t->mu);
    if (u->t->watch) sentinel_watch_kick(u->t->watch);
    lua_pushboolean(L, u->t->watch != NULL);
    pthread_mutex_unlock(&u->t->mu);
    return 1;
}

/* client:doubt(epoch)
 * Sentinel: the master of snapshot `epoch` (from client:route) failed a
 * request (timed out, reset, refused, READONLY): no node is routed to
 * until the sentinels confirm one again (topo_doubt). */
static int meth_doubt(lua_State *L) {
    client_ud *u = client_check(L);
    lua_Integer epoch = luaL_checkinteger(L, 2);
    if (epoch > 0) topo_doubt(u->t, (uint64_t)epoch);
    return 0;
}

/* client:load_slots(reply, host, port [, nodes]) -> true | nil, err
 * A CLUSTER SLOTS reply that the caller got from node host:port, parsed
 * by the C parser and published as the topology (the watchdog follows);
 * nodes: that node's CLUSTER NODES text, for the masters' replicas
 * (cluster_count_replicas). */
static int meth_load_slots(lua_State *L) {
    client_ud *u = client_check(L);
    topo_node asked;
    topo_snap *s;
    redisReply *r;
    char err[CONN_ERRSTR_LEN];
    int i;
    luaL_checktype(L, 2, LUA_TTABLE);
    memset(&asked, 0, sizeof asked);
    asked.host = (char *)luaL_checkstring(L, 3);
    asked.port = (int)luaL_checkinteger(L, 4);
    if (u->t->mode != TOPO_CLUSTER) return luaL_error(L, "not a cluster client");
    r = luaval_reply_of(L, 2, 0);
    if (r == NULL) return luaL_error(L, "out of memory");
    s = cluster_parse_slots(r, &asked, err, sizeof err);
    freeReplyObject(r);
    if (s == NULL) {
        lua_pushnil(L);
        lua_pushstring(L, err);
        return 2;
    }
    if (lua_type(L, 5) == LUA_TSTRING) {
        size_t len;
        const char *text = lua_tolstring(L, 5, &len);
        cluster_count_replicas(s, text, len);
    }
    for (i = 0; i < s->nnodes; i++) topo_node_resolve(&s->nodes[i], 0, 0, err, sizeof err);
    topo_publish(u->t, s);
    lua_pushboolean(L, 1);
    return 1;
}

/* client:set_master(host, port) -> true
 * The master the caller found through the sentinels (and confirmed with
 * ROLE), published as the topology (the watchdog follows). */
static int meth_set_master(lua_State *L) {
    client_ud *u = client_check(L);
    const char *host = luaL_checkstring(L, 2);
    lua_Number port = luaL_checknumber(L, 3);
    topo_snap *s;
    char err[CONN_ERRSTR_LEN];
    if (u->t->mode != TOPO_SENTINEL) return luaL_error(L, "not a sentinel client");
    if (!(port >= 1 && port <= 65535)) return luaL_argerror(L, 3, "port out of range");
    s = topo_snap_new(1, 0);
    if (s == NULL || (s->nodes[0].host = strdup(host)) == NULL) {
        topo_snap_free(s);
        return luaL_error(L, "out of memory");
    }
    s->nodes[0].port = (int)port;
    s->config_epoch = -1;   /* (not known: never compared) */
    topo_node_resolve(&s->nodes[0], 0, 0, err, sizeof err);
    topo_publish(u->t, s);
    lua_pushboolean(L, 1);
    return 1;
}

/* client:nodes() -> n | nil, err, kind
 * How many nodes this client routes to: one; the Sentinel's master; a
 * Cluster's masters; Redlock's masters (the topology loaded if need be).
 * For the operator's list, which asks each of them (node_command). */
static int meth_nodes(lua_State *L) {
    client_ud *u = client_check(L);
    if (router_sync(u->r) != 0) return client_result(L, u, NULL);
    lua_pushinteger(L, u->r->nconns);
    return 1;
}

/* client:node_command(i, name, args...) -> reply | nil, err, kind
 * A command on node i (1 to nodes()), whatever its keys: SCAN on each
 * master. Never redirected, never retried. */
#define CLIENT_NODE_MAX_ARGS 64
static int meth_node_command(lua_State *L) {
    const char *argv[CLIENT_NODE_MAX_ARGS];
    size_t lens[CLIENT_NODE_MAX_ARGS];
    client_ud *u = client_check(L);
    lua_Integer i = luaL_checkinteger(L, 2);
    int n;
    conn *c;
    redisReply *r;
    luaL_checkstring(L, 3);
    n = luaval_args(L, 3, argv, lens, CLIENT_NODE_MAX_ARGS);
    if (router_sync(u->r) != 0) return client_result(L, u, NULL);
    if (i < 1 || i > u->r->nconns) return luaL_argerror(L, 2, "no such node");
    c = router_conn(u->r, (int)i - 1);
    if (c == NULL) {
        u->r->err = CONN_ENOMEM;
        snprintf(u->r->errstr, sizeof u->r->errstr, "out of memory");
        return client_result(L, u, NULL);
    }
    conn_check_idle(c);
    client_intr_arm(L);
    r = conn_command(c, n, argv, lens);
    intr_disarm();
    if (r == NULL) {
        u->r->err = c->err;
        snprintf(u->r->errstr, sizeof u->r->errstr, "%s", c->errstr);
    }
    return client_result(L, u, r);
}

const luaL_Reg client_topo_methods[] = {
    {"nodes", meth_nodes},
    {"node_command", meth_node_command},
    {"topology", meth_topology},
    {"route", meth_route},
    {"load_slots", meth_load_slots},
    {"set_master", meth_set_master},
    {"follow", meth_follow},
    {"doubt", meth_doubt},
    {NULL, NULL}
};
