/*
 * lua_host.c: a minimal stand-alone Lua 5.4 for bench/callgrind.lua, linked
 * with Debian's static liblua5.4.a, which keeps its symbol table where the
 * stock /usr/bin/lua5.4 is stripped: under callgrind, the interpreter's
 * share of a cycle then shows by function (luaV_execute, luaH_getshortstr,
 * the collector...) instead of as bare addresses. Same Lua release, same
 * sources; the figures of record still come from /usr/bin/lua5.4.
 *
 * usage (the subset of lua(1) that spec/helpers.lua's lua_cmd emits):
 *   lua_host [-e CHUNK]... SCRIPT [ARGS...]
 * SCRIPT gets arg[0] = SCRIPT, arg[1..] = ARGS, as under lua(1).
 *
 * build: cc -O2 -I/usr/include/lua5.4 bench/lua_host.c \
 *            /usr/lib/x86_64-linux-gnu/liblua5.4.a -lm -ldl -Wl,-E \
 *            -o bench/out/lua_host
 * (-Wl,-E exports the Lua API to C modules such as redislock/core.so.)
 */
#include <stdio.h>
#include <string.h>

#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

static int report(lua_State *L, int status) {
    if (status != LUA_OK) {
        fprintf(stderr, "lua_host: %s\n", lua_tostring(L, -1));
        lua_pop(L, 1);
    }
    return status;
}

/* error handler: the message with a traceback */
static int traceback(lua_State *L) {
    luaL_traceback(L, L, lua_tostring(L, 1), 1);
    return 1;
}

static int run(lua_State *L, int nargs) {
    int base = lua_gettop(L) - nargs, status;
    lua_pushcfunction(L, traceback);
    lua_insert(L, base);
    status = lua_pcall(L, nargs, 0, base);
    lua_remove(L, base);
    return report(L, status);
}

int main(int argc, char **argv) {
    lua_State *L = luaL_newstate();
    int i = 1, script, status;
    if (L == NULL) return 1;
    luaL_openlibs(L);
    while (i + 1 < argc && strcmp(argv[i], "-e") == 0) {
        if (report(L, luaL_loadstring(L, argv[i + 1])) != LUA_OK || run(L, 0) != LUA_OK) return 1;
        i += 2;
    }
    if (i >= argc) {
        fprintf(stderr, "usage: %s [-e CHUNK]... SCRIPT [ARGS...]\n", argv[0]);
        return 2;
    }
    script = i;
    lua_createtable(L, argc - script - 1, script + 1);
    for (i = 0; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i - script);
    }
    lua_setglobal(L, "arg");
    if (report(L, luaL_loadfile(L, argv[script])) != LUA_OK) return 1;
    for (i = script + 1; i < argc; i++) lua_pushstring(L, argv[i]);
    status = run(L, argc - script - 1);
    lua_close(L);
    return status == LUA_OK ? 0 : 1;
}
