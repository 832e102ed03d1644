/*
 * wd_ids.h: lock ids, and the map from id to entry. No Lua here.
 *
 * An id is drawn from one counter for the whole process and never reused,
 * and it stays below 2^53, so it is exact as a Lua number on every Lua
 * (5.1, LuaJIT and 5.2 have only doubles). A slot-and-generation scheme
 * packed into 64 bits is not: its generation overflows the 53 bits a double
 * holds after 2^21 reuses of a slot, and two live locks then share an id.
 */
#ifndef REDISLOCK_WD_IDS_H
#define REDISLOCK_WD_IDS_H

#include <stdint.h>
#include "watchdog/wd_entry.h"

#define WD_ID_LIMIT (((uint64_t)1 << 53) - 1)   /* ids are < this */

/* A fresh id, or 0 once ids are exhausted (2^53 - 1 of them). */
uint64_t wd_ids_next(void);

/* Test hook: the next id drawn (so a spec reaches high ids at once). */
void wd_ids_set_next(uint64_t next);

/* An open-addressing hash map id -> entry. Zero-initialised is empty. */
typedef struct wd_idmap {
    uint64_t *keys;         /* 0: empty */
    wd_entry **vals;
    uint32_t cap, n;        /* cap: a power of two, or 0 */
} wd_idmap;

/* Room for one more entry: 0, or -1 when out of memory. */
int wd_idmap_reserve(wd_idmap *m);
/* Adds (after a successful reserve: cannot fail). */
void wd_idmap_put(wd_idmap *m, uint64_t id, wd_entry *e);
wd_entry *wd_idmap_get(const wd_idmap *m, uint64_t id);
void wd_idmap_del(wd_idmap *m, uint64_t id);
void wd_idmap_free(wd_idmap *m);

#endif
