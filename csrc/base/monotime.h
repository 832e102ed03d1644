/* monotime.h: the one clock for deadlines and leases. No Lua here.
 *
 * Leases are judged on CLOCK_MONOTONIC only, so a wall-clock jump on the
 * client (NTP step, faketime, an operator's `date -s`) can neither stretch nor
 * shorten what we believe we hold. */
#ifndef REDISLOCK_MONOTIME_H
#define REDISLOCK_MONOTIME_H

#include <stdint.h>
#include <time.h>

static inline int64_t monotime_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline int64_t monotime_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static inline double monotime_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#endif
