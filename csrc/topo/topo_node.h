/*
 * topo_node.h: a topology's nodes and snapshots, and what its loads read
 * of it. No Lua here.
 *
 * The data that the topology (topo.h) publishes and that its loads build:
 * a node (an address, resolved once), a snapshot (the nodes and, for
 * Cluster, the slot map, immutable once published), and the functions of
 * one node. The loads (sentinel.c, cluster.c) and the subscriptions to
 * the sentinels (sentinel_sub.c) build on this alone: what they need of
 * the topology they are handed (topo_src), so that the topology sits
 * above them.
 */
#ifndef REDISLOCK_TOPO_NODE_H
#define REDISLOCK_TOPO_NODE_H

#include <pthread.h>
#include <stdint.h>

#include "net/conn.h"
#include "net/sock.h"

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
    int replicas;           /* a master's replicas that a failover could
                               promote in its place (Sentinel: those the
                               sentinels know, once one was seen to follow
                               it; Cluster: CLUSTER SLOTS'), -1 unknown, 0
                               none (or not asked): where renewals wait for
                               a replica's acknowledgement (wd_ack.c) */
    int replicas_known;     /* Sentinel: the replicas the sentinels could promote
                               (not down), num-slaves when they did not list
                               them (-1: unknown) */
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

/* What a load (sentinel.c, cluster.c) and the subscriptions
 * (sentinel_sub.c) read of their topology: its own fields, which the
 * topology (topo_view.c) copies in here with its mutex held. All borrowed: the
 * topology outlives its loads and stops its thread before it goes. Fixed
 * once the topology is set up, but for the seeds' addresses: the seeds
 * live as long as the topology and are never moved (the order is the
 * user's); only their addresses are filled in, under *mu, by whoever
 * resolves them first. So a reader takes a shallow copy of a seed under
 * *mu, and writes back under it the addresses it resolved. */
typedef struct topo_src {
    pthread_mutex_t *mu;    /* the topology's */
    const conn_config *cfg; /* credentials, db and timeouts for every node */
    topo_node *seeds;       /* sentinels, or cluster seed nodes */
    int nseeds;
    const char *master;     /* sentinel: the master's name */
    const char *sentinel_user, *sentinel_pass;
    tls_ctx *sentinel_tls;  /* how the sentinels are reached (NULL: plain) */
} topo_src;

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

/* Parses "host:port" (hostport.h's rules; the port required) into a
 * node; also "v6:port", an IPv6 address as Redis writes it in MOVED and
 * ASK, without brackets (the last colon). 0, or -1. */
int topo_node_parse(const char *s, size_t len, topo_node *out);
void topo_node_clear(topo_node *n);
int topo_node_same(const topo_node *a, const topo_node *b);

/* Snapshots, for sentinel.c and cluster.c: a new one with n nodes. */
topo_snap *topo_snap_new(int nnodes, int with_slots);
void topo_snap_free(topo_snap *s);

#endif
