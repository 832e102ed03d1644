/* client_ud.h: the client userdata, for client.c and the client_*.c
 * files that hold its other concerns. */
#ifndef REDISLOCK_CLIENT_UD_H
#define REDISLOCK_CLIENT_UD_H

#include "lua.h"
#include "lauxlib.h"
#include "topo/router.h"
#include "cmd/script.h"
#include "topo/topo.h"
#include "watchdog/watchdog.h"

#include "binding/udata.h"

#define CLIENT_MT "redislock.client"

typedef struct client_ud {
    udata_tag tag;             /* (udata.h) */
    topo *t;      /* NULL once closed */
    router *r;    /* this client's connections */
    wd *wd;       /* the watchdog, created at the first watched lock */
    struct client_events *ev;  /* on_event's queues, once asked for (client_events.c) */
} client_ud;

/* The client at stack index 1; raises if it is closed. (Here, inline: every
 * client_*.c file checks its self, and client.c uses several of them.) */
static inline client_ud *client_check(lua_State *L) {
    client_ud *u = (client_ud *)udata_check(L, 1, UDATA_CLIENT, sizeof(client_ud), CLIENT_MT);
    if (u->t == NULL) luaL_error(L, "attempt to use a closed redislock client");
    return u;
}

/* Pushes a closed-state client userdata (safe to collect whatever follows). */
static inline client_ud *client_push_closed(lua_State *L) {
    return (client_ud *)udata_new(L, sizeof(client_ud), UDATA_CLIENT, CLIENT_MT);
}

/* Pushes the Lua result of a command: the reply, or nil, err, kind (kind:
 * "connection", "timeout", "redis", "memory": callers branch on it, never
 * on the message's text). Frees r. */
int client_result(lua_State *L, client_ud *u, redisReply *r);

/* The embedded script named at stack index name_idx and its keys and
 * arguments (the values after it, as strings into argv/lens, at most
 * SCRIPT_MAX_ARGS; *n of them). Raises on an unknown name, on too few
 * values for its keys, and as luaval_args does. */
const script_def *client_script_args(lua_State *L, int name_idx, const char **argv, size_t *lens,
                                     int *n);

/* The Redlock fan-out and WAIT (client_quorum.c). */
extern const luaL_Reg client_quorum_methods[];

/* A wait with the next attempt queued behind it (client_wait.c). */
extern const luaL_Reg client_wait_methods[];

/* The topology methods (client_topo.c). */
extern const luaL_Reg client_topo_methods[];

/* Requests driven from Lua (client_request.c), and their metatable. */
extern const luaL_Reg client_request_methods[];
void client_request_register(lua_State *L);

/* Events and connection counters (client_events.c). */
extern const luaL_Reg client_events_methods[];
void client_events_follow(client_ud *u);    /* after the watchdog is made */
void client_events_free(client_ud *u);
void client_push_net_stats(lua_State *L, client_ud *u, const wd_stats *w);

/* Adds native = {...} and native_nodes = {...} to the table at the top of
 * the stack: the native compare commands each connected node has
 * (client_native.c). */
void client_native_info(lua_State *L, const client_ud *u);

#endif
