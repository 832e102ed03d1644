/*
 * sentinel.h: finding the master through Redis Sentinel. No Lua here.
 *
 * Whom to trust. Right after a failover the sentinels disagree for a
 * moment, and the old master goes on answering as a master for seconds
 * until Sentinel demotes it: the first sentinel to answer may still name
 * it, and ROLE on it still says "master". So a pass asks every sentinel
 * SENTINEL MASTER <name> and trusts an address only when
 *   - a majority of the configured sentinels answered (a lone stale
 *     sentinel must not win),
 *   - it is the one with the highest config-epoch among the answers
 *     (Sentinel's own rule: a failover's new configuration carries a
 *     higher epoch, and the answers of sentinels that have not heard of it
 *     yet are older), no other answer names another address at that epoch,
 *   - no sentinel reports a failover in progress for it (between the
 *     promotion of the replica and the switch both nodes are masters, and
 *     what is written on the old one is lost),
 *   - and ROLE on that node says "master".
 * Anything else is a doubt: sentinel_load asks again after a short pause
 * until its deadline; the topology's thread (topo_thread.c) marks the
 * topology in doubt so that nobody writes to a master not confirmed.
 *
 * A sentinel whose ACL refuses SENTINEL MASTER is asked
 * SENTINEL GET-MASTER-ADDR-BY-NAME instead; its answer has no epoch (it
 * counts below any epoch, and cannot tell of a failover in progress).
 */
#ifndef REDISLOCK_SENTINEL_H
#define REDISLOCK_SENTINEL_H

#include <stddef.h>
#include <stdint.h>

#include "topo/topo_node.h"

enum sentinel_verdict {
    SENTINEL_OK = 0,     /* *out is the confirmed master */
    SENTINEL_DOUBT,      /* a failover under way, a disagreement, or the named
                            node is not a master (yet): ask again soon */
    SENTINEL_FAIL        /* too few sentinels answered, or none knows the name */
};

/* Connections kept from one pass to the next (the follower thread asks
 * every second): one per sentinel, and one to the master asked ROLE. */
typedef struct sentinel_pool sentinel_pool;
sentinel_pool *sentinel_pool_new(int nseeds);
void sentinel_pool_free(sentinel_pool *p);

/* One pass over src's sentinels (each asked within at most the connect
 * timeout, all before deadline), on pool's connections (NULL: new ones,
 * closed after): a verdict, with err and *kind when not OK. */
int sentinel_pass(const topo_src *src, sentinel_pool *pool, int may_resolve, int64_t deadline, topo_snap **out,
                  char *err, size_t errlen, const char **kind);

/* A new, unconnected conn to sentinel s (resolved: s->addrs) with the
 * sentinels' credentials and TLS, timeout_ms for its connect and for each
 * reply. NULL when out of memory. */
conn *sentinel_seed_conn(const topo_src *src, const topo_node *s, long timeout_ms);

/* Passes until one confirms a master or deadline: 0 with *out, or -1 with
 * err ("no sentinel reachable (...)", "master name unknown: ...", or, when
 * the deadline came during a doubt, "no master confirmed yet (failover in
 * progress: ...)", "no master confirmed yet (master not confirmed at ...)")
 * and *kind. */
int sentinel_load(const topo_src *src, int may_resolve, int64_t deadline, topo_snap **out,
                  char *err, size_t errlen, const char **kind);

#endif
