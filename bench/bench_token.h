/* bench_token.h: the owner tokens of the C baselines (spin_poll.c,
 * cycle_raw.c): 16 random bytes from the kernel as 32 hex digits, made
 * exactly as redislock's own (csrc/base/token.c: one getrandom, a table lookup
 * per nibble), so that a baseline does the same work for its token.
 * 0, or -1 when getrandom fails. */
#ifndef BENCH_TOKEN_H
#define BENCH_TOKEN_H

#include <errno.h>
#include <sys/random.h>

static int bench_token(char out[33]) {
    static const char hex[] = "0123456789abcdef";
    unsigned char raw[16];
    size_t got = 0;
    int i;
    while (got < sizeof raw) {
        ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        got += (size_t)n;
    }
    for (i = 0; i < 16; i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 0x0f];
    }
    out[32] = '\0';
    return 0;
}

#endif
