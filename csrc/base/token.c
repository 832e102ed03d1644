/*
 * token.c: owner tokens from getrandom(2).
 *
 * A token is the only thing that proves ownership of a lock, so it must be
 * unguessable: 128 bits straight from the kernel CSPRNG, never a seeded PRNG,
 * never time or MAC based (redis-py's uuid1 mistake).
 *
 * The bytes are drawn TOKEN_BATCH tokens at a time (one system call instead
 * of one per lock) into a buffer that hands each byte out once and wipes
 * it. A fork child must never hand out what its parent will: the buffer is
 * emptied in the child before fork() returns there (a pthread_atfork child
 * handler; the mutex is taken across the fork so the child's copy of it
 * and of the buffer are consistent), so both draw fresh bytes.
 */
#define _GNU_SOURCE
#include "base/token.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/random.h>

#define TOKEN_BATCH 32

static pthread_mutex_t token_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned char token_buf[TOKEN_BATCH * TOKEN_BYTES];
static size_t token_left;        /* unused bytes at the end of token_buf */
static pthread_once_t token_once = PTHREAD_ONCE_INIT;

/* getrandom() may return short or fail with EINTR; loop until the buffer is
 * full. Requests of at most 256 bytes never block once the pool is ready. */
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

static void token_fork_prepare(void) { pthread_mutex_lock(&token_mu); }
static void token_fork_parent(void) { pthread_mutex_unlock(&token_mu); }

/* In a fork child, single-threaded: the parent's unused bytes are its own. */
static void token_fork_child(void) {
    memset(token_buf, 0, sizeof token_buf);
    token_left = 0;
    pthread_mutex_unlock(&token_mu);
}

static void token_init(void) {
    pthread_atfork(token_fork_prepare, token_fork_parent, token_fork_child);
}

int token_new(char *out) {
    static const char hex[] = "0123456789abcdef";
    unsigned char raw[TOKEN_BYTES];
    size_t i;
    pthread_once(&token_once, token_init);
    pthread_mutex_lock(&token_mu);
    if (token_left < TOKEN_BYTES) {
        if (token_fill(token_buf, sizeof token_buf) != 0) {
            int e = errno;
            pthread_mutex_unlock(&token_mu);
            errno = e;
            return -1;
        }
        token_left = sizeof token_buf;
    }
    token_left -= TOKEN_BYTES;
    memcpy(raw, token_buf + token_left, TOKEN_BYTES);
    memset(token_buf + token_left, 0, TOKEN_BYTES);
    pthread_mutex_unlock(&token_mu);
    for (i = 0; i < TOKEN_BYTES; i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 0x0f];
    }
    out[TOKEN_HEX_LEN] = '\0';
    memset(raw, 0, sizeof raw);
    return 0;
}
