/*
 * test/c/wd_heap_test.c: unit test of wd_heap.c, the watchdog's schedule.
 * No server, no thread: entries pushed and removed at random (pops of the
 * top as the thread makes them, removals from the middle as unwatch and
 * extend make them), checked after every step against the entries' own
 * next_at: the top is the earliest, every entry's heap_pos says where it
 * is, the heap property holds in every slot on (next_at, id), and a
 * slot's key and id are its entry's. Ties on next_at (many) pop by id.
 *
 * Run by `make ctest` (and `make test`); exits non-zero on any failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "watchdog/wd_heap.h"

#define N 600

static wd_entry entries[N];

static void check_heap(const wd_heap *h, const char *when) {
    uint32_t i, in = 0;
    int64_t min = INT64_MAX;
    for (i = 0; i < N; i++) {
        if (entries[i].heap_pos < 0) continue;
        in++;
        if (entries[i].next_at < min) min = entries[i].next_at;
        CHECK((uint32_t)entries[i].heap_pos < h->n && h->a[entries[i].heap_pos].e == &entries[i],
              "%s: entry %u says slot %d", when, i, entries[i].heap_pos);
    }
    CHECK(in == h->n, "%s: %u entries say they are in, the heap holds %u", when, in, h->n);
    for (i = 0; i < h->n; i++) {
        const wd_heap_slot *s = &h->a[i], *p = &h->a[(i - 1) / 2];
        CHECK(s->key == s->e->next_at && s->id == s->e->id, "%s: slot %u is not its entry's", when, i);
        if (i > 0)
            CHECK(p->key < s->key || (p->key == s->key && p->id < s->id),
                  "%s: slot %u comes before its parent", when, i);
    }
    if (h->n > 0) CHECK(wd_heap_top(h)->next_at == min, "%s: the top is not the earliest", when);
    else CHECK(wd_heap_top(h) == NULL, "%s: an empty heap has a top", when);
}

int main(void) {
    wd_heap h;
    int step;
    uint32_t i;
    memset(&h, 0, sizeof h);
    CHECK(wd_heap_reserve(&h, N) == 0, "reserve");
    for (i = 0; i < N; i++) {
        entries[i].heap_pos = -1;
        entries[i].id = check_rand() | 1;   /* unique with overwhelming odds */
    }
    check_heap(&h, "empty");

    for (step = 0; step < 20000; step++) {
        uint64_t r = check_rand();
        wd_entry *e = &entries[r % N];
        int op = (int)((r >> 20) % 4);
        if (op <= 1) {
            /* push: what is already in stays (wd_heap_push is a no-op then) */
            if (e->heap_pos < 0) e->next_at = (int64_t)((r >> 32) % 50);   /* many ties */
            wd_heap_push(&h, e);
        } else if (op == 2) {
            /* the thread takes the top */
            wd_entry *top = wd_heap_top(&h);
            if (top) wd_heap_remove(&h, top);
        } else {
            /* unwatch or extend: out of the middle, maybe pushed back later */
            wd_heap_remove(&h, e);
            wd_heap_remove(&h, e);   /* a second removal is a no-op */
        }
        if (step % 7 == 0 || step < 200) check_heap(&h, "random step");
    }
    check_heap(&h, "after the random steps");

    /* draining it pops in order */
    {
        int64_t last = INT64_MIN;
        uint64_t last_id = 0;
        wd_entry *top;
        while ((top = wd_heap_top(&h)) != NULL) {
            CHECK(top->next_at > last || (top->next_at == last && top->id > last_id),
                  "pops out of order: %lld after %lld", (long long)top->next_at, (long long)last);
            last = top->next_at;
            last_id = top->id;
            wd_heap_remove(&h, top);
        }
        check_heap(&h, "drained");
    }
    wd_heap_free(&h);
    return check_report("wd_heap_test");
}
