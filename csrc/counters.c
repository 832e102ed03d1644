/* counters.c: a connection's counts for its owner (see counters.h). */
#include "counters.h"

#include "conn.h"

void conn_note_up(conn *c) {
    unsigned attempts = c->attempts;
    c->attempts = 0;
    if (c->handshakes++ == 0 || c->counters == NULL) return;   /* the first one is no reconnect */
    c->counters->reconnects++;
    if (c->counters->on_reconnect) c->counters->on_reconnect(c->counters->ud, c, attempts);
}

void conn_note_noscript(conn *c) {
    if (c->counters) c->counters->noscript_reloads++;
}
