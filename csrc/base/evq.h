/*
 * evq.h: a bounded queue of events for the Lua side's on_event (a renewal
 * that failed, a connection made again), as plain C structs. No Lua here,
 * and no lock of its own: its owner's mutex guards it (the watchdog's), or
 * its owner's thread is the only one using it (the client's).
 *
 * Off until evq_enable (the events exist for on_event only, and cost
 * nothing without it). Full, it drops the oldest event and counts it: a
 * stalled Redis under 10,000 locks must not grow memory without bound.
 */
#ifndef REDISLOCK_EVQ_H
#define REDISLOCK_EVQ_H

#include <stdint.h>

enum ev_kind { EV_RENEWAL_FAILED = 1, EV_RECONNECT };

typedef struct ev {
    int kind;
    uint64_t id;            /* renewal_failed: the lock's watch id */
    int64_t ms;             /* renewal_failed: ms left of its lease (<= 0: none) */
    unsigned attempts;      /* reconnect: connects it took */
    char node[96];          /* reconnect: "host:port" or a socket path */
} ev;

typedef struct evq {
    ev *q;                  /* ring, oldest at head; NULL while off */
    unsigned head, n, cap;
    uint64_t dropped;       /* events dropped because it was full */
} evq;

#define EVQ_CAP 256

/* Turns it on with room for EVQ_CAP events. 0, or -1 when out of memory. */
int evq_enable(evq *q);
/* The slot for a new event (zeroed), dropping the oldest when full; NULL
 * while off. */
ev *evq_push(evq *q);
/* Moves up to max events out, oldest first; returns how many. */
unsigned evq_take(evq *q, ev *out, unsigned max);
void evq_free(evq *q);

#endif
