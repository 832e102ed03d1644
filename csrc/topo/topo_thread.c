/*
 * topo_thread.c: the topology's own thread, for what must not wait on the
 * callers' or the watchdog's time.
 *
 *   Sentinel  follows the sentinels: subscribed to the failover events of
 *             its master on every one of them (sentinel_sub.h), it casts a
 *             doubt at once on any of them (nothing is renewed or granted
 *             until a master is confirmed again), and makes a pass over
 *             them (sentinel_pass) at once then, once a second anyway (a
 *             missed message, a sentinel that was down), every 100 ms while
 *             in doubt, and whenever someone casts a doubt (a failure on a
 *             connection of theirs).
 *   Cluster   loads the slot map when asked (a redirect the watchdog saw):
 *             the watchdog's renewals never wait for a slow node.
 *
 * Part of the topology: it publishes, doubts and reads the topology
 * directly (topo_internal.h), no callbacks. It holds no reference to it:
 * the topology stops and joins it before it goes. Created with every
 * signal masked (signals are the host's); it blocks only in poll(2) (a
 * pass asks every sentinel at once: a hung one costs it nothing) and never
 * holds the topology's mutex while it waits. After fork the child has no
 * such thread: the next use starts one (the sockets it inherited were
 * closed by conn_fork.c).
 */
#define _GNU_SOURCE
#include "topo/topo_internal.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/deadline.h"
#include "base/monotime.h"
#include "base/proc_id.h"
#include "topo/sentinel.h"
#include "topo/sentinel_sub.h"

#define TT_INTERVAL_MS 1000     /* Sentinel: a pass at least this often */
#define TT_DOUBT_MS 100         /* ... and this often while in doubt */
#define TT_MAX_FDS 65           /* the eventfd and a subscription per sentinel (64 at most) */

struct topo_thread {
    topo *t;                /* not a reference: t stops us before it goes */
    pthread_t thread;
    pid_t pid;              /* the process the thread runs in */
    int wake_fd;            /* eventfd: a kick, or the stop */
    int stopping;           /* atomic */
    sentinel_subs *subs;    /* Sentinel: the failover events */
    sentinel_pool *pool;    /* Sentinel: the passes' connections */
};

/* Whether the topology asked the thread to end (the flag is read and
 * written only here and in tt_stop_flag: atomics, which helgrind cannot
 * see, and tools/helgrind.supp names these two functions). */
static __attribute__((noinline)) int tt_stopping(topo_thread *th) {
    return __atomic_load_n(&th->stopping, __ATOMIC_ACQUIRE);
}

static __attribute__((noinline)) void tt_stop_flag(topo_thread *th) {
    __atomic_store_n(&th->stopping, 1, __ATOMIC_RELEASE);
}

/* One pass over the sentinels, on the thread's pool of connections:
 * publishes a confirmed master, or casts a doubt. */
static void tt_sentinel_pass(topo *t, sentinel_pool *pool) {
    char err[CONN_ERRSTR_LEN];
    const char *kind;
    topo_snap *s = NULL;
    topo_src src;
    uint64_t gen, seq;
    int v;
    pthread_mutex_lock(&t->mu);
    gen = t->doubts;
    seq = ++t->loads;
    topo_src_of(t, &src);
    pthread_mutex_unlock(&t->mu);
    /* (this thread may resolve the sentinels' names: it blocks no one) */
    v = sentinel_pass(&src, pool, 1, deadline_in_ms(t->cfg.connect_timeout_ms > 0 ? t->cfg.connect_timeout_ms : 1000),
                      &s, err, sizeof err, &kind);
    if (v == SENTINEL_OK) {
        s->load_seq = seq;
        topo_publish_as(t, s, gen);
    } else {
        /* A doubt, and so is not knowing (SENTINEL_FAIL: too few of the
         * sentinels answered, or none knows the name): the master we have
         * may be one they have replaced, and a hung or unreachable
         * sentinel may be the only one that could tell us. Nothing is
         * written to it until a pass confirms a master again. */
        topo_doubt_as(t, 0);
    }
}

/* Sleeps in poll until `next` (ms), a kick, or an event on a subscription.
 * Returns 1 when asked to act now (a kick, a failover event of ours). */
static int tt_wait(topo_thread *th, int64_t next) {
    struct pollfd pfd[TT_MAX_FDS];
    int64_t now = monotime_ms();
    int n = 1, ask = 0, timeout = next == INT64_MAX ? -1 : next > now ? (int)(next - now) : 0;
    pfd[0].fd = th->wake_fd;
    pfd[0].events = POLLIN;
    pfd[0].revents = 0;
    if (th->subs) n += sentinel_subs_poll_fds(th->subs, pfd + 1, TT_MAX_FDS - 1);
    if (poll(pfd, (nfds_t)n, timeout) < 0 && errno != EINTR) {
        struct timespec ts = {0, 10000000};   /* cannot happen with valid fds */
        nanosleep(&ts, NULL);
    }
    if (pfd[0].revents & POLLIN) {
        uint64_t counter;
        if (read(th->wake_fd, &counter, sizeof counter) > 0) ask = 1;
    }
    if (th->subs && sentinel_subs_read(th->subs, pfd + 1, n - 1)) {
        /* a failover of ours begins, or goes on: nothing is renewed or
         * granted until a pass confirms a master again */
        topo_doubt_as(th->t, 0);
        ask = 1;
    }
    return ask;
}

static void tt_follow_sentinels(topo_thread *th) {
    topo *t = th->t;
    int64_t next = monotime_ms() + TT_INTERVAL_MS;
    int ask = topo_epoch(t) == 0 || !topo_confirmed(t);   /* (nginx: nothing loaded yet) */
    while (!tt_stopping(th)) {
        int64_t now = monotime_ms(), subs_next = sentinel_subs_tick(th->subs, now);
        if (ask || now >= next) {
            tt_sentinel_pass(t, th->pool);
            next = monotime_ms() + (topo_confirmed(t) ? TT_INTERVAL_MS : TT_DOUBT_MS);
        }
        ask = tt_wait(th, subs_next < next ? subs_next : next);
    }
}

/* Cluster: a new map whenever asked (a kick), by the connect timeout. */
static void tt_load_maps(topo_thread *th) {
    topo *t = th->t;
    while (!tt_stopping(th)) {
        if (tt_wait(th, INT64_MAX) && !tt_stopping(th)) {
            char err[CONN_ERRSTR_LEN];
            const char *kind;
            int64_t deadline = deadline_in_ms(t->cfg.connect_timeout_ms > 0 ? t->cfg.connect_timeout_ms : 2000);
            /* (a failure: the next redirect asks again) */
            topo_refresh(t, topo_epoch(t), 1, deadline, err, sizeof err, &kind);
        }
    }
}

static void *tt_main(void *arg) {
    topo_thread *th = arg;
    if (th->t->mode == TOPO_SENTINEL) tt_follow_sentinels(th);
    else tt_load_maps(th);
    return NULL;
}

static void tt_free(topo_thread *th) {
    sentinel_subs_free(th->subs);
    sentinel_pool_free(th->pool);
    if (th->wake_fd >= 0) close(th->wake_fd);
    free(th);
}

/* A fork child's copy of the parent's thread: that thread may have been
 * anywhere in its connections at the fork (a hiredis reader's buffer
 * reallocated, a reader freed and not yet cleared), and it holds no mutex
 * while it is, so the child's copy of them may be half-changed: freeing it
 * could free twice. Their sockets were closed by conn_fork.c; the rest is
 * left as it is, as conn_fork.c leaves a TLS session (once per topology
 * per child). Only the eventfd is ours to close. */
static void tt_forget(topo_thread *th) {
    if (th->wake_fd >= 0) close(th->wake_fd);
}

/* A new thread for t, or NULL (the topology then learns of a failover only
 * from its connections' errors, and loads maps in the callers' time). */
static topo_thread *tt_start(topo *t) {
    topo_thread *th = calloc(1, sizeof *th);
    topo_src src;
    sigset_t all, old;
    int rc;
    if (th == NULL) return NULL;
    th->t = t;
    th->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (t->mode == TOPO_SENTINEL) {
        topo_src_of(t, &src);
        th->subs = sentinel_subs_new(&src);
        th->pool = sentinel_pool_new(t->nseeds);
    }
    if (th->wake_fd < 0 ||
        (t->mode == TOPO_SENTINEL && (th->subs == NULL || th->pool == NULL || t->nseeds + 1 > TT_MAX_FDS))) {
        tt_free(th);
        return NULL;
    }
    th->pid = proc_id();
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&th->thread, NULL, tt_main, th);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        tt_free(th);
        return NULL;
    }
    /* named by its creator, so that it has its name once it exists (top
     * -H, ps -L, /proc/PID/task/TID/comm) */
    pthread_setname_np(th->thread, "redislock-topo");
    return th;
}

void topo_thread_ensure(topo *t) {
    topo_thread *th = t->thread;
    if (th && th->pid == proc_id()) return;
    if (th) tt_forget(th);   /* a fork child's copy: that thread is not here */
    __atomic_store_n(&t->thread, tt_start(t), __ATOMIC_RELEASE);
}

void topo_thread_kick(topo *t) {
    uint64_t one = 1;
    topo_thread *th = t->thread;
    if (th == NULL || th->pid != proc_id()) return;
    if (write(th->wake_fd, &one, sizeof one) < 0) {
        /* saturated: it is being woken anyway */
    }
}

int topo_thread_ours(const topo *t) {
    topo_thread *th = __atomic_load_n(&t->thread, __ATOMIC_ACQUIRE);
    return th != NULL && th->pid == proc_id();
}

void topo_thread_stop(topo *t) {
    topo_thread *th = t->thread;
    uint64_t one = 1;
    t->thread = NULL;
    if (th == NULL) return;
    if (th->pid == proc_id()) {
        tt_stop_flag(th);
        if (write(th->wake_fd, &one, sizeof one) < 0) { /* saturated: woken anyway */ }
        pthread_join(th->thread, NULL);
        tt_free(th);
        return;
    }
    tt_forget(th);
}
