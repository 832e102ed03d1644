/* lease.h: how much of a lease we count on. The one definition, used by the
 * watchdog thread and (through core.drift) by the Lua side. No Lua here.
 *
 * The server's clock and ours may run at slightly different rates, so of a
 * lease of ttl ms counted from when the request was sent we count on only
 * ttl minus a margin: Redlock's 1% + 2 ms, the 1% rounded up to a whole ms
 * so that no ttl gets less than 1%. */
#ifndef REDISLOCK_LEASE_H
#define REDISLOCK_LEASE_H

#include <stdint.h>

static inline int64_t lease_drift_ms(int64_t ttl_ms) {
    return (ttl_ms + 99) / 100 + 2;
}

#endif
