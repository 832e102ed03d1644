/* watch.h: the Lua handle of one lock registered with a watchdog. */
#ifndef REDISLOCK_WATCH_H
#define REDISLOCK_WATCH_H

#include <stdint.h>
#include "lua.h"
#include "watchdog/watchdog.h"

/* Creates the watch metatable in the registry. Stack: unchanged. */
void watch_register(lua_State *L);

/* Pushes a new handle bound to nothing (it reads "released"). Made before
 * the lock is registered: creating it may raise (out of memory), and a
 * registration without a handle would be renewed with nobody to stop it. */
void watch_push_unbound(lua_State *L);

/* Pushes the handle at idx again, to be bound anew, when it is one of ours
 * and bound to nothing (unwatched); returns 1. Otherwise pushes nothing
 * and returns 0. The caller vouches that nothing else still uses the
 * handle: its old id is gone. */
int watch_push_spare(lua_State *L, int idx);

/* Binds the handle at idx (one watch_push_unbound pushed) to lock id of w and takes a reference on w.
 * Allocates nothing, so it cannot raise after a successful wd_watch. */
void watch_bind(lua_State *L, int idx, wd *w, uint64_t id);

#endif
