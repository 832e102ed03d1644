/*
 * cluster.h: Redis Cluster's slot map and redirects. No Lua here.
 *
 * The map comes from CLUSTER SLOTS, asked of the nodes we know and then of
 * the seeds, loaded at connect and again on MOVED. The redirects (MOVED,
 * ASK, TRYAGAIN, CLUSTERDOWN) and what each asks for are recovery.h's.
 */
#ifndef REDISLOCK_CLUSTER_H
#define REDISLOCK_CLUSTER_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis.h>

#include "topo/topo_node.h"

/* Loads the slot map into a snapshot before deadline, asking first the
 * nodes of cur (the topology's current snapshot, held by the caller; NULL:
 * none yet), then src's seeds. 0, or -1 with err. */
int cluster_load(const topo_src *src, const topo_snap *cur, int may_resolve, int64_t deadline, topo_snap **out,
                 char *err, size_t errlen, const char **kind);

/* The map as node `asked` gave it: its CLUSTER SLOTS reply and its CLUSTER
 * NODES reply (NULL, or an error: an ACL may refuse it; then CLUSTER SLOTS'
 * replica counts stand). NULL with err (Redis' refusal, a malformed
 * reply). Both drivers' (cluster_load here; the cosockets',
 * client_request.c). */
topo_snap *cluster_snap_of(const redisReply *slots, const redisReply *nodes, const topo_node *asked, char *err,
                           size_t errlen);

/* A CLUSTER SLOTS reply (asked of `asked`, whose host stands in for an
 * empty one) as a snapshot. NULL with err when it is malformed. */
topo_snap *cluster_parse_slots(const redisReply *r, const topo_node *asked, char *err, size_t errlen);

/* Each master of s counts the replicas that CLUSTER NODES' text lists for
 * it (those not marked fail), when more than CLUSTER SLOTS listed: a
 * failover could promote one in its place (topo_node.replicas). */
void cluster_count_replicas(topo_snap *s, const char *text, size_t len);

#endif
