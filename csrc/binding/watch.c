/*
 * watch.c: the Lua userdata for one watched lock.
 *
 * The handle is what keeps a lock registered: releasing, closing or
 * collecting it unregisters the lock from the watchdog before returning, so
 * no renewal follows. __gc does no network I/O; an unreleased lock that is
 * collected simply stops being renewed and its ttl frees the name.
 */
#include "binding/watch.h"

#include "lauxlib.h"
#include "binding/compat.h"
#include "binding/udata.h"

#define WATCH_MT "redislock.watch"

typedef struct watch_ud {
    udata_tag tag;  /* (udata.h) */
    wd *w;          /* NULL once unwatched */
    uint64_t id;
} watch_ud;

void watch_push_unbound(lua_State *L) {
    udata_new(L, sizeof(watch_ud), UDATA_WATCH, WATCH_MT);
}

int watch_push_spare(lua_State *L, int idx) {
    watch_ud *u = (watch_ud *)udata_test(L, idx, UDATA_WATCH, sizeof(watch_ud));
    if (u == NULL || u->w != NULL) return 0;
    u->id = 0;
    lua_pushvalue(L, idx);
    return 1;
}

void watch_bind(lua_State *L, int idx, wd *w, uint64_t id) {
    watch_ud *u = (watch_ud *)lua_touserdata(L, idx);   /* ours: see watch.h */
    wd_retain(w);
    u->w = w;
    u->id = id;
}

static watch_ud *watch_check(lua_State *L) {
    return (watch_ud *)udata_check(L, 1, UDATA_WATCH, sizeof(watch_ud), WATCH_MT);
}

/* watch:state() -> state, lease_end
 * state: "held" | "not held" | "unreachable" | "expired" | "max_hold" |
 *        "forked" | "stopped" | "released"
 * lease_end: monotonic seconds until which the lease is surely ours (nil
 * once released or when unknown). */
static int meth_state(lua_State *L) {
    watch_ud *u = watch_check(L);
    int64_t lease_end = -1;
    if (u->w == NULL) {
        lua_pushliteral(L, "released");
        return 1;
    }
    lua_pushstring(L, wd_state_name(wd_status(u->w, u->id, &lease_end)));
    if (lease_end < 0) return 1;
    lua_pushnumber(L, (lua_Number)lease_end / 1000.0);
    return 2;
}

/* watch:renewed(ttl, lease_end, sent): the Lua side extended the lease
 * itself with an extend sent at `sent`. Seconds; lease_end and sent on the
 * monotonic clock. */
static int meth_renewed(lua_State *L) {
    watch_ud *u = watch_check(L);
    lua_Number ttl = luaL_checknumber(L, 2);
    lua_Number end = luaL_checknumber(L, 3);
    lua_Number sent = luaL_checknumber(L, 4);
    if (!(ttl >= 0.001 && ttl < 1e10)) return luaL_argerror(L, 2, "ttl out of range");
    if (!(end >= 0 && end < 1e12)) return luaL_argerror(L, 3, "lease end out of range");
    if (!(sent >= 0 && sent < 1e12)) return luaL_argerror(L, 4, "send time out of range");
    if (u->w != NULL)
        wd_renewed(u->w, u->id, (int64_t)(ttl * 1000 + 0.5), (int64_t)(end * 1000),
                   (int64_t)(sent * 1000));
    return 0;
}

/* watch:replicas(n): the lock's `replicas`: where its renewals wait for a
 * replica's acknowledgement (a master a failover could replace), they
 * wait for at least n (see wd_set_replicas). */
static int meth_replicas(lua_State *L) {
    watch_ud *u = watch_check(L);
    lua_Integer n = luaL_checkinteger(L, 2);
    if (n < 0 || n > 1000) return luaL_argerror(L, 2, "replica count out of range");
    if (u->w != NULL) wd_set_replicas(u->w, u->id, (int)n);
    return 0;
}

/* watch:id() -> the id that client:losses() reports. */
static int meth_id(lua_State *L) {
    watch_ud *u = watch_check(L);
    lua_pushinteger(L, (lua_Integer)u->id);
    return 1;
}

/* watch:unwatch(): stop renewing. Idempotent; also __gc. Never waits: no
 * renewal of this lock is queued after the call, one not yet begun to be
 * written is taken back (see wd_unwatch). */
static int meth_unwatch(lua_State *L) {
    watch_ud *u = watch_check(L);
    if (u->w != NULL) {
        wd *w = u->w;
        u->w = NULL;
        wd_unwatch(w, u->id);
        wd_release(w);
    }
    return 0;
}

/* __gc: unwatch, then untag (udata.h). */
static int meth_gc(lua_State *L) {
    meth_unwatch(L);
    udata_untag(L, 1, UDATA_WATCH, sizeof(watch_ud));
    return 0;
}

static int meth_tostring(lua_State *L) {
    watch_ud *u = watch_check(L);
    lua_pushfstring(L, "redislock.watch (%s)",
                    u->w ? wd_state_name(wd_status(u->w, u->id, NULL)) : "released");
    return 1;
}

static const luaL_Reg watch_methods[] = {
    {"state", meth_state},
    {"renewed", meth_renewed},
    {"replicas", meth_replicas},
    {"id", meth_id},
    {"unwatch", meth_unwatch},
    {NULL, NULL}
};

static const luaL_Reg watch_meta[] = {
    {"__gc", meth_gc},
    {"__close", meth_unwatch},
    {"__tostring", meth_tostring},
    {NULL, NULL}
};

void watch_register(lua_State *L) {
    luaL_newmetatable(L, WATCH_MT);      /* mt */
    luaL_setfuncs(L, watch_meta, 0);
    luaL_newlib(L, watch_methods);       /* mt, methods */
    lua_setfield(L, -2, "__index");      /* mt */
    lua_pop(L, 1);                       /* */
}
