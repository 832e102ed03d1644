/*
 * counters.h: what a connection counts for its owner (a router, the
 * watchdog), for client:stats(). No Lua here.
 *
 * A conn points at its owner's counters (NULL: nobody counts) and adds to
 * them in its owner's thread: a router's on the Lua side; the watchdog's
 * with the watchdog's mutex held, in its thread, or on the Lua side when
 * wd_check_path swaps in a conn it connected (that conn's own first
 * handshake, made without the mutex, counts nothing). So plain increments
 * suffice, and a reader takes the owner's mutex (or is its thread).
 */
#ifndef REDISLOCK_COUNTERS_H
#define REDISLOCK_COUNTERS_H

#include <stdint.h>

struct conn;

typedef struct conn_counters {
    uint64_t reconnects;        /* handshakes completed by a conn that had
                                   completed one before (its connection was
                                   lost and made again) */
    uint64_t noscript_reloads;  /* scripts sent again as EVAL after NOSCRIPT */
    /* Called at each reconnect, in the conn's thread (see above), with how
     * many connects it took since the last handshake; may be NULL. */
    void (*on_reconnect)(void *ud, const struct conn *c, unsigned attempts);
    void *ud;
} conn_counters;

/* conn_handshake.c calls it when a handshake completes. */
void conn_note_up(struct conn *c);
/* fresh, just connected, takes the place of old (the same node's): if old
 * had been connected, that was a reconnect. In old's owner's thread. */
void conn_note_replaced(struct conn *fresh, const struct conn *old);
/* Wherever a NOSCRIPT reply makes us send the script again. */
void conn_note_noscript(struct conn *c);

#endif
