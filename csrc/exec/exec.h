/*
 * exec.h: one request and the rules it is run by, as a state machine. No
 * Lua here.
 *
 * Every request redislock sends to a data node (a script on the node of
 * its key, a plain command, a waiter's BLPOP with its next attempt behind
 * it, a renewal, one master's part of a Redlock fan-out) goes through this
 * one machine, whoever drives it: the Lua side's router waiting for it
 * (csrc/topo/router.c), a poll loop with many at once (csrc/topo/fanout.c, the
 * watchdog's links), or Lua moving the bytes over nginx's cosockets
 * (csrc/binding/client_request.c). The machine decides; the drivers move bytes,
 * wait, and do what it asks of the topology:
 *
 *   - what goes on the wire for an attempt (exec_write): the native
 *     command that does what the script does where the node has one
 *     (native_cmd.h), else EVALSHA, or SCRIPT LOAD + EVAL where the script
 *     is not cached there (after NOSCRIPT, or, for EXEC_EVAL_FIRST, where
 *     it never ran on that socket); ASKING first after an ASK;
 *   - what each reply means (exec_reply, by recovery.h's rules in the
 *     topology's mode): the answer; the same again on this node (NOSCRIPT,
 *     a native command that did not run); again elsewhere (ASK; MOVED,
 *     READONLY: the topology looked up first); after a pause (TRYAGAIN,
 *     LOADING: until the caller's deadline); or give up;
 *   - what a failed connection means (exec_failed): a request that may
 *     have run is never sent again (but for EXEC_IDEMPOTENT, once);
 *   - the caps: EXEC_MAX_TRIES redirects and refreshes, EXEC_MAX_WAITS
 *     pauses when nothing bounds the call.
 *
 * A driver's loop: route (the node of exec_target(), or of the key, after
 * looking the topology up when exec_resolve() says so), connect, exec_write,
 * then exec_reply for each reply until it says anything but EXEC_MORE.
 *
 * The request's strings are borrowed: they must live as long as it runs.
 */
#ifndef REDISLOCK_EXEC_H
#define REDISLOCK_EXEC_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis.h>

#include "exec/exec_conn.h"
#include "exec/recovery.h"
#include "cmd/script.h"

#define EXEC_MAX_TRIES 8        /* redirects and refreshes per request */
#define EXEC_MAX_WAITS 200      /* pauses when nothing bounds the call (~20 s) */
#define EXEC_LAST_SEND_MS 20    /* a request sent after a pause must have this
                                   long left of its deadline for its reply */
#define EXEC_TARGET_MAX 272     /* "host:port" of an ASK target */
#define EXEC_MAX_PRE 3          /* arguments of the command sent first */

/* A Sentinel request that waited for the sentinels to confirm a master
 * until its deadline (router.c, client_request.c). */
#define EXEC_ERR_NO_MASTER "connection lost: no master confirmed yet by the sentinels (timed out: a failover " \
                           "in progress?)"

/* flags */
#define EXEC_IDEMPOTENT  0x01u  /* sent again once after a lost reply
                                   (Redlock: its scripts are idempotent for
                                   their token) */
#define EXEC_EVAL_FIRST  0x02u  /* EVAL (after a SCRIPT LOAD) where the script
                                   has not run on the socket yet (fanout.c
                                   says why) */

/* The redirects a request met (exec_state.seen), which say what the
 * cluster was doing when there were too many (exec_try). */
#define EXEC_SEEN_MOVED    0x01u  /* a node said another serves the slot */
#define EXEC_SEEN_MIGRATE  0x02u  /* ASK, TRYAGAIN: a slot being migrated */
#define EXEC_SEEN_REPLICA  0x04u  /* READONLY, MASTERDOWN: the master is a replica now */

/* What the driver does next. */
enum exec_step {
    EXEC_MORE = 0,      /* read the next reply of this attempt */
    EXEC_DONE,          /* exec_take_answer() is the answer (an error reply
                           included: Redis' refusal as it gave it) */
    EXEC_SEND,          /* write it again on the same node, now */
    EXEC_ROUTE,         /* write it again on the node exec_target() names (an
                           ASK), else on the key's node, after looking the
                           topology up again when exec_resolve() says so */
    EXEC_PAUSE,         /* wait exec_pause_ms(), call exec_after_pause(), then
                           as EXEC_ROUTE */
    EXEC_FAIL           /* give up: err and errstr say why */
};

/* How far a request got: all a driver that keeps many in flight (the
 * watchdog's pipelines) needs to keep of each between its replies; the
 * rest of exec_req it can make again from what it sent. */
typedef struct exec_state {
    uint16_t tries, waits;
    uint8_t due;                /* replies of this attempt still to come */
    uint8_t load_due;           /* of which the SCRIPT LOAD's (first) */
    uint8_t pre_due;            /* of which the pre command's */
    uint8_t asking_due;         /* of which the ASKING's */
    uint8_t native;             /* this attempt's native command (native_cmd.h), 0: none */
    uint8_t seen;               /* EXEC_SEEN_*: the redirects so far, for the
                                   message when they are too many */
    unsigned want_eval : 1;     /* the node lacks the script (NOSCRIPT): EVAL it */
    unsigned eval : 1;          /* this attempt sends EVAL (after SCRIPT LOAD) */
    unsigned after_load : 1;    /* this attempt sends EVALSHA behind a SCRIPT
                                   LOAD of it still in flight on the socket
                                   (another request's, in a pipeline) */
    unsigned scripted : 1;      /* the native command did not run: the script */
    unsigned asking : 1;        /* the next attempt goes to target, after ASKING */
    unsigned resolve : 1;       /* look the topology up before the next attempt */
    unsigned refreshed : 1;     /* the driver looked it up during this request */
    unsigned retried : 1;       /* sent again once after a lost reply */
} exec_state;

typedef struct exec_req {
    /* the request (borrowed) */
    const script_def *script;   /* NULL: argv is a plain command */
    int argc;
    const char *const *argv;    /* the script's keys and arguments, or the command */
    const size_t *lens;
    const char *key;            /* the routing key, or NULL: any node */
    size_t klen;
    const char *pre_argv[EXEC_MAX_PRE]; /* a command before it in the same write,
                                   whose reply comes first (a waiter's BLPOP) */
    size_t pre_lens[EXEC_MAX_PRE];
    int pre_argc;               /* 0: none */
    int mode;                   /* enum topo_mode: whose rules */
    unsigned flags;             /* EXEC_* */
    int64_t deadline;           /* us: the request's own (its timeout), for
                                   every reply of every attempt */
    int64_t until;              /* us: how long a refusal may be waited out:
                                   the caller's deadline, within deadline */

    exec_state st;              /* how far it got */
    redisReply *pre_reply;      /* the pre command's reply (exec_take_pre) */
    redisReply *answer;         /* EXEC_DONE: the answer (exec_take_answer) */
    char target[EXEC_TARGET_MAX]; /* ASK: where to ("host:port") */
    int err;                    /* EXEC_FAIL: enum conn_err */
    char errstr[CONN_ERRSTR_LEN];
} exec_req;

/* A request for script s with its keys and arguments (argc of them, at
 * most SCRIPT_MAX_ARGS), or for command argv when s is NULL, routed by key
 * (NULL: any node). timeout_ms: its deadline from now (0: none); until_us:
 * the caller's own deadline (DEADLINE_NONE: none), which bounds only the
 * waiting out of a refusal (router.h). */
void exec_init(exec_req *x, const script_def *s, int argc, const char *const *argv, const size_t *lens,
               const char *key, size_t klen, int mode, unsigned flags, long timeout_ms, int64_t until_us);

/* A command sent before the request in the same write, its reply read
 * first and kept (exec_take_pre): a waiter's BLPOP. argv borrowed. */
void exec_set_pre(exec_req *x, int argc, const char *const *argv, const size_t *lens);

/* Queues this attempt on x (connected, or connecting: behind its
 * handshake): [SCRIPT LOAD] [pre] [ASKING] request. 0, or -1: out of
 * memory (xc closed; the request has failed, as exec_failed says). */
int exec_write(exec_req *x, exec_conn *xc);

/* The next reply of this attempt (taken: freed, or kept). The next step. */
int exec_reply(exec_req *x, exec_conn *xc, redisReply *r);

/* xc failed before this attempt's answer (its conn's err and errstr);
 * sent: any of its bytes may have been sent. EXEC_ROUTE (it did not run,
 * or may run again: exec_resolve says whether to look the topology up
 * first) or EXEC_FAIL. */
int exec_failed(exec_req *x, const exec_conn *xc, int sent);

/* Whether the topology must be looked up before the next attempt; clears it. */
int exec_resolve(exec_req *x);

/* The ASK target of the next attempt ("host:port"), or NULL. */
const char *exec_target(const exec_req *x);

/* EXEC_PAUSE: how long, in ms (never past `until`). */
long exec_pause_ms(const exec_req *x);

/* After the pause: EXEC_ROUTE, or EXEC_DONE with the refusal as the
 * answer when the caller's deadline is over or too little is left of the
 * request's for another reply. */
int exec_after_pause(exec_req *x);

/* A failure the driver found (no node serves the slot, the topology could
 * not be loaded, no master confirmed in time, out of memory): EXEC_FAIL. */
int exec_fail(exec_req *x, int err, const char *errstr);

/* Counts one more try before an attempt the driver routes: EXEC_ROUTE, or
 * EXEC_FAIL after EXEC_MAX_TRIES, of kind connection, saying what the
 * redirects were: a slot being migrated ("the cluster is resharding"), or
 * no master confirmed yet for the slot (a failover: our master became a
 * replica, or the nodes disagree for a moment on who serves it). */
int exec_try(exec_req *x);

/* The answer after EXEC_DONE, and the pre command's reply: the caller's
 * from then on (freed by it). NULL when there is none. */
redisReply *exec_take_answer(exec_req *x);
redisReply *exec_take_pre(exec_req *x);

/* Whether the next reply of a request at st is its own answer and, being
 * an integer, its final one (no native command to map it): a driver may
 * read it in place (conn_reply_int) and, when exec_answer_int_ok says the
 * integer is an answer of script s, call exec_note_ran and take it as
 * EXEC_DONE without the reply object; an integer that is not (an extend
 * that answers 7) goes to exec_reply as a reply object, which fails it. */
int exec_answer_next(const exec_state *st);
int exec_answer_int_ok(const script_def *s, long long v);
void exec_note_ran(exec_conn *xc, const script_def *s);

/* Frees whatever the request still holds. */
void exec_clear(exec_req *x);

#endif
