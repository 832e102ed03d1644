/*
 * reply_guard.h: the bounds a reply must keep before hiredis' reader sees
 * its bytes. No Lua here.
 *
 * hiredis' reader believes what a reply declares: "*2147483647\r\n" makes
 * it allocate an array of 2^31 slots (0.14 does; 1.x's maxelements stops
 * only that, and only at 2^32 - 1 by default), and freeing that half-read
 * reply walks every slot: seconds of CPU in a call whose deadline was one
 * second, in the watchdog thread as much as in a Lua call. A bulk declared
 * 10^12 bytes long makes it wait for them to the deadline; a line that
 * never ends is buffered, and searched again from its start at every read,
 * for as long as it comes; 1.x nests arrays as deep as the bytes say.
 *
 * So every byte a conn hands to the reader (conn_io.c: the replies that are
 * not simple, reply_fast.h) goes through this guard first. It follows the
 * framing of RESP2, the protocol we speak (we never send HELLO 3), as the
 * reader will, and refuses at once, as a protocol error:
 *   - an array of more than REPLY_GUARD_MAX_ELEMENTS elements;
 *   - a bulk string longer than REPLY_GUARD_MAX_BULK (Redis' own default
 *     proto-max-bulk-len: no reply of a server so configured is longer);
 *   - a line (status, error, integer, or a length) longer than
 *     REPLY_GUARD_MAX_LINE without its CRLF;
 *   - arrays nested deeper than REPLY_GUARD_MAX_DEPTH (hiredis 0.14's own
 *     limit);
 *   - a length that is not -1 or a plain decimal, and a type byte that is
 *     not one of + - : $ * (RESP3's, which 0.14 refuses too).
 * What it lets through is framed exactly as the reader frames it; the
 * reader still judges the rest (a bulk's trailing CRLF, an integer's
 * digits). No reply Redis sends to us comes near a bound: the largest are
 * SCAN's pages (COUNT 1000), CLUSTER SLOTS (at most 16384 ranges, 4 deep)
 * and CLUSTER NODES or INFO as one bulk string.
 */
#ifndef REDISLOCK_REPLY_GUARD_H
#define REDISLOCK_REPLY_GUARD_H

#include <stddef.h>
#include <stdint.h>

#define REPLY_GUARD_MAX_ELEMENTS (1L << 20)
#define REPLY_GUARD_MAX_BULK (512LL << 20)
#define REPLY_GUARD_MAX_LINE 65536
#define REPLY_GUARD_MAX_DEPTH 8

#define REPLY_GUARD_WHY_LEN 80

typedef struct reply_guard {
    uint8_t state;          /* (reply_guard.c: GUARD_*) */
    uint8_t type;           /* the line's type byte */
    uint8_t cr;             /* the line's last byte so far was a CR */
    uint8_t neg;            /* the length began with '-' */
    uint8_t depth;          /* arrays open */
    uint32_t line;          /* bytes of the line so far */
    long long num;          /* the length read so far */
    long long skip;         /* a bulk's bytes (and CRLF) still to come */
    long left[REPLY_GUARD_MAX_DEPTH];  /* elements still to come in each */
    char why[REPLY_GUARD_WHY_LEN];     /* refused: what was wrong */
} reply_guard;

/* A guard at the start of a reply (a new reader's). */
void reply_guard_reset(reply_guard *g);

/* The next n bytes of the stream the reader is fed: how many of them keep
 * the bounds: n, or fewer when a reply breaks one there. Those may go to
 * the reader (what comes before the reply that broke it is whole and
 * sound); from then on the guard is refused and takes no more. */
size_t reply_guard_feed(reply_guard *g, const char *p, size_t n);

/* Why the guard refused the stream ("an array of more than ..."), or NULL
 * while it has not. */
const char *reply_guard_refused(const reply_guard *g);

#endif
