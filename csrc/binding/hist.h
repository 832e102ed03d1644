/* hist.h: log2 histograms and the hot counters of redislock.metrics. */
#ifndef REDISLOCK_HIST_H
#define REDISLOCK_HIST_H

#include "lua.h"

/* The bucket of x among n bounds 2^lo .. 2^(lo+n-1): 1 for x <= 2^lo
 * (zero and negatives too), i for 2^(lo+i-2) < x <= 2^(lo+i-1), n + 1 for
 * anything above the last bound (NaN too). Exact at powers of two. */
int hist_bucket(double x, int lo, int n);

/* core.hist_bucket(x, lo, n) -> hist_bucket's answer (for specs). */
int hist_global_bucket(lua_State *L);

/* core.recorder(wait_lo, wait_hi, hold_lo, hold_hi, ratio_lo, ratio_hi):
 * a client's counters and histograms (redislock.metrics). */
int hist_global_recorder(lua_State *L);

/* Creates the recorder's metatable in the registry. Stack: unchanged. */
void hist_register(lua_State *L);

#endif
