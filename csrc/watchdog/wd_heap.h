/* wd_heap.h: the watchdog's schedule, a min-heap of entries on next_at, so
 * each tick costs O(due log n). No Lua here. */
#ifndef REDISLOCK_WD_HEAP_H
#define REDISLOCK_WD_HEAP_H

#include <stdint.h>
#include "watchdog/wd_entry.h"

typedef struct wd_heap_slot {
    int64_t key;            /* the entry's next_at when it was pushed */
    uint64_t id;            /* the entry's id: ties go in creation order */
    wd_entry *e;
} wd_heap_slot;

typedef struct wd_heap {
    wd_heap_slot *a;
    uint32_t n, cap;
} wd_heap;

/* Room for `total` entries: 0, or -1 when out of memory. Reserved when a
 * lock is registered, so scheduling it again can never fail. */
int wd_heap_reserve(wd_heap *h, uint32_t total);
void wd_heap_push(wd_heap *h, wd_entry *e);
void wd_heap_remove(wd_heap *h, wd_entry *e);   /* no-op if not scheduled */
static inline wd_entry *wd_heap_top(const wd_heap *h) { return h->n ? h->a[0].e : NULL; }
void wd_heap_free(wd_heap *h);

#endif
