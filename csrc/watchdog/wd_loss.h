/*
 * wd_loss.h: the queue of loss reports from the watchdog thread to the Lua
 * side, and the eventfd that is readable while it is not empty. No Lua here.
 *
 * Room is reserved when a lock is registered (one report per lock at most),
 * so reporting a loss never allocates and never fails: a loss is always
 * both queued and signalled.
 */
#ifndef REDISLOCK_WD_LOSS_H
#define REDISLOCK_WD_LOSS_H

#include <stddef.h>
#include <stdint.h>

typedef struct wd_loss {
    uint64_t id;
    int state;
} wd_loss;

typedef struct wd_losses {
    wd_loss *q;
    size_t n, cap;
    int efd;                /* eventfd, -1 once closed */
} wd_losses;

/* Makes the eventfd. 0, or -1 with errno (fd exhaustion). */
int wd_losses_init(wd_losses *l);
/* Room for `total` reports: 0, or -1 when out of memory. */
int wd_losses_reserve(wd_losses *l, size_t total);
/* Queues a report and makes the fd readable. */
void wd_losses_push(wd_losses *l, uint64_t id, int state);
/* Moves up to max reports out; drains the fd once the queue is empty. */
int wd_losses_take(wd_losses *l, uint64_t *ids, int *states, int max);
void wd_losses_free(wd_losses *l);

#endif
