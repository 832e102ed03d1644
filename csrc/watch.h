/* watch.h: the Lua handle of one lock registered with a watchdog. */
#ifndef REDISLOCK_WATCH_H
#define REDISLOCK_WATCH_H

#include <stdint.h>
#include "lua.h"
#include "watchdog.h"

/* Creates the watch metatable in the registry. Stack: unchanged. */
void watch_register(lua_State *L);

/* Pushes a new handle bound to nothing (it reads "released"). Made before
 * the lock is registered: creating it may raise (out of memory), and a
 * registration without a handle would be renewed with nobody to stop it. */
void watch_push_unbound(lua_State *L);

/* Binds the handle at idx to lock id of w and takes a reference on w.
 * Allocates nothing, so it cannot raise after a successful wd_watch. */
void watch_bind(lua_State *L, int idx, wd *w, uint64_t id);

#endif
