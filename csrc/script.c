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
