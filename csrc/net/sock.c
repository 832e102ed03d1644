/*
 * sock.c: sockets with deadlines (see sock.h).
 */
#define _GNU_SOURCE
#include "net/sock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/deadline.h"
#include "base/intr.h"

int sock_numeric(const char *host, int port, sock_addrs *out) {
    struct sockaddr_in *v4 = (struct sockaddr_in *)&out->a[0].ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&out->a[0].ss;
    memset(out, 0, sizeof *out);
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        out->a[0].len = sizeof *v4;
        out->n = 1;
        return 1;
    }
    memset(out, 0, sizeof *out);
    if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        out->a[0].len = sizeof *v6;
        out->n = 1;
        return 1;
    }
    memset(out, 0, sizeof *out);
    return 0;
}

int sock_unix(const char *path, sock_addrs *out) {
    struct sockaddr_un *un = (struct sockaddr_un *)&out->a[0].ss;
    size_t len = strlen(path);
    memset(out, 0, sizeof *out);
    if (len == 0 || len >= sizeof un->sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    un->sun_family = AF_UNIX;
    memcpy(un->sun_path, path, len + 1);
    out->a[0].len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
    out->n = 1;
    return 0;
}

/* Latency over throughput (small commands, one reply each), and keepalive
 * so that a peer that vanished silently (NAT drop, pulled cable) becomes an
 * error instead of a socket that waits forever. */
static void sock_tune(int fd, int family) {
    int one = 1, idle = 15, intvl = 5, cnt = 3;
    if (family != AF_INET && family != AF_INET6) return;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
}

int sock_connect_start(const sock_addrs *a, int i, int *in_progress) {
    const struct sockaddr *sa = (const struct sockaddr *)&a->a[i].ss;
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    *in_progress = 0;
    if (fd < 0) return -1;
    sock_tune(fd, sa->sa_family);
    while (connect(fd, sa, a->a[i].len) != 0) {
        if (errno == EINTR) continue;
        /* unix sockets answer EAGAIN when the backlog is full */
        if (errno == EINPROGRESS || errno == EAGAIN) {
            *in_progress = 1;
            return fd;
        }
        {
            int e = errno;
            close(fd);
            errno = e;
        }
        return -1;
    }
    return fd;
}

int sock_connected(int fd) {
    int e = 0;
    socklen_t len = sizeof e;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) != 0) return -1;
    if (e != 0) {
        errno = e;
        return -1;
    }
    return 0;
}

int sock_wait(int fd, short events, int64_t deadline) {
    int r = sock_poll(fd, events, deadline);
    return r > 0 ? 1 : r;
}

int sock_poll(int fd, short events, int64_t deadline) {
    struct pollfd p;
    int r;
    p.fd = fd;
    p.events = events;
    for (;;) {
        /* (also after an EINTR that recv saw, before this poll) */
        if (intr_pending()) {
            errno = EINTR;
            return -1;
        }
        p.revents = 0;
        r = poll(&p, 1, deadline_poll_ms(deadline));
        if (r > 0) return p.revents;
        if (r == 0) {
            /* poll may return a hair early on a coarse clock: go again */
            if (deadline_passed(deadline)) return 0;
            continue;
        }
        if (errno != EINTR) return -1;
    }
}

int sock_connect(const sock_addrs *a, int64_t deadline) {
    int i, e = ECONNREFUSED;
    for (i = 0; i < a->n; i++) {
        int in_progress, r;
        int fd = sock_connect_start(a, i, &in_progress);
        if (fd < 0) {
            e = errno;
            continue;
        }
        if (!in_progress) return fd;
        r = sock_wait(fd, POLLOUT, deadline);
        if (r == 1 && sock_connected(fd) == 0) return fd;
        e = r == 0 ? ETIMEDOUT : errno;
        close(fd);
        if (r == 0) break;  /* the deadline is for all of them */
    }
    errno = e;
    return -1;
}

ssize_t sock_send(int fd, const void *buf, size_t len) {
    ssize_t n;
    do n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    return n;
}

ssize_t sock_recv(int fd, void *buf, size_t len) {
    ssize_t n;
    do n = recv(fd, buf, len, MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    return n;
}

int sock_set_blocking(int fd) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0) return -1;
    return (fl & O_NONBLOCK) ? fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) : 0;
}

int sock_set_recv_timeout(int fd, long ms) {
    struct timeval tv;
    tv.tv_sec = ms / 1000;
    tv.tv_usec = (ms % 1000) * 1000;
    return setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

ssize_t sock_recv_block(int fd, void *buf, size_t len) {
    return recv(fd, buf, len, 0);
}

void sock_describe(const sock_addrs *a, int i, char *buf, size_t len) {
    const struct sockaddr *sa;
    char ip[INET6_ADDRSTRLEN];
    if (i < 0 || i >= a->n) {
        snprintf(buf, len, "?");
        return;
    }
    sa = (const struct sockaddr *)&a->a[i].ss;
    if (sa->sa_family == AF_UNIX) {
        snprintf(buf, len, "%s", ((const struct sockaddr_un *)sa)->sun_path);
    } else if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &v4->sin_addr, ip, sizeof ip);
        snprintf(buf, len, "%s:%d", ip, ntohs(v4->sin_port));
    } else {
        const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &v6->sin6_addr, ip, sizeof ip);
        snprintf(buf, len, "[%s]:%d", ip, ntohs(v6->sin6_port));
    }
}
