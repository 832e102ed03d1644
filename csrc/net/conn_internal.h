/*
 * conn_internal.h: what conn.c shares with conn_io.c, conn_wait.c, conn_handshake.c
 * and conn_fork.c, and no one else.
 * No Lua here.
 */
#ifndef REDISLOCK_CONN_INTERNAL_H
#define REDISLOCK_CONN_INTERNAL_H

#include <sys/types.h>
#include "net/conn.h"

/* What one receive reads at most (the stack buffer of conn_fill and of
 * conn_wait.c's blocking receive). */
#define CONN_RECV_CHUNK 16384

/* conn_fail with errno's text (ETIMEDOUT: "timed out", of kind timeout;
 * a reset, with conn_tls_hint's). */
void conn_fail_errno(conn *c, const char *what, int e);

/* " (a TLS port? use rediss://)" when c is plain TCP and the server
 * dropped it before a byte of the handshake's answer came; else "". */
const char *conn_tls_hint(const conn *c);

/* A fresh reader for c (the old one, if any, freed first) and its guard
 * at the start of a reply (reply_guard.h): 0, or -1 (out of memory). */
int conn_reader_new(conn *c);

/* What a receive of n bytes (or -1 with errno) into buf means for c:
 * 1 bytes taken, 0 none yet, -1 failed (c's error set). */
int conn_got(conn *c, const char *buf, ssize_t n);

/* conn_got for n bytes (or -1 with errno) straight from the socket into
 * buf (cap bytes): over TLS they are fed to the session, and what it
 * decrypts, in buf again, goes to conn_got. Same answers. */
int conn_got_raw(conn *c, char *buf, size_t cap, ssize_t n);

/* There is something to send: requests, or TLS's own bytes. */
int conn_wants_write(const conn *c);

/* Closes what was, and queues a fresh handshake (and makes the TLS
 * session, when c has TLS): 0, or -1 (c's error set). */
int conn_begin(conn *c);

/* Appends one request to the output buffer: 0, or -1 (out of memory). */
int conn_queue(conn *c, int argc, const char **argv, const size_t *lens);

/* The handshake (conn_handshake.c): queued by conn_begin; each of its
 * replies read by conn_reply goes to conn_handshake_reply (frees it; 0, or
 * -1 failed: the connection is dropped). */
int conn_queue_handshake(conn *c);
int conn_handshake_reply(conn *c, redisReply *r);

/* The registry of every conn, for fork (conn_fork.c). */
void conn_reg_add(conn *c);
void conn_reg_remove(conn *c);

#endif
