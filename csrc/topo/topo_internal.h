/*
 * topo_internal.h: what topo.c, topo_view.c and the topology's thread
 * (topo_thread.c) share of a topology's insides. Not for other files.
 */
#ifndef REDISLOCK_TOPO_INTERNAL_H
#define REDISLOCK_TOPO_INTERNAL_H

#include "topo/topo.h"

typedef struct topo_thread topo_thread;

/* ---- topo_view.c: what the topology shows ----------------------------- */

/* What the loads and the thread read of t (topo_node.h), with t->mu held. */
void topo_src_of(topo *t, topo_src *src);

/* Publishes s (taken) as the answer of a load that began with t->doubts at
 * gen: a doubt cast since wins (topo_view.c says how). */
void topo_publish_as(topo *t, topo_snap *s, uint64_t gen);

/* Casts the doubt about snapshot epoch (0: the current one), with t->mu
 * held / taking it; the thread is not asked to look (topo_doubt asks it:
 * the thread itself doubts by these). Sentinel only: topo_doubt_as
 * returns at once for another mode, topo_doubt_locked leaves that check
 * to its caller. */
void topo_doubt_locked(topo *t, uint64_t epoch);
void topo_doubt_as(topo *t, uint64_t epoch);

/* ---- topo_share.c: the list of every topology ------------------------- */

/* In the list (topo_new), out of it (topo_release, before freeing). */
void topo_list_add(topo *t);
void topo_list_remove(topo *t);

/* ---- topo_thread.c: the topology's own thread -------------------------- */

/* Starts t's thread if this process has none (after a fork, a new one:
 * the parent's is not here), with t->mu held. */
void topo_thread_ensure(topo *t);
/* Asks it to act now: Sentinel, a pass over the sentinels; Cluster, a new
 * map. With t->mu held. */
void topo_thread_kick(topo *t);
/* Whether it runs in this process. */
int topo_thread_ours(const topo *t);
/* Stops and joins it (the topology is going), or forgets a fork child's
 * copy of the parent's. Without t->mu. */
void topo_thread_stop(topo *t);

#endif
