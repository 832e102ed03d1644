/*
 * sentinel_sub.h: a master's failover events, subscribed to on every
 * sentinel without blocking. No Lua here; no thread either: the
 * topology's thread (topo_thread.c) polls these sockets with its own.
 *
 * Errors on our own connections tell of a failover too late: after
 * SENTINEL FAILOVER the old master answers as a master for seconds, and
 * whatever is granted or renewed there meanwhile is lost when Sentinel
 * demotes it. So the topology subscribes on every sentinel to the events
 * of a failover (+try-failover, before the replica is promoted;
 * +switch-master, when the new configuration is taken; and a few more),
 * and on any of them about its master casts a doubt at once (nothing is
 * renewed or granted until a master is confirmed again) and asks the
 * sentinels.
 *
 * A subscription's connect, handshake and SUBSCRIBE are moved on as poll
 * says, and given up after half a second: a sentinel that is hung,
 * not dead, accepts the TCP connection and never answers, and must cost
 * the thread nothing. One that failed is subscribed again a second later.
 */
#ifndef REDISLOCK_SENTINEL_SUB_H
#define REDISLOCK_SENTINEL_SUB_H

#include <poll.h>
#include <stdint.h>

#include "topo/topo_node.h"

typedef struct sentinel_subs sentinel_subs;

/* Subscriptions to src's sentinels about src's master (src copied; its
 * seeds, master and credentials borrowed: they live as long as the
 * topology), none made yet. NULL: out of memory. */
sentinel_subs *sentinel_subs_new(const topo_src *src);
void sentinel_subs_free(sentinel_subs *ss);

/* Subscribes where due, gives up on those that hang: the next moment it
 * must be called again (ms, monotime_ms' clock), at the latest. */
int64_t sentinel_subs_tick(sentinel_subs *ss, int64_t now);

/* Puts its sockets in pfd (at most max): how many. */
int sentinel_subs_poll_fds(const sentinel_subs *ss, struct pollfd *pfd, int max);

/* After poll filled the n entries sentinel_subs_poll_fds put: 1 when an
 * event of our master's failover came (cast a doubt, ask now), else 0. */
int sentinel_subs_read(sentinel_subs *ss, const struct pollfd *pfd, int n);

#endif
