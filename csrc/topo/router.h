/*
 * router.h: one thread's connections to the nodes of a topology. No Lua here.
 *
 * Each thread that talks to Redis (the Lua side's main and wait
 * connections, the watchdog) has a router of its own, since a connection is
 * not thread-safe. A router follows its topology's epoch: when it moves,
 * the router rebuilds its table for the new snapshot, keeping the
 * connections to nodes that are still there and closing the others.
 *
 * route_* run one request on the node of a key (exec.h's machine decides
 * everything about it: what is sent, redirects, NOSCRIPT, pauses; the
 * router routes it, connects, and waits for its replies), within the
 * command's deadline; a request that was sent is never sent again unless
 * Redis refused it (it did not run).
 *
 * Two deadlines bound a call. The command's (timeout_ms from the call's
 * start) bounds everything, each reply included. The caller's own
 * (call_deadline, e.g. the end of an acquire's `wait`) bounds only the
 * waiting for a refusal to pass (TRYAGAIN, LOADING): once it is over, the
 * refusal is the answer, even with wait = 0 after one try. A redirect
 * (MOVED, ASK, READONLY) is still followed: that is the one attempt going
 * to the right node, not a wait.
 */
#ifndef REDISLOCK_ROUTER_H
#define REDISLOCK_ROUTER_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis.h>

#include "net/conn.h"
#include "exec/exec.h"
#include "exec/exec_conn.h"
#include "cmd/script.h"
#include "topo/topo.h"

typedef struct router {
    topo *t;                /* a reference */
    topo_snap *snap;        /* what conns is built for (a reference), or NULL */
    exec_conn **conns;      /* per node of snap, NULL until first used */
    int nconns;
    int may_resolve;        /* 0 in the watchdog thread */
    int probe;              /* conns read INFO memory at connect */
    int stale;              /* a connection was lost: refresh before routing */
    int no_doubt;           /* Sentinel: its failures cast no doubt (the wait
                               connection: its BLPOPs write no lease, and one
                               that ends at the caller's own deadline is no
                               sign of a failing master; the doubt would hold
                               up every client sharing the topology) */
    long spin_us;
    long timeout_ms;        /* per command (the topology's cfg by default) */
    int64_t call_deadline;  /* the next call's own deadline (monotonic us, see
                               above): set by the caller, used and reset to
                               DEADLINE_NONE by that call */
    int last_node;          /* the node of the last request (for WAIT) */
    conn_counters net;      /* what its connections count (counters.h) */
    int err;                /* enum conn_err of the last failure */
    char errstr[CONN_ERRSTR_LEN];
} router;

router *router_new(topo *t, int may_resolve);
void router_free(router *r);

/* Loads the topology if it has none yet, and follows its epoch. 0, or -1
 * with errstr. */
int router_sync(router *r);

/* The snapshot in use was found wrong before any request went (a client's
 * first connect, on a topology another client of the process loaded
 * before a failover its thread has not yet seen): Sentinel, a doubt cast
 * on it; then loaded again, by deadline, and followed. 0, or -1 with
 * errstr. */
int router_reload(router *r, int64_t deadline);

/* The connection to node i of r->snap (made, not connected, on first use). */
exec_conn *router_conn(router *r, int i);

/* Runs x on r's nodes to its end (exec.h's driver for a caller that
 * waits): the answer (an error reply included: the caller frees it), or
 * NULL with errstr. */
redisReply *route_run(router *r, exec_req *x);

/* The kind of r's last failure ("connection", "timeout", "redis", "memory"). */
const char *router_kind(const router *r);

/* Runs argv on the node of key (key NULL: any node, the first). The reply
 * (error replies included, the caller frees it) or NULL with errstr. */
redisReply *route_command(router *r, const char *key, size_t klen,
                          int argc, const char **argv, const size_t *lens);

/* Runs script s (EVALSHA; SCRIPT LOAD + EVAL on NOSCRIPT) on the node of its first key. */
redisReply *route_script(router *r, const script_def *s, int nargs,
                         const char **args, const size_t *lens);

/* A wait for a release and the attempt that follows it, in one write
 * (route_wait.c): BLPOP key secs, then script s, which Redis runs the
 * moment the BLPOP returns. 1: both replies read (*woken the BLPOP's,
 * *attempt the script's; either may be an error reply, and an error from
 * the script, or *attempt NULL, means it did not run); 0: nothing sent, the map is stale or
 * the node is a Sentinel's master not connected (use route_command, which
 * refreshes and follows redirects); -1: failed (errstr), and the script
 * may have run; -2: could not connect (errstr), nothing was sent. */
int route_wait_try(router *r, const char *key, size_t klen, const char *secs, size_t slen,
                   const script_def *s, int nargs, const char **args, const size_t *lens,
                   redisReply **woken, redisReply **attempt);

/* Closes every connection. */
void router_drop(router *r);

#endif
