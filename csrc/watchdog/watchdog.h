/*
 * watchdog.h: one background thread per client that renews held leases and
 * notices when one is lost. No Lua here: the thread never sees a lua_State
 * and never uses the Lua allocator; everything it shares with the Lua side
 * is plain C under one mutex, and no call below waits for the network.
 */
#ifndef REDISLOCK_WATCHDOG_H
#define REDISLOCK_WATCHDOG_H

#include <stddef.h>
#include <stdint.h>
#include "net/conn.h"
#include "base/evq.h"
#include "topo/topo.h"

typedef struct wd wd;
struct script_def;

/* What a watched lock's state is. WD_HELD while renewals succeed; every
 * other value is final and names why the lease is no longer ours. */
enum wd_state {
    WD_HELD = 0,
    WD_NOT_HELD,      /* Redis said the key is gone or someone else's */
    WD_UNREACHABLE,   /* renewals went unanswered until the lease ran out */
    WD_EXPIRED,       /* the lease ran out before a renewal was sent (paused process) */
    WD_MAX_HOLD,      /* held for max_hold: renewals stopped on purpose */
    WD_FORKED,        /* this process is a fork of the holder */
    WD_STOPPED,       /* the client was closed: no more renewals */
    WD_STATE_COUNT
};

typedef struct wd_stats {
    uint64_t renewals;       /* extend scripts queued */
    uint64_t round_trips;    /* passes that queued renewals (one pipeline each) */
    uint64_t failures;       /* renewals that got no usable answer */
    uint64_t lost[WD_STATE_COUNT]; /* losses reported, by state */
    uint64_t watched;        /* locks registered now */
    uint64_t last_batch;     /* renewals in the most recent pass */
    uint64_t noscript_reloads; /* renewals sent again as EVAL after NOSCRIPT */
    uint64_t reconnects;     /* its connections made again after a loss */
    uint64_t events_dropped; /* events for on_event dropped (queue full) */
    uint64_t waits;          /* WAITs sent behind renewals (wd_ack.c) */
    uint64_t unacked;        /* renewals not credited: no replica acknowledged them */
} wd_stats;

/* A watchdog for the nodes of topology t (shared, and kept alive): one
 * connection per node it renews on, at the addresses the topology resolved
 * (the thread never resolves a name). The thread starts at the first
 * watched lock. NULL with a message in errbuf (no memory, no fd for its
 * eventfds). Reference count 1. */
wd *wd_new(topo *t, char *errbuf, size_t errlen);
void wd_retain(wd *w);
/* Drops a reference; the last one stops and joins the thread and frees all. */
void wd_release(wd *w);

/* Stops renewing (client closed): wakes and joins the thread at once;
 * entries keep their state, and anything still held becomes WD_STOPPED
 * once its lease ends. */
void wd_stop(wd *w);

/* The most keys one registration renews together (a set of
 * client:acquire_all: lockset.lua's MAX_NAMES). */
#ifndef WD_SET_MAX
#define WD_SET_MAX 16
#endif

/* A set's keys after its first (client:acquire_all), renewed with it in
 * one script: n of them, at most WD_SET_MAX - 1. */
typedef struct wd_keys {
    int n;
    const char *const *keys;
    const size_t *lens;
} wd_keys;

/* Registers a held lock: key/token as stored, ttl_ms the lease to renew to,
 * renew the script that renews it (KEYS[1] key, ARGV token and ttl ms,
 * answering 1 when renewed: extend for a lock key, extend_grant for a
 * reentrant one, zset_renew for a reader or a permit, rw_renew_reentrant
 * for a reentrant reader; NULL means extend). more: NULL, or a set's other
 * keys, all renewed by one call of renew, a variadic script (extend_all:
 * the count, the keys, token, ttl ms); not under Redlock;
 * lease_end_ms the monotonic time until which the lease is surely ours,
 * hold_until_ms 0 or the monotonic time after which renewals stop.
 * If the watchdog has no connection yet, one is made and checked now
 * (within connect_timeout), so a lock is only handed out with a working
 * renewal path. Returns 0 and the id, or -1 with a message in errbuf. */
int wd_watch(wd *w, const char *key, size_t klen, const wd_keys *more, const char *token, size_t toklen,
             int64_t ttl_ms, int64_t lease_end_ms, int64_t hold_until_ms,
             const struct script_def *renew, uint64_t *id, char *errbuf, size_t errlen);

/* The lock's `replicas`: where its renewals wait for replicas to earn
 * credit (a master a failover could replace, see wd_ack.c), they wait for
 * at least this many (at least 1 there in any case). */
void wd_set_replicas(wd *w, uint64_t id, int replicas);

/* Unregisters a lock. Never waits: no renewal of it is queued after the
 * call, and one queued but not yet begun to be written is taken back; one
 * already (partly) written completes on its own (a compare-and-expire on
 * our token, so it can never touch another holder's key). No network I/O. */
void wd_unwatch(wd *w, uint64_t id);

/* The lock's state, judged now; *lease_end_ms gets its lease end. */
int wd_status(wd *w, uint64_t id, int64_t *lease_end_ms);

/* The Lua side extended the lease itself with an extend sent at sent_ms:
 * adopt the new ttl and lease end (the earlier end if a renewal raced it,
 * and then renew at once to settle which PEXPIRE Redis ran last). */
void wd_renewed(wd *w, uint64_t id, int64_t ttl_ms, int64_t lease_end_ms, int64_t sent_ms);

/* Moves up to max pending loss reports into ids/states; returns how many.
 * Also drains the notification fd. */
int wd_take_losses(wd *w, uint64_t *ids, int *states, int max);

/* An fd that becomes readable when a loss is pending (eventfd), or -1 with
 * errno when none could be made (after a fork, fd exhaustion). */
int wd_fd(wd *w);

void wd_get_stats(wd *w, wd_stats *out);

/* Events for the Lua side's on_event (wd_events.c): renewals that failed
 * and reconnects of the watchdog's connections, queued as plain structs
 * (evq.h) from the moment wd_events_enable is called; the Lua side takes
 * them inside its own calls. 0, or -1 when out of memory. */
int wd_events_enable(wd *w);
/* Moves up to max pending events into out; returns how many. */
int wd_take_events(wd *w, ev *out, int max);

/* "held", "not held", "unreachable", ... */
const char *wd_state_name(int state);

#endif
