/*
 * hostport.h: "host:port" as redislock reads it, everywhere: URLs and the
 * seed lists of connect() (lua/redislock/url.lua, redislock.lua, through
 * core.hostport), the seeds and the nodes the C core is handed
 * (topo_node_parse), an ASK's target. No Lua here.
 *
 *   host[:port]      host: a name (letters, digits, '-', '.', '_', at most
 *                    253 bytes) or an IPv4 address
 *   [v6][:port]      an IPv6 address in brackets
 *   port             1-65535, decimal digits only
 *
 * Anything else (a space, a control byte, a '/', an empty part) is refused
 * before any lookup, with a message that names the part that is wrong and
 * shows it printable and short.
 */
#ifndef REDISLOCK_HOSTPORT_H
#define REDISLOCK_HOSTPORT_H

#include <stddef.h>

/* Parses s (len bytes): *host and *hostlen the host's bytes inside s
 * (without brackets), *port the port (0: none given). 0, or -1 with err
 * ("host expected", "port must be a number 1-65535, got '99999'", ...). */
int hostport_parse(const char *s, size_t len, const char **host, size_t *hostlen, int *port, char *err,
                   size_t errlen);

/* Whether host (len bytes) is a name or an address we may look up. */
int hostport_valid_host(const char *host, size_t len);

#endif
