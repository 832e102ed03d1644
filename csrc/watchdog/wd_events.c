/*
 * wd_events.c: the watchdog's events for the Lua side's on_event: a
 * renewal that failed (the lease still runs, or it is lost next), and a
 * connection of the watchdog made again after a loss. The thread never
 * touches Lua: it queues plain structs (evq.h) under the watchdog's mutex,
 * and the Lua side takes them inside its own calls (client:events()).
 * Nothing is queued until wd_events_enable: without on_event they cost
 * nothing.
 */
#include "wd_internal.h"

/* A handshake of one of the watchdog's conns completed after an earlier
 * one: in the thread, with w->mu held (counters.h says why). */
static void wd_on_reconnect(void *ud, const conn *c, unsigned attempts) {
    wd *w = ud;
    ev *e = evq_push(&w->events);
    if (e == NULL) return;
    e->kind = EV_RECONNECT;
    e->attempts = attempts;
    conn_describe(c, e->node, sizeof e->node);
}

void wd_events_init(wd *w) {
    w->net.on_reconnect = wd_on_reconnect;
    w->net.ud = w;
}

void wd_note_renewal_failed(wd *w, const wd_entry *e, int64_t now) {
    ev *v = evq_push(&w->events);
    if (v == NULL) return;
    v->kind = EV_RENEWAL_FAILED;
    v->id = e->id;
    v->ms = e->lease_end - now;
}

int wd_events_enable(wd *w) {
    int rc;
    pthread_mutex_lock(&w->mu);
    rc = evq_enable(&w->events);
    pthread_mutex_unlock(&w->mu);
    return rc;
}

int wd_take_events(wd *w, ev *out, int max) {
    unsigned n;
    pthread_mutex_lock(&w->mu);
    wd_adopt_after_fork(w);
    n = evq_take(&w->events, out, max > 0 ? (unsigned)max : 0);
    pthread_mutex_unlock(&w->mu);
    return (int)n;
}
