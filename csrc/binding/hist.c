/*
 * hist.c: what redislock.metrics counts on every acquire and release, in
 * C because it runs on the hot path: one call per grant and one per
 * release, where Lua took a dozen table updates, a logarithm and the calls
 * around them.
 *
 * Histograms have log2 buckets; frexp gives a value's exponent exactly,
 * so a value at a power of two lands in its own bucket. The recorder keeps
 * the counters of the grants and holds (acquires, waits, releases, holds,
 * busy, timeouts, errors, extends) and three histograms (wait time, hold
 * time, hold/ttl); metrics.lua keeps the cold ones (losses by reason) and
 * turns read() into stats().
 */
#include "binding/hist.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "lauxlib.h"
#include "binding/compat.h"
#include "base/monotime.h"
#include "binding/udata.h"

#define RECORDER_MT "redislock.recorder"
#define HIST_MAX 64                 /* bounds per histogram, at most */

int hist_bucket(double x, int lo, int n) {
    int e, k;
    double m;
    if (x != x || x > DBL_MAX) return n + 1;     /* NaN, +Inf */
    if (x <= 0) return 1;
    m = frexp(x, &e);               /* x = m * 2^e, 0.5 <= m < 1 */
    k = m == 0.5 ? e - 1 : e;       /* the least k with x <= 2^k */
    if (k <= lo) return 1;
    if (k > lo + n - 1) return n + 1;
    return k - lo + 1;
}

int hist_global_bucket(lua_State *L) {
    double x = (double)luaL_checknumber(L, 1);
    lua_Integer lo = luaL_checkinteger(L, 2), n = luaL_checkinteger(L, 3);
    luaL_argcheck(L, n >= 1 && n <= 1024 && lo > -1000 && lo < 1000, 3, "bad layout");
    lua_pushinteger(L, hist_bucket(x, (int)lo, (int)n));
    return 1;
}

/* ---- the recorder --------------------------------------------------------- */

typedef struct hist {
    int lo, n;                      /* bounds 2^lo .. 2^(lo+n-1) */
    double sum;
    lua_Integer count[HIST_MAX + 1];  /* count[i - 1]: bucket i */
} hist;

typedef struct recorder {
    udata_tag tag;                  /* (udata.h) */
    lua_Integer acquires, busy, timeouts, errors, waits, releases, extends, holds;
    hist wait, hold, ratio;
} recorder;

static void hist_observe(hist *h, double x) {
    h->sum += x;
    h->count[hist_bucket(x, h->lo, h->n) - 1]++;
}

static void hist_layout(lua_State *L, hist *h, int arg) {
    lua_Integer lo = luaL_checkinteger(L, arg), hi = luaL_checkinteger(L, arg + 1);
    luaL_argcheck(L, lo > -1000 && hi < 1000 && hi >= lo && hi - lo < HIST_MAX, arg, "bad layout");
    h->lo = (int)lo;
    h->n = (int)(hi - lo + 1);
}

int hist_global_recorder(lua_State *L) {
    recorder *r = (recorder *)udata_new(L, sizeof(recorder), UDATA_RECORDER, RECORDER_MT);
    hist_layout(L, &r->wait, 1);
    hist_layout(L, &r->hold, 3);
    hist_layout(L, &r->ratio, 5);
    return 1;
}

static recorder *rec_check(lua_State *L) {
    return (recorder *)udata_check(L, 1, UDATA_RECORDER, sizeof(recorder), RECORDER_MT);
}

/* rec:acquired(t_call, retries) -> now: an acquire that began at t_call
 * (core.monotime) was granted now, after `retries` failed attempts. */
static int rec_acquired(lua_State *L) {
    recorder *r = rec_check(L);
    double t_call = (double)luaL_checknumber(L, 2);
    lua_Integer retries = luaL_checkinteger(L, 3);
    double now = monotime_seconds();
    r->acquires++;
    r->holds++;
    if (retries > 0) r->waits++;
    hist_observe(&r->wait, now - t_call);
    lua_pushnumber(L, now);
    return 1;
}

/* rec:hold_end(granted_at, ttl, released) -> held: a hold granted at
 * granted_at (what acquired returned) ended now; released: by a release
 * (counted as one). */
static int rec_hold_end(lua_State *L) {
    recorder *r = rec_check(L);
    double t0 = (double)luaL_checknumber(L, 2);
    double ttl = (double)luaL_checknumber(L, 3);
    double held = monotime_seconds() - t0;
    if (lua_toboolean(L, 4)) r->releases++;
    r->holds--;
    hist_observe(&r->hold, held);
    hist_observe(&r->ratio, ttl > 0 ? held / ttl : HUGE_VAL);
    lua_pushnumber(L, held);
    return 1;
}

/* rec:add(counter): one more of "busy", "timeouts", "errors", "waits",
 * "releases" or "extends". */
static int rec_add(lua_State *L) {
    static const char *const names[] = {"busy", "timeouts", "errors", "waits", "releases", "extends", NULL};
    recorder *r = rec_check(L);
    lua_Integer *const fields[] = {&r->busy, &r->timeouts, &r->errors, &r->waits, &r->releases, &r->extends};
    (*fields[luaL_checkoption(L, 2, NULL, names)])++;
    return 0;
}

static void push_hist(lua_State *L, const hist *h) {
    int i;
    lua_createtable(L, h->n + 1, 1);
    for (i = 0; i <= h->n; i++) {
        lua_pushinteger(L, h->count[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_pushnumber(L, h->sum);
    lua_setfield(L, -2, "sum");
}

/* rec:read() -> { acquires =, busy =, timeouts =, errors =, waits =,
 *   releases =, extends =, holds =, wait = h, hold = h, ratio = h }
 * h: { sum = s, [1] .. [n + 1] = bucket counts } */
static int rec_read(lua_State *L) {
    recorder *r = rec_check(L);
    lua_createtable(L, 0, 11);
#define FIELD(f) (lua_pushinteger(L, r->f), lua_setfield(L, -2, #f))
    FIELD(acquires); FIELD(busy); FIELD(timeouts); FIELD(errors);
    FIELD(waits); FIELD(releases); FIELD(extends); FIELD(holds);
#undef FIELD
    push_hist(L, &r->wait);
    lua_setfield(L, -2, "wait");
    push_hist(L, &r->hold);
    lua_setfield(L, -2, "hold");
    push_hist(L, &r->ratio);
    lua_setfield(L, -2, "ratio");
    return 1;
}

/* __gc: untag (udata.h). */
static int rec_gc(lua_State *L) {
    udata_untag(L, 1, UDATA_RECORDER, sizeof(recorder));
    return 0;
}

static const luaL_Reg rec_methods[] = {
    {"acquired", rec_acquired},
    {"hold_end", rec_hold_end},
    {"add", rec_add},
    {"read", rec_read},
    {NULL, NULL}
};

void hist_register(lua_State *L) {
    luaL_newmetatable(L, RECORDER_MT);   /* mt */
    lua_pushcfunction(L, rec_gc);
    lua_setfield(L, -2, "__gc");
    luaL_newlib(L, rec_methods);         /* mt, methods */
    lua_setfield(L, -2, "__index");      /* mt */
    lua_pop(L, 1);
}
