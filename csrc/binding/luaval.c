/*
 * luaval.c: values between Lua and Redis: command arguments from Lua values
 * (numbers written the one way both transports send them), replies as Lua
 * values, and Lua tables (as lua-resty-redis gives replies) as reply trees
 * for the C parsers.
 */
#include "binding/luaval.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lauxlib.h"
#include "binding/compat.h"
#include "base/reply_obj.h"
#include "base/resp.h"

/* Writes the number at stack index i as Redis wants it, replacing it with
 * the string. Integral values become integers with every digit ("1500", not
 * "1500.0", which PX needs; a 16-digit fence, not the "1.7953298305222e+15"
 * that Lua 5.1 and LuaJIT make of it, which would merge neighbouring
 * fences). Others get the fewest digits that read back as the same double. */
void luaval_number_arg(lua_State *L, int i) {
    char buf[64];
    int len;
#if LUA_VERSION_NUM >= 503
    if (lua_isinteger(L, i)) {
        len = (int)resp_i64(buf, (long long)lua_tointeger(L, i));
    } else
#endif
    {
        lua_Number x = lua_tonumber(L, i);
        if (x != x || x == HUGE_VAL || x == -HUGE_VAL)
            luaL_argerror(L, i, "finite number expected");
        if (floor(x) == x && fabs(x) < 9.2e18) {
            len = (int)resp_i64(buf, (long long)x);
        } else {
            /* the shortest of 15, 16, 17 digits that reads back the same:
             * 0.1 goes as "0.1", not "0.10000000000000001" */
            int digits;
            for (digits = 15; digits <= 17; digits++) {
                len = snprintf(buf, sizeof buf, "%.*g", digits, (double)x);
                if (strtod(buf, NULL) == (double)x) break;
            }
        }
    }
    lua_pushlstring(L, buf, (size_t)len);
    lua_replace(L, i);
}

/* Collects stack values first..top as binary-safe strings (numbers written
 * by client_number_arg). */
int luaval_args(lua_State *L, int first, const char **argv, size_t *lens, int max) {
    int top = lua_gettop(L), i, n = 0;
    if (top - first + 1 > max) luaL_error(L, "too many arguments (at most %d)", max);
    for (i = first; i <= top; i++, n++) {
        int t = lua_type(L, i);
        if (t == LUA_TNUMBER) {
            luaval_number_arg(L, i);
        } else if (t != LUA_TSTRING) {
            luaL_argerror(L, i, lua_pushfstring(L, "string or number expected, got %s", luaL_typename(L, i)));
        }
        argv[n] = lua_tolstring(L, i, &lens[n]);
    }
    return n;
}

void luaval_push_reply(lua_State *L, const redisReply *r, int depth) {
    size_t i;
    switch (r->type) {
    case REDIS_REPLY_INTEGER:
        lua_pushinteger(L, (lua_Integer)r->integer);
        break;
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
        lua_pushlstring(L, r->str, r->len);
        break;
    case REDIS_REPLY_ARRAY:
        if (depth >= LUAVAL_MAX_DEPTH) {
            lua_pushboolean(L, 0);
            break;
        }
        luaL_checkstack(L, 4, "reply too deep");
        lua_createtable(L, (int)r->elements, 0);
        for (i = 0; i < r->elements; i++) {
            luaval_push_reply(L, r->element[i], depth + 1);
            lua_rawseti(L, -2, (int)i + 1);
        }
        break;
    default: /* NIL, and RESP3 types we never ask for */
        lua_pushboolean(L, 0);
        break;
    }
}


/* A Lua value as lua-resty-redis gives a reply (numbers, strings, tables,
 * false/ngx.null for nil) turned into a redisReply tree for the C
 * parsers. NULL when out of memory or too deep. */
redisReply *luaval_reply_of(lua_State *L, int idx, int depth) {
    redisReply *r;
    switch (lua_type(L, idx)) {
    case LUA_TNUMBER:
        r = reply_obj_new(REDIS_REPLY_INTEGER);
        if (r != NULL) r->integer = (long long)lua_tonumber(L, idx);
        return r;
    case LUA_TSTRING: {
        size_t len;
        const char *str = lua_tolstring(L, idx, &len);
        r = reply_obj_new(REDIS_REPLY_STRING);
        if (r != NULL && reply_obj_set_str(r, str, len) != 0) {
            reply_obj_free_bare(r);
            return NULL;
        }
        return r;
    }
    case LUA_TTABLE: {
        size_t n = (size_t)lua_rawlen(L, idx), i;
        if (depth >= LUAVAL_MAX_DEPTH || n > 100000) return NULL;
        r = reply_obj_new(REDIS_REPLY_ARRAY);
        if (r == NULL) return NULL;
        if (reply_obj_set_elements(r, n) != 0) {
            reply_obj_free_bare(r);
            return NULL;
        }
        r->elements = n;   /* (freeReplyObject skips the NULL ones) */
        luaL_checkstack(L, 2, "reply too deep");
        for (i = 0; i < n; i++) {
            lua_rawgeti(L, idx, (int)i + 1);
            r->element[i] = luaval_reply_of(L, lua_gettop(L), depth + 1);
            lua_pop(L, 1);
            if (r->element[i] == NULL) {
                freeReplyObject(r);
                return NULL;
            }
        }
        return r;
    }
    default:
        return reply_obj_new(REDIS_REPLY_NIL);
    }
}

int luaval_push_answer(lua_State *L, redisReply *r) {
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

int luaval_push_wait(lua_State *L, redisReply *woken, redisReply *attempt) {
    lua_pushboolean(L, 1);
    if (woken->type == REDIS_REPLY_ARRAY && woken->elements == 2)
        luaval_push_reply(L, woken->element[1], 1);
    else if (woken->type == REDIS_REPLY_ERROR)
        lua_pushnil(L);
    else
        lua_pushboolean(L, 0);
    if (attempt == NULL || attempt->type == REDIS_REPLY_ERROR)
        lua_pushboolean(L, 0);
    else
        luaval_push_reply(L, attempt, 0);
    freeReplyObject(woken);
    if (attempt) freeReplyObject(attempt);
    return 3;
}
