/*
 * wait_cmd.h: WAIT numreplicas timeout, the command that asks a master how
 * many of its replicas acknowledged the writes made so far on a
 * connection. Written once for its three callers: a Lua call with
 * `replicas = n` (csrc/binding/client_quorum.c), the cosocket transport's
 * request (csrc/binding/client_request.c), and the watchdog's renewals on
 * a master a failover could replace (csrc/watchdog/wd_link.c).
 */
#ifndef REDISLOCK_WAIT_CMD_H
#define REDISLOCK_WAIT_CMD_H

#include "net/conn.h"

/* Queues "WAIT n ms" on c. 0, or -1 when out of memory (c then failed, as
 * conn_append says). */
int wait_cmd_append(conn *c, long long n, long long ms);

#endif
