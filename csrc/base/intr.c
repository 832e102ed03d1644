/*
 * intr.c: the interrupt check of this thread's blocking waits (intr.h).
 */
#include "base/intr.h"

#include <stddef.h>

static __thread intr_check_fn intr_check;
static __thread void *intr_ud;

void intr_arm(intr_check_fn check, void *ud) {
    intr_check = check;
    intr_ud = ud;
}

void intr_disarm(void) {
    intr_check = NULL;
    intr_ud = NULL;
}

int intr_pending(void) {
    return intr_check != NULL && intr_check(intr_ud);
}
