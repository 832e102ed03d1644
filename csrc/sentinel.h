/*
 * sentinel.h: finding the master through Redis Sentinel. No Lua here.
 *
 * The sentinels are tried in turn, each with a short timeout; the first
 * that answers moves to the front for next time. It is asked
 * SENTINEL GET-MASTER-ADDR-BY-NAME; the address it gives is confirmed with
 * ROLE on that node (right after a failover a sentinel may still name the
 * old master, now a replica), retried after a short pause until it says
 * master or the deadline passes. Subscribing to +switch-master would only
 * be a speed-up: every reconnect, READONLY answer, refused connection and
 * killed connection (Sentinel kills clients on reconfiguration) resolves
 * again, and that is the mechanism.
 */
#ifndef REDISLOCK_SENTINEL_H
#define REDISLOCK_SENTINEL_H

#include <stddef.h>
#include <stdint.h>

#include "topo.h"

/* Resolves t's master into a one-node snapshot before deadline. 0, or -1
 * with err ("no sentinel reachable: ...", "master name unknown: ...",
 * "master not confirmed: ...") and *kind. */
int sentinel_load(topo *t, int may_resolve, int64_t deadline, topo_snap **out,
                  char *err, size_t errlen, const char **kind);

#endif
