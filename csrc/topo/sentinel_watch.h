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
 *     them asks the sentinels again at once;
 *   - asks them once a second anyway (a missed message, a sentinel that was
 *     down), and every 100 ms while in doubt;
 *   - is asked at once (sentinel_watch_kick) when anyone casts a doubt.
 * Each ask is one sentinel_pass (sentinel.h): a confirmed master is
 * published (the watchdog and the routers follow it), a doubt marks the
 * topology so that nobody writes until it is lifted (topo.h).
 *
 * The thread is the topology's, started on first use (topo_follow), holds
 * no reference to it, and is stopped and joined when the topology is freed.
 * Created with every signal masked; it blocks only in its own sockets and
 * poll(2), never holding the topology's mutex while it waits. After fork
 * the child has no such thread: the next use starts one (its inherited
 * sockets were closed by conn_fork.c).
 */
#ifndef REDISLOCK_SENTINEL_WATCH_H
#define REDISLOCK_SENTINEL_WATCH_H

#include "topo.h"

typedef struct sentinel_watch sentinel_watch;

/* Starts following t (t's mutex held by the caller). NULL when the thread
 * or its eventfd cannot be made: the topology then learns of a failover
 * only from its connections' errors, as before. */
sentinel_watch *sentinel_watch_start(topo *t);
/* Whether sw's thread runs in this process (not a fork child's copy). */
int sentinel_watch_ours(const sentinel_watch *sw);
/* Asks the sentinels now, not at the next second. Never blocks. */
void sentinel_watch_kick(sentinel_watch *sw);
/* Stops and joins the thread, frees sw. */
void sentinel_watch_stop(sentinel_watch *sw);
/* In a fork child: frees sw without touching the parent's thread. */
void sentinel_watch_abandon(sentinel_watch *sw);

#endif
