/* wd_heap.c: a binary min-heap on next_at with positions kept in entries. */
#include "wd_heap.h"

#include <stdlib.h>

static void wd_heap_swap(wd_heap *h, uint32_t a, uint32_t b) {
    wd_entry *t = h->a[a];
    h->a[a] = h->a[b];
    h->a[b] = t;
    h->a[a]->heap_pos = (int)a;
    h->a[b]->heap_pos = (int)b;
}

static void wd_heap_up(wd_heap *h, uint32_t i) {
    while (i > 0) {
        uint32_t p = (i - 1) / 2;
        if (h->a[p]->next_at <= h->a[i]->next_at) break;
        wd_heap_swap(h, i, p);
        i = p;
    }
}

static void wd_heap_down(wd_heap *h, uint32_t i) {
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && h->a[l]->next_at < h->a[m]->next_at) m = l;
        if (r < h->n && h->a[r]->next_at < h->a[m]->next_at) m = r;
        if (m == i) break;
        wd_heap_swap(h, i, m);
        i = m;
    }
}

int wd_heap_reserve(wd_heap *h, uint32_t total) {
    uint32_t cap = h->cap ? h->cap : 64;
    wd_entry **a;
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
    e->heap_pos = (int)h->n;
    h->a[h->n++] = e;
    wd_heap_up(h, (uint32_t)e->heap_pos);
}

void wd_heap_remove(wd_heap *h, wd_entry *e) {
    uint32_t i = (uint32_t)e->heap_pos;
    if (e->heap_pos < 0) return;
    e->heap_pos = -1;
    if (i == --h->n) return;
    h->a[i] = h->a[h->n];
    h->a[i]->heap_pos = (int)i;
    wd_heap_down(h, i);
    wd_heap_up(h, i);
}

void wd_heap_free(wd_heap *h) {
    free(h->a);
    h->a = NULL;
    h->n = h->cap = 0;
}
