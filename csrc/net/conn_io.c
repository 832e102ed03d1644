/*
 * conn_io.c: a connection's non-blocking steps (see conn.h): connecting,
 * the TLS session's bytes, sending what is queued, and reading replies,
 * the handshake's first (conn_handshake.c says what they are and what
 * their answers mean). conn.c holds the conn's life and its output queue,
 * which these steps build on; conn_wait.c waits on them.
 */
#define _GNU_SOURCE
#include "net/conn.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/proc_id.h"
#include "base/monotime.h"
#include "net/reply_fast.h"
#include "net/conn_internal.h"

/* ---- non-blocking steps ----------------------------------------------------- */

static int conn_tls_flush(conn *c);   /* (below, with the rest of TLS) */

int conn_begin(conn *c) {
    conn_drop(c);
    c->attempts++;   /* counters.h */
    c->gen++;
    c->pid = proc_id();
    if (conn_reader_new(c) != 0 || conn_queue_handshake(c) != 0) {
        conn_fail(c, CONN_ENOMEM, "failed", "out of memory");
        return -1;
    }
    if (c->cfg.tls) {
        char err[TLS_ERR_LEN];
        c->tls = tls_sess_new(c->cfg.tls, c->cfg.host, err, sizeof err);
        if (c->tls == NULL) {
            conn_fail(c, strcmp(err, "out of memory") == 0 ? CONN_ENOMEM : CONN_ECONNECT, "failed", err);
            return -1;
        }
        c->tls_hs = 1;
    }
    return 0;
}

int conn_start(conn *c) {
    int in_progress;
    if (c->cfg.path && c->addrs.n == 0 && sock_unix(c->cfg.path, &c->addrs) != 0) {
        conn_fail_errno(c, "failed", errno);
        return -1;
    }
    if (c->addrs.n == 0) {
        conn_fail(c, CONN_ECONNECT, "failed", "no address known");
        return -1;
    }
    if (conn_begin(c) != 0) return -1;
    for (c->addr_i = 0; c->addr_i < c->addrs.n; c->addr_i++) {
        c->fd = sock_connect_start(&c->addrs, c->addr_i, &in_progress);
        if (c->fd >= 0) break;
    }
    if (c->fd < 0) {
        conn_fail_errno(c, "failed", errno);
        return -1;
    }
    c->connecting = in_progress;
    /* (connected at once: the ClientHello goes now, so that a poll for the
     * server's answer has something to wait for) */
    if (!in_progress && c->tls && conn_tls_flush(c) < 0) return -1;
    return in_progress;
}

int conn_connect_done(conn *c) {
    if (sock_connected(c->fd) == 0) {
        c->connecting = 0;
        if (c->tls && conn_tls_flush(c) < 0) return -1;   /* (as in conn_start) */
        return 0;
    }
    conn_fail_errno(c, "failed", errno);
    return -1;
}

/* ---- detached --------------------------------------------------------------- */

void conn_adopt_fd(conn *c, int fd) {
    conn_drop(c);
    c->fd = fd;
    c->gen++;
    c->pid = proc_id();
    if (conn_reader_new(c) != 0) conn_fail(c, CONN_ENOMEM, "failed", "out of memory");
}

int conn_detach_begin(conn *c, int fresh) {
    conn_drop(c);
    c->gen++;
    c->pid = proc_id();
    if (conn_reader_new(c) != 0 || (fresh && conn_queue_handshake(c) != 0)) {
        conn_fail(c, CONN_ENOMEM, "failed", "out of memory");
        return -1;
    }
    return 0;
}

size_t conn_detach_take(conn *c, const char **p) {
    size_t n = c->out.len - c->out_off;
    *p = c->out.p + c->out_off;
    c->sent_total += n;
    c->out.len = c->out_off = 0;
    return n;
}

int conn_detach_feed(conn *c, const char *p, size_t n) {
    if (c->reader == NULL) return -1;
    return n == 0 || conn_got(c, p, (ssize_t)n) > 0 ? 0 : -1;
}

/* ---- TLS ------------------------------------------------------------------- */

/* The session is a transform between the socket and out/conn_got: what it
 * has to send goes out from here, what comes in is fed to it, and what it
 * decrypts goes where plain bytes go. */

/* The session failed: its reason, kept before conn_fail frees it. A
 * failure before the handshake is done (TLS's or Redis') is "failed". */
static void conn_tls_fail(conn *c) {
    char why[TLS_ERR_LEN];
    snprintf(why, sizeof why, "%s", tls_sess_error(c->tls));
    conn_fail(c, strcmp(why, "out of memory") == 0 ? CONN_ENOMEM :
              strcmp(why, "closed by server") == 0 ? CONN_ELOST : CONN_ECONNECT,
              c->tls_hs || c->hs_next < c->hs_n ? "failed" : "lost", why);
}

/* Sends what the session has waiting, without blocking: 1 all of it, 0
 * some is left (the socket is full), -1 failed. */
static int conn_tls_send(conn *c) {
    for (;;) {
        const char *p;
        size_t n = tls_sess_out(c->tls, &p);
        ssize_t k;
        if (n == 0) return 1;
        k = sock_send(c->fd, p, n);
        if (k < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
            conn_fail_errno(c, c->tls_hs || c->hs_next < c->hs_n ? "failed" : "lost", errno);
            return -1;
        }
        tls_sess_out_sent(c->tls, (size_t)k);
    }
}

/* Moves the session on: the handshake if it is under way, then the
 * requests queued (encrypted: from then on they count as sent), then the
 * ciphertext to the socket. Same answers as conn_flush_some. */
static int conn_tls_flush(conn *c) {
    int r;
    if (c->tls_hs) {
        r = tls_sess_handshake(c->tls);
        if (r < 0) {
            conn_tls_fail(c);
            return -1;
        }
        if (r == 1) c->tls_hs = 0;
    }
    if (!c->tls_hs && c->out_off < c->out.len) {
        size_t n = c->out.len - c->out_off;
        if (tls_sess_write(c->tls, c->out.p + c->out_off, n) != 0) {
            conn_tls_fail(c);
            return -1;
        }
        c->sent_total += (uint64_t)n;
        c->out.len = c->out_off = 0;
    }
    r = conn_tls_send(c);
    if (r <= 0) return r;
    return c->tls_hs ? 0 : 1;
}

/* n bytes received (in buf) for the session: fed to it (borrowed: what
 * it did not take is kept before buf goes), then whatever it can decrypt
 * goes to conn_got. 1, or -1 failed. */
static int conn_tls_got(conn *c, const char *buf, size_t n) {
    char plain[CONN_RECV_CHUNK];
    if (tls_sess_feed(c->tls, buf, n) != 0) {
        conn_tls_fail(c);
        return -1;
    }
    if (c->tls_hs) {
        c->tls_hs = 2;   /* the server answers */
        /* its next flight may be ready to go, and the requests behind it */
        if (conn_tls_flush(c) < 0) return -1;
    }
    while (!c->tls_hs) {
        ssize_t k = tls_sess_read(c->tls, plain, sizeof plain);
        if (k == 0) break;
        if (k < 0) {
            conn_tls_fail(c);
            return -1;
        }
        if (conn_got(c, plain, k) < 0) return -1;
        if (tls_sess_drained(c->tls)) break;   /* (a read that would find nothing) */
    }
    if (tls_sess_keep_rest(c->tls) != 0) {
        conn_tls_fail(c);
        return -1;
    }
    /* (anything the session answers by itself: rare, sent if it fits) */
    if (tls_sess_pending(c->tls) > 0 && conn_tls_send(c) < 0) return -1;
    return 1;
}

int conn_got_raw(conn *c, char *buf, size_t cap, ssize_t n) {
    (void)cap;
    if (c->tls == NULL) return conn_got(c, buf, n);
    if (n > 0) return conn_tls_got(c, buf, (size_t)n);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
    if (c->tls_hs && (n == 0 || errno == ECONNRESET))
        conn_fail(c, CONN_ECONNECT, "failed", n == 0 ? "tls: handshake refused: closed by the server"
                                                     : "tls: handshake refused: reset by the server");
    else if (n == 0)
        conn_fail(c, CONN_ELOST, c->hs_next < c->hs_n ? "failed" : "lost", "closed by server");
    else
        conn_fail_errno(c, c->tls_hs || c->hs_next < c->hs_n ? "failed" : "lost", errno);
    return -1;
}

short conn_poll_events(const conn *c) {
    if (c->fd < 0) return 0;
    if (c->connecting) return POLLOUT;
    if (c->tls && tls_sess_pending(c->tls) > 0) return POLLIN | POLLOUT;
    if (c->tls_hs) return POLLIN;
    return (short)(POLLIN | (c->out_off < c->out.len ? POLLOUT : 0));
}

int conn_connecting(const conn *c) {
    return c->fd >= 0 && (c->connecting || c->tls_hs);
}

int conn_wants_write(const conn *c) {
    return c->out_off < c->out.len || (c->tls && tls_sess_pending(c->tls) > 0);
}

int conn_flush_some(conn *c) {
    if (c->tls) return conn_tls_flush(c);
    while (c->out_off < c->out.len) {
        ssize_t n = sock_send(c->fd, c->out.p + c->out_off, c->out.len - c->out_off);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
            conn_fail_errno(c, "lost", errno);
            return -1;
        }
        c->out_off += (size_t)n;
        c->sent_total += (uint64_t)n;
    }
    c->out.len = c->out_off = 0;
    return 1;
}

#define CONN_FAST_KEEP 65536   /* the simple replies' buffer kept between reads */

int conn_reader_new(conn *c) {
    if (c->reader) redisReaderFree(c->reader);
    c->reader = redisReaderCreate();
    c->reader_holds = 0;
    reply_guard_reset(&c->guard);
    return c->reader ? 0 : -1;
}

/* A reply broke the protocol or its bounds (why): the stream cannot be
 * followed past it, so c is done for, and so is the request it answered
 * (which may have run, as after any lost reply). */
static void conn_fail_protocol(conn *c, const char *why) {
    char msg[CONN_ERRSTR_LEN];
    snprintf(msg, sizeof msg, "protocol error: %s", why);
    conn_fail(c, CONN_ELOST, c->hs_next < c->hs_n ? "failed" : "lost", msg);
}

/* Hands p[0..n) to hiredis' reader, through its guard (reply_guard.h):
 * of a reply that breaks a bound, the reader never gets the part that
 * does, nor anything after it; the replies before it are read out as
 * usual, and then conn_reply fails c (a pipeline's earlier answers are
 * not lost with it). 0, or -1 (out of memory: c failed). */
static int conn_feed_reader(conn *c, const char *p, size_t n) {
    size_t ok = reply_guard_feed(&c->guard, p, n);
    c->reader_holds = 1;   /* (refused at once: conn_reply must still ask) */
    if (ok > 0 && redisReaderFeed(c->reader, p, ok) != REDIS_OK) {
        conn_fail(c, CONN_ENOMEM, "lost", "out of memory");
        return -1;
    }
    return 0;
}

/* Appends bytes to the simple replies' buffer and measures what came:
 * whole simple replies become readable; from the first one that is not
 * simple, hiredis' reader takes the rest. 0, or -1 (c failed). */
static int conn_take(conn *c, const char *p, size_t n) {
    long m;
    if (c->fast_off > 0 && c->fast_off == c->fast_whole) {
        c->fast.len -= c->fast_off;
        memmove(c->fast.p, c->fast.p + c->fast_off, c->fast.len);
        c->fast_off = c->fast_whole = 0;
    }
    if (c->fast.len == 0 && c->fast.cap > CONN_FAST_KEEP) rbuf_free(&c->fast);   /* after a big reply */
    if (rbuf_reserve(&c->fast, n) != 0) {
        conn_fail(c, CONN_ENOMEM, "lost", "out of memory");
        return -1;
    }
    memcpy(c->fast.p + c->fast.len, p, n);
    c->fast.len += n;
    while ((m = reply_fast_scan(c->fast.p + c->fast_whole, c->fast.len - c->fast_whole)) > 0)
        c->fast_whole += (size_t)m;
    if (m < 0) {
        size_t rest = c->fast.len - c->fast_whole;
        c->fast.len = c->fast_whole;
        /* (the bytes stay where they are until the next append) */
        if (conn_feed_reader(c, c->fast.p + c->fast_whole, rest) != 0) return -1;
    }
    return 0;
}

/* hiredis' reader gave back a reply: when it holds nothing more, the next
 * bytes are measured again; when it holds the beginning of what follows,
 * those bytes are taken back (a fresh reader for the next reply that is
 * not simple), so that one odd reply does not keep every later one off
 * the fast path. Either way the reader is at a reply's start, and so is
 * its guard. 0, or -1 (c failed). */
static int conn_reader_gave(conn *c) {
    redisReader *rd = c->reader;
    int rc;
    /* (the reader holds all it will ever get: conn_reply fails c once it
     * has given that) */
    if (reply_guard_refused(&c->guard)) return 0;
    if (rd->pos == rd->len) {
        c->reader_holds = 0;
        reply_guard_reset(&c->guard);
        return 0;
    }
    c->reader = NULL;   /* (kept until its bytes are taken) */
    if (conn_reader_new(c) != 0) {
        redisReaderFree(rd);
        conn_fail(c, CONN_ENOMEM, "lost", "out of memory");
        return -1;
    }
    /* (all older simple replies were read: the reader's are newer) */
    c->fast.len = c->fast_off = c->fast_whole = 0;
    rc = conn_take(c, rd->buf + rd->pos, rd->len - rd->pos);
    redisReaderFree(rd);
    return rc;
}

/* A plain connection's first bytes are a TLS record (an alert, a
 * handshake): a TLS server, spoken to without TLS. */
static int conn_tls_answered(const conn *c, const char *buf) {
    return c->tls == NULL && c->recv_total == 0 && c->hs_next < c->hs_n && (buf[0] == 0x15 || buf[0] == 0x16);
}

/* What a receive of n bytes (or -1 with errno) into buf means for c:
 * 1 bytes taken, 0 none yet, -1 failed (c's error set). */
int conn_got(conn *c, const char *buf, ssize_t n) {
    char why[80];
    if (n > 0) {
        if (conn_tls_answered(c, buf)) {
            conn_fail(c, CONN_ECONNECT, "failed", "the server answered in TLS (a TLS port? use rediss://)");
            return -1;
        }
        c->recv_total += (uint64_t)n;
        /* simple replies (reply_fast.h) kept as they came, others to hiredis */
        if (c->reader_holds ? conn_feed_reader(c, buf, (size_t)n) != 0 : conn_take(c, buf, (size_t)n) != 0)
            return -1;
        return 1;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
    if (n == 0) {
        snprintf(why, sizeof why, "closed by server%s", conn_tls_hint(c));
        conn_fail(c, CONN_ELOST, c->hs_next < c->hs_n ? "failed" : "lost", why);
    } else {
        conn_fail_errno(c, c->hs_next < c->hs_n ? "failed" : "lost", errno);
    }
    return -1;
}

int conn_fill(conn *c) {
    char buf[CONN_RECV_CHUNK];
    return conn_got_raw(c, buf, sizeof buf, sock_recv(c->fd, buf, sizeof buf));
}

int conn_reply(conn *c, redisReply **out) {
    if (c->reader == NULL) {   /* closed: nothing more will come */
        if (c->err == CONN_OK) conn_fail(c, CONN_ELOST, "lost", "closed");
        return -1;
    }
    for (;;) {
        void *rep = NULL;
        redisReply *r;
        if (c->fast_off < c->fast_whole) {
            /* the simple ones are older than anything the reader holds */
            size_t used;
            rep = reply_fast_build(c->fast.p + c->fast_off, c->fast_whole - c->fast_off, &used);
            if (rep == NULL) {
                conn_fail(c, CONN_ENOMEM, "lost", "out of memory");
                return -1;
            }
            c->fast_off += used;
        } else {
            if (!c->reader_holds) return 0;
            if (redisReaderGetReply(c->reader, &rep) != REDIS_OK) {
                char why[REPLY_GUARD_WHY_LEN];
                snprintf(why, sizeof why, "%.70s", c->reader->errstr);
                conn_fail_protocol(c, why);
                return -1;
            }
            if (rep == NULL) {
                const char *why = reply_guard_refused(&c->guard);
                if (why == NULL) return 0;
                conn_fail_protocol(c, why);
                return -1;
            }
            if (conn_reader_gave(c) != 0) {
                freeReplyObject(rep);
                return -1;
            }
        }
        r = rep;
        if (c->hs_next >= c->hs_n) {
            *out = r;
            c->last_reply_us = monotime_us();   /* (conn_check_idle) */
            return 1;
        }
        if (conn_handshake_reply(c, r) != 0) return -1;
    }
}

int conn_reply_int(conn *c, long long *v) {
    size_t m;
    if (c->fast_off >= c->fast_whole || c->hs_next < c->hs_n) return 0;
    m = reply_fast_int(c->fast.p + c->fast_off, c->fast_whole - c->fast_off, v);
    c->fast_off += m;
    return m > 0;
}

