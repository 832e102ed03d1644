/*
 * conn_wait.c: a conn used by a caller that waits (see conn.h): connect and
 * handshake, send, and read a reply, each exchange against one deadline.
 * A reply wait spins first when asked (conn_set_spin), then sleeps in recv
 * for a short first stretch and in poll(2) for the rest of the deadline.
 * The non-blocking steps these are built on live in conn.c.
 */
#define _GNU_SOURCE
#include "net/conn.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <string.h>
#include <sys/socket.h>

#include "net/conn_internal.h"
#include "base/deadline.h"
#include "base/monotime.h"
#include "base/proc_id.h"
#include "net/resolve.h"

int64_t conn_deadline(const conn *c) {
    return deadline_in_ms(c->cfg.timeout_ms);
}

/* Sends everything queued before deadline. Over TLS that includes the
 * handshake, if it is under way: its replies are read here too (the poll
 * waits for what conn_poll_events says), so a connect's handshake and its
 * requests share the one deadline however the server trickles them. */
static int conn_flush(conn *c, int64_t deadline, const char *what) {
    for (;;) {
        int r = conn_flush_some(c);
        if (r != 0) return r == 1 ? 0 : -1;
        r = sock_poll(c->fd, c->tls ? conn_poll_events(c) : POLLOUT, deadline);
        if (r == 0) {
            conn_fail_with(c, CONN_ETIMEOUT, what);
            return -1;
        }
        if (r < 0) {
            conn_fail_errno(c, what, errno);
            return -1;
        }
        if (c->tls && (r & (POLLIN | POLLERR | POLLHUP)) && conn_fill(c) < 0) return -1;
    }
}

/*
 * Spin-then-block: polls the socket without sleeping for up to c->spin_us
 * before the usual blocking wait. A waiter whose wakeup (a BLPOP reply)
 * comes within the spin sees it without the kernel having to wake a
 * sleeping process on an idle CPU, which costs several round trips' time on
 * a small VM. It costs this process's CPU for the spin, never Redis
 * traffic. sched_yield lets anything runnable (the holder, Redis) go first
 * on a busy machine. The spin counts against the command's deadline.
 */
static void conn_spin(conn *c, int64_t deadline) {
    struct pollfd p;
    int64_t end = deadline_min(monotime_us() + c->spin_us, deadline);
    p.fd = c->fd;
    p.events = POLLIN;
    for (;;) {
        int n = poll(&p, 1, 0);
        if (n != 0 && !(n < 0 && errno == EINTR)) return;  /* a reply, or an error to read */
        if (monotime_us() >= end) return;
        sched_yield();
    }
}

/* Kernel receive timeouts run on the coarse timer wheel: one below about
 * 64 ticks fires at most a tick late (1-10 ms, by HZ), a longer one up to
 * an eighth late (at 5 s, 0.2 s). So recv sleeps for a short first stretch
 * only, well short of the deadline; a reply slower than that is waited for
 * by poll(2), on an exact timer. */
#define CONN_RECV_FIRST_MS 50
#define CONN_RECV_MARGIN_MS 25

/* Waits for bytes in recv itself, which saves the poll(2) before a reply:
 * the fd made blocking once, SO_RCVTIMEO set to CONN_RECV_FIRST_MS (less
 * when the deadline is near, in 10 ms steps). 1 bytes taken, 0 nothing
 * (that stretch passed, a signal, too little time left: poll then), -1
 * failed. */
static int conn_fill_wait(conn *c, int64_t deadline) {
    char buf[CONN_RECV_CHUNK];
    long want = CONN_RECV_FIRST_MS;
    if (deadline != DEADLINE_NONE) {
        int64_t left = (deadline - monotime_us()) / 1000 - CONN_RECV_MARGIN_MS;
        if (left < CONN_RECV_MARGIN_MS) return 0;
        if (left < want) want = (long)(left - left % 10);   /* >= 20: never 0, "none" */
    }
    if (c->recv_fd != c->fd) {
        if (sock_set_blocking(c->fd) != 0) return 0;
        c->recv_fd = c->fd;
        c->recv_timeo_ms = 0;
    }
    if (c->recv_timeo_ms != want) {
        if (sock_set_recv_timeout(c->fd, want) != 0) return 0;
        c->recv_timeo_ms = want;
    }
    return conn_got_raw(c, buf, sizeof buf, sock_recv_block(c->fd, buf, sizeof buf));
}

/* Reads the next reply before deadline. */
static redisReply *conn_wait_reply(conn *c, int64_t deadline, const char *what) {
    int spun = c->spin_us <= 0, polling = 0;
    for (;;) {
        redisReply *r = NULL;
        int k = conn_reply(c, &r);
        if (k == 1) return r;
        if (k < 0) return NULL;
        if (!spun) {
            conn_spin(c, deadline);
            spun = 1;
        } else {
            if (!polling) {
                /* recv until its first stretch passes, then poll */
                k = conn_fill_wait(c, deadline);
                if (k > 0) continue;
                if (k < 0) return NULL;
                polling = 1;
            }
            k = sock_wait(c->fd, POLLIN, deadline);
            if (k == 0) {
                conn_fail(c, CONN_ETIMEOUT, what, "timed out");
                return NULL;
            }
            if (k < 0) {
                conn_fail_errno(c, what, errno);
                return NULL;
            }
        }
        if (conn_fill(c) < 0) return NULL;
    }
}

int conn_resolve(conn *c, int64_t deadline) {
    char err[160];
    sock_addrs a;
    if (c->cfg.path) {
        if (sock_unix(c->cfg.path, &a) != 0) {
            conn_fail_errno(c, "failed", errno);
            return -1;
        }
    } else if (!c->may_resolve) {
        return 0;  /* addrs as set */
    } else if (resolve_host(c->cfg.host, c->cfg.port, deadline, &a, err, sizeof err) != 0) {
        conn_fail(c, strstr(err, "timed out") ? CONN_ETIMEOUT : CONN_ECONNECT, "failed", err);
        return -1;
    }
    conn_set_addrs(c, &a);
    return 0;
}

/* A connection left idle this long is checked before it is used. */
#define CONN_IDLE_CHECK_US 1000000

/* Did the server close c while it sat idle (its `timeout`, CLIENT KILL, a
 * proxy)? Only asked when nothing is in flight or buffered: then anything
 * readable, an EOF or stray bytes, means the socket is done for. Sending
 * on it would fail only after the request was on its way, with no telling
 * whether it ran: a release lost that way leaves the lock for its ttl. */
static int conn_closed_while_idle(conn *c) {
    struct pollfd p;
    char b;
    ssize_t n;
    if (conn_wants_write(c) || c->fast_off < c->fast.len || c->reader_holds)
        return 0;
    p.fd = c->fd;
    p.events = POLLIN;
    p.revents = 0;
    if (poll(&p, 1, 0) <= 0 || p.revents == 0) return 0;
    n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
}

void conn_check_idle(conn *c) {
    if (c->fd >= 0 && !conn_connecting(c) && c->hs_next >= c->hs_n && c->pid == proc_id() &&
        monotime_us() - c->last_reply_us >= CONN_IDLE_CHECK_US && conn_closed_while_idle(c))
        conn_drop(c);
}

int conn_ensure(conn *c) {
    return conn_ensure_by(c, deadline_in_ms(c->cfg.connect_timeout_ms));
}

int conn_ensure_by(conn *c, int64_t deadline) {
    if (c->fd >= 0 && c->pid != proc_id()) conn_drop(c);
    if (c->fd >= 0 && !conn_connecting(c) && c->hs_next >= c->hs_n) return 0;
    if (conn_resolve(c, deadline) != 0) return -1;
    if (c->addrs.n == 0) {
        conn_fail(c, CONN_ECONNECT, "failed", "no address known");
        return -1;
    }
    if (conn_begin(c) != 0) return -1;
    c->fd = sock_connect(&c->addrs, deadline);
    if (c->fd < 0) {
        conn_fail_errno(c, "failed", errno);
        return -1;
    }
    if (conn_flush(c, deadline, "failed") != 0) return -1;
    while (c->hs_next < c->hs_n) {
        int k;
        redisReply *r = NULL;
        k = conn_reply(c, &r);
        if (k < 0) return -1;
        if (k == 1) {  /* cannot happen: nothing but the handshake was sent */
            freeReplyObject(r);
            conn_fail(c, CONN_ELOST, "failed", "protocol error");
            return -1;
        }
        if (c->hs_next >= c->hs_n) break;
        k = sock_wait(c->fd, POLLIN, deadline);
        if (k == 0) {
            conn_fail(c, CONN_ETIMEOUT, "failed", "timed out");
            return -1;
        }
        if (k < 0) {
            conn_fail_errno(c, "failed", errno);
            return -1;
        }
        if (conn_fill(c) < 0) return -1;
    }
    c->err = CONN_OK;
    c->last_reply_us = monotime_us();   /* (the handshake's replies) */
    return 0;
}

redisReply *conn_read(conn *c, int64_t deadline) {
    if (c->fd < 0) return NULL;
    if (conn_wants_write(c) && conn_flush(c, deadline, "lost") != 0) return NULL;
    return conn_wait_reply(c, deadline, "lost");
}

redisReply *conn_command(conn *c, int argc, const char **argv, const size_t *lens) {
    int64_t deadline;
    if (conn_ensure(c) != 0) return NULL;
    deadline = conn_deadline(c);
    if (conn_append(c, argc, argv, lens) != 0) return NULL;
    return conn_read(c, deadline);
}

void conn_set_spin(conn *c, long spin_us) {
    c->spin_us = spin_us > 0 ? spin_us : 0;
}

void conn_set_timeouts(conn *c, long connect_ms, long command_ms) {
    c->cfg.connect_timeout_ms = connect_ms;
    c->cfg.timeout_ms = command_ms;
}
