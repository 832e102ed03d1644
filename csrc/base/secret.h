/*
 * secret.h: freeing a secret (a password) so that it does not linger in
 * freed memory: its bytes are wiped first (explicit_bzero, which the
 * compiler may not drop as a dead store). No Lua here.
 */
#ifndef REDISLOCK_SECRET_H
#define REDISLOCK_SECRET_H

#include <stdlib.h>
#include <string.h>

/* Wipes and frees s (NULL: nothing). */
static inline void secret_free(char *s) {
    if (s == NULL) return;
    explicit_bzero(s, strlen(s));
    free(s);
}

#endif
