/*
 * process_leader.c: the job's own process-group leader, for `redislock run`
 * (see process.c).
 *
 * COMMAND gets the guard's death as a signal (PR_SET_PDEATHSIG), but what
 * COMMAND started does not: SIGKILL the guard (the OOM killer's choice, an
 * operator's kill -9) and a job script's children ran on, reparented to
 * init, while nothing renewed the lock and the next host's copy of the job
 * took the name a ttl later. So the job gets a process of its own, forked
 * from the guard before COMMAND and never exec'd: it leads a new process
 * group, which COMMAND joins (and so everything COMMAND starts, unless it
 * leaves: setsid, or a shell's own job control), and asks for the guard's
 * death as its parent-death signal. When the guard dies, it sends the
 * death signal to the whole group, then SIGKILL after kill_after seconds
 * (or sooner, once the group is empty), and exits. While the guard lives it
 * does nothing at all: it ignores every signal (the job's `kill 0`, the
 * guard's own signals to the job's processes). The guard kills it when the
 * job is over.
 *
 * Everything the leader does after fork is a plain system call: it is the
 * child of a threaded process and must not malloc or take locks. It closes
 * every fd it inherited, so it never holds a pipe (COMMAND's output, the
 * job's REDISLOCK_FD) or a Redis connection open.
 */
#define _GNU_SOURCE
#include "process/process_common.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lauxlib.h"
#include "binding/compat.h"

/* Closes every fd, without malloc (close_range, else one by one). */
static void leader_close_all(void) {
    struct rlimit rl;
    long fd, max = 65536;
#ifdef SYS_close_range
    if (syscall(SYS_close_range, 0u, ~0u, 0u) == 0) return;
#endif
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && (long)rl.rlim_cur < max)
        max = (long)rl.rlim_cur;
    for (fd = 0; fd < max; fd++) close((int)fd);
}

/* A decimal number at s, or -1 (no strtol: plain code only). */
static long leader_number(const char *s) {
    long v = 0;
    if (*s < '0' || *s > '9') return -1;
    while (*s >= '0' && *s <= '9' && v < 100000000L) v = v * 10 + (*s++ - '0');
    return v;
}

/* The process group of live process `pid` from /proc/pid/stat (field 5,
 * after the comm in parentheses), or -1 (gone, or a zombie: dead, only
 * not reaped yet). Plain system calls only. */
static pid_t leader_pgrp_of(const char *pid) {
    char path[64], buf[512], *p;
    size_t n = strlen(pid);
    ssize_t got;
    int fd, field;
    if (n > 20) return -1;
    memcpy(path, "/proc/", 6);
    memcpy(path + 6, pid, n);
    memcpy(path + 6 + n, "/stat", 6);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    got = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (got <= 0) return -1;
    buf[got] = '\0';
    p = strrchr(buf, ')');
    if (p == NULL || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X') return -1;
    /* ") S ppid pgrp": skip the state and the ppid */
    for (field = 0, p++; field < 3 && *p; field++) {
        while (*p == ' ') p++;
        if (field < 2)
            while (*p && *p != ' ') p++;
    }
    return (pid_t)leader_number(p);
}

struct leader_dirent {
    unsigned long long ino;
    long long off;
    unsigned short reclen;
    unsigned char type;
    char name[];
};

/* Is a process other than this one in process group pgid? (A scan of
 * /proc with getdents64: no opendir, which allocates.) */
static int leader_group_busy(pid_t pgid) {
    char buf[4096];
    long got;
    int dir = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC), busy = 0;
    pid_t self = getpid();
    if (dir < 0) return 1;   /* cannot tell: wait the whole kill_after */
    while (!busy && (got = syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0) {
        long off = 0;
        while (off < got) {
            struct leader_dirent *d = (struct leader_dirent *)(buf + off);
            off += d->reclen;
            if (d->name[0] < '1' || d->name[0] > '9') continue;
            if (leader_number(d->name) == (long)self) continue;
            if (leader_pgrp_of(d->name) == pgid) {
                busy = 1;
                break;
            }
        }
    }
    close(dir);
    return busy;
}

static double leader_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The leader's whole life; never returns. */
static void leader_run(pid_t guard, int death_signal, double kill_after) {
    sigset_t all;
    pid_t pgid;
    double until;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    if (setpgid(0, 0) != 0) _exit(1);
    pgid = getpid();
    prctl(PR_SET_NAME, "redislock-job", 0, 0, 0);
    leader_close_all();
    prctl(PR_SET_PDEATHSIG, SIGHUP, 0, 0, 0);
    /* Every signal is blocked and read here: while the guard is our
     * parent, nothing happened that concerns us. */
    while (getppid() == guard) {
        struct timespec tick = {1, 0};
        sigtimedwait(&all, NULL, &tick);
    }
    /* The guard is gone: nothing renews the lock any more. */
    kill(-pgid, death_signal);
    if (death_signal != SIGKILL) kill(-pgid, SIGCONT);
    until = leader_now() + kill_after;
    while (leader_now() < until && leader_group_busy(pgid)) {
        struct timespec step = {0, 20 * 1000000L};
        sigtimedwait(&all, NULL, &step);
    }
    kill(-pgid, SIGKILL);   /* ourselves too: the end */
    _exit(0);
}

/* core.job_leader(death_signal, kill_after) -> pid | nil, err
 * Forks the job's group leader (see above); COMMAND joins its group with
 * core.spawn's pgid option. The caller kills it (SIGKILL) once the job is
 * over, and reaps it. */
static int global_job_leader(lua_State *L) {
    int death_signal = process_checksig(L, 1);
    lua_Number kill_after = luaL_checknumber(L, 2);
    pid_t guard = getpid(), pid;
    if (!(kill_after >= 0 && kill_after <= 86400)) return luaL_argerror(L, 2, "out of range");
    if (death_signal <= 0) return luaL_argerror(L, 1, "a signal expected");
    pid = fork();
    if (pid < 0) return process_fail(L, "fork");
    if (pid == 0) leader_run(guard, death_signal, (double)kill_after);
    /* (the leader makes its group itself; this closes the race with a
     * COMMAND that joins it before the leader ran) */
    setpgid(pid, pid);
    lua_pushinteger(L, pid);
    return 1;
}

/* core.foreground_tty() -> true | false: does this process run in the
 * foreground process group of its controlling terminal (a user at a
 * shell prompt)? Then the job must stay in that group, to read the
 * terminal and get its Ctrl-C and Ctrl-Z. */
static int global_foreground_tty(lua_State *L) {
    int fd = open("/dev/tty", O_RDONLY | O_NOCTTY | O_CLOEXEC), fg = 0;
    if (fd >= 0) {
        fg = tcgetpgrp(fd) == getpgrp();
        close(fd);
    }
    lua_pushboolean(L, fg);
    return 1;
}

const luaL_Reg process_leader_functions[] = {
    {"job_leader", global_job_leader},
    {"foreground_tty", global_foreground_tty},
    {NULL, NULL}
};
