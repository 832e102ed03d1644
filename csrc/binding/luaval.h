/* luaval.h: values between Lua and Redis (see luaval.c). */
#ifndef REDISLOCK_LUAVAL_H
#define REDISLOCK_LUAVAL_H

#include <stddef.h>
#include <hiredis.h>
#include "lua.h"

/* Nested replies deeper than this are cut: Redis never sends them for our
 * commands, and it keeps a hostile server from exhausting the C stack. */
#define LUAVAL_MAX_DEPTH 16

/* Replaces the number at stack index i by the string Redis gets for it:
 * integers with every digit, others with the fewest that read back the
 * same. Raises on NaN and infinities. */
void luaval_number_arg(lua_State *L, int i);

/* Stack values first..top as binary-safe strings into argv/lens (numbers
 * by luaval_number_arg); raises on other types or more than max. */
int luaval_args(lua_State *L, int first, const char **argv, size_t *lens, int max);

/* Pushes r as a Lua value (nil replies as false). */
void luaval_push_reply(lua_State *L, const redisReply *r, int depth);

/* The Lua value at idx (numbers, strings, tables, anything else as nil) as
 * a reply tree (free with freeReplyObject); NULL when out of memory or too
 * deep. */
redisReply *luaval_reply_of(lua_State *L, int idx, int depth);

/* A request's answer r (freed here) as Lua gets it: the reply, or nil,
 * "redis error: ...", "redis" for Redis' refusal. How many values. */
int luaval_push_answer(lua_State *L, redisReply *r);

/* A wait's two replies (freed here), the BLPOP's and the attempt's behind
 * it (NULL: none), as channel's wait_try gives them: true, the value
 * popped (false: none came; nil: Redis refused the BLPOP), the attempt's
 * reply (false: it did not run). How many values. */
int luaval_push_wait(lua_State *L, redisReply *woken, redisReply *attempt);

#endif
