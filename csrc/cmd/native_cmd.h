/*
 * native_cmd.h: server commands that do exactly what one of our scripts
 * does, where a node has them. No Lua here.
 *
 * Two scripts have a one-command equivalent on some servers:
 *   extend           compare-and-expire: SET key token IFEQ token PX ms
 *                    (Valkey 8.1+, Redis 8.4+), or Tair's CAS key token
 *                    token PX ms
 *   redlock_release  compare-and-delete: DELIFEQ key token (Valkey 9),
 *                    DELEX key IFEQ token (Redis 8.4, Valkey 9.2), or
 *                    Tair's CAD key token
 * Every other script stays a script (release also wakes waiters and hands
 * fair queues over; redlock_renew tells a missing key from a foreign one).
 *
 * What a node has is learned by feature at connect (native_detect.h), kept
 * per connection as NATIVE_* bits, never inferred from a version string.
 * The reply is mapped to exactly the integer the script answers, so no
 * caller can tell which one ran. Whenever the native command does not give
 * a clean answer, the caller runs the script instead: an error reply means
 * the command did not run (these are single-key commands that check before
 * they write), so the script then runs exactly once.
 */
#ifndef REDISLOCK_NATIVE_CMD_H
#define REDISLOCK_NATIVE_CMD_H

#include <stddef.h>
#include <hiredis.h>

#include "cmd/script.h"

/* Feature bits: what a node was found to support. */
#define NATIVE_DELIFEQ  0x01u   /* DELIFEQ key value */
#define NATIVE_DELEX    0x02u   /* DELEX key IFEQ value */
#define NATIVE_SET_IFEQ 0x04u   /* SET key value IFEQ cmp PX ms */
#define NATIVE_CAD      0x08u   /* CAD key value */
#define NATIVE_CAS      0x10u   /* CAS key old new PX ms */
#define NATIVE_ALL      0x1fu
#define NATIVE_COUNT    5

#define NATIVE_MAX_ARGS 7

/* One native request. Its strings are static or borrowed from the
 * script's arguments: valid as long as those are. */
typedef struct native_cmd {
    unsigned op;                 /* the one feature bit it uses */
    int argc;
    const char *argv[NATIVE_MAX_ARGS];
    size_t lens[NATIVE_MAX_ARGS];
} native_cmd;

/* The native command that stands in for script s run with args (its keys,
 * then its ARGV, as for EVALSHA) on a node with `features`: fills *out and
 * returns its bit, or returns 0: run the script. A preference order picks
 * one when several would do (DELIFEQ, DELEX, CAD; SET IFEQ, CAS). */
unsigned native_build(unsigned features, const script_def *s, int nargs,
                      const char **args, const size_t *lens, native_cmd *out);

enum native_verdict {
    NATIVE_MAPPED = 0,      /* *value: the integer the script answers */
    NATIVE_RETRY,           /* it did not run (an error): run the script */
    NATIVE_UNSUPPORTED      /* the node refuses it (unknown command, syntax,
                               ACL): run the script, and stop using this
                               feature on this connection */
};

/* What the reply r to native command `op` means. */
int native_reply(unsigned op, const redisReply *r, long long *value);

/* Turns r into the integer reply `value` in place, with no allocation
 * (its string, if any, freed with free(): hiredis' default allocator, as
 * luaval.c assumes too). */
void native_reply_set_int(redisReply *r, long long value);

/* "delifeq", "delex", "set_ifeq", "cad", "cas" for a bit; NULL otherwise. */
const char *native_name(unsigned op);
/* The i-th bit (0 <= i < NATIVE_COUNT), for listing them. */
unsigned native_bit(int i);

#endif
