/* watch.h: the Lua handle of one lock registered with a watchdog. */
#ifndef REDISLOCK_WATCH_H
#define REDISLOCK_WATCH_H

#include <stdint.h>
#include "lua.h"
#include "watchdog.h"

/* Creates the watch metatable in the registry. Stack: unchanged. */
void watch_register(lua_State *L);

/* Pushes a new handle for lock id of w; takes a reference on w. */
void watch_push(lua_State *L, wd *w, uint64_t id);

#endif
