/*
 * fanout.h: one request on every node of a router at once (Redlock). No Lua.
 *
 * The request goes to all masters together: connections that are down are
 * started in parallel (their handshake queued ahead of the request), every
 * socket is polled against one deadline, and NOSCRIPT is answered per node
 * (the script cache is each master's own; a script goes as EVAL on a
 * connection where it has not run yet: fanout.c says why). The caller may
 * stop waiting as soon as it has seen enough (a majority); a request still
 * unanswered then stays queued on its connection and its reply is dropped
 * when it comes, so whatever is sent next on that connection (a release)
 * runs after it on that master. A node that has not answered by the deadline has its
 * connection closed: what was written runs in order, if it ever runs.
 */
#ifndef REDISLOCK_FANOUT_H
#define REDISLOCK_FANOUT_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis.h>

#include "topo/router.h"
#include "cmd/script.h"

typedef struct fanout_result {
    redisReply *reply;          /* the answer (error replies included), or NULL */
    int err;                    /* enum conn_err when reply is NULL */
    int done;                   /* answered, failed, or given up */
    char errstr[CONN_ERRSTR_LEN];
} fanout_result;

/* Called after each answer: 1 when the caller has seen enough to stop. */
typedef int (*fanout_enough)(const fanout_result *res, int n, void *ud);

/* Runs script s with args on every node of r (r->nconns results in out,
 * replies owned by the caller: fanout_free). Returns how many answered. */
int fanout_script(router *r, const script_def *s, int nargs, const char **args, const size_t *lens,
                  int64_t deadline, fanout_enough enough, void *ud, fanout_result *out);

void fanout_free(fanout_result *out, int n);

#endif
