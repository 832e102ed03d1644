/* deadline.h: one deadline for a whole exchange. No Lua here.
 *
 * A per-syscall timeout resets with every byte, so a peer that trickles one
 * byte at a time stretches it forever. Every exchange here (resolve, connect,
 * handshake, a pipeline and its replies) runs against one absolute deadline
 * on the monotonic clock instead, and each wait polls for what is left of it
 * (after LuaSocket's timeout.c: a total, not a per-call, timeout); a reply
 * wait first sleeps in recv for a short stretch well inside it (conn_wait.c). */
#ifndef REDISLOCK_DEADLINE_H
#define REDISLOCK_DEADLINE_H

#include <stdint.h>
#include "base/monotime.h"

/* No deadline: wait as long as it takes. */
#define DEADLINE_NONE INT64_MAX

/* The deadline ms milliseconds from now; ms <= 0 means none. */
static inline int64_t deadline_in_ms(long ms) {
    return ms > 0 ? monotime_us() + (int64_t)ms * 1000 : DEADLINE_NONE;
}

/* The earlier of two deadlines. */
static inline int64_t deadline_min(int64_t a, int64_t b) {
    return a < b ? a : b;
}

/* What is left of deadline d as a poll(2) timeout: -1 for none, 0 once it
 * has passed, otherwise whole milliseconds rounded up, so a poll never
 * returns just before the deadline and spins. Capped to fit an int. */
static inline int deadline_poll_ms(int64_t d) {
    int64_t left;
    if (d == DEADLINE_NONE) return -1;
    left = d - monotime_us();
    if (left <= 0) return 0;
    left = (left + 999) / 1000;
    return left > 86400000 ? 86400000 : (int)left;
}

static inline int deadline_passed(int64_t d) {
    return d != DEADLINE_NONE && monotime_us() >= d;
}

#endif
