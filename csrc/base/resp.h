/*
 * resp.h: Redis requests, written in RESP by us. No Lua here.
 *
 * A request is an array of bulk strings: "*N\r\n" then "$len\r\n" bytes
 * "\r\n" per argument. Binary safe, no format strings (hiredis' "%s" form
 * stops at NUL and splits on spaces), and no sprintf on the hot path.
 */
#ifndef REDISLOCK_RESP_H
#define REDISLOCK_RESP_H

#include <stddef.h>

/* A growable byte buffer; zero-initialised is empty. */
typedef struct rbuf {
    char *p;
    size_t len, cap;
} rbuf;

/* Room for `more` bytes after len. 0, or -1 when out of memory. */
int rbuf_reserve(rbuf *b, size_t more);
/* Drops the first n bytes. */
void rbuf_consume(rbuf *b, size_t n);
/* Drops bytes [from, to). */
void rbuf_cut(rbuf *b, size_t from, size_t to);
void rbuf_free(rbuf *b);

/* Appends one request. 0, or -1 when out of memory (b unchanged). */
int resp_command(rbuf *b, int argc, const char *const *argv, const size_t *lens);

/* Appends one request of `total` arguments whose first ones are already in
 * RESP (`pre`, prelen bytes: precomputed, e.g. "EVALSHA sha nkeys"),
 * followed by argv. 0, or -1 when out of memory (b unchanged). */
int resp_command_pre(rbuf *b, size_t total, const char *pre, size_t prelen, int argc,
                     const char *const *argv, const size_t *lens);

/* Writes v in decimal into dst (room for 21 bytes, no NUL); returns the
 * length. What snprintf("%lld") writes, without its cost. */
size_t resp_i64(char *dst, long long v);

/* Writes "*N\r\n" / "$N\r\n" style headers: prefix, the number, CRLF, into
 * dst (room for 24 bytes); returns the length. For precomputed pieces. */
size_t resp_header(char *dst, char prefix, size_t n);

#endif
