/*
 * wd_ids.c: the process-wide id counter and the id -> entry map.
 */
#include "watchdog/wd_ids.h"

#include <stdlib.h>

static uint64_t wd_ids_counter = 1;   /* the next id to hand out */

uint64_t wd_ids_next(void) {
    uint64_t id = __atomic_fetch_add(&wd_ids_counter, 1, __ATOMIC_RELAXED);
    return id < WD_ID_LIMIT ? id : 0;
}

void wd_ids_set_next(uint64_t next) {
    __atomic_store_n(&wd_ids_counter, next, __ATOMIC_RELAXED);
}

/* Fibonacci hashing of the 64-bit id onto the table. */
static uint32_t wd_idmap_home(const wd_idmap *m, uint64_t id) {
    return (uint32_t)((id * 0x9E3779B97F4A7C15ull) >> 32) & (m->cap - 1);
}

static void wd_idmap_insert(wd_idmap *m, uint64_t id, wd_entry *e) {
    uint32_t i = wd_idmap_home(m, id);
    while (m->keys[i] != 0) i = (i + 1) & (m->cap - 1);
    m->keys[i] = id;
    m->vals[i] = e;
    m->n++;
}

int wd_idmap_reserve(wd_idmap *m) {
    wd_idmap grown;
    uint32_t i;
    if (m->cap != 0 && (uint64_t)(m->n + 1) * 4 <= (uint64_t)m->cap * 3) return 0;
    grown.cap = m->cap ? m->cap * 2 : 64;
    if (grown.cap == 0) return -1;
    grown.n = 0;
    grown.keys = calloc(grown.cap, sizeof *grown.keys);
    grown.vals = calloc(grown.cap, sizeof *grown.vals);
    if (grown.keys == NULL || grown.vals == NULL) {
        free(grown.keys);
        free(grown.vals);
        return -1;
    }
    for (i = 0; i < m->cap; i++)
        if (m->keys[i] != 0) wd_idmap_insert(&grown, m->keys[i], m->vals[i]);
    wd_idmap_free(m);
    *m = grown;
    return 0;
}

void wd_idmap_put(wd_idmap *m, uint64_t id, wd_entry *e) {
    wd_idmap_insert(m, id, e);
}

wd_entry *wd_idmap_get(const wd_idmap *m, uint64_t id) {
    uint32_t i;
    if (m->cap == 0 || id == 0) return NULL;
    for (i = wd_idmap_home(m, id); m->keys[i] != 0; i = (i + 1) & (m->cap - 1))
        if (m->keys[i] == id) return m->vals[i];
    return NULL;
}

/* Deletes by shifting back the run after the hole (no tombstones, so
 * lookups stay short however many locks come and go). */
void wd_idmap_del(wd_idmap *m, uint64_t id) {
    uint32_t i, j, mask = m->cap - 1;
    if (m->cap == 0 || id == 0) return;
    for (i = wd_idmap_home(m, id); m->keys[i] != id; i = (i + 1) & mask)
        if (m->keys[i] == 0) return;
    m->keys[i] = 0;
    m->vals[i] = NULL;
    m->n--;
    for (j = (i + 1) & mask; m->keys[j] != 0; j = (j + 1) & mask) {
        uint32_t home = wd_idmap_home(m, m->keys[j]);
        /* move j into the hole at i unless its home lies in (i, j] */
        if (((j - home) & mask) >= ((j - i) & mask)) {
            m->keys[i] = m->keys[j];
            m->vals[i] = m->vals[j];
            m->keys[j] = 0;
            m->vals[j] = NULL;
            i = j;
        }
    }
}

void wd_idmap_free(wd_idmap *m) {
    free(m->keys);
    free(m->vals);
    m->keys = NULL;
    m->vals = NULL;
    m->cap = m->n = 0;
}
