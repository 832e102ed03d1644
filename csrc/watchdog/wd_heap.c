/* wd_heap.c: a binary min-heap on next_at with positions kept in entries.
 * Each slot carries its entry's next_at beside the pointer: sifting
 * compares slots in one array and touches an entry only to note where it
 * moved, so a pass over 10,000 due renewals does not miss the cache on
 * every sibling it compares (next_at never changes while an entry is in
 * the heap: it is removed, changed and pushed again). */
#include "watchdog/wd_heap.h"

#include <stdlib.h>

/* Ties (a whole batch renewed in one ms is due again in one ms) go by id,
 * the order the locks were taken in: renewals then walk the entries, and
 * Redis its keys, in the order they were allocated, not in a scrambled
 * one that misses the cache on both sides. */
static int wd_heap_before(const wd_heap_slot *a, const wd_heap_slot *b) {
    return a->key < b->key || (a->key == b->key && a->id < b->id);
}

static void wd_heap_put(wd_heap *h, uint32_t i, wd_heap_slot s) {
    h->a[i] = s;
    s.e->heap_pos = (int)i;
}

static void wd_heap_up(wd_heap *h, uint32_t i) {
    wd_heap_slot s = h->a[i];
    while (i > 0) {
        uint32_t p = (i - 1) / 2;
        if (!wd_heap_before(&s, &h->a[p])) break;
        wd_heap_put(h, i, h->a[p]);
        i = p;
    }
    wd_heap_put(h, i, s);
}

int wd_heap_reserve(wd_heap *h, uint32_t total) {
    uint32_t cap = h->cap ? h->cap : 64;
    wd_heap_slot *a;
    if (total <= h->cap) return 0;
    while (cap < total) {
        if (cap > UINT32_MAX / 2) return -1;
        cap *= 2;
    }
    a = realloc(h->a, cap * sizeof *a);
    if (a == NULL) return -1;
    h->a = a;
    h->cap = cap;
    return 0;
}

void wd_heap_push(wd_heap *h, wd_entry *e) {
    if (e->heap_pos >= 0) return;
    h->a[h->n].key = e->next_at;
    h->a[h->n].id = e->id;
    h->a[h->n].e = e;
    wd_heap_up(h, h->n++);
}

/* Floyd's way: the hole at i sinks to a leaf along the earlier child (one
 * comparison a level, not two), the last slot fills it there and rises
 * to its place, which is near the bottom: the usual case for the thread's
 * pops of the top, where the last slot is among the latest due. */
void wd_heap_remove(wd_heap *h, wd_entry *e) {
    uint32_t i = (uint32_t)e->heap_pos;
    if (e->heap_pos < 0) return;
    e->heap_pos = -1;
    if (i == --h->n) return;
    for (;;) {
        uint32_t l = 2 * i + 1, m = l;
        if (l >= h->n) break;
        if (l + 1 < h->n && wd_heap_before(&h->a[l + 1], &h->a[l])) m = l + 1;
        wd_heap_put(h, i, h->a[m]);
        i = m;
    }
    h->a[i] = h->a[h->n];   /* the last slot into the hole (i < n) */
    wd_heap_up(h, i);
}

void wd_heap_free(wd_heap *h) {
    free(h->a);
    h->a = NULL;
    h->n = h->cap = 0;
}
