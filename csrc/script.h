/*
 * script.h: the Redis-side scripts, embedded at build time from
 * lua/redislock/scripts/ (one .lua file each), and how to run them. No Lua here.
 */
#ifndef REDISLOCK_SCRIPT_H
#define REDISLOCK_SCRIPT_H

#include <stddef.h>
#include "conn.h"

/* Most arguments (keys + argv) any script call takes. */
#define SCRIPT_MAX_ARGS 32

typedef struct script_def {
    const char *name;    /* file name without .lua */
    int nkeys;           /* how many leading arguments are KEYS */
    const char *sha;     /* SHA1 of source, as SCRIPT LOAD returns it */
    size_t len;
    const char *source;  /* the file's exact bytes */
} script_def;

const script_def *script_find(const char *name);
size_t script_count(void);
const script_def *script_at(size_t i);

/* Runs s with nargs arguments (its nkeys keys first) as EVALSHA, and once
 * more as EVAL when Redis answers NOSCRIPT (script cache flushed, server
 * restarted or failed over). Reply and error rules are conn_command's. */
redisReply *script_call(conn *c, const script_def *s, int nargs,
                        const char **args, const size_t *lens);

/* Is r Redis' NOSCRIPT error? */
int script_is_noscript(const redisReply *r);

#endif
