/*
 * recovery.h: what to do after Redis refused a request or a connection
 * failed: the one set of rules for every path that talks to Redis. No Lua
 * here.
 *
 * exec.c's request machine asks this file, and every request is run by
 * that machine (the Lua side's router and waits, the watchdog's links, the
 * Redlock fan-out, the nginx transport); route_wait.c asks it only what a
 * refusal means for the waiter's connection. A rule is changed here or
 * nowhere. It asks with what it saw (an error reply, or a connection
 * failure and whether the request had been sent) and the topology's mode;
 * the answer is the class (what happened) and what to do about it (bits).
 *
 * The classes, and what each means in each mode (recovery.c has the table):
 *
 *   MOVED slot host:port  the slot lives elsewhere for good. It did not run.
 *                         Cluster: look the map up again, retry.
 *   ASK slot host:port    the slot is being migrated and the keys are on
 *                         host:port. It did not run. Cluster: send ASKING
 *                         then the request there, this once.
 *   TRYAGAIN              a multi-key request in a slot being migrated. It
 *                         did not run. Cluster: pause, retry, until the
 *                         caller's deadline (which the command's timeout
 *                         bounds); then the refusal is the answer.
 *   CLUSTERDOWN           the cluster cannot serve: a clear error, as Redis
 *                         words it.
 *   READONLY              our master is a replica now (a failover). It did
 *                         not run. Sentinel, Cluster: drop the connection,
 *                         look the topology up again, retry.
 *   MASTERDOWN            a replica whose link to its master is down. It
 *                         did not run. A replica never runs our writes,
 *                         whatever its link: the READONLY rule.
 *   LOADING               the node restarted and is loading its data. It
 *                         did not run. Pause, retry until the caller's
 *                         deadline: it will serve once loaded. Sentinel,
 *                         Cluster: also look the topology up again (once
 *                         per call): a restart is when failovers happen,
 *                         and a restarted master does not know yet that it
 *                         was replaced; the sentinels (the other nodes) do.
 *   NOSCRIPT              the node's script cache lacks it. It did not run:
 *                         SCRIPT LOAD + EVAL, exactly once (the caller
 *                         keeps the "once": an EVAL never answers NOSCRIPT).
 *   UNSENT (a failure)    nothing was sent: the connect was refused, timed
 *                         out, or its handshake failed. It did not run.
 *                         Sentinel, Cluster: look the topology up again and
 *                         retry (the node may be another one now); Redlock:
 *                         retry once on a new connection.
 *   TIMEOUT (a failure)   sent, no whole answer in time: it may have run,
 *                         so it is never sent again. Sentinel, Cluster:
 *                         look the topology up again before the next one.
 *   RESET (a failure)     sent, then the connection was closed, reset or
 *                         garbled: the same, except in Redlock, whose
 *                         requests are idempotent for their token (one
 *                         retry on a new connection: fanout.c says why).
 *
 * Single Redis: only NOSCRIPT and LOADING are recovered from; every other
 * refusal is the answer (there is no other node to go to). Redlock: only
 * NOSCRIPT and the failures above; the quorum, not a retry, decides about
 * a master that refused.
 */
#ifndef REDISLOCK_RECOVERY_H
#define REDISLOCK_RECOVERY_H

#include <stddef.h>
#include <hiredis.h>

enum recovery_class {
    RECOVERY_NONE = 0,      /* an answer (a plain error reply included) */
    RECOVERY_MOVED,
    RECOVERY_ASK,
    RECOVERY_TRYAGAIN,
    RECOVERY_CLUSTERDOWN,
    RECOVERY_READONLY,
    RECOVERY_MASTERDOWN,
    RECOVERY_LOADING,
    RECOVERY_NOSCRIPT,
    RECOVERY_UNSENT,        /* failures */
    RECOVERY_TIMEOUT,
    RECOVERY_RESET,
    RECOVERY_CLASSES
};

/* What to do, as bits; none: the reply or the failure goes to the caller. */
#define RECOVERY_RETRY   0x01u  /* it did not run (or may run again): send it again,
                                   after what the other bits say */
#define RECOVERY_RESOLVE 0x02u  /* look the topology up again before the next
                                   request (with PAUSE: once per call) */
#define RECOVERY_DROP    0x04u  /* close this connection (its node is not ours) */
#define RECOVERY_ASKING  0x08u  /* the retry goes to the target, after ASKING,
                                   for this one request */
#define RECOVERY_PAUSE   0x10u  /* first wait recovery_pause_ms, and retry only
                                   before the caller's deadline */
#define RECOVERY_EVAL    0x20u  /* the retry is SCRIPT LOAD + EVAL, once */

typedef struct recovery {
    int cls;                /* enum recovery_class */
    unsigned todo;          /* RECOVERY_* bits, for the mode asked about */
    const char *target;     /* MOVED, ASK: "host:port" inside the error text
                               (not a copy; topo_node_parse reads it), else NULL */
    size_t target_len;
} recovery;

/* An error text as Redis sends it after the '-' ("MOVED 3999 127.0.0.1:7001"),
 * in mode (enum topo_mode). Anything else is RECOVERY_NONE with no todo. */
void recovery_of_error(const char *s, size_t len, int mode, recovery *out);

/* A reply: recovery_of_error for an error reply; RECOVERY_NONE for any
 * other (NULL included). The fast path: one type test for an answer. */
void recovery_of_reply(const redisReply *r, int mode, recovery *out);

/* A failure of enum conn_err err; sent: the request had been handed to the
 * connection's socket (a reply was being waited for). A refused connect
 * (CONN_ECONNECT) and any failure before sending are UNSENT; out of memory
 * is RECOVERY_NONE (nothing to recover). */
void recovery_of_failure(int err, int sent, int mode, recovery *out);

/* The pause before the waits-th retry after a PAUSE refusal (waits >= 1):
 * 5 ms more each time, at most 100 ms. */
long recovery_pause_ms(int waits);

/* "moved", "ask", ... (lowercase, as Lua gets them); "none" for RECOVERY_NONE. */
const char *recovery_name(int cls);

#endif
