/*
 * process_fd.c: fds and the job's process tree for `redislock run` (see
 * process.c): polling, the pipe whose write end every process of the job
 * inherits (its end of file says the last one is gone), and the job's
 * processes found as the guard's descendants in /proc (it is their
 * subreaper, so orphans stay in its tree).
 */
#define _GNU_SOURCE
#include "process/process_common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "lauxlib.h"
#include "binding/compat.h"

/* poll(2) for input on fds[0..n) for up to t seconds (clamped to a day, so
 * the millisecond count fits an int). Returns a bit per readable fd. */
unsigned process_poll(const int *fds, int n, lua_Number t) {
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

const luaL_Reg process_fd_functions[] = {
    {"readable", global_readable},
    {"pipe", global_pipe},
    {"close", global_close},
    {"drain", global_drain},
    {"subreaper", global_subreaper},
    {"descendants", global_descendants},
    {NULL, NULL}
};
