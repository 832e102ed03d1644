/*
 * wd_thread.c: the renewal thread, an event loop: one per process, for
 * every client's watchdog (a process with 200 clients runs one, not 200).
 *
 * Shape (after jemalloc's background_thread.c): created with every signal
 * masked (signals are the host's), stopped by setting a flag, waking it and
 * joining. It sleeps in poll(2) on every watchdog's links and one eventfd
 * that the Lua side writes when it has something earlier for it, a
 * watchdog leaves, or a topology changed: so a stop never waits for a
 * stalled Redis, and a new lock never waits for the thread's current
 * sleep. Each round, for each watchdog under its own mutex: queue the
 * renewals due, move bytes on every link without blocking, apply the
 * answers, report the leases that ended unanswered; then sleep until the
 * earliest of those moments over all of them.
 *
 * The runner (R) knows the watchdogs it drives; one that leaves
 * (wd_runner_leave) waits for the round that may be using it to end, and
 * the last one to leave stops and joins the thread. Lock order: a
 * watchdog's mutex before R.mu (wd_watch registers under its own); the
 * thread never holds both. After fork the child has no thread: R is reset
 * (wd_fork.c), and the child's first watched lock starts one.
 */
#define _GNU_SOURCE
#include "base/proc_id.h"
#include "watchdog/wd_internal.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/monotime.h"

/* A link's place in the round's poll set. */
typedef struct wd_slot {
    int w;                  /* index in the round's copy of the watchdogs */
    int link;               /* index in its links */
} wd_slot;

static struct wd_runner {
    pthread_mutex_t mu;
    pthread_cond_t idle;    /* a round ended, or the thread did */
    wd **ws;                /* the watchdogs it drives */
    int n, cap;
    pthread_t thread;
    pid_t pid;              /* where the thread runs; 0: none */
    int stopping;           /* the last watchdog left: end */
    int joining;            /* it is being joined: no new start until done */
    int busy;               /* a round holds its copy of ws */
    uint64_t rounds;        /* rounds ended (a leaver waits for the one in
                               progress, never for the ones after: they
                               copied ws without it) */
    int wake_fd;            /* eventfd; -1 until the first start */
    int64_t wake_at;        /* atomic: when its poll ends by itself (ms); 0
                               while it is awake (it looks at every heap
                               before it sleeps, but a heap it already
                               looked at this round may get an earlier
                               entry: then it is woken) */
} R = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0, 0, 0, 0, 0, 0, 0, 0, -1, 0};

void wd_wake(wd *w) {
    uint64_t one = 1;
    int fd = __atomic_load_n(&R.wake_fd, __ATOMIC_ACQUIRE);
    (void)w;
    if (fd >= 0 && write(fd, &one, sizeof one) < 0) {
        /* counter saturated: the thread is being woken anyway */
    }
}

void wd_wake_by(wd *w, int64_t at) {
    int64_t sleeps = __atomic_load_n(&R.wake_at, __ATOMIC_ACQUIRE);
    if (sleeps == 0 || at < sleeps) wd_wake(w);
}

int wd_runner_fd(void) {
    return __atomic_load_n(&R.wake_fd, __ATOMIC_ACQUIRE);
}

void wd_runner_forked(void) {
    /* (in a fork child: the thread is not here; R.mu was taken by the
     * prepare handler; no allocation, only close(2)) */
    R.n = 0;
    R.pid = 0;
    R.stopping = R.joining = R.busy = 0;
    R.wake_at = 0;
    if (R.wake_fd >= 0) close(R.wake_fd);
    __atomic_store_n(&R.wake_fd, -1, __ATOMIC_RELEASE);
}

void wd_runner_lock(void) { pthread_mutex_lock(&R.mu); }
void wd_runner_unlock(void) { pthread_mutex_unlock(&R.mu); }

/* The next moment the thread must act without being woken: a renewal due,
 * a lease ending with its renewal unanswered, a connect or reply timeout. */
static int64_t wd_next_wake(const wd *w) {
    const wd_entry *top = wd_heap_top(&w->heap);
    int64_t t = top ? top->next_at : INT64_MAX;
    int i;
    for (i = 0; i < w->nlinks; i++) {
        int64_t d = wd_link_next_deadline(w, &w->links[i]);
        if (d < t) t = d;
    }
    return t;
}

/* The earliest lease end of a held lock: a refresh may not outlast it. */
static int64_t wd_earliest_end(const wd *w) {
    int64_t t = INT64_MAX;
    uint32_t i;
    for (i = 0; i < w->ids.cap; i++) {
        const wd_entry *e = w->ids.vals[i];
        if (w->ids.keys[i] != 0 && e->state == WD_HELD && e->pid == w->pid && e->lease_end < t)
            t = e->lease_end;
    }
    return t;
}

/* A redirect or a refused master asked for it: the topology is looked up
 * again. Sentinel and Cluster: by the topology's own thread, while the
 * renewals go on (we are woken when it publishes). Where that thread could
 * not start, not here: this one thread renews every client's locks and
 * reads their answers, so a lookup of one client's (sentinels or nodes
 * that hang) must never hold it, whatever its deadline (another client's
 * answer may come any moment; left unread, its lease runs out). Then the
 * Lua side's next request looks the topology up, and meanwhile renewals
 * that fail report their loss before the lease ends. A single node or
 * Redlock's masters need no network: here, without the mutex. */
static void wd_refresh(wd *w, int64_t now) {
    uint64_t seen = w->snap ? w->snap->epoch : 0;
    int64_t end = wd_earliest_end(w), until = now + (w->cfg.connect_timeout_ms > 0 ? w->cfg.connect_timeout_ms : 2000);
    char err[CONN_ERRSTR_LEN];
    const char *kind;
    if (end < until) until = end;
    w->want_refresh = 0;
    if (w->t->mode == TOPO_SENTINEL) {
        /* the topology's thread asks the sentinels; we are woken when it
         * knows (never blocked here meanwhile: renewals go on) */
        topo_follow(w->t);   /* (it may start now) */
        if (topo_following(w->t)) topo_doubt(w->t, seen);
        return;
    }
    if (w->t->mode == TOPO_CLUSTER) {
        topo_load_async(w->t);   /* the same, for the map */
        return;
    }
    if (until <= now) return;
    pthread_mutex_unlock(&w->mu);
    topo_refresh(w->t, seen, 0, until * 1000, err, sizeof err, &kind);
    pthread_mutex_lock(&w->mu);
}

/* What the links do with what they read (wd_sched.c). */
static const wd_appliers wd_apply = {wd_apply_step, wd_apply_answer};

/* w's part of a round before the poll, with w->mu held: the topology
 * looked up if asked, the renewals due queued, bytes moved, answers
 * applied, losses reported. The moment it must act next without being
 * woken (now or earlier: at once). */
static int64_t wd_round_work(wd *w) {
    int64_t now = monotime_ms();
    int i;
    if (w->inherited || w->pid != proc_id()) return INT64_MAX;   /* (a fork child's, not adopted yet) */
    if (w->want_refresh) wd_refresh(w, now);
    wd_links_sync(w, now);
    if (topo_confirms(w->t) != w->confirms_seen) {
        /* a doubt was lifted: renew what waited for it, now; but not more
         * than once per WD_RENEW_ALL_MS, should our renewals fail on a
         * master the sentinels confirm (each failure casts a doubt that
         * the next pass lifts) */
        w->confirms_seen = topo_confirms(w->t);
        if (now >= w->renew_all_after) {
            w->renew_all_after = now + WD_RENEW_ALL_MS;
            wd_renew_all_now(w, now);
        }
    }
    wd_collect(w, now);
    for (i = 0; i < w->nlinks; i++) wd_link_pump(w, &w->links[i], now, &wd_apply);
    now = monotime_ms();
    for (i = 0; i < w->nlinks; i++) wd_link_expire(w, &w->links[i], now);
    if (w->want_refresh) return now;
    return wd_next_wake(w);
}

/* Puts w's links' sockets in the poll set from *n on (room made by the
 * caller), with w->mu held. */
static void wd_round_fds(const wd *w, int wi, struct pollfd *pfd, wd_slot *slots, int *n) {
    int i;
    for (i = 0; i < w->nlinks; i++) {
        pfd[*n].fd = w->links[i].x->c->fd;
        pfd[*n].events = wd_link_events(&w->links[i]);
        pfd[*n].revents = 0;
        slots[*n].w = wi;
        slots[*n].link = i;
        (*n)++;
    }
}

/* What the poll saw for w's links (slots from..to of the set), with w->mu
 * held. (The links may have changed meanwhile: matched by fd.) */
static void wd_round_after(wd *w, const struct pollfd *pfd, const wd_slot *slots, int from, int to) {
    int k;
    for (k = from; k < to; k++) {
        int i = slots[k].link;
        if (i < w->nlinks && pfd[k].fd == w->links[i].x->c->fd) w->links[i].revents = pfd[k].revents;
    }
}

/* The round's buffers, grown to hold `need` poll entries. 0, or -1. */
typedef struct wd_round {
    wd **ws;
    int wcap;
    struct pollfd *pfd;
    wd_slot *slots;
    int cap;
    int *first;             /* per watchdog: its first slot */
} wd_round;

static int wd_round_room(wd_round *rd, int need) {
    struct pollfd *p;
    wd_slot *s;
    if (need <= rd->cap) return 0;
    need = need * 2;
    p = realloc(rd->pfd, (size_t)need * sizeof *p);
    if (p == NULL) return -1;
    rd->pfd = p;
    s = realloc(rd->slots, (size_t)need * sizeof *s);
    if (s == NULL) return -1;
    rd->slots = s;
    rd->cap = need;
    return 0;
}

static int wd_round_watchdogs(wd_round *rd, int nw) {
    wd **ws;
    int *first;
    if (nw <= rd->wcap) return 0;
    ws = realloc(rd->ws, (size_t)nw * 2 * sizeof *ws);
    if (ws == NULL) return -1;
    rd->ws = ws;
    first = realloc(rd->first, (size_t)(nw * 2 + 1) * sizeof *first);
    if (first == NULL) return -1;
    rd->first = first;
    rd->wcap = nw * 2;
    return 0;
}

/* Takes the runner's list for a round: how many, or -1 to end. */
static int wd_round_begin(wd_round *rd) {
    int nw;
    pthread_mutex_lock(&R.mu);
    if (R.stopping || wd_round_watchdogs(rd, R.n) != 0) {
        nw = R.stopping ? -1 : 0;   /* (out of memory: an empty round, and again) */
    } else {
        nw = R.n;
        memcpy(rd->ws, R.ws, (size_t)nw * sizeof *rd->ws);
    }
    R.busy = nw > 0;
    __atomic_store_n(&R.wake_at, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&R.mu);
    return nw;
}

static void wd_round_end(void) {
    pthread_mutex_lock(&R.mu);
    R.busy = 0;
    R.rounds++;
    pthread_cond_broadcast(&R.idle);
    pthread_mutex_unlock(&R.mu);
}

/* Sleeps in poll on the n entries until `next` (ms), or a wakeup. */
static void wd_round_sleep(wd_round *rd, int n, int64_t next) {
    int64_t now = monotime_ms();
    int timeout;
    if (next <= now) return;
    if (rd->cap == 0) {
        struct timespec ts = {0, 10000000};   /* (out of memory: no poll set) */
        nanosleep(&ts, NULL);
        return;
    }
    timeout = next == INT64_MAX ? -1 : (next - now > 86400000 ? 86400000 : (int)(next - now));
    __atomic_store_n(&R.wake_at, next, __ATOMIC_RELEASE);
    if (poll(rd->pfd, (nfds_t)n, timeout) < 0 && errno != EINTR) {
        /* cannot happen with valid fds; do not spin on it */
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    __atomic_store_n(&R.wake_at, 0, __ATOMIC_RELEASE);
    if (rd->pfd[0].revents & POLLIN) {
        uint64_t counter;
        if (read(rd->pfd[0].fd, &counter, sizeof counter) < 0) { /* EAGAIN */ }
    }
}

static void *wd_main(void *arg) {
    wd_round rd;
    int nw;
    (void)arg;
    memset(&rd, 0, sizeof rd);
    while ((nw = wd_round_begin(&rd)) >= 0) {
        int64_t next = INT64_MAX;
        int i, n = 1;
        if (wd_round_room(&rd, 1) != 0) nw = 0;
        else rd.pfd[0] = (struct pollfd){.fd = R.wake_fd, .events = POLLIN, .revents = 0};
        for (i = 0; i < nw; i++) {
            wd *w = rd.ws[i];
            int64_t t;
            pthread_mutex_lock(&w->mu);
            rd.first[i] = n;
            t = wd_round_work(w);
            if (wd_round_room(&rd, n + w->nlinks) == 0) wd_round_fds(w, i, rd.pfd, rd.slots, &n);
            else t = monotime_ms() + 10;   /* (no room: again soon) */
            pthread_mutex_unlock(&w->mu);
            if (t < next) next = t;
        }
        if (rd.first) rd.first[nw] = n;
        wd_round_sleep(&rd, n, next);
        for (i = 0; i < nw; i++) {
            pthread_mutex_lock(&rd.ws[i]->mu);
            wd_round_after(rd.ws[i], rd.pfd, rd.slots, rd.first[i], rd.first[i + 1]);
            pthread_mutex_unlock(&rd.ws[i]->mu);
        }
        wd_round_end();
    }
    free(rd.ws);
    free(rd.first);
    free(rd.pfd);
    free(rd.slots);
    return NULL;
}

/* Starts the thread, with R.mu held. 0, or -1 with errbuf. */
static int wd_runner_start(char *errbuf, size_t errlen) {
    sigset_t all, old;
    int rc;
    if (R.wake_fd < 0) {
        int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (fd < 0) {
            snprintf(errbuf, errlen, "cannot make an eventfd: %s", strerror(errno));
            return -1;
        }
        __atomic_store_n(&R.wake_fd, fd, __ATOMIC_RELEASE);
    }
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&R.thread, NULL, wd_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        snprintf(errbuf, errlen, "watchdog thread could not start: %s", strerror(rc));
        return -1;
    }
    /* named by its creator, so that it has its name once it exists (top
     * -H, ps -L, /proc/PID/task/TID/comm) */
    pthread_setname_np(R.thread, "redislock-wd");
    R.pid = proc_id();
    return 0;
}

int wd_thread_start(wd *w, char *errbuf, size_t errlen) {
    int rc = 0;
    pthread_mutex_lock(&R.mu);
    while (R.joining) pthread_cond_wait(&R.idle, &R.mu);   /* (the last one's thread is ending) */
    if (R.n == R.cap) {
        int cap = R.cap ? R.cap * 2 : 8;
        wd **ws = realloc(R.ws, (size_t)cap * sizeof *ws);
        if (ws == NULL) {
            snprintf(errbuf, errlen, "out of memory");
            rc = -1;
        } else {
            R.ws = ws;
            R.cap = cap;
        }
    }
    if (rc == 0 && R.pid != proc_id()) rc = wd_runner_start(errbuf, errlen);
    if (rc == 0) {
        R.ws[R.n++] = w;
        w->running = 1;
        w->pid = proc_id();
        wd_wake(w);   /* (its heap is new to the thread) */
    }
    pthread_mutex_unlock(&R.mu);
    return rc;
}

void wd_runner_leave(wd *w) {
    int i, last;
    pthread_mutex_lock(&R.mu);
    for (i = 0; i < R.n; i++)
        if (R.ws[i] == w) {
            R.ws[i] = R.ws[--R.n];
            break;
        }
    last = R.n == 0 && R.pid == proc_id() && !R.joining;
    if (last) {
        /* the last one: the thread ends and is joined (nothing of ours may
         * run once the Lua state that loaded us is gone) */
        R.stopping = 1;
        R.joining = 1;
        wd_wake(w);
        pthread_mutex_unlock(&R.mu);
        pthread_join(R.thread, NULL);
        pthread_mutex_lock(&R.mu);
        R.pid = 0;
        R.stopping = 0;
        R.joining = 0;
        R.busy = 0;
        free(R.ws);   /* (the module may be unloaded next: keep nothing) */
        R.ws = NULL;
        R.cap = 0;
        pthread_cond_broadcast(&R.idle);
    } else {
        /* the round in progress may hold w still: it ends at once when
         * woken (the next ones copied the list without w) */
        uint64_t round = R.rounds;
        while (R.busy && R.rounds == round && R.pid == proc_id()) {
            wd_wake(w);
            pthread_cond_wait(&R.idle, &R.mu);
        }
    }
    pthread_mutex_unlock(&R.mu);
}
