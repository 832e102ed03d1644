/* wd_loss.c: the loss queue and its eventfd (see wd_loss.h). */
#define _GNU_SOURCE
#include "watchdog/wd_loss.h"

#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

int wd_losses_init(wd_losses *l) {
    memset(l, 0, sizeof *l);
    l->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    return l->efd >= 0 ? 0 : -1;
}

int wd_losses_reserve(wd_losses *l, size_t total) {
    size_t cap = l->cap ? l->cap : 16;
    wd_loss *q;
    if (total <= l->cap) return 0;
    while (cap < total) cap *= 2;
    q = realloc(l->q, cap * sizeof *q);
    if (q == NULL) return -1;
    l->q = q;
    l->cap = cap;
    return 0;
}

void wd_losses_push(wd_losses *l, uint64_t id, int state) {
    uint64_t one = 1;
    if (l->n < l->cap) {
        l->q[l->n].id = id;
        l->q[l->n].state = state;
        l->n++;
    }
    if (l->efd >= 0 && write(l->efd, &one, sizeof one) < 0) {
        /* counter saturated: already readable */
    }
}

int wd_losses_take(wd_losses *l, uint64_t *ids, int *states, int max) {
    int n = 0;
    uint64_t counter;
    while (n < max && (size_t)n < l->n) {
        ids[n] = l->q[n].id;
        states[n] = l->q[n].state;
        n++;
    }
    if (n > 0) {
        memmove(l->q, l->q + n, (l->n - (size_t)n) * sizeof *l->q);
        l->n -= (size_t)n;
    }
    /* The eventfd is written once per report and nowhere else, so it is
     * readable only if we just took some: the usual call (no losses, on
     * every acquire and release) makes no system call. */
    if (n > 0 && l->n == 0 && l->efd >= 0 && read(l->efd, &counter, sizeof counter) < 0) {
        /* EAGAIN: already drained */
    }
    return n;
}

void wd_losses_free(wd_losses *l) {
    if (l->efd >= 0) close(l->efd);
    free(l->q);
    memset(l, 0, sizeof *l);
    l->efd = -1;
}
