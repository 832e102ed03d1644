/*
 * process_signal.c: signals for `redislock run` (see process.c): names and
 * numbers, kill, what is ignored, and a signalfd that Lua polls with a
 * timeout (a signal handler must never touch a lua_State, so the chosen
 * signals are blocked and read as data instead).
 */
#define _GNU_SOURCE
#include "process/process_common.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "lauxlib.h"
#include "binding/compat.h"

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
int process_checksig(lua_State *L, int idx) {
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

const char *process_signame(int sig) {
    int i;
    for (i = 0; process_signals[i].name; i++)
        if (process_signals[i].sig == sig) return process_signals[i].name;
    return NULL;
}

/* The signals of the list at idx (names or numbers) as a set. */
void process_sigset(lua_State *L, int idx, sigset_t *set) {
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

/* ---- stopping a wait (the CLI's Ctrl-C) -------------------------------- */

/* The signal that stopped the wait, and the state to raise in. A handler
 * may only set the hook (lua_sethook is safe in a signal handler, as lua.c's
 * own SIGINT handler does): the hook raises at the next instruction, and
 * the wait in C sees the hook and returns at once (intr.h). */
static volatile sig_atomic_t process_stop_sig;
static lua_State *process_stop_L;
static struct sigaction process_stop_old[NSIG];
static int process_stop_set[NSIG];

static void process_stop_hook(lua_State *L, lua_Debug *ar) {
    (void)ar;
    lua_sethook(L, NULL, 0, 0);
    luaL_error(L, "interrupted by SIG%s", process_signame((int)process_stop_sig) ?
               process_signame((int)process_stop_sig) : "?");
}

static void process_stop_handler(int sig) {
    process_stop_sig = sig;
    lua_sethook(process_stop_L, process_stop_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

/* core.stop_on({sig, ...}) -> true | nil, err
 * core.stop_on(nil)        -> the name of the signal that came, or nil
 * From the first call until the second, those signals raise "interrupted
 * by SIGINT" in the main thread, ending any wait of the library at once
 * (no SA_RESTART: a wait sees EINTR). The second call puts back what was
 * there before (lua.c's SIGINT handler, SIGTERM's default) and clears a
 * hook of ours that has not run yet. */
static int global_stop_on(lua_State *L) {
    int sig;
    if (lua_isnoneornil(L, 1)) {
        for (sig = 1; sig < NSIG; sig++)
            if (process_stop_set[sig]) {
                sigaction(sig, &process_stop_old[sig], NULL);
                process_stop_set[sig] = 0;
            }
        if (process_stop_L && lua_gethook(process_stop_L) == process_stop_hook)
            lua_sethook(process_stop_L, NULL, 0, 0);
        if (process_stop_sig == 0) return 0;
        lua_pushstring(L, process_signame((int)process_stop_sig));
        return 1;
    } else {
        sigset_t set;
        struct sigaction sa;
        process_sigset(L, 1, &set);
#if LUA_VERSION_NUM >= 502
        lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
        process_stop_L = lua_tothread(L, -1);
        lua_pop(L, 1);
#else
        process_stop_L = L;
#endif
        process_stop_sig = 0;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = process_stop_handler;
        sigfillset(&sa.sa_mask);
        for (sig = 1; sig < NSIG; sig++) {
            if (sigismember(&set, sig) != 1 || sig == SIGKILL || sig == SIGSTOP) continue;
            if (sigaction(sig, &sa, process_stop_set[sig] ? NULL : &process_stop_old[sig]) != 0)
                return process_fail(L, "sigaction");
            process_stop_set[sig] = 1;
        }
        lua_pushboolean(L, 1);
        return 1;
    }
}

/* core.die_by(sig): ends this process by signal sig at its default action
 * (a shell then sees it died of SIGINT, and a script's loop stops, as after
 * flock's). Returns only if that did not end it. */
static int global_die_by(lua_State *L) {
    int sig = process_checksig(L, 1);
    struct sigaction dfl;
    sigset_t one;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, NULL);
    sigemptyset(&one);
    sigaddset(&one, sig);
    sigprocmask(SIG_UNBLOCK, &one, NULL);
    raise(sig);
    return 0;
}

const luaL_Reg process_signal_functions[] = {
    {"stop_on", global_stop_on},
    {"die_by", global_die_by},
    {"kill", global_kill},
    {"signum", global_signum},
    {"ignored_signals", global_ignored_signals},
    {"ignore_signals", global_ignore_signals},
    {"signalfd", global_signalfd},
    {"signal_wait", global_signal_wait},
    {NULL, NULL}
};
