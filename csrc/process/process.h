/* process.h: the few process primitives the CLI and the fork specs need,
 * for Lua 5.4 hosts where luaposix is not packaged. */
#ifndef REDISLOCK_PROCESS_H
#define REDISLOCK_PROCESS_H

#include "lua.h"

/* The module redislock.process: fork, exec, waitpid, kill, _exit, signal
 * helpers (signalfd, ignored signals) and job helpers (pipe, drain,
 * subreaper, descendants, the job's leader), for the CLI and the specs. */
int luaopen_redislock_process(lua_State *L);

#endif
