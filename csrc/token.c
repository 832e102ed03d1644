/*
 * token.c: owner tokens from getrandom(2).
 *
 * A token is the only thing that proves ownership of a lock, so it must be
 * unguessable: 128 bits straight from the kernel CSPRNG, never a seeded PRNG,
 * never time or MAC based (redis-py's uuid1 mistake).
 */
#define _GNU_SOURCE
#include "token.h"

#include <errno.h>
#include <sys/random.h>

/* getrandom() may return short or fail with EINTR; loop until the buffer is
 * full. Small requests (<= 256 bytes) never block once the pool is ready. */
static int token_fill(unsigned char *buf, size_t len) {
    size_t got = 0;
    while (got < len) {
        ssize_t n = getrandom(buf + got, len - got, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        got += (size_t)n;
    }
    return 0;
}

int token_new(char *out) {
    static const char hex[] = "0123456789abcdef";
    unsigned char raw[TOKEN_BYTES];
    size_t i;
    if (token_fill(raw, sizeof raw) != 0) return -1;
    for (i = 0; i < TOKEN_BYTES; i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 0x0f];
    }
    out[TOKEN_HEX_LEN] = '\0';
    return 0;
}
