/*
 * resp.c: requests in RESP (see resp.h).
 */
#include "base/resp.h"

#include <stdlib.h>
#include <string.h>

int rbuf_reserve(rbuf *b, size_t more) {
    size_t need = b->len + more, cap;
    char *p;
    if (need < b->len) return -1;  /* overflow */
    if (need <= b->cap) return 0;
    cap = b->cap ? b->cap : 256;
    while (cap < need) {
        if (cap > ((size_t)-1) / 2) return -1;
        cap *= 2;
    }
    p = realloc(b->p, cap);
    if (p == NULL) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

void rbuf_consume(rbuf *b, size_t n) {
    if (n >= b->len) {
        b->len = 0;
        return;
    }
    memmove(b->p, b->p + n, b->len - n);
    b->len -= n;
}

void rbuf_cut(rbuf *b, size_t from, size_t to) {
    if (to > b->len) to = b->len;
    if (from >= to) return;
    memmove(b->p + from, b->p + to, b->len - to);
    b->len -= to - from;
}

void rbuf_free(rbuf *b) {
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

size_t resp_i64(char *dst, long long v) {
    char digits[24];
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    size_t k = 0, len = 0;
    do {
        digits[k++] = (char)('0' + u % 10);
        u /= 10;
    } while (u > 0);
    if (v < 0) dst[len++] = '-';
    while (k > 0) dst[len++] = digits[--k];
    return len;
}

size_t resp_header(char *dst, char prefix, size_t n) {
    char digits[24];
    size_t k = 0, i, len = 0;
    if (n < 10) {              /* most argument counts and many lengths */
        dst[0] = prefix;
        dst[1] = (char)('0' + n);
        dst[2] = '\r';
        dst[3] = '\n';
        return 4;
    }
    if (n < 100) {             /* keys, tokens */
        dst[0] = prefix;
        dst[1] = (char)('0' + n / 10);
        dst[2] = (char)('0' + n % 10);
        dst[3] = '\r';
        dst[4] = '\n';
        return 5;
    }
    do {
        digits[k++] = (char)('0' + n % 10);
        n /= 10;
    } while (n > 0);
    dst[len++] = prefix;
    for (i = 0; i < k; i++) dst[len++] = digits[k - 1 - i];
    dst[len++] = '\r';
    dst[len++] = '\n';
    return len;
}

int resp_command_pre(rbuf *b, size_t total, const char *pre, size_t prelen, int argc,
                     const char *const *argv, const size_t *lens) {
    size_t need = 24 + prelen, i;
    char *w;
    for (i = 0; i < (size_t)argc; i++) {
        if (lens[i] > ((size_t)-1) / 2 - need) return -1;
        need += 24 + lens[i] + 2;
    }
    if (rbuf_reserve(b, need) != 0) return -1;
    w = b->p + b->len;
    w += resp_header(w, '*', total);
    if (prelen) memcpy(w, pre, prelen);
    w += prelen;
    for (i = 0; i < (size_t)argc; i++) {
        w += resp_header(w, '$', lens[i]);
        if (lens[i]) memcpy(w, argv[i], lens[i]);
        w += lens[i];
        *w++ = '\r';
        *w++ = '\n';
    }
    b->len = (size_t)(w - b->p);
    return 0;
}

int resp_command(rbuf *b, int argc, const char *const *argv, const size_t *lens) {
    return resp_command_pre(b, (size_t)argc, NULL, 0, argc, argv, lens);
}
