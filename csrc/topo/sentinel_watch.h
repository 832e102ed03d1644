/*
 * sentinel_watch.h: a Sentinel topology's follower thread. No Lua here.
 *
 * Errors on our own connections tell of a failover too late: after
 * SENTINEL FAILOVER the old master answers as a master for seconds, and
 * whatever is granted or renewed there meanwhile is lost when Sentinel
 * demotes it. So each Sentinel topology has a thread that
 *   - subscribes on every sentinel to the events of a failover
 *     (+try-failover, before the replica is promoted; +switch-master,
 *     when the new configuration is taken; and a few more), and on any of
 *     them about our master casts a doubt at once (nothing is renewed or
 *     granted until a master is confirmed again) and asks the sentinels;
 *   - asks them once a second anyway (a missed message, a sentinel that was
 *     down), and every 100 ms while in doubt;
 *   - is asked at once (sentinel_watch_kick) when anyone casts a doubt.
 * Each ask is one sentinel_pass (sentinel.h), made by the topology when
 * the thread asks it to (sentinel_watch_owner's recheck): a confirmed
 * master is published (the watchdog and the routers follow it), a doubt
 * marks the topology so that nobody writes until it is lifted (topo.h).
 *
 * The thread is the topology's, started on first use (topo_follow), holds
 * no reference to it, and is stopped and joined when the topology is freed.
 * It knows of it only what it is handed at start: the sentinels and how to
 * reach them (topo_src, topo_node.h), and its owner's callbacks.
 * Created with every signal masked; it blocks only in poll(2) (its
 * subscriptions are made without blocking, and a pass asks every sentinel
 * at once: a hung sentinel costs it nothing), never holding the topology's
 * mutex while it waits. After fork
 * the child has no such thread: the next use starts one (its inherited
 * sockets were closed by conn_fork.c).
 */
#ifndef REDISLOCK_SENTINEL_WATCH_H
#define REDISLOCK_SENTINEL_WATCH_H

#include <stdint.h>

#include "topo/sentinel.h"
#include "topo/topo_node.h"

typedef struct sentinel_watch sentinel_watch;

/* What the thread asks of the topology that owns it (topo.c): each called
 * with ud, in the thread, without the topology's mutex. */
typedef struct sentinel_watch_owner {
    void *ud;
    /* One pass over the sentinels on the thread's pool of connections:
     * publishes a confirmed master, or casts a doubt. */
    void (*recheck)(void *ud, sentinel_pool *pool);
    /* A failover event of our master came: nothing may be written to
     * the master until a pass confirms one again (topo_doubt). */
    void (*doubt)(void *ud);
    /* Whether the master is confirmed (topo_confirmed). */
    int (*confirmed)(void *ud);
    /* The current snapshot's epoch, 0 before the first (topo_epoch). */
    uint64_t (*epoch)(void *ud);
} sentinel_watch_owner;

/* Starts following the sentinels of src, for owner (src and owner are
 * copied; the topology's mutex, src->mu, held by the caller). NULL when
 * the thread or its eventfd cannot be made: the topology then learns of a
 * failover only from its connections' errors, as before. */
sentinel_watch *sentinel_watch_start(const topo_src *src, const sentinel_watch_owner *owner);
/* Whether sw's thread runs in this process (not a fork child's copy). */
int sentinel_watch_ours(const sentinel_watch *sw);
/* Asks the sentinels now, not at the next second. Never blocks. */
void sentinel_watch_kick(sentinel_watch *sw);
/* Stops and joins the thread, frees sw. */
void sentinel_watch_stop(sentinel_watch *sw);
/* In a fork child: frees sw without touching the parent's thread. */
void sentinel_watch_abandon(sentinel_watch *sw);

#endif
