/*
 * topo.h: where a client's keys live. No Lua here.
 *
 * One topology object per client, shared by the Lua side and its watchdog
 * thread. It holds the node list and, for Cluster, the slot map, as
 * immutable snapshots with an epoch: a reader takes a reference to the
 * current snapshot (a few instructions under a mutex) and routes with it
 * without any lock; whoever sees a redirect, a refused master or a lost
 * connection asks for a refresh, which builds a new snapshot and publishes
 * it with the next epoch. Readers compare epochs to notice.
 *
 * Modes:
 *   single    one node, as configured (host:port or a unix socket)
 *   sentinel  the master named `master`, resolved through the sentinels
 *             (sentinel.c) again on every refresh, and followed as it
 *             happens by the topology's own thread (topo_thread.c)
 *   cluster   the slot map from CLUSTER SLOTS (cluster.c)
 *   redlock   independent masters, each with its own address and
 *             credentials, every key on all of them (a quorum decides)
 *
 * The nodes and snapshots themselves, and what the loads read of the
 * topology, are topo_node.h's.
 */
#ifndef REDISLOCK_TOPO_H
#define REDISLOCK_TOPO_H

#include <pthread.h>
#include <stdint.h>

#include "net/conn.h"
#include "exec/exec_conn.h"
#include "exec/topo_mode.h"
#include "topo/topo_node.h"


/* A watcher told of every change (a watchdog), in a list: clients that
 * share a topology each have theirs. */
typedef struct topo_listener {
    void (*fn)(void *);
    void *arg;
    struct topo_listener *next;
} topo_listener;

typedef struct topo {
    pthread_mutex_t mu;
    int mode;
    topo_snap *cur;
    uint64_t epoch;         /* cur->epoch, readable without the mutex */
    conn_config cfg;        /* credentials, db and timeouts for every node */
    exec_opts xopts;        /* native commands on its data nodes (exec_conn.h) */
    topo_node *seeds;       /* sentinels, or cluster seed nodes */
    int nseeds;
    char *master;           /* sentinel: the master's name */
    char *sentinel_user, *sentinel_pass;
    tls_ctx *sentinel_tls;  /* how the sentinels are reached (NULL: plain) */
    uint64_t refreshes;     /* topology changes published */
    uint64_t refresh_failures;
    int refs;
    char *share_key;        /* shared by clients configured the same (topo_share.c), or NULL */
    struct topo *next_topo; /* every topology of the process (topo_share.c) */
    /* Sentinel: whether the current master may be written to. Cleared by
     * topo_doubt (a failure on its connection, a failover under way) and
     * set again only by a load that began after the last doubt; while it
     * is clear nobody sends to that node (router.c refreshes first, the
     * watchdog holds its renewals). Read without the mutex (atomics). */
    int confirmed;
    uint64_t doubts;        /* topo_doubt calls that cleared it */
    uint64_t loads;         /* sentinel loads begun (their load_seq) */
    uint64_t confirms;      /* times it was set again after a doubt */
    struct topo_thread *thread;     /* its own thread (topo_thread.c), or NULL */
    topo_listener *listeners;       /* told of every change (the watchdogs) */
} topo;

/* A topology for cfg's endpoint in `mode`. seeds: "host:port" strings (the
 * sentinels or the cluster's seed nodes). Does no I/O: topo_refresh loads
 * it. NULL with a message in err. */
topo *topo_new(int mode, const conn_config *cfg, const char *const *seeds, int nseeds,
               const char *master, const char *sentinel_user, const char *sentinel_pass,
               char *err, size_t errlen);
/* Sentinel: the sentinels' TLS settings (retained; NULL: plain TCP). */
void topo_set_sentinel_tls(topo *t, tls_ctx *x);
void topo_retain(topo *t);
void topo_release(topo *t);

/* Sharing (topo_share.c): the topology that clients configured as `key`
 * share, with a reference, or NULL; t shared from now on as key (0, or -1:
 * out of memory). The key is the caller's: a string that differs whenever
 * anything t holds would (Sentinel and Cluster topologies only). */
topo *topo_shared(const char *key);
int topo_share(topo *t, const char *key);
/* The fork handlers for every topology's mutex (topo_share.c); called
 * by whoever registers handlers that must run before them (wd_fork.c). */
void topo_fork_init(void);

/* The current snapshot, with a reference; topo_snap_put gives it back. */
topo_snap *topo_snap_get(topo *t);
void topo_snap_put(topo *t, topo_snap *s);
uint64_t topo_epoch(const topo *t);

/* Builds and publishes a fresh snapshot before deadline, unless another
 * thread already published one after epoch `seen`. may_resolve: 0 in the
 * watchdog thread (names it cannot resolve are skipped). 0, or -1 with a
 * message in err and *kind ("connection", "timeout", "redis"). */
int topo_refresh(topo *t, uint64_t seen, int may_resolve, int64_t deadline,
                 char *err, size_t errlen, const char **kind);

/* Sentinel: is the current master confirmed (always 1 in other modes)? */
int topo_confirmed(const topo *t);
/* How many times a doubt was lifted: a watcher that saw it change renews
 * at once what it held back. */
uint64_t topo_confirms(const topo *t);
/* How many doubts were cast: an answer from a master read after this moved
 * since its request was sent is not to be trusted (it may come from a
 * master being demoted). Take it before asking topo_confirmed: a doubt cast
 * after a true answer then moves it (confirmed is cleared first). */
uint64_t topo_doubts(const topo *t);
/* Sentinel: the master of snapshot `epoch` failed us (a timeout, a reset,
 * a refused connect, READONLY) or a failover is under way (epoch 0: the
 * current one): nobody writes to it until the sentinels confirm a master
 * again; the follower thread is asked at once. */
void topo_doubt(topo *t, uint64_t epoch);
/* Sentinel: starts the thread that follows the sentinels if this process
 * has none (after a fork too). Other modes: nothing. */
void topo_follow(topo *t);
/* Whether that thread runs for t in this process. */
int topo_following(const topo *t);
/* Cluster: asks the topology's thread for a new map (started if need be),
 * without waiting for it: 1, or 0 when no thread can do it (other modes;
 * no thread could start): then topo_refresh, in the caller's time. */
int topo_load_async(topo *t);
/* fn(arg) is called (under the topology's mutex: it must only wake a
 * thread) after every change of snapshot or of confirmation, until
 * removed. 0, or -1: out of memory. */
int topo_add_listener(topo *t, void (*fn)(void *), void *arg);
void topo_remove_listener(topo *t, void (*fn)(void *), void *arg);

/* Redlock: adds a master (deep-copied) to the topology's fixed list. */
int topo_add_seed(topo *t, const topo_node *n);

/* The settings to connect to node n: its own credentials (redlock) or
 * the topology's; database 0 in a cluster. Strings are borrowed. */
void topo_node_config(const topo *t, const topo_node *n, conn_config *out);

/* Publishes s as the current snapshot (takes ownership). */
void topo_publish(topo *t, topo_snap *s);

#endif
