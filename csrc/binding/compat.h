/*
 * compat.h: the few Lua 5.2+ C API calls this module uses, for Lua 5.1 and
 * LuaJIT. Include after lua.h and lauxlib.h. Lua 5.4 is the primary target;
 * everything here compiles away there.
 */
#ifndef REDISLOCK_COMPAT_H
#define REDISLOCK_COMPAT_H

#include "lua.h"
#include "lauxlib.h"

#if LUA_VERSION_NUM < 502

/* LuaJIT 2.1 ships luaL_setfuncs; plain 5.1 does not. Our own copy under
 * another name avoids clashing with either. */
static inline void compat_setfuncs(lua_State *L, const luaL_Reg *l, int nup) {
    luaL_checkstack(L, nup + 1, "too many upvalues");
    for (; l->name != NULL; l++) {
        int i;
        for (i = 0; i < nup; i++) lua_pushvalue(L, -nup);
        lua_pushcclosure(L, l->func, nup);
        lua_setfield(L, -(nup + 2), l->name);
    }
    lua_pop(L, nup);
}
#define luaL_setfuncs compat_setfuncs


/* LuaJIT 2.1's lauxlib.h defines these two already. */
#ifndef luaL_newlibtable
#define luaL_newlibtable(L, l) lua_createtable(L, 0, sizeof(l) / sizeof((l)[0]) - 1)
#endif
#ifndef luaL_newlib
#define luaL_newlib(L, l) (luaL_newlibtable(L, l), luaL_setfuncs(L, l, 0))
#endif
#define lua_rawlen lua_objlen

#endif /* LUA_VERSION_NUM < 502 */

#endif
