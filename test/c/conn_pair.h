/*
 * test/c/conn_pair.h: a conn on one end of a socketpair, for the C tests
 * that play the server by writing its bytes into the other end. No server,
 * no Lua. flags: SOCK_NONBLOCK, SOCK_CLOEXEC or 0 (the peer's too).
 */
#ifndef REDISLOCK_TEST_CONN_PAIR_H
#define REDISLOCK_TEST_CONN_PAIR_H

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "net/conn.h"

static inline conn *conn_pair(int flags, int *peer) {
    conn_config cfg;
    conn *c;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | flags, 0, sv) != 0) abort();
    memset(&cfg, 0, sizeof cfg);
    cfg.path = (char *)"/nonexistent";   /* never connected: the fd is adopted */
    c = conn_new(&cfg);
    if (c == NULL) abort();
    conn_adopt_fd(c, sv[0]);
    *peer = sv[1];
    return c;
}

#endif
