/*
 * wd_internal.h: the watchdog's shared state, for its own files only
 * (watchdog.c the API, wd_sched.c the renewals due and their sending,
 * wd_lease.c what an answer means for a lease, wd_link.c the connections,
 * wd_thread.c the thread, wd_events.c on_event's events, wd_fork.c fork).
 * No Lua here.
 *
 * One mutex guards everything below. The thread holds it except while it
 * sleeps in poll(2); every socket is non-blocking, so holding it never waits
 * on the network, and the Lua side's calls (acquire, release, held) never
 * wait for a slow or stalled Redis.
 */
#ifndef REDISLOCK_WD_INTERNAL_H
#define REDISLOCK_WD_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "net/conn.h"
#include "exec/exec.h"
#include "exec/exec_conn.h"
#include "topo/topo.h"
#include "watchdog/watchdog.h"
#include "watchdog/wd_entry.h"
#include "watchdog/wd_heap.h"
#include "watchdog/wd_ids.h"
#include "watchdog/wd_loss.h"

#define WD_RETRY_MIN_MS 10      /* a failed renewal is retried after ttl/10, at least this */
#define WD_RENEW_ALL_MS 100     /* at most this often, all at once after a doubt is lifted */

/* A renewal sent on a link and not yet answered (with the SCRIPT LOAD and
 * the ASKING that may go before it: one attempt of exec.h's machine), or
 * a WAIT behind renewals (wd_ack.c). */
typedef struct wd_req {
    wd_entry *e;            /* NULL: a WAIT */
    int64_t ttl_ms;         /* the lease it asked for */
    int64_t sent_at;        /* ms, when it was queued: the lease counts from here */
    uint64_t from, to;      /* its bytes in the link's stream (conn offsets) */
    exec_state st;          /* how far the request got (exec.h) */
    const struct script_def *script;  /* what it sends: its renew (extend if none), redlock_renew */
    uint32_t round;         /* the entry's round it was sent in */
    uint64_t doubts;        /* topo_doubts() it counts from (Sentinel) */
    int wait;               /* a WAIT (wd_ack.c) */
} wd_req;

/* A renewal answered "renewed" whose credit waits for the WAIT behind it
 * (wd_ack.c): what wd_outcome will be told. */
typedef struct wd_acked {
    wd_entry *e;
    uint32_t round;
    int64_t sent_at, ttl_ms;
    uint64_t doubts;
} wd_acked;

/* The watchdog's connection to one node, with its requests in order. */
typedef struct wd_link {
    topo_node node;         /* which node (a copy) */
    exec_conn *x;           /* its conn: may_resolve = 0, the thread never resolves */
    wd_req *q;              /* ring: oldest at head */
    uint32_t head, n, cap;
    int64_t since;          /* ms: when the current connect began */
    int64_t end_lb;         /* ms: at most the earliest lease end among its
                             * held requests (0: unknown). The loop looks
                             * at them one by one only once it is reached,
                             * never on every wakeup: 10,000 in flight
                             * would cost a scan each (see wd_lease_lowered) */
    short revents;          /* what the last poll saw */
    /* wd_ack.c: renewals answered and waiting for their WAIT's answer, and
     * what the next WAIT covers */
    wd_acked *held;
    uint32_t nheld, held_cap;
    uint32_t unwaited;      /* renewals queued since the last WAIT */
    uint32_t waits;         /* WAITs queued and not answered yet */
    int wait_need;          /* the most acknowledgements one of them needs */
    int64_t wait_ms;        /* the WAIT's timeout for them */
} wd_link;

struct wd {
    pthread_mutex_t mu;
    int running;            /* the process's renewal thread drives it (wd_thread.c) */
    int stopped;            /* wd_stop called: never start again */
    int refs;
    pid_t pid;              /* process it is driven in */
    int inherited;          /* forked: the eventfds were the parent's */

    topo *t;                /* where keys live (shared with the Lua side) */
    /* The renewal scripts, looked up once by wd_new: each client's thread
     * only reads its own watchdog's (a lazy static filled from every
     * thread at once was a data race). */
    const struct script_def *extend_script, *renew_script;
    topo_snap *snap;        /* the snapshot links is built for */
    conn_config cfg;        /* settings for the links (the topology's) */
    wd_link *links;         /* one per node of snap */
    int nlinks;
    int want_refresh;       /* a redirect or a refused master: reload t */
    uint64_t send_doubts;   /* topo_doubts() the requests being queued count
                               from: taken before the master was found
                               confirmed (wd_collect), or the first send's
                               (wd_resend); a doubt cast since voids them */
    uint64_t confirms_seen; /* topo_confirms(t) when last looked at */
    int64_t renew_all_after;/* ms: the next doubt lifted renews all at once from then */

    wd_idmap ids;           /* id -> entry, for the Lua side's calls */
    wd_heap heap;           /* renewals by time */
    wd_losses losses;       /* reports for the Lua side */
    evq events;             /* events for on_event (wd_events.c) */
    conn_counters net;      /* what its connections count (counters.h) */
    uint32_t nentries;      /* entries alive, orphans awaiting an answer included */
    wd_stats stats;

    struct wd *next_wd;     /* the registry of all watchdogs, for fork */
};

/* wd_lease.c: with w->mu held; calls nothing of the links or the
 * scheduler, which both call it. */
void wd_mark_lost(wd *w, wd_entry *e, int state);
void wd_entry_free(wd *w, wd_entry *e);
void wd_renew_all_now(wd *w, int64_t now);
void wd_apply_failure(wd *w, wd_entry *e, int64_t now);
void wd_outcome(wd *w, wd_entry *e, int outcome, uint32_t round, int64_t sent_at, int64_t ttl_ms,
                int64_t now);
void wd_contested(wd *w, wd_entry *e, int64_t now);
int64_t wd_retry_at(const wd_entry *e, int64_t now);
/* An entry's lease_end was set lower while it may be in flight: every
 * link's end_lb comes down to it (under the mutex). */
void wd_lease_lowered(wd *w, int64_t lease_end);

/* wd_ack.c: a renewal is credited once a replica has it, with w->mu held.
 * wd_ack_needed: whether renewals on l wait for a replica (a master a
 * failover could replace); wd_ack_queued: a renewal of e was queued on l;
 * wd_ack_due: 1 when those queued since the last WAIT want one (WAIT
 * *need *ms, which wd_link_pump sends behind them), else 0; wd_ack_hold: an answer
 * "renewed" waits for it (-1: no room, no credit); wd_ack_answer: the
 * WAIT's answer (r NULL: none) settles them; wd_ack_fail_all: the link was
 * lost; wd_ack_expire: those whose lease ran out meanwhile are lost (and
 * *lb lowered to the earliest other end, *dead set: the link is dropped);
 * wd_ack_forget: a fork child forgets the parent's. */
int wd_ack_needed(const wd *w, const wd_link *l);
void wd_ack_queued(wd *w, wd_link *l, const wd_entry *e);
int wd_ack_due(wd_link *l, int *need, int64_t *ms);
int wd_ack_hold(wd *w, wd_link *l, const wd_req *req);
void wd_ack_answer(wd *w, wd_link *l, const redisReply *r, int64_t now);
void wd_ack_fail_all(wd *w, wd_link *l, int64_t now);
void wd_ack_expire(wd *w, wd_link *l, int64_t now, int64_t *lb, int *dead);
void wd_ack_forget(wd *w, wd_link *l);

/* wd_sched.c: with w->mu held. */
void wd_collect(wd *w, int64_t now);
void wd_apply_step(wd *w, wd_link *l, const wd_req *req, exec_req *x, int step, int64_t now);
void wd_apply_answer(wd *w, wd_link *l, const wd_req *req, const redisReply *r, int64_t now);
wd_link *wd_route(wd *w, const wd_entry *e);

/* wd_link.c: with w->mu held; never blocks. */
int wd_link_reserve(wd_link *l, uint32_t total);
/* e's renewal as exec.h's request (its script: `script`, or the one the
 * entry is renewed with), its arguments written into args. */
typedef struct wd_args {
    const char *argv[WD_SET_MAX + 3];   /* [count] keys... token ttl [left] */
    size_t lens[WD_SET_MAX + 3];
    char left_txt[24];
    char count_txt[8];
} wd_args;
void wd_request(const wd *w, wd_entry *e, const struct script_def *script, exec_req *x, wd_args *args);
/* Queues e's renewal on l: st NULL for a new one; else how far it got (it
 * goes again after NOSCRIPT, ASK or a native command that did not run),
 * and round the original request's (its answer counts in that round
 * only; e->round for a new renewal). 0, or -1 (the link was dropped). */
int wd_link_queue(wd *w, wd_link *l, wd_entry *e, const exec_state *st, int64_t sent_at,
                  const struct script_def *script, uint32_t round);
int wd_links_sync(wd *w, int64_t now);
int wd_link_open(wd_link *l, int64_t now);
wd_link *wd_link_find(wd *w, const topo_node *n);
exec_conn *wd_link_conn(wd *w, const topo_node *n);
void wd_link_unqueue(wd_link *l, wd_entry *e);
/* What wd_link_pump does with each renewal the machine is done with, given
 * with its request (taken off the queue): wd_apply_step; and with an
 * answer read in place (an integer, the common case): wd_apply_answer. */
typedef struct wd_appliers {
    void (*step)(wd *w, wd_link *l, const wd_req *req, exec_req *x, int step, int64_t now);
    void (*answer)(wd *w, wd_link *l, const wd_req *req, const redisReply *r, int64_t now);
} wd_appliers;
void wd_link_pump(wd *w, wd_link *l, int64_t now, const wd_appliers *apply);
void wd_link_expire(wd *w, wd_link *l, int64_t now);
void wd_link_drop(wd *w, wd_link *l, int64_t now);
int64_t wd_link_next_deadline(const wd *w, const wd_link *l);
short wd_link_events(const wd_link *l);
void wd_link_free(wd_link *l);

/* wd_thread.c: the process's one renewal thread. wd_thread_start: w is
 * driven by it from now on (started if need be), with w->mu held;
 * wd_runner_leave: no longer, without w->mu (returns once no round uses
 * w; the last one to leave joins the thread); wd_wake: it looks at every
 * watchdog at once; wd_wake_by: if it sleeps past `at` (ms); the fork
 * handlers' part (wd_fork.c): R.mu taken and given back, R reset in the
 * child. */
int wd_thread_start(wd *w, char *errbuf, size_t errlen);
void wd_runner_leave(wd *w);
void wd_wake(wd *w);
void wd_wake_by(wd *w, int64_t at);
void wd_runner_lock(void);
void wd_runner_unlock(void);
void wd_runner_forked(void);

/* wd_events.c */
void wd_events_init(wd *w);                                  /* at wd_new */
void wd_note_renewal_failed(wd *w, const wd_entry *e, int64_t now);  /* with w->mu held */

/* wd_fork.c */
void wd_fork_register(wd *w);
void wd_fork_unregister(wd *w);
void wd_adopt_after_fork(wd *w);                             /* with w->mu held */

#endif
