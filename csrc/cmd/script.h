/*
 * script.h: the Redis-side scripts, embedded at build time from
 * lua/redislock/scripts/ (one .lua file each), and how to run them. No Lua here.
 * (What a NOSCRIPT asks for is recovery.h's to say.)
 */
#ifndef REDISLOCK_SCRIPT_H
#define REDISLOCK_SCRIPT_H

#include <stddef.h>
#include <stdint.h>
#include "net/conn.h"

/* Most arguments (keys + argv) any script call takes. */
#define SCRIPT_MAX_ARGS 64

typedef struct script_def {
    const char *name;    /* file name without .lua */
    int nkeys;           /* how many leading arguments are KEYS; -1: as many
                            as the call's first argument says (a script that
                            says "--@keys variadic": acquire_all), which is
                            sent as EVALSHA's numkeys */
    const char *sha;     /* SHA1 of source, as SCRIPT LOAD returns it */
    size_t len;
    const char *source;  /* the file's exact bytes */
    const char *evalsha; /* "EVALSHA sha nkeys" in RESP: the first three
                            bulk strings of every EVALSHA of it (two for a
                            variadic one: its count is its first argument) */
    size_t evalsha_len;
} script_def;

/* The script named `name`, or NULL (a binary search: the table is sorted). */
const script_def *script_find(const char *name);
/* The same for a Lua string of `len` bytes (NUL-terminated, as Lua's are),
 * cached per thread for the hot path. */
const script_def *script_find_len(const char *name, size_t len);
size_t script_count(void);
const script_def *script_at(size_t i);
/* s's place in the table (script_at(script_index(s)) == s). */
size_t script_index(const script_def *s);
/* s's bit for a per-connection set of scripts (exec_conn.h scripts_ran):
 * bit i for script_at(i), 0 for none beyond the 64th. */
uint64_t script_bit(const script_def *s);

/* The index among a call's arguments of s's first key (the one that
 * routes it: its node, its slot), or -1 when it takes none. A variadic
 * script's first argument is its key count, checked here against nargs:
 * -1 too when it names none or more than there are. */
int script_first_key(const script_def *s, int nargs, const char **args, const size_t *lens);

/* Queues EVALSHA s nkeys args... on c, or, with eval, EVAL <s's source>
 * nkeys args... (after a NOSCRIPT, or where s has not run yet: the caller
 * queues the SCRIPT LOAD before it). The one builder of script requests:
 * the router, the watchdog and the Redlock fan-out send these bytes. nargs
 * is at most SCRIPT_MAX_ARGS. 0, or -1 (c failed: out of memory). */
int script_append(conn *c, const script_def *s, int eval, int nargs, const char **args,
                  const size_t *lens);

#endif
