/* process_common.h: what process.c, process_signal.c and process_fd.c
 * share. No state: each is a set of thin bindings (process.h). */
#ifndef REDISLOCK_PROCESS_COMMON_H
#define REDISLOCK_PROCESS_COMMON_H

#include <errno.h>
#include <signal.h>
#include <string.h>

#include "lua.h"
#include "lauxlib.h"

/* Pushes nil, "what: strerror(errno)" and returns 2. */
static inline int process_fail(lua_State *L, const char *what) {
    int e = errno;
    lua_pushnil(L);
    lua_pushfstring(L, "%s: %s", what, strerror(e));
    return 2;
}

/* A signal given as a name ("TERM", "SIGTERM") or a number; raises when
 * there is no such signal. */
int process_checksig(lua_State *L, int idx);

/* The name of a signal ("TERM"), or NULL. */
const char *process_signame(int sig);

/* The signals of the list at idx (names or numbers) as a set. */
void process_sigset(lua_State *L, int idx, sigset_t *set);

/* poll(2) for input on fds[0..n) (n at most PROCESS_MAX_POLL) for up to t
 * seconds. Returns a bit per readable fd. */
#define PROCESS_MAX_POLL 8
unsigned process_poll(const int *fds, int n, lua_Number t);

extern const luaL_Reg process_signal_functions[];   /* process_signal.c */
extern const luaL_Reg process_fd_functions[];       /* process_fd.c */
extern const luaL_Reg process_leader_functions[];   /* process_leader.c */

#endif
