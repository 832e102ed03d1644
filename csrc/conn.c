/*
 * conn.c: a hiredis connection that knows how to (re)build itself.
 *
 * hiredis' rule is that a context is dead after any I/O error; we follow it:
 * free it, remember why in errstr, and connect again on the next call. The
 * settings (timeouts, AUTH, SELECT, keepalive) are re-applied on every
 * connect, so a reconnected context is indistinguishable from the first one.
 */
#define _GNU_SOURCE
#include "conn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include "monotime.h"

static char *conn_strdup(const char *s) {
    return s ? strdup(s) : NULL;
}

int conn_config_copy(conn_config *dst, const conn_config *src) {
    *dst = *src;
    dst->host = conn_strdup(src->host);
    dst->path = conn_strdup(src->path);
    dst->username = conn_strdup(src->username);
    dst->password = conn_strdup(src->password);
    if ((src->host && !dst->host) || (src->path && !dst->path) ||
        (src->username && !dst->username) || (src->password && !dst->password)) {
        conn_config_free(dst);
        return -1;
    }
    return 0;
}

void conn_config_free(conn_config *cfg) {
    if (cfg->password) {
        /* explicit_bzero: the password must not linger in freed memory. */
        explicit_bzero(cfg->password, strlen(cfg->password));
        free(cfg->password);
    }
    free(cfg->host);
    free(cfg->path);
    free(cfg->username);
    memset(cfg, 0, sizeof *cfg);
}

conn *conn_new(const conn_config *cfg) {
    conn *c = calloc(1, sizeof *c);
    if (c == NULL) return NULL;
    if (conn_config_copy(&c->cfg, cfg) != 0) {
        free(c);
        return NULL;
    }
    return c;
}

void conn_free(conn *c) {
    if (c == NULL) return;
    conn_drop(c);
    conn_config_free(&c->cfg);
    free(c);
}

void conn_describe(const conn *c, char *buf, size_t len) {
    if (c->cfg.path)
        snprintf(buf, len, "%s", c->cfg.path);
    else if (strchr(c->cfg.host, ':'))
        snprintf(buf, len, "[%s]:%d", c->cfg.host, c->cfg.port);
    else
        snprintf(buf, len, "%s:%d", c->cfg.host, c->cfg.port);
}

void conn_drop(conn *c) {
    /* In a forked child this closes only the child's copy of the fd: the
     * parent's socket stays open, and hiredis sends nothing on free. */
    if (c->ctx == NULL) return;
    redisFree(c->ctx);
    c->ctx = NULL;
}

static struct timeval conn_tv(long ms) {
    struct timeval tv;
    tv.tv_sec = ms / 1000;
    tv.tv_usec = (ms % 1000) * 1000;
    return tv;
}

/* Copies hiredis' reason for a failed context before it is freed. A timeout
 * reads as EAGAIN in hiredis 0.14; say "timed out" instead. */
static void conn_fail(conn *c, const char *what) {
    int saved_errno = errno;
    char where[160];
    const char *why = "unknown error";
    conn_describe(c, where, sizeof where);
    if (c->ctx) {
        if (c->ctx->err == REDIS_ERR_IO && (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK))
            why = "timed out";
        else if (c->ctx->err == REDIS_ERR_EOF)
            why = "closed by server";
        else if (c->ctx->errstr[0])
            why = c->ctx->errstr;
    }
    snprintf(c->errstr, sizeof c->errstr, "connection %s: %.60s (%.100s)", what, why, where);
    conn_drop(c);
}

/* Runs a setup command (AUTH, SELECT) right after connect. A redis error is
 * reported as such; its text never contains our arguments. */
static int conn_setup(conn *c, int argc, const char **argv, const size_t *lens) {
    redisReply *r = redisCommandArgv(c->ctx, argc, argv, lens);
    if (r == NULL) {
        conn_fail(c, "lost");
        return -1;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(c->errstr, sizeof c->errstr, "redis error: %.*s", (int)r->len, r->str);
        freeReplyObject(r);
        conn_drop(c);
        return -1;
    }
    freeReplyObject(r);
    return 0;
}

static int conn_open(conn *c) {
    struct timeval ctv = conn_tv(c->cfg.connect_timeout_ms);
    if (c->cfg.path)
        c->ctx = redisConnectUnixWithTimeout(c->cfg.path, ctv);
    else
        c->ctx = redisConnectWithTimeout(c->cfg.host, c->cfg.port, ctv);
    c->pid = getpid();
    if (c->ctx == NULL) {
        snprintf(c->errstr, sizeof c->errstr, "connection failed: out of memory");
        return -1;
    }
    if (c->ctx->err) {
        conn_fail(c, "failed");
        return -1;
    }
    /* hiredis 0.14 opens sockets without SOCK_CLOEXEC: a command started by
     * `redislock run` would inherit an authenticated connection. */
    fcntl(c->ctx->fd, F_SETFD, fcntl(c->ctx->fd, F_GETFD) | FD_CLOEXEC);
    if (c->cfg.timeout_ms > 0 && redisSetTimeout(c->ctx, conn_tv(c->cfg.timeout_ms)) != REDIS_OK) {
        conn_fail(c, "failed");
        return -1;
    }
    /* Keepalive makes a silently vanished peer (NAT drop, pulled cable) an
     * error instead of a socket that waits forever. Unix sockets need none. */
    if (c->cfg.path == NULL) redisEnableKeepAlive(c->ctx);
    if (c->cfg.password) {
        const char *argv[3];
        size_t lens[3];
        int argc = 0;
        argv[argc] = "AUTH"; lens[argc++] = 4;
        if (c->cfg.username) {
            argv[argc] = c->cfg.username; lens[argc++] = strlen(c->cfg.username);
        }
        argv[argc] = c->cfg.password; lens[argc++] = strlen(c->cfg.password);
        if (conn_setup(c, argc, argv, lens) != 0) return -1;
    }
    if (c->cfg.db > 0) {
        char db[16];
        const char *argv[2];
        size_t lens[2];
        snprintf(db, sizeof db, "%d", c->cfg.db);
        argv[0] = "SELECT"; lens[0] = 6;
        argv[1] = db; lens[1] = strlen(db);
        if (conn_setup(c, 2, argv, lens) != 0) return -1;
    }
    return 0;
}

int conn_ensure(conn *c) {
    if (c->ctx != NULL && c->pid != getpid()) conn_drop(c);
    if (c->ctx != NULL) return 0;
    return conn_open(c);
}

/*
 * hiredis writes with write(2), so a server that went away turns our next
 * write into SIGPIPE, whose default action kills the host process (a Lua
 * interpreter, an nginx worker). A library must not change the host's signal
 * dispositions, so instead we block SIGPIPE in this thread around our I/O and
 * swallow one that we caused: the write then fails with EPIPE, which hiredis
 * reports as an I/O error. A SIGPIPE already pending before us is left alone.
 */
typedef struct conn_sigpipe {
    sigset_t old_mask;
    int was_pending;
} conn_sigpipe;

static void conn_sigpipe_block(conn_sigpipe *g) {
    sigset_t pipe_set, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    sigpending(&pending);
    g->was_pending = sigismember(&pending, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &g->old_mask);
}

static void conn_sigpipe_restore(conn_sigpipe *g) {
    sigset_t pipe_set, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    if (!g->was_pending) {
        sigpending(&pending);
        if (sigismember(&pending, SIGPIPE)) {
            struct timespec zero = {0, 0};
            while (sigtimedwait(&pipe_set, NULL, &zero) == -1 && errno == EINTR) {}
        }
    }
    pthread_sigmask(SIG_SETMASK, &g->old_mask, NULL);
}

/*
 * Spin-then-block: sends the command, then polls the socket without sleeping
 * for up to c->spin_us before the usual blocking read. A waiter whose wakeup
 * (a BLPOP reply) comes within the spin sees it without the kernel having to
 * wake a sleeping process on an idle CPU, which costs several round trips'
 * time on a small VM. It costs this process's CPU for the spin, never Redis
 * traffic: the one command is sent once. sched_yield lets anything runnable
 * (the holder, Redis) go first on a busy machine. The command's timeout still
 * counts from the send: the blocking read gets only what the spin left.
 */
static int conn_spin(conn *c) {
    struct pollfd p;
    int64_t start = monotime_us(), end = start + c->spin_us;
    long timeout_ms = c->cfg.timeout_ms;
    int done = 0;
    while (!done)
        if (redisBufferWrite(c->ctx, &done) != REDIS_OK) return 0;  /* the read reports it */
    if (timeout_ms > 0 && end > start + (int64_t)timeout_ms * 1000)
        end = start + (int64_t)timeout_ms * 1000;
    p.fd = c->ctx->fd;
    p.events = POLLIN;
    for (;;) {
        int n = poll(&p, 1, 0);
        if (n > 0 || (n < 0 && errno != EINTR)) return 0;  /* a reply, or an error to read */
        if (monotime_us() >= end) break;
        sched_yield();
    }
    if (timeout_ms > 0) {
        /* Left for the blocking read: the timeout minus the spin, at least
         * 1 ms (a zero timeval would mean no timeout at all). */
        long left_ms = timeout_ms - (long)((monotime_us() - start) / 1000);
        redisSetTimeout(c->ctx, conn_tv(left_ms > 1 ? left_ms : 1));
        return 1;
    }
    return 0;
}

redisReply *conn_command(conn *c, int argc, const char **argv, const size_t *lens) {
    void *r = NULL;
    conn_sigpipe g;
    conn_sigpipe_block(&g);  /* connecting writes too (AUTH, SELECT) */
    if (conn_ensure(c) == 0) {
        if (redisAppendCommandArgv(c->ctx, argc, argv, lens) != REDIS_OK) {
            conn_fail(c, "lost");
        } else {
            int shortened = c->spin_us > 0 && conn_spin(c);
            if (redisGetReply(c->ctx, &r) != REDIS_OK) {
                conn_fail(c, "lost");
                r = NULL;
            } else if (shortened) {
                redisSetTimeout(c->ctx, conn_tv(c->cfg.timeout_ms));
            }
        }
    }
    conn_sigpipe_restore(&g);
    return r;
}

void conn_set_spin(conn *c, long spin_us) {
    c->spin_us = spin_us > 0 ? spin_us : 0;
}

int conn_append(conn *c, int argc, const char **argv, const size_t *lens) {
    conn_sigpipe g;
    int rc;
    conn_sigpipe_block(&g);
    rc = conn_ensure(c);
    conn_sigpipe_restore(&g);
    if (rc != 0) return -1;
    if (redisAppendCommandArgv(c->ctx, argc, argv, lens) != REDIS_OK) {
        conn_fail(c, "lost");
        return -1;
    }
    return 0;
}

redisReply *conn_read(conn *c) {
    void *r = NULL;
    conn_sigpipe g;
    if (c->ctx == NULL) return NULL;
    conn_sigpipe_block(&g);  /* the first read flushes the appended commands */
    if (redisGetReply(c->ctx, &r) != REDIS_OK) {
        conn_fail(c, "lost");
        r = NULL;
    }
    conn_sigpipe_restore(&g);
    return r;
}

void conn_set_timeouts(conn *c, long connect_ms, long command_ms) {
    c->cfg.connect_timeout_ms = connect_ms;
    c->cfg.timeout_ms = command_ms;
    /* A zero timeval means no timeout at all, as for a fresh socket. */
    if (c->ctx != NULL) redisSetTimeout(c->ctx, conn_tv(command_ms));
}
