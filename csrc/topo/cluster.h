/*
 * cluster.h: Redis Cluster's slot map and redirects. No Lua here.
 *
 * The map comes from CLUSTER SLOTS, asked of the nodes we know and then of
 * the seeds, loaded at connect and again on MOVED. Redirects:
 *   -MOVED slot host:port   the slot lives elsewhere for good: refresh the map
 *   -ASK slot host:port     this one command goes there, after ASKING
 *   -TRYAGAIN               a multi-key command during resharding: retry later
 *   -CLUSTERDOWN            a clear error
 */
#ifndef REDISLOCK_CLUSTER_H
#define REDISLOCK_CLUSTER_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis.h>

#include "topo.h"

/* Loads the slot map into a snapshot before deadline. 0, or -1 with err. */
int cluster_load(topo *t, int may_resolve, int64_t deadline, topo_snap **out,
                 char *err, size_t errlen, const char **kind);

/* A CLUSTER SLOTS reply (asked of `asked`, whose host stands in for an
 * empty one) as a snapshot. NULL with err when it is malformed. */
topo_snap *cluster_parse_slots(const redisReply *r, const topo_node *asked, char *err, size_t errlen);

enum cluster_redirect { CLUSTER_NONE = 0, CLUSTER_MOVED, CLUSTER_ASK, CLUSTER_TRYAGAIN,
                        CLUSTER_DOWN, CLUSTER_READONLY };

/* What an error reply asks for; for MOVED and ASK, *target gets the node
 * (the caller clears it). */
int cluster_redirect_of(const redisReply *r, topo_node *target);

#endif
