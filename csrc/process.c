/*
 * process.c: fork, exec, wait and signals for `redislock run` and for specs.
 *
 * Debian ships no luaposix for Lua 5.4, and a job guard has to start a child,
 * forward signals to it and report how it ended. These are thin bindings;
 * the policy (what to forward, exit codes) is in lua/redislock/cli.lua.
 *
 * Signals are not handled with Lua callbacks (a signal handler must never
 * touch a lua_State); instead the chosen signals are blocked and turned into
 * readable data on a signalfd that Lua polls with a timeout.
 */
#define _GNU_SOURCE
#include "process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lauxlib.h"
#include "compat.h"

static int process_fail(lua_State *L, const char *what) {
    int e = errno;
    lua_pushnil(L);
    lua_pushfstring(L, "%s: %s", what, strerror(e));
    return 2;
}

static const struct { const char *name; int sig; } process_signals[] = {
    {"HUP", SIGHUP}, {"INT", SIGINT}, {"QUIT", SIGQUIT}, {"KILL", SIGKILL},
    {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"PIPE", SIGPIPE}, {"ALRM", SIGALRM},
    {"TERM", SIGTERM}, {"CHLD", SIGCHLD}, {"CONT", SIGCONT}, {"STOP", SIGSTOP},
    {"TSTP", SIGTSTP}, {NULL, 0}
};

/* A signal given as a name ("TERM", "SIGTERM") or a number. */
static int process_checksig(lua_State *L, int idx) {
    int i;
    if (lua_type(L, idx) == LUA_TNUMBER) {
        lua_Number n = lua_tonumber(L, idx);
        if (!(n >= 0 && n < 65)) luaL_argerror(L, idx, "no such signal");
        return (int)n;
    } else {
        const char *s = luaL_checkstring(L, idx);
        if (strncmp(s, "SIG", 3) == 0) s += 3;
        for (i = 0; process_signals[i].name; i++)
            if (strcmp(s, process_signals[i].name) == 0) return process_signals[i].sig;
        return luaL_argerror(L, idx, "no such signal");
    }
}

static const char *process_signame(int sig) {
    int i;
    for (i = 0; process_signals[i].name; i++)
        if (process_signals[i].sig == sig) return process_signals[i].name;
    return NULL;
}

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

/* Builds, in Lua-owned memory, the environment for a child: ours plus the
 * NAME = value pairs of the table at idx (which win). Done before fork so
 * the child, a copy of a threaded process, needs no malloc before exec. */
static char **process_envp(lua_State *L, int idx) {
    size_t n = 0, extra = 0, i, k = 0;
    char **envp;
    int top;
    while (environ[n]) n++;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING ||
            strchr(lua_tostring(L, -2), '=') != NULL || lua_tostring(L, -2)[0] == '\0')
            luaL_argerror(L, idx, "string names and values expected");
        extra++;
        lua_pop(L, 1);
    }
    envp = (char **)lua_newuserdata(L, sizeof(char *) * (n + extra + 1));
    top = lua_gettop(L);
    luaL_checkstack(L, (int)extra + 2, "environment too large");
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        const char *s = lua_pushfstring(L, "%s=%s", lua_tostring(L, -2), lua_tostring(L, -1));
        lua_insert(L, top + 1);  /* keep it on the stack, below the iteration */
        envp[k++] = (char *)s;
        lua_pop(L, 1);
    }
    for (i = 0; i < n; i++) {
        const char *eq = strchr(environ[i], '=');
        size_t j, len = eq ? (size_t)(eq - environ[i]) + 1 : strlen(environ[i]);
        int overridden = 0;
        for (j = 0; j < extra; j++)
            if (strncmp(envp[j], environ[i], len) == 0) overridden = 1;
        if (!overridden) envp[k++] = environ[i];
    }
    envp[k] = NULL;
    return envp;
}

/* core.spawn(argv, env) -> pid | nil, err
 * Forks and execs argv[1] (searched in PATH) with argv. env: nil to inherit,
 * or a table of extra NAME = value pairs set in the child. The child starts
 * with every signal unblocked and default dispositions. */
static int global_spawn(lua_State *L) {
    int n, i, fds[2];
    char **argv, **envp = environ;
    pid_t pid;
    luaL_checktype(L, 1, LUA_TTABLE);
    if (!lua_isnoneornil(L, 2)) {
        luaL_checktype(L, 2, LUA_TTABLE);
        envp = process_envp(L, 2);
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
        struct sigaction dfl;
        sigset_t none;
        int e, sig;
        close(fds[0]);
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        for (sig = 1; sig < NSIG; sig++)
            if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, NULL);
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execvpe(argv[0], argv, envp);
        e = errno;
        if (write(fds[1], &e, sizeof e) < 0) { /* parent sees EOF */ }
        _exit(127);
    }
    close(fds[1]);
    {
        int e = 0;
        ssize_t got;
        do got = read(fds[0], &e, sizeof e); while (got < 0 && errno == EINTR);
        close(fds[0]);
        if (got == (ssize_t)sizeof e) {
            waitpid(pid, NULL, 0);
            lua_pushnil(L);
            lua_pushfstring(L, "cannot run %s: %s", argv[0], strerror(e));
            return 2;
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

/* core.kill(pid, sig) -> true | nil, err */
static int global_kill(lua_State *L) {
    pid_t pid = (pid_t)luaL_checkinteger(L, 1);
    int sig = process_checksig(L, 2);
    if (kill(pid, sig) != 0) return process_fail(L, "kill");
    lua_pushboolean(L, 1);
    return 1;
}

/* core._exit(code): leaves at once, without atexit handlers or __gc (what a
 * forked child must do so it does not run the parent's finalizers). */
static int global_exit(lua_State *L) {
    _exit((int)luaL_optinteger(L, 1, 0));
    return 0;
}

/* core.signalfd({"TERM", "INT", ...}) -> fd | nil, err
 * Blocks those signals in this thread and returns a signalfd that receives
 * them; read with core.signal_wait. Children from core.spawn unblock them. */
static int global_signalfd(lua_State *L) {
    sigset_t set;
    int i, n, fd;
    luaL_checktype(L, 1, LUA_TTABLE);
    sigemptyset(&set);
    n = (int)lua_rawlen(L, 1);
    for (i = 1; i <= n; i++) {
        lua_rawgeti(L, 1, i);
        sigaddset(&set, process_checksig(L, lua_gettop(L)));
        lua_pop(L, 1);
    }
    if (sigismember(&set, SIGCHLD)) {
        /* An inherited SIG_IGN would make the kernel reap our children
         * itself, and waitpid would never report them. */
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigaction(SIGCHLD, &dfl, NULL);
    }
    if (sigprocmask(SIG_BLOCK, &set, NULL) != 0) return process_fail(L, "sigprocmask");
    fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (fd < 0) return process_fail(L, "signalfd");
    lua_pushinteger(L, fd);
    return 1;
}

/* poll(2) for input on fd for up to t seconds (clamped to a day, so the
 * millisecond count fits an int). */
static int process_poll(int fd, lua_Number t) {
    struct pollfd p;
    int r;
    if (t > 86400) t = 86400;
    p.fd = fd;
    p.events = POLLIN;
    do r = poll(&p, 1, (int)(t * 1000)); while (r < 0 && errno == EINTR);
    return r > 0 && (p.revents & POLLIN);
}

/* core.signal_wait(fd, timeout_seconds) -> "TERM" | nil (timed out)
 * Waits until a signal arrives on the signalfd or the timeout passes. */
static int global_signal_wait(lua_State *L) {
    int fd = (int)luaL_checkinteger(L, 1);
    lua_Number t = luaL_checknumber(L, 2);
    struct signalfd_siginfo si;
    if (!(t >= 0 && t < 1e9)) return luaL_argerror(L, 2, "timeout out of range");
    if (!process_poll(fd, t)) return 0;
    if (read(fd, &si, sizeof si) != (ssize_t)sizeof si) return 0;
    {
        const char *name = process_signame((int)si.ssi_signo);
        if (name) lua_pushstring(L, name);
        else lua_pushinteger(L, (lua_Integer)si.ssi_signo);
    }
    return 1;
}

/* core.readable(fd, timeout_seconds) -> true | false: poll(2) for input. */
static int global_readable(lua_State *L) {
    lua_Number t = luaL_checknumber(L, 2);
    int fd = (int)luaL_checkinteger(L, 1);
    if (!(t >= 0 && t < 1e9)) return luaL_argerror(L, 2, "timeout out of range");
    lua_pushboolean(L, process_poll(fd, t));
    return 1;
}

static const luaL_Reg process_functions[] = {
    {"fork", global_fork},
    {"spawn", global_spawn},
    {"waitpid", global_waitpid},
    {"kill", global_kill},
    {"_exit", global_exit},
    {"signalfd", global_signalfd},
    {"signal_wait", global_signal_wait},
    {"readable", global_readable},
    {NULL, NULL}
};

void process_register(lua_State *L) {
    luaL_setfuncs(L, process_functions, 0);
}
