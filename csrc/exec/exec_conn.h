/*
 * exec_conn.h: a connection to a data node as the request layer knows it.
 * No Lua here.
 *
 * The socket layer's conn (conn.h) knows sockets, TLS, deadlines and
 * replies; what a request needs to know of the node on the other end is
 * kept here, beside it: which native commands the node has (learned by the
 * connection's handshake, native_detect.h), which scripts already ran on
 * this socket, whether the node refuses SCRIPT LOAD, and how many replies
 * to requests nobody waits for any more are still to come (a fan-out that
 * had enough, a SCRIPT LOAD ahead of an EVAL): those are read and dropped
 * before the next reply is handed out. All of it is about one socket, and
 * starts afresh with the next (conn's gen).
 *
 * Not thread-safe: one per thread, as the conn it wraps.
 */
#ifndef REDISLOCK_EXEC_CONN_H
#define REDISLOCK_EXEC_CONN_H

#include <stdint.h>
#include <hiredis.h>

#include "net/conn.h"
#include "cmd/native_detect.h"
#include "cmd/script.h"

/* How connections to data nodes are to learn of native commands (the
 * client's settings, kept by its topology). */
typedef struct exec_opts {
    int no_native;          /* never detect nor use native compare commands */
    unsigned native_assume; /* tests only: NATIVE_* bits claimed after every
                               detection (the specs drive the fallback paths
                               with it on a server that lacks the commands) */
} exec_opts;

typedef struct exec_conn {
    conn *c;                /* owned */
    native_state nat;       /* what the node has (its hook's) */
    uint64_t scripts_ran;   /* bit i: script_at(i) ran on this socket (fanout.c
                               sends EVAL until then: see there why) */
    int no_script_load;     /* the node refused SCRIPT LOAD (an ACL without
                               script|load, a renamed command): EVAL alone */
    uint64_t loading;       /* script_bit()s of the SCRIPT LOADs queued and not
                               answered yet: a request of one of them refused
                               NOSCRIPT before it ran goes again as EVALSHA
                               behind it, not as EVAL (a pipeline of many
                               renewals after a flush: one load, one EVAL) */
    int skip;               /* replies nobody waits for still to come */
    int64_t skip_since;     /* monotonic us: when the oldest was given up */
    uint64_t gen;           /* c->gen the above is about */
} exec_conn;

/* A new, unconnected exec_conn for cfg (a copy is kept), learning native
 * commands as opts say (NULL: with defaults). NULL when out of memory. */
exec_conn *exec_conn_new(const conn_config *cfg, const exec_opts *opts);
void exec_conn_free(exec_conn *x);

/* Detection for a data node of a slot map (native_conn_setup): its probe
 * key. Takes effect at its next handshake. */
void exec_conn_setup(exec_conn *x, const uint16_t *slot_node, int node);

/* What is known of the socket in use: reset when it is another one. */
void exec_conn_sync(exec_conn *x);

/* The next reply to a request someone waits for (those given up on are
 * read and dropped first): conn_reply's answers. */
int exec_conn_reply(exec_conn *x, redisReply **r);
/* The same, waiting until deadline (conn_read): the reply, or NULL
 * (x->c's err and errstr). */
redisReply *exec_conn_read(exec_conn *x, int64_t deadline);
/* conn_reply_int, when nothing given up on is ahead. */
int exec_conn_reply_int(exec_conn *x, long long *v);

/* n requests queued on x whose replies nobody will read. */
void exec_conn_give_up(exec_conn *x, int n);

/* r answers a request whose answer nobody reads (a given-up one, a SCRIPT
 * LOAD): if it says the node refuses SCRIPT LOAD, no_script_load. */
void exec_conn_note_dropped(exec_conn *x, const redisReply *r);

/* The answer to a SCRIPT LOAD of s queued with exec_conn_queue_load came
 * (or was dropped): none in flight any more. */
void exec_conn_loaded(exec_conn *x, const script_def *s);

/* Queues "SCRIPT LOAD <s's source>" to go just before an EVAL of s (a
 * script created by SCRIPT LOAD is never evicted: Redis 8 evicts the
 * ones EVAL created, beyond 500, so the EVALSHAs after it keep finding
 * it; the EVAL runs the script whatever the load answers). Nothing where
 * the node refused SCRIPT LOAD before. 1 queued, 0 not, -1 failed (out of
 * memory). skipped: its answer is dropped by exec_conn_reply (right for a
 * caller that reads every reply in turn); else the caller reads it and
 * hands it to exec_conn_note_dropped. */
int exec_conn_queue_load(exec_conn *x, const script_def *s, int skipped);

/* conn_check_idle, unless replies given up on are still to come. */
void exec_conn_check_idle(exec_conn *x);

#endif
