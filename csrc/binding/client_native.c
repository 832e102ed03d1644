/*
 * client_native.c: what a client's connections learned about native
 * compare commands (native_detect.h), for tests and operators.
 */
#include "binding/client_ud.h"

#include "net/conn.h"
#include "cmd/native_cmd.h"

/* Pushes { delifeq = bool, delex = bool, set_ifeq = bool, cad = bool,
 * cas = bool } for feature bits. */
static void client_native_push_bits(lua_State *L, unsigned bits) {
    int i;
    lua_createtable(L, 0, NATIVE_COUNT);
    for (i = 0; i < NATIVE_COUNT; i++) {
        lua_pushboolean(L, (bits & native_bit(i)) != 0);
        lua_setfield(L, -2, native_name(native_bit(i)));
    }
}

/* A connection whose handshake has been read: its bits are what the node
 * said (or all false when detection is off for it). */
static int client_native_known(const conn *c) {
    return c != NULL && c->fd >= 0 && !c->connecting && c->hs_next >= c->hs_n;
}

/* Sets, in the table at the top of the stack, native = the bits of the
 * first connected node (the main connection's, outside a Cluster) and
 * native_nodes = { ["host:port"] = bits, ... } for every connected node.
 * Both are absent before any connection was made. */
void client_native_info(lua_State *L, const client_ud *u) {
    int i, first = 1;
    char where[160];
    if (u->r == NULL) return;
    lua_newtable(L);                                  /* info, nodes */
    for (i = 0; i < u->r->nconns; i++) {
        const exec_conn *xc = u->r->conns[i];
        const conn *c = xc ? xc->c : NULL;
        if (!client_native_known(c)) continue;
        client_native_push_bits(L, xc->nat.bits);        /* info, nodes, bits */
        if (first) {
            client_native_push_bits(L, xc->nat.bits);    /* info, nodes, bits, bits */
            lua_setfield(L, -4, "native");            /* info, nodes, bits */
            first = 0;
        }
        conn_describe(c, where, sizeof where);
        lua_setfield(L, -2, where);                   /* info, nodes */
    }
    if (first) {
        lua_pop(L, 1);                                /* info */
        return;
    }
    lua_setfield(L, -2, "native_nodes");              /* info */
}
