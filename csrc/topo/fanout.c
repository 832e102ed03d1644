/*
 * fanout.c: one request on every node at once, polled (see fanout.h): a
 * driver of exec.h's machine, one request per master.
 */
#define _GNU_SOURCE
#include "base/proc_id.h"
#include "topo/fanout.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/deadline.h"
#include "base/intr.h"
#include "base/monotime.h"

/* One master's request. EXEC_EVAL_FIRST: the script goes as EVAL (after a
 * SCRIPT LOAD) on a connection where it has not run yet. Why: the caller
 * stops at a majority, and a request still unanswered then has its answer
 * dropped (fanout.h). If that answer is NOSCRIPT, the script never ran on
 * that master: an acquire on fresh masters (or ones just restarted) would
 * hold only a bare majority, under load, until the watchdog took the key
 * back there. EVAL runs it at once; the SCRIPT LOAD sent just before it
 * caches it as a script Redis 8 never evicts. A cache emptied under a live
 * connection (SCRIPT FLUSH; or eviction, where SCRIPT LOAD is refused so
 * the script came from EVAL) still gives a late NOSCRIPT that is dropped:
 * always sending EVAL would close that too, at the cost of the source on
 * every request and of the EVALSHA rule; not done. EXEC_IDEMPOTENT: a
 * connection found dead before any answer (the master restarted since we
 * last used it) is tried once more, on a new one: the scripts sent this
 * way are idempotent for their token. */
typedef struct fanout_node {
    exec_conn *xc;
    exec_req x;
    int connecting;             /* the connect is under way */
    int again;                  /* sent again once on a new connection */
} fanout_node;

static void fanout_fail(fanout_result *res, int err, const char *why) {
    res->done = 1;
    res->err = err ? err : CONN_ELOST;
    snprintf(res->errstr, sizeof res->errstr, "%s", why[0] ? why : "connection lost");
}

/* Connects the node if needed (without waiting) and queues the request.
 * 0, or -1 (failed, as exec_failed said: not sent). */
static int fanout_send(fanout_node *f) {
    conn *c = f->xc->c;
    if (c->fd >= 0 && c->pid != proc_id()) conn_drop(c);
    if (c->fd < 0) {
        int started = conn_start(c);
        if (started < 0) return -1;
        f->connecting = started;
    } else {
        f->connecting = c->connecting;
    }
    if (exec_write(&f->x, f->xc) != 0) return -1;
    return f->connecting || conn_flush_some(c) >= 0 ? 0 : -1;
}

/* A failure of the node's connection (sent: the request may have been):
 * once more on a new connection where the machine says it may, else the
 * node's result. 1 when it is final. */
static int fanout_failed(fanout_node *f, fanout_result *res, int sent) {
    int step = exec_failed(&f->x, f->xc, sent);
    if (step == EXEC_ROUTE && !f->again && !deadline_passed(f->x.deadline)) {
        f->again = 1;
        if (fanout_send(f) == 0) return 0;
        exec_failed(&f->x, f->xc, 0);
    }
    fanout_fail(res, f->x.err, f->x.errstr);
    return 1;
}

/* One node's next step after poll said revents. 1 when it just finished. */
static int fanout_step(fanout_node *f, fanout_result *res, short revents) {
    conn *c = f->xc->c;
    int k;
    if (f->connecting) {
        if (!(revents & (POLLOUT | POLLERR | POLLHUP))) return 0;
        if (conn_connect_done(c) != 0) return fanout_failed(f, res, 0);
        f->connecting = 0;
    }
    if (conn_flush_some(c) < 0) return fanout_failed(f, res, 1);
    if (revents & (POLLIN | POLLERR | POLLHUP)) {
        while ((k = conn_fill(c)) == 1) {}
        if (k < 0) return fanout_failed(f, res, 1);
    }
    for (;;) {
        redisReply *r = NULL;
        int step;
        k = exec_conn_reply(f->xc, &r);
        if (k < 0) return fanout_failed(f, res, 1);
        if (k == 0) return 0;
        step = exec_reply(&f->x, f->xc, r);
        if (step == EXEC_MORE) continue;
        if (step == EXEC_SEND) {
            /* (NOSCRIPT, or a native command that did not run: the script,
             * on this master, now; the one recovery a master's refusal gets
             * here: the quorum decides about the others, recovery.h) */
            if (exec_write(&f->x, f->xc) != 0 || conn_flush_some(c) < 0) return fanout_failed(f, res, 1);
            continue;
        }
        if (step == EXEC_DONE) {
            res->reply = exec_take_answer(&f->x);
            res->done = 1;
        } else {
            exec_clear(&f->x);
            fanout_fail(res, f->x.err ? f->x.err : CONN_EREDIS, f->x.errstr);
        }
        return 1;
    }
}

/* The ones that did not answer. Their connection stays, so that what is
 * sent next on it (a release) runs after this request on that master, and
 * their late replies are dropped; unless it has not answered anything for
 * longer than the client's timeout: then it is closed (a stalled master
 * runs what was written, in order, when it resumes). */
static void fanout_give_up(router *r, fanout_node *nodes, fanout_result *out, int n) {
    int64_t now = monotime_us();
    int64_t stale = (int64_t)(r->timeout_ms > 0 ? r->timeout_ms : 2000) * 1000;
    int i;
    for (i = 0; i < n; i++) {
        exec_conn *xc = nodes[i].xc;
        if (out[i].done || xc == NULL) continue;
        /* (a SCRIPT LOAD among them is no longer one in flight for anyone
         * to send EVALSHA behind: its answer is dropped, unread) */
        if (nodes[i].x.st.load_due) exec_conn_loaded(xc, nodes[i].x.script);
        exec_conn_give_up(xc, nodes[i].x.st.due);
        exec_clear(&nodes[i].x);
        out[i].done = 1;
        out[i].err = CONN_ETIMEOUT;
        if (now - xc->skip_since >= stale) {
            conn_fail_with(xc->c, CONN_ETIMEOUT, "lost");
            snprintf(out[i].errstr, sizeof out[i].errstr, "%s", xc->c->errstr);
        } else {
            snprintf(out[i].errstr, sizeof out[i].errstr, "no answer in time");
        }
    }
}

int fanout_script(router *r, const script_def *s, int nargs, const char **args, const size_t *lens,
                  int64_t deadline, fanout_enough enough, void *ud, fanout_result *out) {
    fanout_node *nodes;
    struct pollfd *pfd;
    int *map;
    int n, i, first, answered = 0, pending = 0;
    if (router_sync(r) != 0) return -1;
    n = r->nconns;
    nodes = calloc((size_t)(n ? n : 1), sizeof *nodes);
    pfd = calloc((size_t)(n ? n : 1), sizeof *pfd);
    map = calloc((size_t)(n ? n : 1), sizeof *map);
    memset(out, 0, (size_t)n * sizeof *out);
    if (nodes == NULL || pfd == NULL || map == NULL) {
        free(nodes);
        free(pfd);
        free(map);
        return -1;
    }
    /* everything goes out before anything is waited for */
    for (i = 0; i < n; i++) {
        fanout_node *f = &nodes[i];
        f->xc = router_conn(r, i);
        if (f->xc == NULL) {
            fanout_fail(&out[i], CONN_ENOMEM, "out of memory");
            continue;
        }
        first = script_first_key(s, nargs, args, lens);
        exec_init(&f->x, s, nargs, args, lens, first >= 0 ? args[first] : NULL, first >= 0 ? lens[first] : 0,
                  TOPO_REDLOCK, EXEC_IDEMPOTENT | EXEC_EVAL_FIRST, 0, deadline);
        f->x.deadline = deadline;
        /* (a connect that failed at once: its result, as before the engine;
         * only a connection found dead after it was made is tried again) */
        if (fanout_send(f) == 0) {
            pending++;
        } else {
            exec_failed(&f->x, f->xc, 0);
            fanout_fail(&out[i], f->x.err, f->x.errstr);
        }
    }
    while (pending > 0 && !(enough && enough(out, n, ud))) {
        int np = 0, rc;
        for (i = 0; i < n; i++) {
            if (out[i].done) continue;
            pfd[np].fd = nodes[i].xc->c->fd;
            pfd[np].events = conn_poll_events(nodes[i].xc->c);   /* (POLLOUT while connecting) */
            pfd[np].revents = 0;
            map[np++] = i;
        }
        rc = poll(pfd, (nfds_t)np, deadline_poll_ms(deadline));
        if (rc < 0 && (errno != EINTR || intr_pending())) break;   /* (intr.h) */
        for (i = 0; i < np; i++) {
            int k = map[i];
            if (pfd[i].revents == 0 || !fanout_step(&nodes[k], &out[k], pfd[i].revents)) continue;
            pending--;
            if (out[k].reply) answered++;
        }
        if (deadline_passed(deadline)) break;
    }
    fanout_give_up(r, nodes, out, n);
    free(nodes);
    free(pfd);
    free(map);
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
