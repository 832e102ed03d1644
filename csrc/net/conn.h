/*
 * conn.h: one connection to one Redis node, on a socket of our own with
 * hiredis' reply parser. No Lua here.
 *
 * Every exchange runs against one deadline (deadline.h): connect_timeout
 * bounds name resolution, connect and the handshake (AUTH, SELECT, PING,
 * and for data nodes the native command detection of native_detect.h)
 * together; timeout bounds a command from its send to its whole reply,
 * however slowly the bytes come. After any failure the connection is dead
 * (hiredis' rule): it is closed, the reason kept in errstr, and the next use
 * connects again.
 *
 * Two ways to drive it: blocking calls for the Lua side (conn_command,
 * conn_append + conn_read), and non-blocking steps for the watchdog's event
 * loop (conn_start, conn_flush_some, conn_fill, conn_reply).
 *
 * Not thread-safe: one conn per thread. After fork() the child closes every
 * inherited conn's socket at once (pthread_atfork), so a child never speaks
 * on its parent's connection and never closes an fd that is no longer ours;
 * it leaves an inherited TLS session untouched (conn_fork.c says why).
 *
 * TLS (cfg.tls) lives in the same steps: the handshake runs on the same
 * non-blocking socket and in the same poll loops (conn_poll_events says
 * what to wait for), within connect_timeout like the rest of connecting;
 * requests are encrypted as they are sent and replies decrypted as they
 * come, so every deadline means what it means without TLS.
 */
#ifndef REDISLOCK_CONN_H
#define REDISLOCK_CONN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <hiredis.h>

#include "net/counters.h"
#include "net/reply_guard.h"
#include "base/resp.h"
#include "net/sock.h"
#include "net/tls.h"

#define CONN_ERRSTR_LEN 200

struct conn;

/* Requests that a layer above rides in the handshake of the connections it
 * sets up (the command layer's native command detection, native_detect.h):
 * queue() queues them after PING and says how many (-1: failed to queue);
 * reply() gets each one's reply, i from 0, and must never fail the
 * handshake. Both get the conn's hook_ud. The connection knows nothing of
 * what they mean. */
typedef struct conn_hook {
    int (*queue)(struct conn *c, void *ud);
    void (*reply)(struct conn *c, void *ud, int i, const redisReply *r);
} conn_hook;

/* What kind of failure the last one was (conn_kind names it for Lua). */
enum conn_err {
    CONN_OK = 0,
    CONN_ECONNECT,   /* could not connect: refused, unreachable, no such name */
    CONN_ETIMEOUT,   /* the deadline passed (connecting or waiting for a reply) */
    CONN_ELOST,      /* closed, reset or garbled in the middle of an exchange */
    CONN_EREDIS,     /* the server refused the handshake (AUTH, SELECT, PING) */
    CONN_ENOMEM,
    CONN_EINTR       /* a signal asked the interpreter to stop (intr.h) */
};

typedef struct conn_config {
    char *host;              /* TCP host, or NULL when path is set */
    int port;
    char *path;              /* unix socket path, or NULL */
    char *username;          /* ACL user, or NULL for the default user */
    char *password;          /* NULL: no AUTH. Never copied into a message. */
    int db;                  /* SELECT after connect when > 0 */
    long connect_timeout_ms; /* resolve + connect + handshake, in total */
    long timeout_ms;         /* one command, send to whole reply; 0: none */
    tls_ctx *tls;            /* TLS settings (tls.h; a reference of its own in
                                every copy), or NULL: plain TCP */
} conn_config;

/* What the handshake learned of the server (conn_new's probe = 1). */
typedef struct conn_info {
    char maxmemory_policy[40];   /* "" when unknown */
    char info_error[96];         /* why it is unknown (e.g. NOPERM), or "" */
} conn_info;

typedef struct conn {
    conn_config cfg;
    int may_resolve;         /* 0: never resolve a name, use addrs as set */
    int probe;               /* the handshake also reads INFO memory */
    sock_addrs addrs;        /* the endpoint's addresses (n == 0: unknown) */
    unsigned addrs_gen;      /* grows each time addrs is set anew */
    int fd;                  /* -1 while disconnected */
    uint64_t gen;            /* sockets opened so far: whoever keeps state about
                                the one in use sees a new one by this */
    int connecting;          /* non-blocking connect under way (conn_start) */
    tls_sess *tls;           /* the socket's TLS session, or NULL (plain) */
    int tls_hs;              /* its handshake is under way (1; 2 once the
                                server's first bytes came): requests wait
                                in out, unencrypted, until it is done */
    int addr_i;              /* the address being tried */
    pid_t pid;               /* the process that opened fd */
    redisReader *reader;     /* replies that are not simple (reply_fast.h) */
    reply_guard guard;       /* the bounds of what reader is fed (reply_guard.h) */
    int reader_holds;        /* it holds bytes: every byte goes to it until
                                it has given back a reply with none left */
    rbuf fast;               /* simple replies received, in order, older
                                than any byte the reader holds: */
    size_t fast_off;         /* fast.p[fast_off..fast_whole): whole ones not
                                read yet; */
    size_t fast_whole;       /* fast.p[fast_whole..len): the beginning of one */
    rbuf out;                /* queued requests; out.p[out_off..] unsent */
    size_t out_off;
    uint64_t sent_total;     /* bytes handed to the kernel since connect */
    uint64_t queued_total;   /* bytes queued since connect */
    uint64_t recv_total;     /* bytes received since connect (plain, after TLS) */
    unsigned char hs_kind[8];/* the handshake's replies, in order */
    int hs_n, hs_next;       /* how many; the next one to read */
    long spin_us;            /* conn_read polls this long before sleeping */
    int recv_fd;             /* the fd made blocking for conn_fill_wait, or -1 */
    long recv_timeo_ms;      /* its SO_RCVTIMEO in ms (0: none set) */
    conn_info info;
    conn_counters *counters; /* its owner's (counters.h), or NULL */
    unsigned attempts;       /* connects begun since the last handshake */
    uint64_t handshakes;     /* handshakes completed: after the first, each
                                one is a reconnect */
    const conn_hook *hook;   /* more requests for its handshake, or NULL */
    void *hook_ud;           /* the hook's own, handed to it */
    int64_t last_reply_us;   /* monotonic us of the last reply conn_reply
                                gave, or of conn_ensure's handshake: a conn idle
                                longer than that is checked for a close by
                                the server before use (conn_check_idle) */
    int err;                 /* enum conn_err of the last failure */
    char errstr[CONN_ERRSTR_LEN];
    struct conn *reg_prev, *reg_next;  /* all conns, for fork */
} conn;

/* Deep copy of a config (strings duplicated). 0, or -1 when out of memory. */
int conn_config_copy(conn_config *dst, const conn_config *src);
/* Frees the strings, wiping the password first. */
void conn_config_free(conn_config *cfg);

/* A new, not yet connected conn with its own copy of cfg; NULL if no memory. */
conn *conn_new(const conn_config *cfg);
void conn_free(conn *c);

/* For a conn_hook's queue(): queues one more handshake request. 0, or -1. */
int conn_hook_queue(conn *c, int argc, const char **argv, const size_t *lens);

/* Registers conn_fork.c's fork handlers now (conn_new does it too); for code
 * whose own handlers must be registered after these. */
void conn_fork_init(void);

/* Sets the addresses to connect to (for conns that may not resolve). */
void conn_set_addrs(conn *c, const sock_addrs *a);

/* ---- blocking use (the Lua side) ---------------------------------------- */

/* Resolves the endpoint now (when this conn may) before deadline: 0, or -1
 * with errstr. conn_ensure does it on every connect. */
int conn_resolve(conn *c, int64_t deadline);

/* Connects and completes the handshake now if not connected (or if the
 * process forked since), all within connect_timeout. 0, or -1 with errstr
 * ("connection failed: ..." or "redis error: ..."). */
int conn_ensure(conn *c);
/* ... within deadline instead (what is left of a longer connect's). */
int conn_ensure_by(conn *c, int64_t deadline);

/* Drops c if the server closed it while it sat idle for over a second (its
 * `timeout`, CLIENT KILL, a proxy, the server's death): checked before a
 * request is queued, when nothing is in flight (the caller knows of
 * requests whose replies it gave up on: then it does not ask), so that it goes on a new
 * connection rather than into a dead one, where it would fail with no
 * telling whether it ran. A drop, not a reconnect: the caller connects
 * the way its topology says (a Sentinel's master is looked up again). */
void conn_check_idle(conn *c);

/* Sends one command and reads its reply within timeout, binary safe.
 * Returns the reply (the caller frees it, an error reply included) or NULL
 * after a failure, with err/errstr set and the connection closed. Never
 * retries: the command may have run, and only the caller knows whether
 * repeating is safe. */
redisReply *conn_command(conn *c, int argc, const char **argv, const size_t *lens);

/* Pipelining: conn_ensure, queue commands, then read their replies in order
 * against one deadline (conn_deadline: now + timeout). Same error rules. */
int conn_append(conn *c, int argc, const char **argv, const size_t *lens);
/* The same, the first arguments given in RESP already (resp_command_pre). */
int conn_append_pre(conn *c, size_t total, const char *pre, size_t prelen, int argc,
                    const char **argv, const size_t *lens);
redisReply *conn_read(conn *c, int64_t deadline);
int64_t conn_deadline(const conn *c);

/* Spin-then-block for conn_read (0 turns it off; see conn_wait.c). */
void conn_set_spin(conn *c, long spin_us);
void conn_set_timeouts(conn *c, long connect_ms, long command_ms);

/* ---- non-blocking steps (the watchdog's event loop) -------------------- */

/* Starts connecting. The handshake is queued at once, so requests can be
 * queued behind it. 1: wait for POLLOUT, then conn_connect_done; 0:
 * connected; -1: failed (errstr). Never resolves a name: set addrs. */
int conn_start(conn *c);
int conn_connect_done(conn *c);
/* Sends what is queued without blocking: 1 all sent, 0 more to send (or,
 * over TLS, a handshake still under way), -1 failed. */
int conn_flush_some(conn *c);
/* Reads what the kernel has without blocking: 1 read some, 0 nothing yet, -1 failed. */
int conn_fill(conn *c);
/* The next reply to a queued request, handshake replies consumed (and
 * checked) on the way: 1 with *r set, 0 none complete yet, -1 failed. */
int conn_reply(conn *c, redisReply **r);
/* conn_reply for a reply that is an integer and was simple: 1 with *v set
 * (no allocation), 0 when the next reply is something else or not here
 * yet (then ask conn_reply). Only after the handshake. */
int conn_reply_int(conn *c, long long *v);
/* Removes the queued bytes [from, to) (stream offsets, see queued_total)
 * if none of them was sent yet: 0 removed, -1 already (partly) sent. */
int conn_unqueue(conn *c, uint64_t from, uint64_t to);
/* What to poll c's fd for now: POLLOUT while connecting or while there
 * is something to send; POLLIN otherwise too (and alone while a TLS
 * handshake waits for the server). 0 when closed. */
short conn_poll_events(const conn *c);
/* Connecting: the TCP connect or the TLS handshake is under way (both
 * count against connect_timeout). */
int conn_connecting(const conn *c);
/* Records a failure found by the caller (e.g. a timeout) and closes. */
void conn_fail_with(conn *c, int err, const char *what);
/* The same with its own words: "connection <what>: <why> (<where>)"; an
 * interrupted wait says so in its own words. */
void conn_fail(conn *c, int err, const char *what, const char *why);

/* Closes the socket: the next use reconnects. */
void conn_drop(conn *c);

/* Takes over a connected socket (tests, the fuzzer): no handshake. */
void conn_adopt_fd(conn *c, int fd);

/* ---- detached: someone else moves the bytes (nginx's cosockets) -------- */

/* Starts an exchange over a socket that is not ours (c->fd stays -1; c's
 * config has no TLS: the other side's socket does that): requests are
 * queued as usual, handed out by conn_detach_take, and what came back is
 * given to conn_detach_feed, then read with conn_reply. fresh: the socket
 * was just made, so the handshake (AUTH, SELECT, PING, the hook's) goes
 * first and its replies are read and checked on the way; else it was set
 * up before. 0, or -1 (out of memory: errstr). */
int conn_detach_begin(conn *c, int fresh);
/* The bytes queued since the last take (*p, valid until the next queue or
 * reset), counted as sent. */
size_t conn_detach_take(conn *c, const char **p);
/* n bytes that came back: 0, or -1 (out of memory, c failed). */
int conn_detach_feed(conn *c, const char *p, size_t n);

/* "127.0.0.1:6379" or "/tmp/redis.sock", for messages. */
void conn_describe(const conn *c, char *buf, size_t len);

/* "connection", "timeout", "redis", "memory" for enum conn_err. */
const char *conn_kind(int err);

#endif
