/*
 * client_events.c: the client's events for on_event, and the connection
 * counters of client:stats().
 *
 * Three sources, all taken on the Lua side inside its own calls: the main
 * connections' reconnects (queued by the router's conns, in this thread),
 * the watchdog's events (renewals that failed, its reconnects: queued by
 * its thread under its mutex, wd_events.c), and topology changes (the
 * topology's count of published changes, compared with the last one
 * seen). Nothing is queued until the first client:events() call, which
 * the Lua side makes only when on_event is set.
 */
#include "binding/client_ud.h"

#include <stdlib.h>
#include <string.h>

#include "binding/compat.h"
#include "base/evq.h"

struct client_events {
    evq q;                      /* the main connections' events */
    uint64_t epoch_seen;        /* the topology's epoch at the last look */
    uint64_t changes_seen;      /* and its count of changes */
    int wd_on;                  /* the watchdog queues too */
};

static const char *const client_modes[] = {"single", "sentinel", "cluster", "redlock"};

/* A main connection's handshake completed after an earlier one (this
 * thread: the router is the Lua side's). */
static void client_on_reconnect(void *ud, const conn *c, unsigned attempts) {
    ev *e = evq_push(&((struct client_events *)ud)->q);
    if (e == NULL) return;
    e->kind = EV_RECONNECT;
    e->attempts = attempts;
    conn_describe(c, e->node, sizeof e->node);
}

void client_events_follow(client_ud *u) {
    if (u->ev && !u->ev->wd_on && u->wd && wd_events_enable(u->wd) == 0) u->ev->wd_on = 1;
}

void client_events_free(client_ud *u) {
    if (u->ev == NULL) return;
    evq_free(&u->ev->q);
    free(u->ev);
    u->ev = NULL;
}

static uint64_t client_topo_changes(topo *t) {
    uint64_t n;
    pthread_mutex_lock(&t->mu);
    n = t->refreshes;
    pthread_mutex_unlock(&t->mu);
    return n;
}

/* Pushes one event as a table: { event = ..., fields... }. connection:
 * whose it was, "client" or "watchdog". */
static void client_push_event(lua_State *L, const ev *e, const char *connection) {
    lua_createtable(L, 0, 4);
    if (e->kind == EV_RENEWAL_FAILED) {
        lua_pushliteral(L, "renewal_failed");
        lua_setfield(L, -2, "event");
        lua_pushinteger(L, (lua_Integer)e->id);
        lua_setfield(L, -2, "id");
        lua_pushnumber(L, (lua_Number)e->ms / 1000);
        lua_setfield(L, -2, "lease_left");
    } else {
        lua_pushliteral(L, "reconnect");
        lua_setfield(L, -2, "event");
        lua_pushstring(L, e->node);
        lua_setfield(L, -2, "node");
        lua_pushinteger(L, (lua_Integer)e->attempts);
        lua_setfield(L, -2, "attempts");
        lua_pushstring(L, connection);
        lua_setfield(L, -2, "connection");
    }
}

/* Appends the events of one queue (taken by take) to the list on top,
 * which the first event makes (k == 0: none yet): a poll that finds
 * nothing allocates nothing. */
static int client_push_queue(lua_State *L, int k, const char *connection,
                             int (*take)(void *src, ev *out, int max), void *src) {
    ev buf[32];
    int n, i;
    while ((n = take(src, buf, 32)) > 0)
        for (i = 0; i < n; i++) {
            if (k == 0) lua_newtable(L);
            client_push_event(L, &buf[i], connection);
            lua_rawseti(L, -2, ++k);
        }
    return k;
}

static int client_take_main(void *src, ev *out, int max) {
    return (int)evq_take(&((struct client_events *)src)->q, out, (unsigned)max);
}

static int client_take_wd(void *src, ev *out, int max) {
    return wd_take_events((wd *)src, out, max);
}

/* client:events() -> { { event = "reconnect" | "renewal_failed" |
 *                        "topology_changed", fields... }, ... }
 * The events since the last call, oldest first per source: main
 * connections, then the watchdog, then the topology. The first call turns
 * the queues on and returns nothing. Fields: reconnect: node, attempts,
 * connection ("client" or "watchdog"); renewal_failed: id (the watch id),
 * lease_left (seconds; <= 0 when none is left); topology_changed: mode,
 * epoch, nodes, changes (since the last event), master (Sentinel). Never
 * a password: nodes are named by address. */
static int meth_events(lua_State *L) {
    client_ud *u = client_check(L);
    struct client_events *ce = u->ev;
    uint64_t epoch;
    int k = 0;
    if (ce == NULL) {
        ce = calloc(1, sizeof *ce);
        if (ce == NULL || evq_enable(&ce->q) != 0) {
            free(ce);
            return luaL_error(L, "out of memory");
        }
        ce->epoch_seen = topo_epoch(u->t);
        ce->changes_seen = client_topo_changes(u->t);
        u->ev = ce;
        u->r->net.on_reconnect = client_on_reconnect;
        u->r->net.ud = ce;
        client_events_follow(u);
        return 0;
    }
    k = client_push_queue(L, k, "client", client_take_main, ce);
    if (u->wd) k = client_push_queue(L, k, "watchdog", client_take_wd, u->wd);
    epoch = topo_epoch(u->t);
    if (epoch != ce->epoch_seen) {
        uint64_t changes = client_topo_changes(u->t);
        ce->epoch_seen = epoch;
        if (changes != ce->changes_seen) {
            topo_snap *s = topo_snap_get(u->t);
            if (k == 0) lua_newtable(L);
            lua_createtable(L, 0, 6);
            lua_pushliteral(L, "topology_changed");
            lua_setfield(L, -2, "event");
            lua_pushstring(L, client_modes[u->t->mode]);
            lua_setfield(L, -2, "mode");
            lua_pushinteger(L, (lua_Integer)epoch);
            lua_setfield(L, -2, "epoch");
            lua_pushinteger(L, (lua_Integer)(changes - ce->changes_seen));
            lua_setfield(L, -2, "changes");
            if (s) {
                lua_pushinteger(L, s->nnodes);
                lua_setfield(L, -2, "nodes");
                if (u->t->mode == TOPO_SENTINEL && s->nnodes > 0) {
                    char where[160];
                    topo_node_describe(&s->nodes[0], where, sizeof where);
                    lua_pushstring(L, where);
                    lua_setfield(L, -2, "master");
                }
                topo_snap_put(u->t, s);
            }
            lua_rawseti(L, -2, ++k);
            ce->changes_seen = changes;
        }
    }
    return k > 0 ? 1 : 0;
}

/* Adds the connection counters to the stats table on top: reconnects and
 * NOSCRIPT reloads of the main connections and the watchdog's (w: its
 * stats, zero without one), events dropped. The wait connection (blocking
 * waits) is not counted: it is closed on purpose when a wait ends at the
 * caller's deadline. */
void client_push_net_stats(lua_State *L, client_ud *u, const wd_stats *w) {
    uint64_t reconnects = w->reconnects, noscript = w->noscript_reloads;
    uint64_t dropped = w->events_dropped;
    if (u->r) {
        reconnects += u->r->net.reconnects;
        noscript += u->r->net.noscript_reloads;
    }
    if (u->ev) dropped += u->ev->q.dropped;
    lua_pushinteger(L, (lua_Integer)reconnects);
    lua_setfield(L, -2, "reconnects");
    lua_pushinteger(L, (lua_Integer)noscript);
    lua_setfield(L, -2, "noscript_reloads");
    lua_pushinteger(L, (lua_Integer)dropped);
    lua_setfield(L, -2, "events_dropped");
}

const luaL_Reg client_events_methods[] = {
    {"events", meth_events},
    {NULL, NULL}
};
