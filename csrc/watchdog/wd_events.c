/*
 * wd_events.c: the watchdog's events for the Lua side's on_event: a
 * renewal that failed (the lease still runs, or it is lost next), and a
 * connection of the watchdog made again after a loss. The thread never
 * touches Lua: it queues plain structs (evq.h) under the watchdog's mutex,
 * and the Lua side takes them inside its own calls (client:events()).
 * Nothing is queued until wd_events_enable: without on_event they cost
 * nothing. (wd_events_enable and wd_take_events, the Lua side's calls,
 * are in watchdog.c with the rest of its API.)
 */
#include "watchdog/wd_internal.h"

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
