/*
 * process.c: fork, exec and wait for `redislock run` and for specs; the
 * signals are in process_signal.c, fds and the job's tree in process_fd.c.
 *
 * Debian ships no luaposix for Lua 5.4, and a job guard has to start a child,
 * forward signals to it and report how it ended. These are thin bindings;
 * the policy (what to forward, exit codes) is in lua/redislock/cli.lua.
 *
 * Signals are not handled with Lua callbacks (a signal handler must never
 * touch a lua_State); instead the chosen signals are blocked and turned into
 * readable data on a signalfd that Lua polls with a timeout.
 *
 * A job is COMMAND and everything it starts. The guard finds the job's
 * processes as its descendants in /proc (it is their subreaper, so orphans
 * stay in the tree), and learns that the last one is gone when every copy of
 * a pipe's write end, inherited by each of them, is closed.
 */
#define _GNU_SOURCE
#include "process/process.h"
#include "process/process_common.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lauxlib.h"
#include "binding/compat.h"

/* core.fork() -> pid (parent), 0 (child) | nil, err */
static int global_fork(lua_State *L) {
    pid_t pid;
    fflush(NULL);
    pid = fork();
    if (pid < 0) return process_fail(L, "fork");
    lua_pushinteger(L, pid);
    return 1;
}

extern char **environ;

/* Whether environ[i] ("NAME=value") names one of the first n entries of the
 * table at idx, whose keys are names. */
static int process_env_named(const char *entry, const char *const *names, size_t n) {
    const char *eq = strchr(entry, '=');
    size_t j, len = eq ? (size_t)(eq - entry) : strlen(entry);
    for (j = 0; j < n; j++)
        if (strlen(names[j]) == len && strncmp(names[j], entry, len) == 0) return 1;
    return 0;
}

/* Builds, in Lua-owned memory, the environment for a child: ours, with the
 * NAME = value pairs of the table at idx set (they win) and the NAME = false
 * ones removed. Done before fork so the child, a copy of a threaded process,
 * needs no malloc before exec. */
static char **process_envp(lua_State *L, int idx) {
    size_t n = 0, extra = 0, i, k = 0, set = 0;
    char **envp;
    const char **names;
    int top;
    while (environ[n]) n++;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        int t = lua_type(L, -1);
        if (lua_type(L, -2) != LUA_TSTRING || !(t == LUA_TSTRING || (t == LUA_TBOOLEAN && !lua_toboolean(L, -1))) ||
            strchr(lua_tostring(L, -2), '=') != NULL || lua_tostring(L, -2)[0] == '\0')
            luaL_argerror(L, idx, "string names and values (or false) expected");
        extra++;
        lua_pop(L, 1);
    }
    envp = (char **)lua_newuserdata(L, sizeof(char *) * (n + extra + 1));
    names = (const char **)lua_newuserdata(L, sizeof(char *) * (extra + 1));
    top = lua_gettop(L);
    luaL_checkstack(L, (int)extra + 2, "environment too large");
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        names[k++] = lua_tostring(L, -2);  /* the table keeps the key alive */
        if (lua_type(L, -1) == LUA_TSTRING) {
            const char *s = lua_pushfstring(L, "%s=%s", lua_tostring(L, -2), lua_tostring(L, -1));
            lua_insert(L, top + 1);  /* keep it on the stack, below the iteration */
            envp[set++] = (char *)s;
        }
        lua_pop(L, 1);
    }
    for (i = 0; i < n; i++)
        if (!process_env_named(environ[i], names, extra)) envp[set++] = environ[i];
    envp[set] = NULL;
    return envp;
}

/* What the child does between fork and exec, all async-signal-safe: the
 * parent is a threaded process, so no malloc, no stdio, no locks. */
typedef struct {
    sigset_t ignore;       /* SIG_IGN in the child; every other signal SIG_DFL */
    int death_signal;      /* PR_SET_PDEATHSIG, or 0 */
    pid_t parent;          /* the guard, to catch its death before prctl */
    int keep_fd;           /* left open across exec, or -1 */
    pid_t pgid;            /* the process group to join (the job's leader), or 0 */
} spawn_setup;

static void process_child_setup(const spawn_setup *o) {
    struct sigaction sa;
    sigset_t none;
    int sig;
    memset(&sa, 0, sizeof sa);
    for (sig = 1; sig < NSIG; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP) continue;
        sa.sa_handler = sigismember(&o->ignore, sig) == 1 ? SIG_IGN : SIG_DFL;
        sigaction(sig, &sa, NULL);
    }
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (o->death_signal) {
        /* Sent when the thread that forked us ends: the guard's main thread,
         * which lives as long as the guard. If the guard died before this
         * call, our parent is already someone else: do not start at all. */
        if (prctl(PR_SET_PDEATHSIG, o->death_signal, 0, 0, 0) != 0 || getppid() != o->parent)
            _exit(127);
    }
    if (o->keep_fd >= 0) fcntl(o->keep_fd, F_SETFD, 0);
    /* (the parent does it too: whichever runs first; a leader already
     * gone leaves us in the guard's group) */
    if (o->pgid > 0) setpgid(0, o->pgid);
}

/* core.spawn(argv, env [, opts]) -> pid | nil, err, code
 * Forks and execs argv[1] (searched in PATH) with argv. env: nil to inherit,
 * or a table of NAME = value pairs set in the child (NAME = false: removed).
 * The child starts with every signal unblocked and default dispositions,
 * except, with opts:
 *   ignore = {sig, ...}    left ignored (SIG_IGN), as exec itself would
 *   death_signal = sig     sent to the child when this thread ends
 *                          (PR_SET_PDEATHSIG), even by SIGKILL
 *   keep_fd = fd           a close-on-exec fd the child keeps open
 *   pgid = pid             the process group the child joins (the job's
 *                          leader: core.job_leader)
 * code, when exec failed: 127 if there is no such file, 126 if it exists
 * but cannot be executed (the shells' statuses). */
static int global_spawn(lua_State *L) {
    int n, i, fds[2];
    char **argv, **envp = environ;
    pid_t pid;
    spawn_setup o;
    luaL_checktype(L, 1, LUA_TTABLE);
    if (!lua_isnoneornil(L, 2)) {
        luaL_checktype(L, 2, LUA_TTABLE);
        envp = process_envp(L, 2);
    }
    sigemptyset(&o.ignore);
    o.death_signal = 0;
    o.keep_fd = -1;
    o.pgid = 0;
    o.parent = getpid();
    if (!lua_isnoneornil(L, 3)) {
        luaL_checktype(L, 3, LUA_TTABLE);
        lua_getfield(L, 3, "ignore");
        if (!lua_isnil(L, -1)) process_sigset(L, lua_gettop(L), &o.ignore);
        lua_pop(L, 1);
        lua_getfield(L, 3, "death_signal");
        if (!lua_isnil(L, -1)) o.death_signal = process_checksig(L, lua_gettop(L));
        lua_pop(L, 1);
        lua_getfield(L, 3, "keep_fd");
        if (!lua_isnil(L, -1)) o.keep_fd = (int)luaL_checkinteger(L, -1);
        lua_pop(L, 1);
        lua_getfield(L, 3, "pgid");
        if (!lua_isnil(L, -1)) o.pgid = (pid_t)luaL_checkinteger(L, -1);
        lua_pop(L, 1);
    }
    n = (int)lua_rawlen(L, 1);
    if (n < 1) return luaL_argerror(L, 1, "empty command");
    argv = (char **)lua_newuserdata(L, sizeof(char *) * (size_t)(n + 1));
    for (i = 0; i < n; i++) {
        lua_rawgeti(L, 1, i + 1);
        if (lua_type(L, -1) != LUA_TSTRING) return luaL_argerror(L, 1, "strings expected");
        argv[i] = (char *)lua_tostring(L, -1);
        lua_pop(L, 1); /* the table keeps the string alive */
    }
    argv[n] = NULL;
    /* A close-on-exec pipe tells the parent whether exec worked. */
    if (pipe2(fds, O_CLOEXEC) != 0) return process_fail(L, "pipe");
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return process_fail(L, "fork");
    }
    if (pid == 0) {
        /* Only async-signal-safe calls from here to exec. */
        int e;
        close(fds[0]);
        process_child_setup(&o);
        execvpe(argv[0], argv, envp);
        e = errno;
        if (write(fds[1], &e, sizeof e) < 0) { /* parent sees EOF */ }
        _exit(127);
    }
    close(fds[1]);
    if (o.pgid > 0) setpgid(pid, o.pgid);
    {
        int e = 0;
        ssize_t got;
        do got = read(fds[0], &e, sizeof e); while (got < 0 && errno == EINTR);
        close(fds[0]);
        if (got == (ssize_t)sizeof e) {
            waitpid(pid, NULL, 0);
            lua_pushnil(L);
            lua_pushfstring(L, "cannot run %s: %s", argv[0], strerror(e));
            lua_pushinteger(L, e == ENOENT || e == ENOTDIR ? 127 : 126);
            return 3;
        }
    }
    lua_pushinteger(L, pid);
    return 1;
}

/* core.waitpid(pid [, nohang]) -> pid, "exited", code | pid, "signaled", sig
 *                                 | 0 (nohang, still running) | nil, err */
static int global_waitpid(lua_State *L) {
    pid_t pid = (pid_t)luaL_checkinteger(L, 1);
    int status, r;
    int flags = lua_toboolean(L, 2) ? WNOHANG : 0;
    do r = waitpid(pid, &status, flags); while (r < 0 && errno == EINTR);
    if (r < 0) return process_fail(L, "waitpid");
    lua_pushinteger(L, r);
    if (r == 0) return 1;
    if (WIFEXITED(status)) {
        lua_pushliteral(L, "exited");
        lua_pushinteger(L, WEXITSTATUS(status));
    } else {
        const char *name = process_signame(WTERMSIG(status));
        lua_pushliteral(L, "signaled");
        lua_pushinteger(L, WTERMSIG(status));
        lua_pushstring(L, name);
        return 4;
    }
    return 3;
}

/* core._exit(code): leaves at once, without atexit handlers or __gc (what a
 * forked child must do so it does not run the parent's finalizers). */
static int global_exit(lua_State *L) {
    _exit((int)luaL_optinteger(L, 1, 0));
    return 0;
}

static const luaL_Reg process_functions[] = {
    {"fork", global_fork},
    {"spawn", global_spawn},
    {"waitpid", global_waitpid},
    {"_exit", global_exit},
    {NULL, NULL}
};

/* require "redislock.process" (lua/redislock/process.lua opens this entry
 * of the core's shared object): the process primitives, in a table of
 * their own; redislock.core keeps only what lock users need. */
__attribute__((visibility("default")))
int luaopen_redislock_process(lua_State *L) {
    lua_newtable(L);                                /* process */
    luaL_setfuncs(L, process_functions, 0);
    luaL_setfuncs(L, process_signal_functions, 0);
    luaL_setfuncs(L, process_fd_functions, 0);
    luaL_setfuncs(L, process_leader_functions, 0);
    return 1;
}
