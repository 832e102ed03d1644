/*
 * fanout.c: one request on every node at once, polled (see fanout.h).
 */
#define _GNU_SOURCE
#include "proc_id.h"
#include "fanout.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "deadline.h"
#include "intr.h"
#include "monotime.h"
#include "native_cmd.h"
#include "recovery.h"

enum { FO_IDLE = 0, FO_CONNECTING, FO_SENT };

typedef struct fanout_node {
    conn *c;
    int state;
    int eval;                   /* sent as EVAL (first use here, or after a NOSCRIPT) */
    int retried;                /* sent again once on a new connection */
    unsigned native;            /* sent as this native command (native_cmd.h) */
    int scripted;               /* the native one did not run: the script */
} fanout_node;

/* The request: the native command that does what s does where the node
 * has one (its handshake read: a connection still connecting knows none
 * yet), else EVALSHA; or EVAL after a NOSCRIPT (resend), or while s has not
 * run on this connection yet.
 *
 * Why EVAL at first use: the caller stops at a majority, and a request
 * still unanswered then has its answer dropped (fanout.h). If that answer
 * is NOSCRIPT, the script never ran on that master: an acquire on fresh
 * masters (or ones just restarted) would hold only a bare majority,
 * under load, until the watchdog took the key back there. EVAL runs it at
 * once; the SCRIPT LOAD sent just before it (script.h) caches it as a
 * script Redis 8 never evicts. A cache emptied under a live connection
 * (SCRIPT FLUSH; or eviction, where SCRIPT LOAD is refused so the script
 * came from EVAL) still gives a late NOSCRIPT that is dropped: always
 * sending EVAL would close that too, at the cost of the source on every
 * request and of the EVALSHA rule; not done. */
static int fanout_append(fanout_node *f, const script_def *s, int resend, int nargs,
                         const char **args, const size_t *lens) {
    conn *c = f->c;
    native_cmd nc;
    uint64_t bit = script_bit(s);
    int eval;
    f->native = 0;
    if (!resend && !f->scripted && native_build(c->native, s, nargs, args, lens, &nc)) {
        f->native = nc.op;
        return conn_append(c, nc.argc, nc.argv, nc.lens);
    }
    eval = resend || (bit != 0 && !(c->scripts_ran & bit));
    f->eval = eval;
    /* (only dropped answers are ahead of ours on c: the late ones) */
    if (eval && script_queue_load_skipped(c, s) < 0) return -1;
    return script_append(c, s, eval, nargs, args, lens);
}

static void fanout_fail(fanout_result *res, const conn *c) {
    res->done = 1;
    res->err = c->err ? c->err : CONN_ELOST;
    snprintf(res->errstr, sizeof res->errstr, "%s", c->errstr[0] ? c->errstr : "connection lost");
}

/* One node's next step after poll said revents. 1 when it just finished. */
static int fanout_step(fanout_node *f, fanout_result *res, short revents, const script_def *s,
                       int nargs, const char **args, const size_t *lens) {
    conn *c = f->c;
    if (f->state == FO_CONNECTING) {
        if (!(revents & (POLLOUT | POLLERR | POLLHUP))) return 0;
        if (conn_connect_done(c) != 0) {
            fanout_fail(res, c);
            return 1;
        }
        f->state = FO_SENT;
    }
    if (conn_flush_some(c) < 0) {
        fanout_fail(res, c);
        return 1;
    }
    if (revents & (POLLIN | POLLERR | POLLHUP)) {
        int k;
        while ((k = conn_fill(c)) == 1) {}
        if (k < 0) {
            fanout_fail(res, c);
            return 1;
        }
    }
    for (;;) {
        redisReply *r = NULL;
        recovery rec;
        int k = conn_reply(c, &r);
        if (k < 0) {
            fanout_fail(res, c);
            return 1;
        }
        if (k == 0) return 0;
        if (f->native) {
            long long v;
            int verdict = native_reply(f->native, r, &v);
            if (verdict == NATIVE_MAPPED) {
                native_reply_set_int(r, v);
                res->reply = r;
                res->done = 1;
                return 1;
            }
            /* it did not run: the script, on this master, now */
            if (verdict == NATIVE_UNSUPPORTED) c->native &= ~f->native;
            freeReplyObject(r);
            f->scripted = 1;
            if (fanout_append(f, s, 0, nargs, args, lens) != 0 || conn_flush_some(c) < 0) {
                fanout_fail(res, c);
                return 1;
            }
            continue;
        }
        recovery_of_reply(r, TOPO_REDLOCK, &rec);
        if (!f->eval && (rec.todo & RECOVERY_EVAL)) {
            /* (the one recovery a master's refusal gets here: the quorum
             * decides about the others, recovery.h) */
            freeReplyObject(r);
            c->scripts_ran &= ~script_bit(s);   /* (the cache was flushed) */
            conn_note_noscript(c);
            if (fanout_append(f, s, 1, nargs, args, lens) != 0 || conn_flush_some(c) < 0) {
                fanout_fail(res, c);
                return 1;
            }
            continue;
        }
        if (r->type != REDIS_REPLY_ERROR) c->scripts_ran |= script_bit(s);
        res->reply = r;
        res->done = 1;
        return 1;
    }
}

/* Connects the node if needed (without waiting) and queues the request.
 * 0, or -1 with res filled (failed). */
static int fanout_send(fanout_node *f, fanout_result *res, const script_def *s, int nargs,
                       const char **args, const size_t *lens) {
    conn *c = f->c;
    if (c->fd >= 0 && c->pid != proc_id()) conn_drop(c);
    if (c->fd < 0) {
        int started = conn_start(c);
        if (started < 0) {
            fanout_fail(res, c);
            return -1;
        }
        f->state = started ? FO_CONNECTING : FO_SENT;
    } else {
        f->state = c->connecting ? FO_CONNECTING : FO_SENT;
    }
    f->scripted = 0;
    if (fanout_append(f, s, 0, nargs, args, lens) != 0 ||
        (f->state == FO_SENT && conn_flush_some(c) < 0)) {
        fanout_fail(res, c);
        return -1;
    }
    return 0;
}

int fanout_script(router *r, const script_def *s, int nargs, const char **args, const size_t *lens,
                  int64_t deadline, fanout_enough enough, void *ud, fanout_result *out) {
    fanout_node *nodes;
    struct pollfd *pfd;
    int n, i, answered = 0, pending = 0;
    if (router_sync(r) != 0) return -1;
    n = r->nconns;
    nodes = calloc((size_t)(n ? n : 1), sizeof *nodes);
    pfd = calloc((size_t)(n ? n : 1), sizeof *pfd);
    memset(out, 0, (size_t)n * sizeof *out);
    if (nodes == NULL || pfd == NULL) {
        free(nodes);
        free(pfd);
        return -1;
    }
    /* everything goes out before anything is waited for */
    for (i = 0; i < n; i++) {
        conn *c = router_conn(r, i);
        nodes[i].c = c;
        if (c == NULL) {
            out[i].done = 1;
            out[i].err = CONN_ENOMEM;
            snprintf(out[i].errstr, sizeof out[i].errstr, "out of memory");
            continue;
        }
        if (fanout_send(&nodes[i], &out[i], s, nargs, args, lens) == 0) pending++;
    }
    while (pending > 0 && !(enough && enough(out, n, ud))) {
        int np = 0, rc;
        int map[256];
        for (i = 0; i < n && np < 256; i++) {
            conn *c = nodes[i].c;
            if (out[i].done) continue;
            pfd[np].fd = c->fd;
            pfd[np].events = conn_poll_events(c);   /* (POLLOUT while connecting) */
            pfd[np].revents = 0;
            map[np++] = i;
        }
        rc = poll(pfd, (nfds_t)np, deadline_poll_ms(deadline));
        if (rc < 0 && (errno != EINTR || intr_pending())) break;   /* (intr.h) */
        for (i = 0; i < np; i++) {
            int k = map[i];
            if (pfd[i].revents == 0) continue;
            if (fanout_step(&nodes[k], &out[k], pfd[i].revents, s, nargs, args, lens)) {
                /* A connection found dead (the master restarted since we
                 * last used it, recovery.h's UNSENT or RESET) before any
                 * answer: once, on a new one. The scripts sent this way
                 * are idempotent for their token. */
                recovery rec;
                recovery_of_failure(out[k].err, nodes[k].state == FO_SENT, TOPO_REDLOCK, &rec);
                if (!out[k].reply && (rec.todo & RECOVERY_RETRY) && !nodes[k].retried &&
                    nodes[k].c->skip == 0 && !deadline_passed(deadline)) {
                    nodes[k].retried = 1;
                    memset(&out[k], 0, sizeof out[k]);
                    if (fanout_send(&nodes[k], &out[k], s, nargs, args, lens) == 0) continue;
                }
                pending--;
                if (out[k].reply) answered++;
            }
        }
        if (deadline_passed(deadline)) break;
    }
    /* The ones that did not answer. Their connection stays, so that what
     * is sent next on it (a release) runs after this request on that
     * master, and their late answer is dropped; unless it has not answered
     * anything for longer than the client's timeout: then it is closed (a
     * stalled master runs what was written, in order, when it resumes). */
    {
        int64_t now = monotime_us();
        int64_t stale = (int64_t)(r->timeout_ms > 0 ? r->timeout_ms : 2000) * 1000;
        for (i = 0; i < n; i++) {
            conn *c = nodes[i].c;
            if (out[i].done || c == NULL) continue;
            if (c->skip == 0) c->skip_since = now;
            c->skip++;
            out[i].done = 1;
            out[i].err = CONN_ETIMEOUT;
            if (now - c->skip_since >= stale) {
                conn_fail_with(c, CONN_ETIMEOUT, "lost");
                snprintf(out[i].errstr, sizeof out[i].errstr, "%s", c->errstr);
            } else {
                snprintf(out[i].errstr, sizeof out[i].errstr, "no answer in time");
            }
        }
    }
    free(nodes);
    free(pfd);
    return answered;
}

void fanout_free(fanout_result *out, int n) {
    int i;
    for (i = 0; i < n; i++)
        if (out[i].reply) {
            freeReplyObject(out[i].reply);
            out[i].reply = NULL;
        }
}
