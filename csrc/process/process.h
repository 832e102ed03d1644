/* process.h: the few process primitives the CLI and the fork specs need,
 * for Lua 5.4 hosts where luaposix is not packaged. */
#ifndef REDISLOCK_PROCESS_H
#define REDISLOCK_PROCESS_H

#include "lua.h"

/* Adds fork, exec, waitpid, kill, _exit, signal helpers (signalfd, ignored
 * signals) and job helpers (pipe, drain, subreaper, descendants) to the
 * table on top of the stack. */
void process_register(lua_State *L);

#endif
