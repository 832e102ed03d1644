/* client.h: the connection userdata, as seen from core.c. */
#ifndef REDISLOCK_CLIENT_H
#define REDISLOCK_CLIENT_H

#include "lua.h"

/* Creates the client metatable in the registry. Stack: unchanged. */
void client_register(lua_State *L);

/* Arms this thread's interrupt check (intr.h) for a call from L that may
 * block: its waits give up once a signal has set a debug hook on L, or on
 * L's main thread, that was not there when the call began. Disarm with
 * intr_disarm() when the call is done. */
void client_intr_arm(lua_State *L);

/* core.connect(config) -> client | nil, err */
int client_global_connect(lua_State *L);
int client_global_number_arg(lua_State *L);

#endif
