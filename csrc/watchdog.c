/*
 * watchdog.c: the lease-renewal thread.
 *
 * Shape (after jemalloc's background_thread.c): the thread is created with
 * every signal masked and sleeps in pthread_cond_timedwait on the monotonic
 * clock, so new work and stop requests wake it at once. State shared with the
 * Lua side lives in `struct wd` under one mutex; the network round trip runs
 * with the mutex released, and the locks being renewed are marked in_flight so
 * that wd_unwatch can wait for their answers: after unwatch returns, nothing
 * more for that lock is sent.
 *
 * Renewal: each lock is renewed at a third of its ttl with the very `extend`
 * script that lock:extend sends. Locks due within half a renewal interval
 * of each other go out as one pipeline. A min-heap on the next renewal time keeps a tick O(due log n).
 *
 * Loss: "not held" from Redis is final at once. A renewal that gets no answer
 * is retried quickly; the lock is declared lost when the lease we know of ends
 * on our monotonic clock (counted from when the last successful renewal was
 * *sent*, minus a drift margin), so we report before another client can be
 * granted the name.
 *
 * Fork: pthread_atfork handlers keep the mutexes consistent. In the child the
 * thread does not exist; the child handler only resets state, and the child's
 * own first watch starts a new thread. Locks registered by the parent are
 * never renewed or reported by the child (their pid differs).
 */
#define _GNU_SOURCE
#include "watchdog.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "lease.h"
#include "monotime.h"
#include "script.h"

#define WD_BATCH_MAX 1024        /* locks per pipeline */
#define WD_TOKEN_MAX 64
#define WD_MIN_TIMEOUT_MS 20     /* floor for one round trip's timeout */
#define WD_RETRY_MIN_MS 10

typedef struct wd_entry {
    uint64_t id;
    char *key;
    size_t klen;
    char token[WD_TOKEN_MAX];
    size_t toklen;
    int64_t ttl_ms;
    int64_t next_at;        /* monotonic ms of the next renewal */
    int64_t slack;          /* may be renewed this much early, to share a
                               pipeline: half its renewal interval */
    int64_t lease_end;      /* monotonic ms until which the lease is surely ours */
    int64_t hold_until;     /* 0, or when max_hold stops renewals */
    pid_t pid;              /* the process that registered it */
    int state;              /* WD_HELD or the reason it was lost */
    int failing;            /* the last renewal got no usable answer */
    int64_t last_sent;      /* when the last renewal was sent (0: never) */
    int64_t last_ttl;       /* the ttl it asked for */
    int64_t last_done;      /* when its answer was applied */
    int in_flight;          /* in the pipeline being sent right now */
    int heap_pos;           /* index in the heap, -1 when not scheduled */
} wd_entry;

typedef struct wd_loss {
    uint64_t id;
    int state;
} wd_loss;

typedef struct wd_batch wd_batch;

struct wd {
    pthread_mutex_t mu;
    pthread_cond_t wake;    /* the thread waits here for work or stop */
    pthread_cond_t done;    /* unwatch waits here for in-flight renewals */
    pthread_t thread;
    int running;            /* a thread exists in this process */
    int stopping;
    int stopped;            /* wd_stop called: never start again */
    int refs;
    pid_t pid;              /* process the thread runs in */
    int inherited;          /* forked: conn and fd belong to the parent */
    int64_t wake_at;        /* when the thread's wait ends by itself: 0 while
                               it is awake, INT64_MAX when only a signal
                               ends it. A lock due no earlier needs no
                               signal: the thread sees it when it wakes. */

    conn *conn;             /* the thread's own connection */
    wd_batch *batch;        /* the thread's scratch space, made before the
                               thread starts (a fork child's new thread
                               reuses its copy) */
    long timeout_ms;        /* the client's configured timeouts: each round */
    long connect_timeout_ms;/* trip is bounded by these and by its leases */

    wd_entry **slots;       /* id -> entry: slot index in the low 32 bits */
    uint32_t *gens;         /* generation per slot, the high 32 bits of ids */
    uint32_t nslots, cap;
    uint32_t *free_slots;
    uint32_t nfree;

    wd_entry **heap;        /* min-heap on next_at */
    uint32_t nheap;

    wd_loss *losses;
    size_t nlosses, losscap;
    int efd;                /* eventfd: readable while losses are pending */

    wd_stats stats;

    struct wd *next_wd;     /* the registry of all watchdogs, for fork */
};

/* ---- registry and fork --------------------------------------------------- */

static pthread_mutex_t wd_registry_mu = PTHREAD_MUTEX_INITIALIZER;
static wd *wd_registry;
static pthread_once_t wd_atfork_once = PTHREAD_ONCE_INIT;

static void wd_init_conds(wd *w) {
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&w->wake, &attr);
    pthread_cond_init(&w->done, &attr);
    pthread_condattr_destroy(&attr);
}

static void wd_init_sync(wd *w) {
    pthread_mutex_init(&w->mu, NULL);
    wd_init_conds(w);
}

/* Before fork: hold every lock, so the child gets them in a known state. */
static void wd_atfork_prepare(void) {
    wd *w;
    pthread_mutex_lock(&wd_registry_mu);
    for (w = wd_registry; w; w = w->next_wd) pthread_mutex_lock(&w->mu);
}

static void wd_atfork_parent(void) {
    wd *w;
    for (w = wd_registry; w; w = w->next_wd) pthread_mutex_unlock(&w->mu);
    pthread_mutex_unlock(&wd_registry_mu);
}

/* In the child only state is reset (no I/O, no allocation): there is no
 * thread here, nothing is in flight, the parent's pending reports are not
 * ours, and the connection and eventfd are the parent's. The mutexes were
 * taken by this very thread in prepare, so they are simply unlocked; the
 * condition variables may still count the vanished thread as a waiter, so
 * they are made anew. */
static void wd_atfork_child(void) {
    wd *w;
    uint32_t i;
    for (w = wd_registry; w; w = w->next_wd) {
        wd_init_conds(w);
        w->running = 0;
        w->stopping = 0;
        w->inherited = 1;
        w->nlosses = 0;
        for (i = 0; i < w->nslots; i++)
            if (w->slots[i]) w->slots[i]->in_flight = 0;
        pthread_mutex_unlock(&w->mu);
    }
    pthread_mutex_unlock(&wd_registry_mu);
}

static void wd_atfork_register(void) {
    pthread_atfork(wd_atfork_prepare, wd_atfork_parent, wd_atfork_child);
}

/* In a forked child: the inherited hiredis context may have been mid-write
 * in the parent's thread, so it is not freed (its fd is closed and its
 * memory left alone). */
static void wd_forget_parent_conn(wd *w) {
    if (w->conn->ctx) {
        close(w->conn->ctx->fd);
        w->conn->ctx = NULL;
    }
}

/* Lua-side, with w->mu held: after a fork, drop what belongs to the parent
 * (its connection and its eventfd) and make our own eventfd. */
static void wd_adopt_after_fork(wd *w) {
    if (!w->inherited) return;
    w->inherited = 0;
    wd_forget_parent_conn(w);
    if (w->efd >= 0) close(w->efd);
    w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

/* ---- heap ---------------------------------------------------------------- */

static void wd_heap_swap(wd *w, uint32_t a, uint32_t b) {
    wd_entry *t = w->heap[a];
    w->heap[a] = w->heap[b];
    w->heap[b] = t;
    w->heap[a]->heap_pos = (int)a;
    w->heap[b]->heap_pos = (int)b;
}

static void wd_heap_up(wd *w, uint32_t i) {
    while (i > 0) {
        uint32_t p = (i - 1) / 2;
        if (w->heap[p]->next_at <= w->heap[i]->next_at) break;
        wd_heap_swap(w, i, p);
        i = p;
    }
}

static void wd_heap_down(wd *w, uint32_t i) {
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < w->nheap && w->heap[l]->next_at < w->heap[m]->next_at) m = l;
        if (r < w->nheap && w->heap[r]->next_at < w->heap[m]->next_at) m = r;
        if (m == i) break;
        wd_heap_swap(w, i, m);
        i = m;
    }
}

/* The heap has room for every slot (grown with them), so push cannot fail. */
static void wd_heap_push(wd *w, wd_entry *e) {
    e->heap_pos = (int)w->nheap;
    w->heap[w->nheap++] = e;
    wd_heap_up(w, (uint32_t)e->heap_pos);
}

static void wd_heap_remove(wd *w, wd_entry *e) {
    uint32_t i = (uint32_t)e->heap_pos;
    if (e->heap_pos < 0) return;
    e->heap_pos = -1;
    if (i == --w->nheap) return;
    w->heap[i] = w->heap[w->nheap];
    w->heap[i]->heap_pos = (int)i;
    wd_heap_down(w, i);
    wd_heap_up(w, i);
}

/* ---- entries ------------------------------------------------------------- */

static wd_entry *wd_lookup(wd *w, uint64_t id) {
    uint32_t slot = (uint32_t)(id & 0xffffffffu);
    if (slot == 0 || slot > w->nslots) return NULL;
    if (w->gens[slot - 1] != (uint32_t)(id >> 32)) return NULL;
    return w->slots[slot - 1];
}

static int wd_grow(wd *w) {
    uint32_t cap = w->cap ? w->cap * 2 : 64;
    wd_entry **slots = realloc(w->slots, cap * sizeof *slots);
    if (slots == NULL) return -1;
    w->slots = slots;
    uint32_t *gens = realloc(w->gens, cap * sizeof *gens);
    if (gens == NULL) return -1;
    w->gens = gens;
    uint32_t *free_slots = realloc(w->free_slots, cap * sizeof *free_slots);
    if (free_slots == NULL) return -1;
    w->free_slots = free_slots;
    wd_entry **heap = realloc(w->heap, cap * sizeof *heap);
    if (heap == NULL) return -1;
    w->heap = heap;
    w->cap = cap;
    return 0;
}

/* Finds a slot for e and gives it an id that is never reused in this wd. */
static int wd_insert(wd *w, wd_entry *e) {
    uint32_t slot;
    if (w->nfree > 0) {
        slot = w->free_slots[--w->nfree];
    } else {
        if (w->nslots == w->cap && wd_grow(w) != 0) return -1;
        slot = w->nslots++;
        w->gens[slot] = 0;
    }
    w->gens[slot]++;
    w->slots[slot] = e;
    e->id = ((uint64_t)w->gens[slot] << 32) | (slot + 1);
    return 0;
}

/* Gives e's slot back (its generation already makes the old id stale). */
static void wd_slot_free(wd *w, const wd_entry *e) {
    uint32_t slot = (uint32_t)(e->id & 0xffffffffu) - 1;
    w->slots[slot] = NULL;
    w->free_slots[w->nfree++] = slot;
}

static void wd_entry_free(wd *w, wd_entry *e) {
    wd_heap_remove(w, e);
    wd_slot_free(w, e);
    w->stats.watched--;
    free(e->key);
    free(e);
}

/* Records a final state and tells the Lua side (queue + eventfd). */
static void wd_mark_lost(wd *w, wd_entry *e, int state) {
    uint64_t one = 1;
    if (e->state != WD_HELD) return;
    e->state = state;
    wd_heap_remove(w, e);
    w->stats.lost[state]++;
    if (w->nlosses == w->losscap) {
        size_t cap = w->losscap ? w->losscap * 2 : 16;
        wd_loss *l = realloc(w->losses, cap * sizeof *l);
        if (l == NULL) return; /* the state still says lost; held() sees it */
        w->losses = l;
        w->losscap = cap;
    }
    w->losses[w->nlosses].id = e->id;
    w->losses[w->nlosses].state = state;
    w->nlosses++;
    if (w->efd >= 0 && write(w->efd, &one, sizeof one) < 0) {
        /* counter saturated: already readable */
    }
}

/* ---- the thread ---------------------------------------------------------- */

struct wd_batch {
    wd_entry *e[WD_BATCH_MAX];
    int result[WD_BATCH_MAX];   /* 1 renewed, 0 not held, -1 no usable answer */
    int64_t ttl_ms[WD_BATCH_MAX];  /* the ttl each renewal asked for */
    char ttl[WD_BATCH_MAX][24];
    int n;
    int renewals, round_trips;  /* counted without the mutex, added after */
    int64_t sent_at;
    int64_t timeout_ms;
};

/* With w->mu held: takes the locks due now (and those due soon, so that
 * locks taken at about the same time share a pipeline) into b. Locks whose
 * lease already ran out are reported instead of renewed. */
static void wd_collect(wd *w, wd_batch *b, int64_t now) {
    int64_t min_left = INT64_MAX;
    b->n = 0;
    while (w->nheap > 0 && b->n < WD_BATCH_MAX) {
        wd_entry *e = w->heap[0];
        if (e->next_at > now + e->slack) break;
        wd_heap_remove(w, e);
        if (e->pid != w->pid) continue;  /* the parent's, after a fork */
        if (now >= e->lease_end) {
            wd_mark_lost(w, e, e->failing ? WD_UNREACHABLE : WD_EXPIRED);
            continue;
        }
        if (e->hold_until && now >= e->hold_until) {
            wd_mark_lost(w, e, WD_MAX_HOLD);
            continue;
        }
        e->in_flight = 1;
        e->last_sent = now;
        e->last_ttl = e->ttl_ms;
        b->ttl_ms[b->n] = e->ttl_ms;
        snprintf(b->ttl[b->n], sizeof b->ttl[0], "%lld", (long long)e->ttl_ms);
        if (e->lease_end - now < min_left) min_left = e->lease_end - now;
        b->e[b->n++] = e;
    }
    /* A round trip may not outlast the shortest lease in it: past that, the
     * answer no longer matters and we must be free to report the loss. */
    b->timeout_ms = min_left < WD_MIN_TIMEOUT_MS ? WD_MIN_TIMEOUT_MS : min_left;
    if (w->timeout_ms > 0 && b->timeout_ms > w->timeout_ms) b->timeout_ms = w->timeout_ms;
}

/* Sends the listed renewals as one pipeline and reads their answers; those
 * answered NOSCRIPT go once more as EVAL. Without w->mu: only this thread
 * touches the conn, and in_flight entries are not freed meanwhile. */
static void wd_send(wd *w, wd_batch *b, const script_def *extend, int use_eval, int *todo) {
    int i, sent = 0, failed = 0;
    for (i = 0; i < b->n; i++) {
        const char *args[3];
        size_t lens[3];
        if (!todo[i]) continue;
        args[0] = b->e[i]->key; lens[0] = b->e[i]->klen;
        args[1] = b->e[i]->token; lens[1] = b->e[i]->toklen;
        args[2] = b->ttl[i]; lens[2] = strlen(b->ttl[i]);
        if (failed || script_append(w->conn, extend, use_eval, 3, args, lens) != 0) {
            failed = 1;
            b->result[i] = -1;
            todo[i] = 0;
            continue;
        }
        sent++;
    }
    if (sent == 0) return;
    b->round_trips++;
    b->renewals += sent;
    for (i = 0; i < b->n; i++) {
        redisReply *r;
        if (!todo[i]) continue;
        r = failed ? NULL : conn_read(w->conn);
        todo[i] = 0;
        if (r == NULL) {
            failed = 1;
            b->result[i] = -1;
        } else if (!use_eval && script_is_noscript(r)) {
            todo[i] = 1;  /* again, as EVAL */
        } else if (r->type == REDIS_REPLY_INTEGER) {
            b->result[i] = r->integer == 1 ? 1 : 0;
        } else {
            b->result[i] = -1;  /* a redis error: retried like an outage */
        }
        if (r) freeReplyObject(r);
    }
}

static void wd_renew(wd *w, wd_batch *b) {
    const script_def *extend = script_find("extend");
    int todo[WD_BATCH_MAX];
    int i, again = 0;
    conn_set_timeouts(w->conn,
                      b->timeout_ms < w->connect_timeout_ms ? b->timeout_ms : w->connect_timeout_ms,
                      b->timeout_ms);
    b->renewals = b->round_trips = 0;
    for (i = 0; i < b->n; i++) {
        todo[i] = 1;
        b->result[i] = -1;
    }
    wd_send(w, b, extend, 0, todo);
    for (i = 0; i < b->n; i++) again |= todo[i];
    if (again) wd_send(w, b, extend, 1, todo);
}

/* With w->mu held: applies the answers and reschedules. */
static void wd_apply(wd *w, wd_batch *b) {
    int64_t now = monotime_ms();
    int i;
    w->stats.renewals += (uint64_t)b->renewals;
    w->stats.round_trips += (uint64_t)b->round_trips;
    for (i = 0; i < b->n; i++) {
        wd_entry *e = b->e[i];
        e->in_flight = 0;
        e->last_done = now;
        if (e->state != WD_HELD) continue;
        if (b->result[i] == 1) {
            int64_t end = b->sent_at + b->ttl_ms[i] - lease_drift_ms(b->ttl_ms[i]);
            /* A lock:extend with another ttl raced this renewal: either
             * PEXPIRE may have run last, so count on the earlier end. */
            if (b->ttl_ms[i] != e->ttl_ms && e->lease_end < end) end = e->lease_end;
            e->failing = 0;
            e->lease_end = end;
            e->next_at = b->sent_at + b->ttl_ms[i] / 3;
            e->slack = b->ttl_ms[i] / 6;
        } else if (b->result[i] == 0) {
            wd_mark_lost(w, e, WD_NOT_HELD);
            continue;
        } else {
            int64_t retry = e->ttl_ms / 10;
            if (retry < WD_RETRY_MIN_MS) retry = WD_RETRY_MIN_MS;
            e->failing = 1;
            w->stats.failures++;
            if (now >= e->lease_end) {
                wd_mark_lost(w, e, WD_UNREACHABLE);
                continue;
            }
            e->next_at = now + retry < e->lease_end ? now + retry : e->lease_end;
            e->slack = 0;
        }
        wd_heap_push(w, e);
    }
    pthread_cond_broadcast(&w->done);
}

static void *wd_main(void *arg) {
    wd *w = arg;
    wd_batch *b = w->batch;
    pthread_mutex_lock(&w->mu);
    while (!w->stopping) {
        int64_t now = monotime_ms();
        wd_collect(w, b, now);
        if (b->n > 0) {
            w->stats.last_batch = (uint64_t)b->n;
            b->sent_at = now;
            pthread_mutex_unlock(&w->mu);
            wd_renew(w, b);
            pthread_mutex_lock(&w->mu);
            wd_apply(w, b);
            continue;
        }
        if (w->nheap == 0) {
            w->wake_at = INT64_MAX;
            pthread_cond_wait(&w->wake, &w->mu);
        } else {
            /* Wake for the earliest lock; wd_collect then takes the ones due
             * within their slack along with it. */
            int64_t at = w->heap[0]->next_at;
            struct timespec ts;
            if (at <= now) continue;
            ts.tv_sec = at / 1000;
            ts.tv_nsec = (at % 1000) * 1000000;
            w->wake_at = at;
            pthread_cond_timedwait(&w->wake, &w->mu, &ts);
        }
        w->wake_at = 0;
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* With w->mu held: starts the thread with every signal blocked, so signals
 * meant for the host are never delivered to it. */
static int wd_start(wd *w, char *errbuf, size_t errlen) {
    sigset_t all, old;
    int rc;
    /* Allocated here, where failing can still be reported: a thread that
     * found no memory would leave its locks unrenewed without a word. */
    if (w->batch == NULL && (w->batch = malloc(sizeof *w->batch)) == NULL) {
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    w->stopping = 0;
    w->wake_at = 0;  /* the new thread looks at the heap before it waits */
    rc = pthread_create(&w->thread, NULL, wd_main, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        snprintf(errbuf, errlen, "watchdog thread could not start: %s", strerror(rc));
        return -1;
    }
    w->running = 1;
    w->pid = getpid();
    return 0;
}

/* ---- the Lua side's calls ------------------------------------------------ */

wd *wd_new(const conn_config *cfg) {
    wd *w = calloc(1, sizeof *w);
    if (w == NULL) return NULL;
    w->conn = conn_new(cfg);
    if (w->conn == NULL) {
        free(w);
        return NULL;
    }
    w->timeout_ms = cfg->timeout_ms;
    w->connect_timeout_ms = cfg->connect_timeout_ms;
    w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    w->refs = 1;
    w->pid = getpid();
    wd_init_sync(w);
    pthread_once(&wd_atfork_once, wd_atfork_register);
    pthread_mutex_lock(&wd_registry_mu);
    w->next_wd = wd_registry;
    wd_registry = w;
    pthread_mutex_unlock(&wd_registry_mu);
    return w;
}

void wd_retain(wd *w) {
    pthread_mutex_lock(&w->mu);
    w->refs++;
    pthread_mutex_unlock(&w->mu);
}

/* Stops and joins the thread if this process runs one. */
static void wd_join(wd *w) {
    pthread_mutex_lock(&w->mu);
    if (!w->running || w->pid != getpid()) {
        w->running = 0;
        pthread_mutex_unlock(&w->mu);
        return;
    }
    w->stopping = 1;
    pthread_cond_broadcast(&w->wake);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_mutex_lock(&w->mu);
    w->running = 0;
    pthread_mutex_unlock(&w->mu);
}

void wd_stop(wd *w) {
    pthread_mutex_lock(&w->mu);
    w->stopped = 1;
    pthread_mutex_unlock(&w->mu);
    wd_join(w);
}

void wd_release(wd *w) {
    wd **p;
    uint32_t i;
    int last;
    pthread_mutex_lock(&w->mu);
    last = --w->refs == 0;
    pthread_mutex_unlock(&w->mu);
    if (!last) return;
    wd_join(w);
    pthread_mutex_lock(&wd_registry_mu);
    for (p = &wd_registry; *p; p = &(*p)->next_wd)
        if (*p == w) {
            *p = w->next_wd;
            break;
        }
    pthread_mutex_unlock(&wd_registry_mu);
    for (i = 0; i < w->nslots; i++)
        if (w->slots[i]) {
            free(w->slots[i]->key);
            free(w->slots[i]);
        }
    if (w->inherited) wd_forget_parent_conn(w);
    conn_free(w->conn);
    free(w->batch);
    if (w->efd >= 0) close(w->efd);
    free(w->slots);
    free(w->gens);
    free(w->free_slots);
    free(w->heap);
    free(w->losses);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->wake);
    pthread_cond_destroy(&w->done);
    free(w);
}

int wd_watch(wd *w, const char *key, size_t klen, const char *token, size_t toklen,
             int64_t ttl_ms, int64_t lease_end_ms, int64_t hold_until_ms,
             uint64_t *id, char *errbuf, size_t errlen) {
    wd_entry *e;
    if (toklen >= WD_TOKEN_MAX) {
        snprintf(errbuf, errlen, "token too long");
        return -1;
    }
    e = calloc(1, sizeof *e);
    if (e == NULL || (e->key = malloc(klen ? klen : 1)) == NULL) {
        free(e);
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    memcpy(e->key, key, klen);
    e->klen = klen;
    memcpy(e->token, token, toklen);
    e->toklen = toklen;
    e->ttl_ms = ttl_ms;
    e->lease_end = lease_end_ms;
    /* Renew at a third of the ttl, or sooner when the lease we start from
     * is shorter than the ttl (a lock handed over with a short lease). */
    {
        int64_t now = monotime_ms();
        int64_t by_ttl = now + ttl_ms / 3, by_lease = now + (lease_end_ms - now) / 3;
        e->next_at = by_lease < by_ttl ? by_lease : by_ttl;
        e->slack = (e->next_at - now) / 2;
    }
    e->hold_until = hold_until_ms;
    e->pid = getpid();
    e->state = WD_HELD;
    e->heap_pos = -1;

    pthread_mutex_lock(&w->mu);
    wd_adopt_after_fork(w);
    if (w->stopped) {
        snprintf(errbuf, errlen, "client closed");
        goto fail;
    }
    if (wd_insert(w, e) != 0) {
        snprintf(errbuf, errlen, "out of memory");
        goto fail;
    }
    if (!w->running && wd_start(w, errbuf, errlen) != 0) {
        wd_slot_free(w, e);
        goto fail;
    }
    w->stats.watched++;
    wd_heap_push(w, e);
    /* Usually no signal: after a release the thread still waits for that
     * lock's renewal time, and a lock taken again with the same ttl is due
     * later. Sparing the wakeup keeps it off the hand-over's path. */
    if (e->next_at < w->wake_at) pthread_cond_signal(&w->wake);
    *id = e->id;
    pthread_mutex_unlock(&w->mu);
    return 0;
fail:
    pthread_mutex_unlock(&w->mu);
    free(e->key);
    free(e);
    return -1;
}

void wd_unwatch(wd *w, uint64_t id) {
    wd_entry *e;
    pthread_mutex_lock(&w->mu);
    e = wd_lookup(w, id);
    if (e != NULL) {
        /* In a fork child in_flight was cleared, so this never waits for a
         * thread that does not exist. */
        while (e->in_flight) pthread_cond_wait(&w->done, &w->mu);
        wd_entry_free(w, e);
    }
    pthread_mutex_unlock(&w->mu);
}

int wd_status(wd *w, uint64_t id, int64_t *lease_end_ms) {
    wd_entry *e;
    int state;
    pthread_mutex_lock(&w->mu);
    e = wd_lookup(w, id);
    if (e == NULL) {
        state = WD_STOPPED;
    } else if (e->pid != getpid()) {
        state = WD_FORKED;
    } else {
        state = e->state;
        if (lease_end_ms) *lease_end_ms = e->lease_end;
        /* Judged now, not at the thread's next tick: a paused or starved
         * thread must not make a dead lease look alive. And final: a
         * renewal answered later must not bring the lock back, since the
         * caller may already have acted on its loss. */
        if (state == WD_HELD && monotime_ms() >= e->lease_end) {
            state = w->stopped ? WD_STOPPED : e->failing ? WD_UNREACHABLE : WD_EXPIRED;
            wd_mark_lost(w, e, state);
        }
    }
    pthread_mutex_unlock(&w->mu);
    return state;
}

void wd_renewed(wd *w, uint64_t id, int64_t ttl_ms, int64_t lease_end_ms, int64_t sent_ms) {
    wd_entry *e;
    pthread_mutex_lock(&w->mu);
    e = wd_lookup(w, id);
    if (e != NULL && e->state == WD_HELD && e->pid == getpid()) {
        int raced = e->in_flight || e->last_done >= sent_ms;
        if (raced) {
            /* A renewal of ours was on the wire while the Lua side's extend
             * was: Redis may have run either PEXPIRE last, so count on the
             * earlier of the two ends, and renew with the new ttl at once. */
            int64_t ours = e->last_sent + e->last_ttl - lease_drift_ms(e->last_ttl);
            if (ours < lease_end_ms) lease_end_ms = ours;
        }
        e->ttl_ms = ttl_ms;
        e->lease_end = lease_end_ms;
        e->failing = 0;
        if (!e->in_flight) {
            int64_t now = monotime_ms();
            wd_heap_remove(w, e);
            e->next_at = raced ? now : now + ttl_ms / 3;
            e->slack = raced ? 0 : ttl_ms / 6;
            wd_heap_push(w, e);
            pthread_cond_signal(&w->wake);
        }
    }
    pthread_mutex_unlock(&w->mu);
}

int wd_take_losses(wd *w, uint64_t *ids, int *states, int max) {
    int n = 0;
    uint64_t counter;
    pthread_mutex_lock(&w->mu);
    wd_adopt_after_fork(w);
    while (n < max && (size_t)n < w->nlosses) {
        ids[n] = w->losses[n].id;
        states[n] = w->losses[n].state;
        n++;
    }
    if (n > 0) {
        memmove(w->losses, w->losses + n, (w->nlosses - (size_t)n) * sizeof *w->losses);
        w->nlosses -= (size_t)n;
    }
    /* The eventfd is written once per queued loss and nowhere else, so it
     * is readable only if we just took some: the usual call (no losses, on
     * every acquire and release) makes no system call. */
    if (n > 0 && w->nlosses == 0 && w->efd >= 0 && read(w->efd, &counter, sizeof counter) < 0) {
        /* EAGAIN: already drained */
    }
    pthread_mutex_unlock(&w->mu);
    return n;
}

int wd_fd(wd *w) {
    int fd;
    pthread_mutex_lock(&w->mu);
    wd_adopt_after_fork(w);
    fd = w->efd;
    pthread_mutex_unlock(&w->mu);
    return fd;
}

void wd_get_stats(wd *w, wd_stats *out) {
    pthread_mutex_lock(&w->mu);
    *out = w->stats;
    pthread_mutex_unlock(&w->mu);
}

const char *wd_state_name(int state) {
    static const char *const names[WD_STATE_COUNT] = {
        "held", "not held", "unreachable", "expired", "max_hold", "forked", "stopped"
    };
    return state >= 0 && state < WD_STATE_COUNT ? names[state] : "unknown";
}
