/*
 * script.c: EVALSHA with the NOSCRIPT fallback, over the embedded scripts.
 *
 * EVALSHA saves sending the source on every call; the fallback to EVAL makes
 * a flushed script cache invisible to callers. EVAL also re-caches the script,
 * so the next call is an EVALSHA hit again. A NOSCRIPT reply means the script
 * did not run, so sending EVAL after it runs the script exactly once.
 */
#include "script.h"

#include <stdio.h>
#include <string.h>

#include "scripts_gen.h"

#define SCRIPT_COUNT (sizeof script_table / sizeof script_table[0])

const script_def *script_find(const char *name) {
    size_t i;
    for (i = 0; i < SCRIPT_COUNT; i++)
        if (strcmp(script_table[i].name, name) == 0) return &script_table[i];
    return NULL;
}

size_t script_count(void) {
    return SCRIPT_COUNT;
}

const script_def *script_at(size_t i) {
    return i < SCRIPT_COUNT ? &script_table[i] : NULL;
}

int script_is_noscript(const redisReply *r) {
    return r != NULL && r->type == REDIS_REPLY_ERROR && r->len >= 8 &&
           memcmp(r->str, "NOSCRIPT", 8) == 0;
}

/* Lays out EVAL[SHA] body nkeys args... into argv/lens; returns argc. */
static int script_argv(const script_def *s, int use_eval, int nargs,
                       const char **args, const size_t *lens, char *nkeys_buf,
                       const char **argv, size_t *argvlen) {
    int i;
    snprintf(nkeys_buf, 16, "%d", s->nkeys);
    argv[0] = use_eval ? "EVAL" : "EVALSHA";
    argvlen[0] = strlen(argv[0]);
    argv[1] = use_eval ? s->source : s->sha;
    argvlen[1] = use_eval ? s->len : 40;
    argv[2] = nkeys_buf;
    argvlen[2] = strlen(nkeys_buf);
    for (i = 0; i < nargs; i++) {
        argv[3 + i] = args[i];
        argvlen[3 + i] = lens[i];
    }
    return nargs + 3;
}

redisReply *script_call(conn *c, const script_def *s, int nargs,
                        const char **args, const size_t *lens) {
    const char *argv[SCRIPT_MAX_ARGS + 3];
    size_t argvlen[SCRIPT_MAX_ARGS + 3];
    char nkeys[16];
    redisReply *r;
    int argc;
    if (nargs > SCRIPT_MAX_ARGS) {
        snprintf(c->errstr, sizeof c->errstr, "too many script arguments");
        return NULL;
    }
    argc = script_argv(s, 0, nargs, args, lens, nkeys, argv, argvlen);
    r = conn_command(c, argc, argv, argvlen);
    if (!script_is_noscript(r)) return r;
    freeReplyObject(r);
    argc = script_argv(s, 1, nargs, args, lens, nkeys, argv, argvlen);
    return conn_command(c, argc, argv, argvlen);
}
