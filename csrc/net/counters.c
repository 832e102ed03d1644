/* counters.c: a connection's counts for its owner (see counters.h). */
#include "net/counters.h"

#include "net/conn.h"

void conn_note_up(conn *c) {
    unsigned attempts = c->attempts;
    c->attempts = 0;
    if (c->handshakes++ == 0 || c->counters == NULL) return;   /* the first one is no reconnect */
    c->counters->reconnects++;
    if (c->counters->on_reconnect) c->counters->on_reconnect(c->counters->ud, c, attempts);
}

void conn_note_replaced(conn *fresh, const conn *old) {
    if (old->handshakes == 0 || fresh->handshakes == 0) return;
    fresh->handshakes += old->handshakes;
    if (fresh->counters == NULL) return;
    fresh->counters->reconnects++;
    if (fresh->counters->on_reconnect)
        fresh->counters->on_reconnect(fresh->counters->ud, fresh, old->attempts + 1);
}

void conn_note_noscript(conn *c) {
    if (c->counters) c->counters->noscript_reloads++;
}
