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
 *             happens by a thread of the topology's (sentinel_watch.c)
 *   cluster   the slot map from CLUSTER SLOTS (cluster.c)
 *   redlock   independent masters, each with its own address and
 *             credentials, every key on all of them (a quorum decides)
 */
#ifndef REDISLOCK_TOPO_H
#define REDISLOCK_TOPO_H

#include <pthread.h>
#include <stdint.h>

#include "conn.h"
#include "sock.h"

enum topo_mode { TOPO_SINGLE = 0, TOPO_SENTINEL, TOPO_CLUSTER, TOPO_REDLOCK };

#define TOPO_NO_NODE 0xffff
#define TOPO_MAX_NODES 1024

typedef struct topo_node {
    char *host;             /* TCP host, or NULL for a unix socket */
    int port;
    char *path;             /* unix socket, or NULL */
    sock_addrs addrs;       /* resolved (n == 0: not yet) */
    int own_auth;           /* redlock: username, password, db and tls
                               below are this node's, not the topology's */
    char *username, *password;
    int db;
    tls_ctx *tls;           /* (own_auth) its TLS settings, or NULL: plain */
} topo_node;

typedef struct topo_snap {
    uint64_t epoch;
    int refs;               /* under the topology's mutex */
    int nnodes;
    topo_node *nodes;
    uint16_t *slot_node;    /* cluster: node index per slot, TOPO_NO_NODE if
                               unassigned; NULL otherwise (node 0) */
    long long config_epoch; /* sentinel: the config-epoch the master was named
                               with (-1: unknown); 0 otherwise */
    uint64_t load_seq;      /* sentinel: which load found it (topo's loads) */
} topo_snap;

typedef struct topo {
    pthread_mutex_t mu;
    int mode;
    topo_snap *cur;
    uint64_t epoch;         /* cur->epoch, readable without the mutex */
    conn_config cfg;        /* credentials, db and timeouts for every node */
    topo_node *seeds;       /* sentinels, or cluster seed nodes */
    int nseeds;
    char *master;           /* sentinel: the master's name */
    char *sentinel_user, *sentinel_pass;
    tls_ctx *sentinel_tls;  /* how the sentinels are reached (NULL: plain) */
    uint64_t refreshes;     /* topology changes published */
    uint64_t refresh_failures;
    int refs;
    /* Sentinel: whether the current master may be written to. Cleared by
     * topo_doubt (a failure on its connection, a failover under way) and
     * set again only by a load that began after the last doubt; while it
     * is clear nobody sends to that node (router.c refreshes first, the
     * watchdog holds its renewals). Read without the mutex (atomics). */
    int confirmed;
    uint64_t doubts;        /* topo_doubt calls that cleared it */
    uint64_t loads;         /* sentinel loads begun (their load_seq) */
    uint64_t confirms;      /* times it was set again after a doubt */
    struct sentinel_watch *watch;   /* the follower thread, or NULL */
    void (*listener)(void *);       /* told of every change (the watchdog) */
    void *listener_arg;
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
 * master being demoted). */
uint64_t topo_doubts(const topo *t);
/* Sentinel: the master of snapshot `epoch` failed us (a timeout, a reset,
 * a refused connect, READONLY) or a failover is under way (epoch 0: the
 * current one): nobody writes to it until the sentinels confirm a master
 * again; the follower thread is asked at once. */
void topo_doubt(topo *t, uint64_t epoch);
/* Sentinel: starts the follower thread if this process has none (after a
 * fork too). Other modes: nothing. */
void topo_follow(topo *t);
/* Whether a follower thread runs for t in this process. */
int topo_following(const topo *t);
/* One pass over the sentinels, as the follower thread makes it every
 * second (on its pool of connections, sentinel.h): publishes a confirmed
 * master, or casts a doubt. */
struct sentinel_pool;
void topo_recheck(topo *t, struct sentinel_pool *pool);
/* fn(arg) is called (under the topology's mutex: it must only wake a
 * thread) after every change of snapshot or of confirmation. fn NULL: none. */
void topo_set_listener(topo *t, void (*fn)(void *), void *arg);

/* The node of a key in snapshot s: an index, or -1 when its slot has no
 * node (a cluster still being set up). */
int topo_node_of(const topo_snap *s, const char *key, size_t len);

/* Resolves a node's address if not done (may block until deadline). */
int topo_node_resolve(topo_node *n, int may_resolve, int64_t deadline, char *err, size_t errlen);

/* A blocking conn to TCP node n with base's settings (its host, port and
 * path replaced by n's), budgeted to end by deadline and by max_ms from
 * now; n resolved first (as may_resolve allows), the conn never resolving
 * again. NULL with err. For the loads' short exchanges (sentinel.c,
 * cluster.c). */
conn *topo_node_conn(topo_node *n, const conn_config *base, int may_resolve, int64_t deadline, long max_ms,
                     char *err, size_t errlen);

/* "host:port" / path of a node, for messages. */
void topo_node_describe(const topo_node *n, char *buf, size_t len);

/* A deep copy of a node (addresses and credentials included). 0, or -1. */
int topo_node_dup(topo_node *dst, const topo_node *src);

/* Redlock: adds a master (deep-copied) to the topology's fixed list. */
int topo_add_seed(topo *t, const topo_node *n);

/* The settings to connect to node n: its own credentials (redlock) or
 * the topology's; database 0 in a cluster. Strings are borrowed. */
void topo_node_config(const topo *t, const topo_node *n, conn_config *out);

/* Parses "host:port", "[v6]:port" or "v6:port" (the last colon) into a
 * node. 0, or -1. */
int topo_node_parse(const char *s, size_t len, topo_node *out);
void topo_node_clear(topo_node *n);
int topo_node_same(const topo_node *a, const topo_node *b);

/* Snapshots, for sentinel.c and cluster.c: a new one with n nodes. */
topo_snap *topo_snap_new(int nnodes, int with_slots);
void topo_snap_free(topo_snap *s);
/* Publishes s as the current snapshot (takes ownership). */
void topo_publish(topo *t, topo_snap *s);

#endif
