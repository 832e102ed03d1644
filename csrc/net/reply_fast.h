/*
 * reply_fast.h: the common Redis replies read without hiredis' reader.
 * No Lua here.
 *
 * A lock's requests are answered by small, flat replies: an integer (a
 * release, a renewal), an array of two or three integers (an acquire), a
 * status. hiredis' reader copies every chunk it is fed into a buffer of
 * its own, walks a task stack per reply and allocates a reply object for
 * each. conn.c instead keeps the bytes it receives, while hiredis' reader
 * holds none, and measures them here: whole simple replies (and the
 * beginning of one, until the rest comes) are built only when asked for,
 * as the same redisReply tree hiredis builds (freeReplyObject frees it),
 * or, for an integer, read as its value alone (the watchdog's renewals:
 * no allocation at all). From the first reply that is not simple, the
 * bytes go to hiredis' reader until it holds none again: replies keep
 * their order.
 *
 * Simple:
 *   ":" integer, at most 18 digits;
 *   "+" or "-" line, at most 4 KB, with no CR or LF inside;
 *   "$-1", or "$" length under 1 MB, that many bytes, CRLF;
 *   "*-1", or "*" count (at most 64) of the ones above, not nested;
 * numbers written as Redis writes them (hiredis refuses "01" and "-0").
 * A reply cut by a read waits for its next bytes, so that a pipeline's
 * answers, read 16 KB at a time, all take this path. Anything else (RESP3
 * types, nesting, odd numbers, a CR alone, malformed bytes) is hiredis'
 * to read, and to report as before.
 */
#ifndef REDISLOCK_REPLY_FAST_H
#define REDISLOCK_REPLY_FAST_H

#include <stddef.h>
#include <hiredis.h>

#define REPLY_FAST_MAX_ELEMENTS 64
#define REPLY_FAST_MAX_LINE 4096        /* a status or error line */
#define REPLY_FAST_MAX_BULK_DIGITS 6    /* bulk strings under 1 MB */

/* What starts p[0..n): the length of a whole simple reply (> 0); 0 when
 * it may still become one (the bytes so far are a beginning of one: wait
 * for more); -1 when it cannot (hiredis reads it from there on). */
long reply_fast_scan(const char *p, size_t n);

/* The reply at the start of p[0..n), which reply_fast_scan measured, as
 * hiredis would build it; *used: its length. NULL when out of memory. */
redisReply *reply_fast_build(const char *p, size_t n, size_t *used);

/* When the reply at the start of p[0..n) (measured by reply_fast_scan)
 * is an integer: its value in *v, and its length; otherwise 0. */
size_t reply_fast_int(const char *p, size_t n, long long *v);

#endif
