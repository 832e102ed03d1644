/*
 * client_topo.c: the client's nodes one by one, for the operator's list
 * (redislock.admin asks each master). The cosocket transport needs nothing
 * of the topology here: its requests route themselves
 * (client_request.c).
 */
#include "binding/client_ud.h"

#include <stdio.h>

#include "binding/compat.h"
#include "binding/client.h"
#include "net/conn.h"
#include "base/intr.h"
#include "binding/luaval.h"

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
    exec_conn *xc;
    redisReply *r = NULL;
    luaL_checkstring(L, 3);
    n = luaval_args(L, 3, argv, lens, CLIENT_NODE_MAX_ARGS);
    if (router_sync(u->r) != 0) return client_result(L, u, NULL);
    if (i < 1 || i > u->r->nconns) return luaL_argerror(L, 2, "no such node");
    xc = router_conn(u->r, (int)i - 1);
    if (xc == NULL) {
        u->r->err = CONN_ENOMEM;
        snprintf(u->r->errstr, sizeof u->r->errstr, "out of memory");
        return client_result(L, u, NULL);
    }
    exec_conn_check_idle(xc);
    client_intr_arm(L);
    if (conn_ensure(xc->c) == 0 && conn_append(xc->c, n, argv, lens) == 0)
        r = exec_conn_read(xc, conn_deadline(xc->c));
    intr_disarm();
    if (r == NULL) {
        u->r->err = xc->c->err;
        snprintf(u->r->errstr, sizeof u->r->errstr, "%s", xc->c->errstr);
    }
    return client_result(L, u, r);
}

const luaL_Reg client_topo_methods[] = {
    {"nodes", meth_nodes},
    {"node_command", meth_node_command},
    {NULL, NULL}
};
