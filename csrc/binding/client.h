/* client.h: the connection userdata, as seen from core.c. */
#ifndef REDISLOCK_CLIENT_H
#define REDISLOCK_CLIENT_H

#include "lua.h"

/* Creates the client metatable in the registry. Stack: unchanged. */
void client_register(lua_State *L);

/* core.connect(config) -> client | nil, err */
int client_global_connect(lua_State *L);
int client_global_number_arg(lua_State *L);

#endif
