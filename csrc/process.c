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
 *
 * A job is COMMAND and everything it starts. The guard finds the job's
 * processes as its descendants in /proc (it is their subreaper, so orphans
 * stay in the tree), and learns that the last one is gone when every copy of
 * a pipe's write end, inherited by each of them, is closed.
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
#include <dirent.h>
#include <sys/prctl.h>
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
    {"TSTP", SIGTSTP}, {"TTIN", SIGTTIN}, {"TTOU", SIGTTOU}, {"WINCH", SIGWINCH},
    {"URG", SIGURG}, {"XCPU", SIGXCPU}, {"XFSZ", SIGXFSZ}, {"VTALRM", SIGVTALRM},
    {"PROF", SIGPROF}, {"IO", SIGIO}, {"PWR", SIGPWR}, {"SYS", SIGSYS},
    {"TRAP", SIGTRAP}, {"ABRT", SIGABRT}, {"BUS", SIGBUS}, {"FPE", SIGFPE},
    {"ILL", SIGILL}, {"SEGV", SIGSEGV}, {NULL, 0}
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

/* The signals of the list at idx (names or numbers) as a set. */
static void process_sigset(lua_State *L, int idx, sigset_t *set) {
    int i, n;
    sigemptyset(set);
    luaL_checktype(L, idx, LUA_TTABLE);
    n = (int)lua_rawlen(L, idx);
    for (i = 1; i <= n; i++) {
        lua_rawgeti(L, idx, i);
        sigaddset(set, process_checksig(L, lua_gettop(L)));
        lua_pop(L, 1);
    }
}

/* What the child does between fork and exec, all async-signal-safe: the
 * parent is a threaded process, so no malloc, no stdio, no locks. */
typedef struct {
    sigset_t ignore;       /* SIG_IGN in the child; every other signal SIG_DFL */
    int death_signal;      /* PR_SET_PDEATHSIG, or 0 */
    pid_t parent;          /* the guard, to catch its death before prctl */
    int keep_fd;           /* left open across exec, or -1 */
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

/* core.kill(pid, sig) -> true | nil, err */
static int global_kill(lua_State *L) {
    pid_t pid = (pid_t)luaL_checkinteger(L, 1);
    int sig = process_checksig(L, 2);
    if (kill(pid, sig) != 0) return process_fail(L, "kill");
    lua_pushboolean(L, 1);
    return 1;
}

/* core.signum(sig) -> number | nil: a signal name ("TERM", "SIGTERM") or
 * number checked; nil if there is no such signal. */
static int global_signum(lua_State *L) {
    int i;
    if (lua_type(L, 1) == LUA_TNUMBER) {
        lua_Number n = lua_tonumber(L, 1);
        if (!(n >= 1 && n < NSIG && n == (int)n)) return 0;
        lua_pushinteger(L, (lua_Integer)n);
        return 1;
    } else {
        const char *s = luaL_checkstring(L, 1);
        if (strncmp(s, "SIG", 3) == 0) s += 3;
        for (i = 0; process_signals[i].name; i++) {
            if (strcmp(s, process_signals[i].name) == 0) {
                lua_pushinteger(L, process_signals[i].sig);
                return 1;
            }
        }
        return 0;
    }
}

/* core._exit(code): leaves at once, without atexit handlers or __gc (what a
 * forked child must do so it does not run the parent's finalizers). */
static int global_exit(lua_State *L) {
    _exit((int)luaL_optinteger(L, 1, 0));
    return 0;
}

/* core.ignored_signals([mask]) -> { [n] = true, [name] = true, ... }
 * The signals ignored (SIG_IGN) in this process now, plus those set in mask,
 * a hex string in the form of the SigIgn line of /proc/PID/status (bit n-1
 * for signal n): a launcher can read it before an interpreter that installs
 * its own handlers (lua.c does, for SIGINT) runs. */
static int global_ignored_signals(lua_State *L) {
    unsigned long long mask = 0;
    int sig;
    if (!lua_isnoneornil(L, 1)) {
        const char *s = luaL_checkstring(L, 1);
        char *end;
        errno = 0;
        mask = strtoull(s, &end, 16);
        if (errno != 0 || *s == '\0' || *end != '\0') return luaL_argerror(L, 1, "hex mask expected");
    }
    lua_newtable(L);
    for (sig = 1; sig < NSIG; sig++) {
        struct sigaction old;
        int ignored = sig <= 64 && ((mask >> (sig - 1)) & 1);
        if (sigaction(sig, NULL, &old) == 0 && old.sa_handler == SIG_IGN) ignored = 1;
        if (sig == SIGKILL || sig == SIGSTOP || !ignored) continue;
        lua_pushboolean(L, 1);
        lua_rawseti(L, -2, sig);
        if (process_signame(sig)) {
            lua_pushboolean(L, 1);
            lua_setfield(L, -2, process_signame(sig));
        }
    }
    return 1;
}

/* core.ignore_signals({sig, ...}) -> true | nil, err: sets SIG_IGN. */
static int global_ignore_signals(lua_State *L) {
    sigset_t set;
    struct sigaction ign;
    int sig;
    process_sigset(L, 1, &set);
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    for (sig = 1; sig < NSIG; sig++)
        if (sigismember(&set, sig) == 1 && sig != SIGKILL && sig != SIGSTOP && sigaction(sig, &ign, NULL) != 0)
            return process_fail(L, "sigaction");
    lua_pushboolean(L, 1);
    return 1;
}

/* core.signalfd({"TERM", "INT", ...}) -> fd | nil, err
 * Blocks those signals in this thread and returns a signalfd that receives
 * them; read with core.signal_wait. Children from core.spawn unblock them. */
static int global_signalfd(lua_State *L) {
    sigset_t set;
    int fd;
    process_sigset(L, 1, &set);
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

/* poll(2) for input on fds[0..n) for up to t seconds (clamped to a day, so
 * the millisecond count fits an int). Returns a bit per readable fd. */
#define PROCESS_MAX_POLL 8
static unsigned process_poll(const int *fds, int n, lua_Number t) {
    struct pollfd p[PROCESS_MAX_POLL];
    int r, i;
    unsigned ready = 0;
    if (t > 86400) t = 86400;
    for (i = 0; i < n; i++) {
        p[i].fd = fds[i];
        p[i].events = POLLIN;
        p[i].revents = 0;
    }
    do r = poll(p, (nfds_t)n, (int)(t * 1000)); while (r < 0 && errno == EINTR);
    if (r <= 0) return 0;
    for (i = 0; i < n; i++)
        if (p[i].revents & (POLLIN | POLLHUP | POLLERR)) ready |= 1u << i;
    return ready;
}

/* Where a signal came from: "kernel" (the terminal's ^C, ^\, hangup: sent
 * to a whole process group), "process" (kill, sigqueue, tgkill by some
 * process, whose pid comes with it) or "other" (SIGCHLD, timers, ...). */
static const char *process_origin(const struct signalfd_siginfo *si) {
    switch (si->ssi_code) {
    case SI_KERNEL: return "kernel";
    case SI_USER: case SI_QUEUE: case SI_TKILL: return "process";
    default: return "other";
    }
}

/* core.signal_wait(fd, timeout_seconds [, {fd, ...}])
 *   -> "TERM", sender_pid, origin | nil (timed out, or another fd readable)
 * Waits until a signal arrives on the signalfd, one of the other fds (at
 * most 7) becomes readable, or the timeout passes. origin: see above. */
static int global_signal_wait(lua_State *L) {
    int fds[PROCESS_MAX_POLL], n = 1, i;
    lua_Number t = luaL_checknumber(L, 2);
    struct signalfd_siginfo si;
    fds[0] = (int)luaL_checkinteger(L, 1);
    if (!(t >= 0 && t < 1e9)) return luaL_argerror(L, 2, "timeout out of range");
    if (!lua_isnoneornil(L, 3)) {
        luaL_checktype(L, 3, LUA_TTABLE);
        for (i = 1; i <= (int)lua_rawlen(L, 3); i++) {
            if (n == PROCESS_MAX_POLL) return luaL_argerror(L, 3, "too many fds");
            lua_rawgeti(L, 3, i);
            fds[n++] = (int)luaL_checkinteger(L, -1);
            lua_pop(L, 1);
        }
    }
    if (!(process_poll(fds, n, t) & 1u)) return 0;
    if (read(fds[0], &si, sizeof si) != (ssize_t)sizeof si) return 0;
    {
        const char *name = process_signame((int)si.ssi_signo);
        if (name) lua_pushstring(L, name);
        else lua_pushinteger(L, (lua_Integer)si.ssi_signo);
    }
    lua_pushinteger(L, (lua_Integer)si.ssi_pid);
    lua_pushstring(L, process_origin(&si));
    return 3;
}

/* core.readable(fd, timeout_seconds) -> true | false: poll(2) for input. */
static int global_readable(lua_State *L) {
    lua_Number t = luaL_checknumber(L, 2);
    int fd = (int)luaL_checkinteger(L, 1);
    if (!(t >= 0 && t < 1e9)) return luaL_argerror(L, 2, "timeout out of range");
    lua_pushboolean(L, process_poll(&fd, 1, t) != 0);
    return 1;
}

/* fd moved to 3 or above (close-on-exec), so that a pipe made while stdin,
 * stdout or stderr is closed never becomes a child's 0, 1 or 2. */
static int process_above_stdio(int fd) {
    int moved;
    if (fd > 2) return fd;
    moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    close(fd);
    return moved;
}

/* core.pipe() -> read_fd, write_fd | nil, err: both close-on-exec and above
 * 2; the read end does not block. */
static int global_pipe(lua_State *L) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return process_fail(L, "pipe");
    fds[0] = process_above_stdio(fds[0]);
    fds[1] = process_above_stdio(fds[1]);
    if (fds[0] < 0 || fds[1] < 0) {
        int e = errno;
        if (fds[0] >= 0) close(fds[0]);
        if (fds[1] >= 0) close(fds[1]);
        errno = e;
        return process_fail(L, "pipe");
    }
    fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
    lua_pushinteger(L, fds[0]);
    lua_pushinteger(L, fds[1]);
    return 2;
}

/* core.close(fd) -> true | nil, err */
static int global_close(lua_State *L) {
    if (close((int)luaL_checkinteger(L, 1)) != 0) return process_fail(L, "close");
    lua_pushboolean(L, 1);
    return 1;
}

/* core.drain(fd) -> true (end of file) | false: reads and drops whatever a
 * non-blocking fd has, and says whether every writer has closed it. */
static int global_drain(lua_State *L) {
    int fd = (int)luaL_checkinteger(L, 1);
    char buf[512];
    for (;;) {
        ssize_t got = read(fd, buf, sizeof buf);
        if (got > 0) continue;
        if (got < 0 && errno == EINTR) continue;
        lua_pushboolean(L, got == 0);
        return 1;
    }
}

/* core.subreaper() -> true | nil, err: orphaned descendants of this process
 * are re-parented to it rather than to init (PR_SET_CHILD_SUBREAPER), so
 * they stay in its tree; it must reap them (waitpid(-1)). */
static int global_subreaper(lua_State *L) {
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) return process_fail(L, "prctl");
    lua_pushboolean(L, 1);
    return 1;
}

/* The parent pid of process pid, from /proc/pid/stat; 0 if it is gone. */
static pid_t process_ppid(pid_t pid) {
    char path[64], buf[512], *p;
    ssize_t got;
    int fd, ppid = 0;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    got = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (got <= 0) return 0;
    buf[got] = '\0';
    /* comm (field 2) may hold spaces and parens: state and ppid follow the
     * last ") ". */
    p = strrchr(buf, ')');
    if (!p || sscanf(p + 1, " %*c %d", &ppid) != 1) return 0;
    return (pid_t)ppid;
}

/* core.descendants(pid) -> { pid, ... }: every live process whose chain of
 * parents leads to pid (children before their own children). */
static int global_descendants(lua_State *L) {
    pid_t root = (pid_t)luaL_checkinteger(L, 1);
    DIR *d;
    struct dirent *e;
    size_t n = 0, cap = 256, i, head = 0, found = 0;
    pid_t *pids, *ppids, *queue;
    lua_newtable(L);                                /* list */
    d = opendir("/proc");
    if (!d) return process_fail(L, "/proc");
    pids = (pid_t *)malloc(cap * sizeof(pid_t));
    if (!pids) {
        closedir(d);
        return luaL_error(L, "out of memory");
    }
    while ((e = readdir(d)) != NULL) {
        char *end;
        long v = strtol(e->d_name, &end, 10);
        if (*end != '\0' || v <= 0) continue;
        if (n == cap) {
            pid_t *more = (pid_t *)realloc(pids, cap * 2 * sizeof(pid_t));
            if (!more) break;
            pids = more;
            cap *= 2;
        }
        pids[n] = (pid_t)v;
        n++;
    }
    closedir(d);
    /* pids[0..n) then their parents in ppids, then a queue of found ones. */
    ppids = (pid_t *)malloc((n + 1) * 2 * sizeof(pid_t));
    if (!ppids) {
        free(pids);
        return luaL_error(L, "out of memory");
    }
    queue = ppids + n + 1;
    for (i = 0; i < n; i++) ppids[i] = process_ppid(pids[i]);
    queue[found++] = root;
    while (head < found) {
        pid_t parent = queue[head++];
        for (i = 0; i < n; i++) {
            if (ppids[i] == parent && pids[i] != root) {
                queue[found++] = pids[i];
                lua_pushinteger(L, pids[i]);
                lua_rawseti(L, -2, (int)found - 1);
                ppids[i] = 0;  /* never visited twice */
            }
        }
    }
    free(ppids);
    free(pids);
    return 1;
}

static const luaL_Reg process_functions[] = {
    {"fork", global_fork},
    {"spawn", global_spawn},
    {"waitpid", global_waitpid},
    {"kill", global_kill},
    {"signum", global_signum},
    {"_exit", global_exit},
    {"ignored_signals", global_ignored_signals},
    {"ignore_signals", global_ignore_signals},
    {"signalfd", global_signalfd},
    {"signal_wait", global_signal_wait},
    {"readable", global_readable},
    {"pipe", global_pipe},
    {"close", global_close},
    {"drain", global_drain},
    {"subreaper", global_subreaper},
    {"descendants", global_descendants},
    {NULL, NULL}
};

void process_register(lua_State *L) {
    luaL_setfuncs(L, process_functions, 0);
}
