/*
 * resolve.h: host names to addresses within a deadline. No Lua here.
 *
 * getaddrinfo(3) takes no timeout: a resolver that never answers holds the
 * caller for as long as resolv.conf's retries add up to (seconds). So a name
 * is resolved on a short-lived thread of its own while the caller waits
 * only until its deadline; a lookup that outlives it is abandoned and frees
 * itself when it ends. Numeric addresses never reach the resolver.
 *
 * Only threads that may block on the caller's behalf resolve (the Lua
 * side's connects): the watchdog thread never does, it reuses the addresses
 * resolved here.
 */
#ifndef REDISLOCK_RESOLVE_H
#define REDISLOCK_RESOLVE_H

#include <stddef.h>
#include <stdint.h>
#include "net/sock.h"

/* Resolves host:port into out before deadline. 0, or -1 with a message in
 * err ("cannot resolve NAME: ...", "resolving NAME timed out"). */
int resolve_host(const char *host, int port, int64_t deadline, sock_addrs *out,
                 char *err, size_t errlen);

#endif
