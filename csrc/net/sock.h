/*
 * sock.h: the sockets under every connection, owned by us rather than by
 * hiredis. No Lua here.
 *
 * Non-blocking from creation (only conn_wait.c's reply wait turns that off,
 * for recv to sleep; every other call passes MSG_DONTWAIT), close-on-exec
 * from creation (a command started by `redislock run` must never inherit an
 * authenticated connection), sends that cannot raise SIGPIPE (MSG_NOSIGNAL:
 * no signal mask games around each command), and every wait is bounded by
 * a deadline (deadline.h): a poll(2), or, for the first 50 ms of a reply
 * wait with time to spare, a recv(2) that sleeps itself under SO_RCVTIMEO
 * (one syscall where poll and recv are two; conn_wait.c keeps it well short
 * of the deadline). hiredis is used only to parse replies.
 */
#ifndef REDISLOCK_SOCK_H
#define REDISLOCK_SOCK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#define SOCK_MAX_ADDRS 8

/* The addresses of one endpoint, tried in order. */
typedef struct sock_addrs {
    int n;
    struct {
        struct sockaddr_storage ss;
        socklen_t len;
    } a[SOCK_MAX_ADDRS];
} sock_addrs;

/* Fills out with host:port when host is a numeric IPv4 or IPv6 address;
 * returns 1 then, 0 when host is a name (resolve.h resolves those). */
int sock_numeric(const char *host, int port, sock_addrs *out);

/* Fills out with a unix socket path; -1 (ENAMETOOLONG) when it is too long. */
int sock_unix(const char *path, sock_addrs *out);

/* Starts a non-blocking connect to address i of a. Returns the fd and sets
 * *in_progress (1: wait for POLLOUT, then sock_connected), or -1 with errno. */
int sock_connect_start(const sock_addrs *a, int i, int *in_progress);

/* After POLLOUT on a connecting fd: 0 when connected, -1 with errno. */
int sock_connected(int fd);

/* Connects to the first address of a that accepts, all before deadline.
 * Returns the fd, or -1 with errno (ETIMEDOUT when the deadline passed). */
int sock_connect(const sock_addrs *a, int64_t deadline);

/* One non-blocking send or receive: bytes moved, or -1 with errno (EAGAIN
 * when the kernel buffer is full or empty). recv returns 0 at EOF. */
ssize_t sock_send(int fd, const void *buf, size_t len);
ssize_t sock_recv(int fd, void *buf, size_t len);

/* For sock_recv_block: O_NONBLOCK off (every call above passes MSG_DONTWAIT,
 * so they stay non-blocking) and SO_RCVTIMEO ms milliseconds (0: none).
 * 0, or -1 with errno. */
int sock_set_blocking(int fd);
int sock_set_recv_timeout(int fd, long ms);

/* One receive that sleeps until bytes come or the fd's SO_RCVTIMEO passes:
 * bytes, 0 at EOF, or -1 with errno (EAGAIN: timed out; EINTR: a signal;
 * EAGAIN at once on an fd still non-blocking). */
ssize_t sock_recv_block(int fd, void *buf, size_t len);

/* Polls fd for events until deadline: 1 ready, 0 deadline passed, -1 error. */
int sock_wait(int fd, short events, int64_t deadline);
/* The same, with what came: the revents (> 0), 0 deadline passed, -1 error. */
int sock_poll(int fd, short events, int64_t deadline);

/* "127.0.0.1:6379", "[::1]:6379" or the unix path, for messages. */
void sock_describe(const sock_addrs *a, int i, char *buf, size_t len);

#endif
