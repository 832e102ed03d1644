/*
 * watchdog.h: one background thread per client that renews held leases and
 * notices when one is lost. No Lua here: the thread never sees a lua_State
 * and never uses the Lua allocator; everything it shares with the Lua side
 * is plain C under one mutex.
 */
#ifndef REDISLOCK_WATCHDOG_H
#define REDISLOCK_WATCHDOG_H

#include <stddef.h>
#include <stdint.h>
#include "conn.h"

typedef struct wd wd;

/* What a watched lock's state is. WD_HELD while renewals succeed; every
 * other value is final and names why the lease is no longer ours. */
enum wd_state {
    WD_HELD = 0,
    WD_NOT_HELD,      /* Redis said the key is gone or someone else's */
    WD_UNREACHABLE,   /* renewals failed until the lease ran out */
    WD_EXPIRED,       /* the lease ran out before a renewal was sent (paused process) */
    WD_MAX_HOLD,      /* held for max_hold: renewals stopped on purpose */
    WD_FORKED,        /* this process is a fork of the holder */
    WD_STOPPED,       /* the client was closed: no more renewals */
    WD_STATE_COUNT
};

typedef struct wd_stats {
    uint64_t renewals;       /* extend scripts sent */
    uint64_t round_trips;    /* pipelines sent (one read phase each) */
    uint64_t failures;       /* renewals that got no usable answer */
    uint64_t lost[WD_STATE_COUNT]; /* losses reported, by state */
    uint64_t watched;        /* locks registered now */
    uint64_t last_batch;     /* locks in the most recent pipeline */
} wd_stats;

/* A watchdog for the endpoint in cfg (copied). The thread starts lazily at
 * the first watched lock. NULL when out of memory. Reference count 1. */
wd *wd_new(const conn_config *cfg);
void wd_retain(wd *w);
/* Drops a reference; the last one stops and joins the thread and frees all. */
void wd_release(wd *w);

/* Stops renewing (client closed): joins the thread; entries keep their
 * state, and anything still held becomes WD_STOPPED once its lease ends. */
void wd_stop(wd *w);

/* Registers a held lock: key/token as stored, ttl_ms the lease to renew to,
 * lease_end_ms the monotonic time until which the lease is surely ours,
 * hold_until_ms 0 or the monotonic time after which renewals stop. Returns 0
 * and the id, or -1 (no memory, thread could not start, stopped) with a
 * message in errbuf. */
int wd_watch(wd *w, const char *key, size_t klen, const char *token, size_t toklen,
             int64_t ttl_ms, int64_t lease_end_ms, int64_t hold_until_ms,
             uint64_t *id, char *errbuf, size_t errlen);

/* Unregisters a lock. Returns only when no renewal of it is in flight, so
 * nothing for this lock reaches Redis after the call. No network I/O. */
void wd_unwatch(wd *w, uint64_t id);

/* The lock's state, judged now; *lease_end_ms gets its lease end. */
int wd_status(wd *w, uint64_t id, int64_t *lease_end_ms);

/* The Lua side extended the lease itself with an extend sent at sent_ms:
 * adopt the new ttl and lease end (the earlier end if a renewal raced it). */
void wd_renewed(wd *w, uint64_t id, int64_t ttl_ms, int64_t lease_end_ms, int64_t sent_ms);

/* Moves up to max pending loss reports into ids/states; returns how many.
 * Also drains the notification fd. */
int wd_take_losses(wd *w, uint64_t *ids, int *states, int max);

/* An fd that becomes readable when a loss is pending (eventfd). */
int wd_fd(wd *w);

void wd_get_stats(wd *w, wd_stats *out);

/* "held", "not held", "unreachable", ... */
const char *wd_state_name(int state);

#endif
