/* token.h: unguessable owner tokens. No Lua here. */
#ifndef REDISLOCK_TOKEN_H
#define REDISLOCK_TOKEN_H

#include <stddef.h>

/* 16 random bytes (128 bits) rendered as 32 lowercase hex characters. */
#define TOKEN_BYTES 16
#define TOKEN_HEX_LEN (TOKEN_BYTES * 2)

/* Fills out[TOKEN_HEX_LEN + 1] from the kernel CSPRNG. 0 on success, -1 with
 * errno set when the kernel gives no randomness: there is no weaker fallback. */
int token_new(char *out);

#endif
