/*
 * script.c: EVALSHA with the NOSCRIPT fallback, over the embedded scripts.
 *
 * EVALSHA saves sending the source on every call; the fallback to EVAL makes
 * a flushed script cache invisible to callers. A NOSCRIPT reply means the
 * script did not run, so sending EVAL after it runs the script exactly once.
 * Every EVAL goes right after a SCRIPT LOAD of the same source, whose answer
 * is dropped. This file holds the scripts and finds them; script_load.c
 * builds the requests, and recovery.c says what a NOSCRIPT asks for.
 */
#include "cmd/script.h"

#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "scripts_gen.h"

#define SCRIPT_COUNT (sizeof script_table / sizeof script_table[0])

const script_def *script_find(const char *name) {
    size_t lo = 0, hi = SCRIPT_COUNT;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int cmp = strcmp(name, script_table[mid].name);
        if (cmp == 0) return &script_table[mid];
        if (cmp < 0) hi = mid;
        else lo = mid + 1;
    }
    return NULL;
}

/* The names come from Lua's interned strings, so one call site passes the
 * same pointer every time: a per-thread cache of the last few lookups,
 * checked by content (a pointer can be reused for another string once the
 * first is collected), saves the binary search on the hot path. */
#define SCRIPT_CACHE 8
static __thread struct {
    const char *name;
    size_t len;
    const script_def *def;
} script_cache[SCRIPT_CACHE];

const script_def *script_find_len(const char *name, size_t len) {
    size_t slot = ((uintptr_t)name >> 4) % SCRIPT_CACHE;
    const script_def *def = script_cache[slot].def;
    /* same pointer and length, and the same bytes: def->name is len long */
    if (script_cache[slot].name == name && script_cache[slot].len == len && def != NULL &&
        memcmp(def->name, name, len) == 0)
        return def;
    if (memchr(name, '\0', len) != NULL) return NULL;   /* a NUL inside: no script */
    def = script_find(name);
    if (def != NULL) {
        script_cache[slot].name = name;
        script_cache[slot].len = len;
        script_cache[slot].def = def;
    }
    return def;
}

size_t script_count(void) {
    return SCRIPT_COUNT;
}

const script_def *script_at(size_t i) {
    return i < SCRIPT_COUNT ? &script_table[i] : NULL;
}

size_t script_index(const script_def *s) {
    return (size_t)(s - script_table);
}

uint64_t script_bit(const script_def *s) {
    size_t i = script_index(s);
    return i < SCRIPT_COUNT && i < 64 ? (uint64_t)1 << i : 0;
}
