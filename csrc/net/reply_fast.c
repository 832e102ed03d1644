/* reply_fast.c: see reply_fast.h. */
#include "net/reply_fast.h"

#include <string.h>

#include "base/reply_obj.h"

/* The line at p[0..n) up to CRLF: its length without the CRLF, or -1 when
 * it is not whole or has a CR of its own. */
static long fast_line(const char *p, size_t n) {
    const char *cr = memchr(p, '\r', n);
    if (cr == NULL || (size_t)(cr - p) + 1 >= n || cr[1] != '\n') return -1;
    return (long)(cr - p);
}

/* Scans return the length of the whole simple reply at the start of
 * p[0..n) (> 0), FAST_MORE when what is there may still become one (wait
 * for more bytes), or FAST_NOT when it cannot (hiredis reads it). */
#define FAST_MORE 0
#define FAST_NOT (-1)

/* "-1" then CRLF at p[1..]: a nil ($-1, *-1). */
static long fast_nil(const char *p, size_t n) {
    static const char nil[] = "-1\r\n";
    size_t i;
    for (i = 1; i < 5; i++) {
        if (i >= n) return FAST_MORE;
        if (p[i] != nil[i - 1]) return FAST_NOT;
    }
    return 5;
}

/* The digits at p[i..n) (after an optional '-' when minus), at most
 * `digits` of them, no leading zero, then CRLF: the index just past the CRLF, FAST_MORE or
 * FAST_NOT. */
static long fast_digits(const char *p, size_t i, size_t n, int minus, size_t digits) {
    size_t from;
    int neg = minus && i < n && p[i] == '-';
    i += (size_t)neg;
    from = i;
    while (i < n && p[i] >= '0' && p[i] <= '9') i++;
    if (i - from > digits) return FAST_NOT;
    /* hiredis refuses a leading zero ("01", "-0"): so do we (it says why) */
    if (i > from && p[from] == '0' && (i - from > 1 || neg)) return FAST_NOT;
    if (i == n) return FAST_MORE;
    if (i == from || p[i] != '\r') return FAST_NOT;
    if (i + 1 == n) return FAST_MORE;
    return p[i + 1] == '\n' ? (long)i + 2 : FAST_NOT;
}

/* The number at p (checked by fast_digits), up to its CR. */
static long long fast_value(const char *p) {
    long long x = 0;
    int neg = *p == '-';
    p += neg;
    while (*p != '\r') x = x * 10 + (*p++ - '0');
    return neg ? -x : x;
}

/* One scalar reply at p[0..n): see FAST_MORE. */
static long fast_scalar(const char *p, size_t n) {
    const char *cr;
    long head;
    size_t total;
    if (n == 0) return FAST_MORE;
    switch (p[0]) {
    case ':':
        return fast_digits(p, 1, n, 1, 18);
    case '+':
    case '-':
        /* (no CR or LF inside: Redis never sends one there, and a reader
         * may refuse it: such a line is hiredis' to judge) */
        cr = memchr(p + 1, '\r', n - 1);
        if (memchr(p + 1, '\n', cr ? (size_t)(cr - p) - 1 : n - 1) != NULL) return FAST_NOT;
        if (cr == NULL) return n > REPLY_FAST_MAX_LINE ? FAST_NOT : FAST_MORE;
        if ((size_t)(cr - p) > REPLY_FAST_MAX_LINE) return FAST_NOT;
        if ((size_t)(cr - p) + 1 == n) return FAST_MORE;
        return cr[1] == '\n' ? (long)(cr - p) + 2 : FAST_NOT;
    case '$':
        if (n > 1 && p[1] == '-') return fast_nil(p, n);
        head = fast_digits(p, 1, n, 0, REPLY_FAST_MAX_BULK_DIGITS);
        if (head <= 0) return head;
        total = (size_t)head + (size_t)fast_value(p + 1) + 2;
        if (total > n) return FAST_MORE;
        return p[total - 2] == '\r' && p[total - 1] == '\n' ? (long)total : FAST_NOT;
    default:
        return FAST_NOT;
    }
}

long reply_fast_scan(const char *p, size_t n) {
    long long count, i;
    long at;
    if (n == 0) return FAST_MORE;
    if (p[0] != '*') return fast_scalar(p, n);
    if (n > 1 && p[1] == '-') return fast_nil(p, n);
    at = fast_digits(p, 1, n, 0, 2);
    if (at <= 0) return at;
    count = fast_value(p + 1);
    if (count > REPLY_FAST_MAX_ELEMENTS) return FAST_NOT;
    for (i = 0; i < count; i++) {
        long m = fast_scalar(p + at, n - (size_t)at);
        if (m <= 0) return m;
        at += m;
    }
    return at;
}

/* The scalar at p, as hiredis builds it (reply_obj.h). */
static redisReply *fast_build_scalar(const char *p, size_t n, size_t *used) {
    long len = fast_line(p + 1, n - 1);   /* (measured already: whole) */
    const char *str = p + 1;
    size_t slen = (size_t)len;
    int type;
    redisReply *r;
    *used = (size_t)len + 3;
    switch (p[0]) {
    case ':':
        r = reply_obj_new(REDIS_REPLY_INTEGER);
        if (r != NULL) r->integer = fast_value(p + 1);
        return r;
    case '+':
        type = REDIS_REPLY_STATUS;
        break;
    case '-':
        type = REDIS_REPLY_ERROR;
        break;
    default:   /* '$' */
        if (p[1] == '-') return reply_obj_new(REDIS_REPLY_NIL);
        type = REDIS_REPLY_STRING;
        str = p + len + 3;
        slen = (size_t)fast_value(p + 1);
        *used += slen + 2;
        break;
    }
    r = reply_obj_new(type);
    if (r != NULL && reply_obj_set_str(r, str, slen) != 0) {
        reply_obj_free_bare(r);
        return NULL;
    }
    return r;
}

redisReply *reply_fast_build(const char *p, size_t n, size_t *used) {
    long len;
    long long count, i;
    size_t at, m;
    redisReply *r;
    if (p[0] != '*') return fast_build_scalar(p, n, used);
    len = fast_line(p + 1, n - 1);
    at = (size_t)len + 3;
    *used = at;
    if (p[1] == '-') return reply_obj_new(REDIS_REPLY_NIL);
    r = reply_obj_new(REDIS_REPLY_ARRAY);
    if (r == NULL) return NULL;
    count = fast_value(p + 1);
    if (reply_obj_set_elements(r, (size_t)count) != 0) {
        reply_obj_free_bare(r);
        return NULL;
    }
    for (i = 0; i < count; i++) {
        r->element[i] = fast_build_scalar(p + at, n - at, &m);
        if (r->element[i] == NULL) {
            r->elements = (size_t)i;
            freeReplyObject(r);
            return NULL;
        }
        at += m;
    }
    r->elements = (size_t)count;
    *used = at;
    return r;
}

size_t reply_fast_int(const char *p, size_t n, long long *v) {
    if (p[0] != ':') return 0;
    *v = fast_value(p + 1);
    return (size_t)fast_digits(p, 1, n, 1, 18);
}
