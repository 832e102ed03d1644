/*
 * test/c/check.h: what the C unit tests in test/c share. Each test
 * is one translation unit: the counters are its own.
 *
 *   CHECK(cond, fmt, ...)   counts a check; a failed one is printed with
 *                           its place and the message, and counted
 *   check_report(name)      prints "<name>: N checks, N failed" and gives
 *                           the exit status (0 when none failed)
 *   check_rand()            xorshift64 from check_rng: the same sequence on
 *                           every run, so a failure repeats (a test may set
 *                           check_rng to a seed of its own first)
 */
#ifndef REDISLOCK_TEST_CHECK_H
#define REDISLOCK_TEST_CHECK_H

#include <stdint.h>
#include <stdio.h>

static int checks, failures;

#define CHECK(cond, ...) do {                                             \
        checks++;                                                         \
        if (!(cond)) {                                                    \
            failures++;                                                   \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                 \
            fputc('\n', stderr);                                          \
        }                                                                 \
    } while (0)

static inline int check_report(const char *name) {
    printf("%s: %d checks, %d failed\n", name, checks, failures);
    return failures == 0 ? 0 : 1;
}

static uint64_t check_rng = 88172645463325252ULL;

static inline uint64_t check_rand(void) {
    check_rng ^= check_rng << 13;
    check_rng ^= check_rng >> 7;
    check_rng ^= check_rng << 17;
    return check_rng;
}

#endif
