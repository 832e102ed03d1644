/*
 * exec.c: one request's rules as a state machine (see exec.h).
 */
#include "exec/exec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/deadline.h"
#include "base/monotime.h"
#include "cmd/native_cmd.h"
#include "cmd/script_answer.h"

void exec_init(exec_req *x, const script_def *s, int argc, const char *const *argv, const size_t *lens,
               const char *key, size_t klen, int mode, unsigned flags, long timeout_ms, int64_t until_us) {
    memset(x, 0, sizeof *x);
    x->script = s;
    x->argc = argc;
    x->argv = argv;
    x->lens = lens;
    x->key = key;
    x->klen = klen;
    x->mode = mode;
    x->flags = flags;
    x->deadline = deadline_in_ms(timeout_ms);
    x->until = deadline_min(x->deadline, until_us);
}

void exec_set_pre(exec_req *x, int argc, const char *const *argv, const size_t *lens) {
    int i;
    x->pre_argc = argc < EXEC_MAX_PRE ? argc : EXEC_MAX_PRE;
    for (i = 0; i < x->pre_argc; i++) {
        x->pre_argv[i] = argv[i];
        x->pre_lens[i] = lens[i];
    }
}

int exec_fail(exec_req *x, int err, const char *errstr) {
    x->err = err;
    snprintf(x->errstr, sizeof x->errstr, "%s", errstr);
    return EXEC_FAIL;
}

/* What too many redirects were, by what they said (exec_state.seen). A
 * failover is not a resharding: while the nodes learn of the new master
 * (by gossip, in a moment), the map one of them gives may still name the
 * old one, which sends us on; a migration says ASK or TRYAGAIN. */
static const char *exec_why_tries(unsigned seen) {
    if (seen & EXEC_SEEN_MIGRATE)
        return "connection lost: too many redirects (a slot is being migrated: the cluster is resharding)";
    if (seen & EXEC_SEEN_REPLICA)
        return "connection lost: no master confirmed yet (ours became a replica: a failover in progress)";
    if (seen & EXEC_SEEN_MOVED)
        return "connection lost: no master confirmed yet (the nodes disagree on who serves the slot: "
               "a failover in progress?)";
    return "connection lost: no master confirmed yet (too many tries)";
}

int exec_try(exec_req *x) {
    if (++x->st.tries > EXEC_MAX_TRIES) return exec_fail(x, CONN_ELOST, exec_why_tries(x->st.seen));
    return EXEC_ROUTE;
}

/* Whether this attempt sends EVAL (after a SCRIPT LOAD): after a NOSCRIPT,
 * or, for EXEC_EVAL_FIRST, where the script has not run on this socket.
 * After a NOSCRIPT where a SCRIPT LOAD of it is still in flight on the
 * socket (queued by a request ahead of this one in a pipeline), EVALSHA
 * behind that load does, without the source, once; EVAL if refused again. */
static int exec_wants_eval(exec_req *x, const exec_conn *xc) {
    uint64_t bit;
    if (x->script == NULL) return 0;
    bit = script_bit(x->script);
    if (x->st.want_eval) {
        if (bit != 0 && (xc->loading & bit) && !x->st.after_load) {
            x->st.after_load = 1;
            return 0;
        }
        return 1;
    }
    return (x->flags & EXEC_EVAL_FIRST) && bit != 0 && !(xc->scripts_ran & bit);
}

/* The request itself: the native command (nc, when it has one), EVAL or
 * EVALSHA, or the command. */
static int exec_write_request(exec_req *x, exec_conn *xc, const native_cmd *nc) {
    if (x->script == NULL) return conn_append(xc->c, x->argc, (const char **)x->argv, x->lens);
    if (nc->op) return conn_append(xc->c, nc->argc, (const char **)nc->argv, nc->lens);
    return script_append(xc->c, x->script, x->st.eval, x->argc, (const char **)x->argv, x->lens);
}

int exec_write(exec_req *x, exec_conn *xc) {
    static const char *ask[1] = {"ASKING"};
    static const size_t ask_len[1] = {6};
    native_cmd nc;
    int eval, k;
    exec_conn_sync(xc);
    /* the native command that stands in for the script where the node has
     * one (its handshake read: a connection still connecting knows none
     * yet, and sends the script), unless the script was asked for (a
     * NOSCRIPT: it goes as EVAL; a native command that did not run) */
    nc.op = 0;
    if (x->script && !x->st.want_eval && !x->st.scripted)
        native_build(xc->nat.bits, x->script, x->argc, (const char **)x->argv, x->lens, &nc);
    x->st.native = (uint8_t)nc.op;
    eval = !nc.op && exec_wants_eval(x, xc);
    x->st.load_due = x->st.pre_due = x->st.asking_due = 0;
    x->st.eval = eval;
    /* an EVAL goes after a SCRIPT LOAD (exec_conn.h); the ASKING right
     * before the request, as it holds for the next command only */
    if (eval) {
        if ((k = exec_conn_queue_load(xc, x->script, 0)) < 0) goto failed;
        x->st.load_due = (uint8_t)k;
    }
    if (x->pre_argc > 0) {
        if (conn_append(xc->c, x->pre_argc, x->pre_argv, x->pre_lens) != 0) goto failed;
        x->st.pre_due = 1;
    }
    if (x->st.asking) {
        if (conn_append(xc->c, 1, ask, ask_len) != 0) goto failed;
        x->st.asking_due = 1;
    }
    if (exec_write_request(x, xc, &nc) != 0) goto failed;
    x->st.due = (uint8_t)(x->st.load_due + x->st.pre_due + x->st.asking_due + 1);
    return 0;
failed:
    exec_fail(x, xc->c->err ? xc->c->err : CONN_ENOMEM, xc->c->errstr[0] ? xc->c->errstr : "out of memory");
    return -1;
}

/* The pause after a refusal that asks for one: the caller's deadline over,
 * or no deadline at all and EXEC_MAX_WAITS waited: the refusal is the
 * answer now (1). */
static int exec_pause_over(const exec_req *x) {
    if (x->until == DEADLINE_NONE && x->st.waits > EXEC_MAX_WAITS) return 1;
    return deadline_passed(x->until);
}

/* What a refusal to be retried asks for besides: ASKING to its target, a
 * pause, a new connection, a fresh look at the topology. */
static int exec_redirect(exec_req *x, exec_conn *xc, redisReply *r, const recovery *rec) {
    x->st.seen |= rec->cls == RECOVERY_MOVED ? EXEC_SEEN_MOVED :
                  rec->cls == RECOVERY_ASK || rec->cls == RECOVERY_TRYAGAIN ? EXEC_SEEN_MIGRATE :
                  rec->cls == RECOVERY_READONLY || rec->cls == RECOVERY_MASTERDOWN ? EXEC_SEEN_REPLICA : 0;
    if (rec->todo & RECOVERY_ASKING) {
        if (rec->target_len >= sizeof x->target) {
            x->answer = r;    /* (no address we could follow: an answer) */
            return EXEC_DONE;
        }
        memcpy(x->target, rec->target, rec->target_len);
        x->target[rec->target_len] = '\0';
        x->st.asking = 1;
    }
    if (rec->todo & RECOVERY_PAUSE) {
        /* it did not run, and may once the node is ready (a slot being
         * migrated, a dataset being loaded): wait, more each time, until
         * the caller's deadline, without counting it as a redirect; then
         * Redis' refusal is the answer. A refresh it asks for: once. */
        x->st.waits++;
        if (exec_pause_over(x)) {
            x->answer = r;
            return EXEC_DONE;
        }
        if ((rec->todo & RECOVERY_RESOLVE) && x->st.waits == 1) {
            x->st.resolve = 1;
            x->st.refreshed = 0;
            x->st.asking = 0;
        }
        x->answer = r;    /* (kept: the answer if the pause ends it) */
        return EXEC_PAUSE;
    }
    freeReplyObject(r);
    if (rec->todo & RECOVERY_DROP) conn_drop(xc->c);   /* its node is a replica now */
    if (rec->todo & RECOVERY_RESOLVE) {
        /* the map changed, or the master did: look again, and go where it
         * says (a later ASK says where again) */
        x->st.resolve = 1;
        x->st.refreshed = 0;
        x->st.asking = 0;
    }
    if (deadline_passed(x->deadline))
        return exec_fail(x, CONN_ETIMEOUT, "connection lost: timed out (following redirects)");
    return EXEC_ROUTE;
}

/* An answer that is not of its script's shape (script_answer.h): nobody
 * reads it as one; the call fails with what came. The stream is whole (the
 * connection keeps it), and the script may have run, as after any lost
 * reply: never sent again. */
static int exec_misshapen(exec_req *x, redisReply *r) {
    char what[48], msg[CONN_ERRSTR_LEN];
    script_answer_describe(r, what, sizeof what);
    freeReplyObject(r);
    snprintf(msg, sizeof msg, "redis error: protocol error: %.40s answered %s, not what it returns", x->script->name,
             what);
    return exec_fail(x, CONN_EREDIS, msg);
}

/* The answer to the request itself (not to what went before it). */
static int exec_answer(exec_req *x, exec_conn *xc, redisReply *r) {
    recovery rec;
    if (x->st.native) {
        /* A native command stood in for the script: its answer read as the
         * script's integer; or, when it gave none (an error: it did not
         * run), the script, here and now, for the rest of the request. A
         * command the node refuses is not tried again on this socket. */
        long long v;
        int verdict = native_reply(x->st.native, r, &v);
        if (verdict == NATIVE_MAPPED) {
            native_reply_set_int(r, v);
            x->answer = r;
            return EXEC_DONE;
        }
        if (verdict == NATIVE_UNSUPPORTED) xc->nat.bits &= ~(unsigned)x->st.native;
        freeReplyObject(r);
        x->st.scripted = 1;
        return EXEC_SEND;
    }
    if (x->script && r->type != REDIS_REPLY_ERROR) xc->scripts_ran |= script_bit(x->script);
    recovery_of_reply(r, x->mode, &rec);
    if (!(rec.todo & RECOVERY_RETRY)) {
        if (x->script && !script_answer_ok(x->script, r)) return exec_misshapen(x, r);
        x->answer = r;    /* the answer, as Redis gave it */
        return EXEC_DONE;
    }
    if (rec.todo & RECOVERY_EVAL) {
        if (x->script == NULL || x->st.eval) {
            x->answer = r;    /* not ours to load, or sent as EVAL: an answer */
            return EXEC_DONE;
        }
        /* the script cache is per node, and this one lacks it: EVAL it
         * here (after ASKING again, if that is how we got here), loaded
         * first; it did not run, so it runs exactly once */
        freeReplyObject(r);
        xc->scripts_ran &= ~script_bit(x->script);
        conn_note_noscript(xc->c);
        x->st.want_eval = 1;
        return EXEC_SEND;
    }
    return exec_redirect(x, xc, r, &rec);
}

int exec_reply(exec_req *x, exec_conn *xc, redisReply *r) {
    x->st.due--;
    if (x->st.load_due > 0) {
        x->st.load_due--;
        exec_conn_loaded(xc, x->script);
        exec_conn_note_dropped(xc, r);
        freeReplyObject(r);
        return EXEC_MORE;
    }
    if (x->st.pre_due > 0) {
        x->st.pre_due--;
        if (x->pre_reply) freeReplyObject(x->pre_reply);
        x->pre_reply = r;
        return EXEC_MORE;
    }
    if (x->st.asking_due > 0) {
        x->st.asking_due--;
        freeReplyObject(r);   /* (+OK; an error shows in the answer behind it) */
        return EXEC_MORE;
    }
    return exec_answer(x, xc, r);
}

int exec_failed(exec_req *x, const exec_conn *xc, int sent) {
    recovery rec;
    const conn *c = xc->c;
    recovery_of_failure(c->err, sent, x->mode, &rec);
    exec_fail(x, c->err ? c->err : CONN_ELOST, c->errstr[0] ? c->errstr : "connection lost");
    /* (EINTR: a signal asked us to stop; nothing to say of the node) */
    if ((rec.todo & RECOVERY_RESOLVE) && c->err != CONN_EINTR) x->st.resolve = 1;
    if (!(rec.todo & RECOVERY_RETRY) || c->err == CONN_EINTR || deadline_passed(x->deadline)) return EXEC_FAIL;
    if (!sent) {
        /* nothing was sent: after a fresh look the node may be another one
         * (once; where there is nothing to look up, still once) */
        if (x->st.refreshed) return EXEC_FAIL;
        if (!(rec.todo & RECOVERY_RESOLVE)) x->st.refreshed = 1;
        return EXEC_ROUTE;
    }
    /* sent, maybe run: never again, but for what may run twice, once */
    if (!(x->flags & EXEC_IDEMPOTENT) || x->st.retried) return EXEC_FAIL;
    x->st.retried = 1;
    return EXEC_ROUTE;
}

int exec_resolve(exec_req *x) {
    int r = x->st.resolve;
    x->st.resolve = 0;
    return r;
}

const char *exec_target(const exec_req *x) {
    return x->st.asking ? x->target : NULL;
}

long exec_pause_ms(const exec_req *x) {
    long ms = recovery_pause_ms(x->st.waits);
    if (x->until != DEADLINE_NONE) {
        int64_t left = (x->until - monotime_us()) / 1000;
        if (left < ms) ms = left > 0 ? (long)left : 0;
    }
    return ms;
}

int exec_after_pause(exec_req *x) {
    if (deadline_passed(x->until) ||
        (x->deadline != DEADLINE_NONE && x->deadline - monotime_us() < EXEC_LAST_SEND_MS * 1000))
        return EXEC_DONE;    /* the refusal kept in answer is the answer */
    if (x->answer) freeReplyObject(x->answer);
    x->answer = NULL;
    return EXEC_ROUTE;
}

int exec_answer_next(const exec_state *st) {
    return st->due == 1 && st->native == 0;
}

int exec_answer_int_ok(const script_def *s, long long v) {
    return s == NULL || script_answer_int_ok(s, v);
}

void exec_note_ran(exec_conn *xc, const script_def *s) {
    if (s) xc->scripts_ran |= script_bit(s);
}

redisReply *exec_take_answer(exec_req *x) {
    redisReply *r = x->answer;
    x->answer = NULL;
    return r;
}

redisReply *exec_take_pre(exec_req *x) {
    redisReply *r = x->pre_reply;
    x->pre_reply = NULL;
    return r;
}

void exec_clear(exec_req *x) {
    if (x->answer) freeReplyObject(x->answer);
    if (x->pre_reply) freeReplyObject(x->pre_reply);
    x->answer = x->pre_reply = NULL;
}
