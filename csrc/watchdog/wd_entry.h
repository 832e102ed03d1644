/* wd_entry.h: one lock the watchdog renews. No Lua here.
 * Every field is read and written under its watchdog's mutex. */
#ifndef REDISLOCK_WD_ENTRY_H
#define REDISLOCK_WD_ENTRY_H

struct script_def;

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define WD_TOKEN_MAX 64
#ifndef WD_SET_MAX
/* The most keys one entry renews together (a set of client:acquire_all:
 * lockset.lua's MAX_NAMES): its first key, and the rest in `more`
 * (watchdog.h says it too, for the binding). */
#define WD_SET_MAX 16
#endif

typedef struct wd_entry {
    uint64_t id;
    char *key;          /* right after the entry, in its block (wd_watch) */
    size_t klen;
    int nmore;          /* a set's keys after the first (0: one key); they
                           follow the first in the block, more[i] each, and
                           its renewal script (e->renew) takes them all */
    const char *more[WD_SET_MAX - 1];
    size_t more_lens[WD_SET_MAX - 1];
    char token[WD_TOKEN_MAX];
    size_t toklen;
    int64_t ttl_ms;         /* the lease each renewal asks for */
    int64_t ttl_txt_of;     /* the ttl_ms ttl_txt spells (0: none yet) */
    char ttl_txt[24];       /* ttl_ms in decimal, written once per ttl */
    size_t ttl_txt_len;
    int64_t next_at;        /* monotonic ms of the next renewal */
    int64_t slack;          /* may be renewed this much early, to share a
                               round trip: half its renewal interval */
    int64_t lease_end;      /* monotonic ms until which the lease is surely ours */
    int64_t hold_until;     /* 0, or when max_hold stops renewals */
    pid_t pid;              /* the process that registered it */
    int state;              /* WD_HELD or the reason it was lost */
    int failing;            /* the last renewal got no usable answer */
    int queued;             /* requests of its renewal waiting for a reply
                               (one; Redlock: one per master) */
    uint32_t round;         /* which renewal its requests belong to: answers
                               to an older one (Redlock went on without
                               them) are only counted off */
    int r_ok, r_no, r_fail; /* this renewal's answers so far: renewed, not
                               held, no usable answer (Redlock counts a
                               majority; elsewhere there is one) */
    int contested;          /* Redlock: a master answered "someone else's"
                               (a rival's attempt, most often) since this
                               renewal was sent: the next comes sooner, to
                               take that master back (wd_contested) */
    int64_t flight_end;     /* the lease end that renewal gives if it succeeds */
    int orphaned;           /* unwatched while queued: freed once the
                               renewal is answered or its link dropped */
    int raced;              /* the Lua side extended it while queued */
    int64_t last_done;      /* when the last renewal answer was applied */
    int slot;               /* its key's Cluster slot (-1: not a cluster) */
    const struct script_def *renew;   /* its renewal script (NULL: extend) */
    int replicas;           /* the lock's `replicas`: where a renewal waits
                               for replicas (wd_ack.c), at least this many */
    int heap_pos;           /* index in the heap, -1 when not scheduled */
} wd_entry;

#endif
