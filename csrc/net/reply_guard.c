/* reply_guard.c: see reply_guard.h. */
#include "net/reply_guard.h"

#include <stdio.h>
#include <string.h>

enum {
    GUARD_TYPE = 0,   /* a type byte comes next */
    GUARD_LINE,       /* the text of a status, error or integer line */
    GUARD_LEN,        /* the length of an array or a bulk string */
    GUARD_BULK,       /* a bulk string's bytes and CRLF */
    GUARD_DEAD        /* refused: nothing more is read */
};

void reply_guard_reset(reply_guard *g) {
    memset(g, 0, sizeof *g);
}

/* Refuses the stream: why (fmt names the bound v, or says what was
 * wrong: the byte v), and the guard stays dead. */
static int guard_refuse(reply_guard *g, const char *fmt, long long v) {
    g->state = GUARD_DEAD;
    snprintf(g->why, sizeof g->why, fmt, v);
    return -1;
}

const char *reply_guard_refused(const reply_guard *g) {
    return g->state == GUARD_DEAD ? g->why : NULL;
}

/* One element is whole: the arrays it ends go with it. */
static void guard_element_done(reply_guard *g) {
    while (g->depth > 0 && --g->left[g->depth - 1] == 0) g->depth--;
    g->state = GUARD_TYPE;
}

/* A length's line is whole: what it opens. 0, or -1 (refused). */
static int guard_length_done(reply_guard *g) {
    if (g->type == '$') {
        if (g->neg) {
            guard_element_done(g);   /* nil */
        } else {
            g->skip = g->num + 2;
            g->state = GUARD_BULK;
        }
        return 0;
    }
    if (g->neg || g->num == 0) {
        guard_element_done(g);   /* nil, or empty */
        return 0;
    }
    if (g->depth == REPLY_GUARD_MAX_DEPTH)
        return guard_refuse(g, "arrays nested more than %lld deep", REPLY_GUARD_MAX_DEPTH);
    g->left[g->depth++] = (long)g->num;
    g->state = GUARD_TYPE;
    return 0;
}

/* One byte of a length (g->line counts it: 2 for the first, after the
 * type byte): "-1", or digits, then CRLF. 0, or -1 (refused). */
static int guard_length_byte(reply_guard *g, char c) {
    int bulk = g->type == '$';
    if (g->cr) {
        if (c != '\n') return guard_refuse(g, "a length followed by a CR alone (byte %lld)", (unsigned char)c);
        return guard_length_done(g);
    }
    if (c == '\r' && g->line > 2 && (!g->neg || g->num == 1)) {
        g->cr = 1;
        return 0;
    }
    if (c == '-' && g->line == 2) {
        g->neg = 1;
        return 0;
    }
    if (c < '0' || c > '9' || (g->neg && (g->num != 0 || c != '1')))
        return guard_refuse(g, "a length that is not a number (byte %lld)", (unsigned char)c);
    g->num = g->num * 10 + (c - '0');
    if (bulk && g->num > REPLY_GUARD_MAX_BULK)
        return guard_refuse(g, "a bulk string longer than %lld bytes", REPLY_GUARD_MAX_BULK);
    if (!bulk && g->num > REPLY_GUARD_MAX_ELEMENTS)
        return guard_refuse(g, "an array of more than %lld elements", REPLY_GUARD_MAX_ELEMENTS);
    return 0;
}

/* The type byte of the next element. 0, or -1 (refused). */
static int guard_type(reply_guard *g, char c) {
    g->type = (uint8_t)c;
    g->line = 1;
    g->cr = g->neg = 0;
    g->num = 0;
    switch (c) {
    case '+':
    case '-':
    case ':':
        g->state = GUARD_LINE;
        return 0;
    case '$':
    case '*':
        g->state = GUARD_LEN;
        return 0;
    default:
        return guard_refuse(g, "a reply of unknown type (byte %lld)", (unsigned char)c);
    }
}

/* The text of a line, up to its CRLF, from p[0..n): how many bytes it took. */
static size_t guard_line(reply_guard *g, const char *p, size_t n) {
    size_t i = 0;
    while (i < n) {
        const char *lf;
        if (g->cr && p[i] == '\n') {
            g->line++;
            guard_element_done(g);
            return i + 1;
        }
        lf = memchr(p + i, '\n', n - i);
        if (lf == NULL) {
            g->line += (uint32_t)(n - i > REPLY_GUARD_MAX_LINE ? REPLY_GUARD_MAX_LINE : n - i);
            g->cr = p[n - 1] == '\r';
            return n;
        }
        /* the bytes before this LF; it ends the line if a CR precedes it */
        g->line += (uint32_t)(lf - (p + i) > REPLY_GUARD_MAX_LINE ? REPLY_GUARD_MAX_LINE : lf - (p + i));
        g->cr = lf > p + i ? lf[-1] == '\r' : g->cr;
        i = (size_t)(lf - p);
        if (!g->cr) {
            g->line++;
            i++;
        }
        if (g->line > REPLY_GUARD_MAX_LINE) return i;
    }
    return n;
}

size_t reply_guard_feed(reply_guard *g, const char *p, size_t n) {
    size_t i = 0, start = 0;   /* start: where the element being read began */
    if (g->state == GUARD_DEAD) return 0;
    while (i < n) {
        if (g->state == GUARD_TYPE) start = i;
        switch (g->state) {
        case GUARD_TYPE:
            if (guard_type(g, p[i++]) != 0) return start;
            break;
        case GUARD_LINE:
            i += guard_line(g, p + i, n - i);
            break;
        case GUARD_LEN:
            g->line++;
            if (guard_length_byte(g, p[i++]) != 0) return start;
            break;
        default: {   /* GUARD_BULK */
            size_t take = (size_t)g->skip < n - i ? (size_t)g->skip : n - i;
            g->skip -= (long long)take;
            i += take;
            if (g->skip == 0) guard_element_done(g);
            break;
        }
        }
        if (g->state != GUARD_BULK && g->state != GUARD_TYPE && g->line > REPLY_GUARD_MAX_LINE) {
            guard_refuse(g, "a line longer than %lld bytes", REPLY_GUARD_MAX_LINE);
            return start;
        }
    }
    return n;
}
