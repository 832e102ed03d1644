/*
 * udata.h: luaL_checkudata without the registry lookup, for methods on the
 * hot path (each call of client:script, watch:unwatch, ... checks its self).
 *
 * Each of our userdata types starts with a tag: the userdata's own address
 * and the type's number, written when it is made (udata_new). A check
 * reads the tag of a block of the type's size, with no string hashing and
 * no metatable lookup; a Lua program cannot forge one, since only C writes
 * a userdata's bytes, and __gc clears it (udata_untag) before the block is
 * freed. Anything else (another type, a table, nil) falls
 * back to luaL_checkudata, which also words the error.
 */
#ifndef REDISLOCK_UDATA_H
#define REDISLOCK_UDATA_H

#include <stddef.h>
#include <string.h>

#include "lua.h"
#include "lauxlib.h"
#include "binding/compat.h"

enum { UDATA_CLIENT = 1, UDATA_WATCH, UDATA_RECORDER };

typedef struct udata_tag {
    const void *self;       /* the userdata's own address */
    int type;               /* UDATA_* */
} udata_tag;

/* The userdata at idx when it is a `type` of `size` bytes (tagged by
 * udata_new, and not collected); NULL otherwise, never raising. */
static inline void *udata_test(lua_State *L, int idx, int type, size_t size) {
    udata_tag *t = (udata_tag *)lua_touserdata(L, idx);
    if (t != NULL && lua_rawlen(L, idx) == size && t->self == t && t->type == type) return t;
    return NULL;
}

/* udata_test, or luaL_checkudata's error for tname. */
static inline void *udata_check(lua_State *L, int idx, int type, size_t size, const char *tname) {
    void *p = udata_test(L, idx, type, size);
    return p != NULL ? p : luaL_checkudata(L, idx, tname);
}

/* Clears the tag of the userdata at idx when it is a tagged `type` of
 * `size` bytes (its __gc, after its own work): the block is about to be
 * freed, and another module's userdata of the same size made at that
 * address must never read as ours. Anything else (a __gc called by hand
 * with another value) is left alone. An object used again after its __gc
 * still passes udata_check, through luaL_checkudata and its metatable. */
static inline void udata_untag(lua_State *L, int idx, int type, size_t size) {
    udata_tag *t = (udata_tag *)udata_test(L, idx, type, size);
    if (t != NULL) t->self = NULL;
}

/* Pushes a new userdata of `size` bytes (a struct starting with a
 * udata_tag), tagged, with tname's metatable; the rest is zeroed. */
static inline void *udata_new(lua_State *L, size_t size, int type, const char *tname) {
    udata_tag *t = (udata_tag *)lua_newuserdata(L, size);
    memset(t, 0, size);
    t->self = t;
    t->type = type;
    luaL_getmetatable(L, tname);
    lua_setmetatable(L, -2);
    return t;
}

#endif
