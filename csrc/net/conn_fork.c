/*
 * conn_fork.c: every conn in one registry, so that a fork child closes the
 * sockets it inherited (see conn_fork_child) before anything can speak on
 * them.
 */
#define _GNU_SOURCE
#include "net/conn.h"

#include <pthread.h>
#include <unistd.h>

#include "net/conn_internal.h"

static pthread_mutex_t conn_reg_mu = PTHREAD_MUTEX_INITIALIZER;
static conn *conn_reg_head;
static pthread_once_t conn_fork_once = PTHREAD_ONCE_INIT;

static void conn_fork_prepare(void) { pthread_mutex_lock(&conn_reg_mu); }
static void conn_fork_parent(void) { pthread_mutex_unlock(&conn_reg_mu); }

/* In the child: the sockets are the parent's connections. Speaking on them
 * would interleave bytes with the parent; closing them later, at first use,
 * could close an fd the child has reused by then. So close them now (close
 * is async-signal-safe) and leave the rest of the cleanup to the next use.
 *
 * A TLS session is abandoned, never freed nor shut down: it is the
 * parent's session (its keys, its sequence numbers), and another thread of
 * the parent (the watchdog's, a Sentinel follower's) may have been inside
 * OpenSSL with it at the fork, leaving the child's copy half-changed and
 * any lock OpenSSL held then held forever here. Its memory is the child's
 * copy-on-write image of the parent's, untouched from now on: the child's
 * next use makes a session of its own. */
static void conn_fork_child(void) {
    conn *c;
    for (c = conn_reg_head; c; c = c->reg_next) {
        if (c->fd >= 0) close(c->fd);
        c->fd = -1;
        c->recv_fd = -1;
        c->connecting = 0;
        c->tls = NULL;
        c->tls_hs = 0;
    }
    pthread_mutex_unlock(&conn_reg_mu);
}

static void conn_fork_register(void) {
    pthread_atfork(conn_fork_prepare, conn_fork_parent, conn_fork_child);
}

void conn_fork_init(void) {
    pthread_once(&conn_fork_once, conn_fork_register);
}

void conn_reg_add(conn *c) {
    conn_fork_init();
    pthread_mutex_lock(&conn_reg_mu);
    c->reg_prev = NULL;
    c->reg_next = conn_reg_head;
    if (conn_reg_head) conn_reg_head->reg_prev = c;
    conn_reg_head = c;
    pthread_mutex_unlock(&conn_reg_mu);
}

void conn_reg_remove(conn *c) {
    pthread_mutex_lock(&conn_reg_mu);
    if (c->reg_prev) c->reg_prev->reg_next = c->reg_next;
    else conn_reg_head = c->reg_next;
    if (c->reg_next) c->reg_next->reg_prev = c->reg_prev;
    pthread_mutex_unlock(&conn_reg_mu);
}
