/*
 * conn.c: a connection that knows how to (re)build itself (see conn.h).
 *
 * hiredis' rule is that a context is dead after any I/O error; we follow it:
 * close, remember why in errstr, connect again on the next call. The settings
 * (AUTH, SELECT) are re-applied on every connect, so a reconnected conn is
 * indistinguishable from the first one. Only hiredis' reply parser is used;
 * the socket and the request bytes are ours. Here: the conn's life, its
 * failures and its output queue; conn_io.c takes the steps that never wait
 * (connect, TLS, send, read, taking over a socket), conn_handshake.c is
 * what every new connection says first, conn_fork.c closes them in a fork
 * child (its registry, which each conn joins here, is the one of them this
 * file calls), and conn_wait.c waits on the steps: the others build on
 * this file.
 */
#define _GNU_SOURCE
#include "net/conn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net/conn_internal.h"
#include "base/secret.h"

/* ---- config ---------------------------------------------------------------- */

static char *conn_strdup(const char *s) {
    return s ? strdup(s) : NULL;
}

int conn_config_copy(conn_config *dst, const conn_config *src) {
    *dst = *src;
    tls_ctx_retain(dst->tls);
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
    secret_free(cfg->password);
    free(cfg->host);
    free(cfg->path);
    free(cfg->username);
    tls_ctx_release(cfg->tls);
    memset(cfg, 0, sizeof *cfg);
}

conn *conn_new(const conn_config *cfg) {
    conn *c = calloc(1, sizeof *c);
    if (c == NULL) return NULL;
    if (conn_config_copy(&c->cfg, cfg) != 0) {
        free(c);
        return NULL;
    }
    c->fd = -1;
    c->recv_fd = -1;
    c->may_resolve = 1;
    conn_reg_add(c);
    return c;
}

void conn_free(conn *c) {
    if (c == NULL) return;
    conn_drop(c);
    conn_reg_remove(c);
    rbuf_free(&c->out);
    rbuf_free(&c->fast);
    conn_config_free(&c->cfg);
    free(c);
}

void conn_set_addrs(conn *c, const sock_addrs *a) {
    c->addrs = *a;
    c->addrs_gen++;
}

void conn_describe(const conn *c, char *buf, size_t len) {
    if (c->cfg.path)
        snprintf(buf, len, "%s", c->cfg.path);
    else if (c->cfg.host && strchr(c->cfg.host, ':'))
        snprintf(buf, len, "[%s]:%d", c->cfg.host, c->cfg.port);
    else if (c->cfg.host)
        snprintf(buf, len, "%s:%d", c->cfg.host, c->cfg.port);
    else
        sock_describe(&c->addrs, 0, buf, len);
}

const char *conn_kind(int err) {
    switch (err) {
    case CONN_ETIMEOUT: return "timeout";
    case CONN_EREDIS: return "redis";
    case CONN_ENOMEM: return "memory";
    case CONN_EINTR: return "interrupted";
    default: return "connection";
    }
}

/* ---- failure and teardown -------------------------------------------------- */

void conn_drop(conn *c) {
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    c->recv_fd = -1;
    c->connecting = 0;
    tls_sess_free(c->tls);
    c->tls = NULL;
    c->tls_hs = 0;
    if (c->reader) redisReaderFree(c->reader);
    c->reader = NULL;
    c->reader_holds = 0;
    c->fast.len = c->fast_off = c->fast_whole = 0;
    c->out.len = 0;
    c->out_off = 0;
    c->sent_total = c->queued_total = c->recv_total = 0;
    c->hs_n = c->hs_next = 0;
    c->last_reply_us = 0;
}

/* Records why, "connection <what>: <why> (<where>)", and closes. An
 * interrupted wait says so in its own word (the request may have run). */
void conn_fail(conn *c, int err, const char *what, const char *why) {
    char where[160];
    conn_describe(c, where, sizeof where);
    c->err = err;
    if (err == CONN_EINTR)
        snprintf(c->errstr, sizeof c->errstr, "interrupted: a signal ended the wait (%.80s)", where);
    else
        snprintf(c->errstr, sizeof c->errstr, "connection %.6s: %.116s (%.60s)", what, why, where);
    conn_drop(c);
}

/* A plain TCP connection the server dropped before a byte of its answer to
 * the handshake came: what a TLS port does with our plaintext (Redis resets
 * it), hence the hint; the closing words of conn_fail's why, or "". */
const char *conn_tls_hint(const conn *c) {
    return c->tls == NULL && c->cfg.path == NULL && c->hs_next < c->hs_n && c->recv_total == 0
           ? " (a TLS port? use rediss://)" : "";
}

void conn_fail_errno(conn *c, const char *what, int e) {
    char why[CONN_ERRSTR_LEN];
    if (e == EINTR) {
        conn_fail(c, CONN_EINTR, what, "interrupted");
    } else if (e == ETIMEDOUT) {
        conn_fail(c, CONN_ETIMEOUT, what, "timed out");
    } else {
        snprintf(why, sizeof why, "%s%s", strerror(e), e == ECONNRESET || e == EPIPE ? conn_tls_hint(c) : "");
        conn_fail(c, CONN_ECONNECT, what, why);
    }
}

void conn_fail_with(conn *c, int err, const char *what) {
    /* (a TLS handshake not a byte of which came back: likely not TLS there) */
    conn_fail(c, err, what, err != CONN_ETIMEOUT ? "failed" :
              c->tls_hs == 1 ? "tls handshake timed out: no answer (not a TLS port?)" :
              c->tls_hs ? "tls handshake timed out" : "timed out");
}

int conn_unqueue(conn *c, uint64_t from, uint64_t to) {
    size_t a, b;
    if (from < c->sent_total || to > c->queued_total || from > to) return -1;
    a = c->out_off + (size_t)(from - c->sent_total);
    b = c->out_off + (size_t)(to - c->sent_total);
    rbuf_cut(&c->out, a, b);
    c->queued_total -= to - from;
    return 0;
}

/* ---- queueing requests ------------------------------------------------------ */

int conn_queue(conn *c, int argc, const char **argv, const size_t *lens) {
    size_t before = c->out.len;
    if (resp_command(&c->out, argc, argv, lens) != 0) return -1;
    c->queued_total += c->out.len - before;
    return 0;
}

int conn_append(conn *c, int argc, const char **argv, const size_t *lens) {
    if (conn_queue(c, argc, argv, lens) != 0) {
        conn_fail(c, CONN_ENOMEM, "lost", "out of memory");
        return -1;
    }
    return 0;
}

int conn_append_pre(conn *c, size_t total, const char *pre, size_t prelen, int argc,
                    const char **argv, const size_t *lens) {
    size_t before = c->out.len;
    if (resp_command_pre(&c->out, total, pre, prelen, argc, argv, lens) != 0) {
        conn_fail(c, CONN_ENOMEM, "lost", "out of memory");
        return -1;
    }
    c->queued_total += c->out.len - before;
    return 0;
}
