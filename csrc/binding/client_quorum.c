/*
 * client_quorum.c: the client's calls that ask several servers and count
 * their answers: the Redlock fan-out (one script on every master at once,
 * until a quorum decides) and WAIT (how many replicas have a write).
 */
#include "binding/client_ud.h"

#include <stdio.h>

#include "lauxlib.h"
#include "binding/compat.h"
#include "binding/client.h"
#include "net/conn.h"
#include "base/deadline.h"
#include "topo/fanout.h"
#include "base/intr.h"
#include "binding/luaval.h"
#include "topo/router.h"
#include "cmd/script.h"
#include "cmd/script_answer.h"
#include "cmd/wait_cmd.h"

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
    const script_def *s;
    fanout_result *res;
    luaL_checkstring(L, 4);
    if (!(timeout > 0 && timeout <= 86400)) return luaL_argerror(L, 2, "timeout out of range");
    s = client_script_args(L, 4, argv, lens, &nargs);
    if (router_sync(u->r) != 0) return client_result(L, u, NULL);
    n = u->r->nconns;
    res = (fanout_result *)lua_newuserdata(L, (size_t)(n ? n : 1) * sizeof *res);
    client_intr_arm(L);
    n = fanout_script(u->r, s, nargs, argv, lens, deadline_in_ms((long)(timeout * 1000)),
                      client_quorum_enough, &quorum, res);
    intr_disarm();
    if (n < 0) {
        lua_pushnil(L);
        lua_pushliteral(L, "out of memory");
        lua_pushliteral(L, "memory");
        return 3;
    }
    n = u->r->nconns;
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
    exec_conn *xc;
    redisReply *r;
    if (!(n >= 0 && n <= 1e6)) return luaL_argerror(L, 2, "replica count out of range");
    if (!(t >= 0 && t <= 86400)) return luaL_argerror(L, 3, "timeout out of range");
    if (u->r->last_node < 0 || u->r->snap == NULL || u->r->last_node >= u->r->nconns ||
        (xc = u->r->conns[u->r->last_node]) == NULL || xc->c->fd < 0) {
        lua_pushnil(L);
        lua_pushliteral(L, "connection lost: the write's connection is gone");
        lua_pushliteral(L, "connection");
        return 3;
    }
    if (wait_cmd_append(xc->c, (int)n, (long)(t * 1000)) != 0) return client_result(L, u, NULL);
    /* Redis answers WAIT at its own timeout: give the socket a little more */
    client_intr_arm(L);
    r = exec_conn_read(xc, deadline_in_ms((long)(t * 1000) + (u->r->timeout_ms > 0 ? u->r->timeout_ms : 2000)));
    intr_disarm();
    if (r == NULL) {
        u->r->err = xc->c->err;
        snprintf(u->r->errstr, sizeof u->r->errstr, "%s", xc->c->errstr);
    } else if (r->type != REDIS_REPLY_INTEGER && r->type != REDIS_REPLY_ERROR) {
        /* WAIT answers a count: anything else is no count of
         * acknowledgements (and no number the policy could compare) */
        char what[48];
        script_answer_describe(r, what, sizeof what);
        freeReplyObject(r);
        lua_pushnil(L);
        lua_pushfstring(L, "redis error: protocol error: WAIT answered %s, not a count", what);
        lua_pushliteral(L, "redis");
        return 3;
    }
    return client_result(L, u, r);
}

/* client:failover_acks(key) -> n
 * How many replicas must acknowledge a write on the node of key before it
 * may be counted on across a failover: every replica a failover could
 * promote in that node's place (a Sentinel master whose replica was seen
 * to follow it, a Cluster master with replicas: topo_node.replicas), else
 * 0. What the watchdog's renewals wait for there too (wd_ack.c). */
static int meth_failover_acks(lua_State *L) {
    client_ud *u = client_check(L);
    size_t klen;
    const char *key = luaL_checklstring(L, 2, &klen);
    int n = 0;
    if (u->t && (u->t->mode == TOPO_SENTINEL || u->t->mode == TOPO_CLUSTER)) {
        topo_snap *s = topo_snap_get(u->t);
        if (s) {
            int i = topo_node_of(s, key, klen);
            n = i >= 0 && s->nodes[i].replicas > 0 ? s->nodes[i].replicas : 0;
            topo_snap_put(u->t, s);
        }
    }
    lua_pushinteger(L, n);
    return 1;
}

const luaL_Reg client_quorum_methods[] = {
    {"fanout", meth_fanout},
    {"replicas", meth_replicas},
    {"failover_acks", meth_failover_acks},
    {NULL, NULL}
};
