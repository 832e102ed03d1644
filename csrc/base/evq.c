/* evq.c: the bounded event queue (see evq.h). */
#include "base/evq.h"

#include <stdlib.h>
#include <string.h>

int evq_enable(evq *q) {
    if (q->q) return 0;
    q->q = calloc(EVQ_CAP, sizeof *q->q);
    if (q->q == NULL) return -1;
    q->head = q->n = 0;
    q->cap = EVQ_CAP;
    return 0;
}

ev *evq_push(evq *q) {
    ev *e;
    if (q->q == NULL) return NULL;
    if (q->n == q->cap) {
        q->head = (q->head + 1) % q->cap;
        q->n--;
        q->dropped++;
    }
    e = &q->q[(q->head + q->n) % q->cap];
    q->n++;
    memset(e, 0, sizeof *e);
    return e;
}

unsigned evq_take(evq *q, ev *out, unsigned max) {
    unsigned k = 0;
    while (k < max && q->n > 0) {
        out[k++] = q->q[q->head];
        q->head = (q->head + 1) % q->cap;
        q->n--;
    }
    return k;
}

void evq_free(evq *q) {
    free(q->q);
    memset(q, 0, sizeof *q);
}
