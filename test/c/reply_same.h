/*
 * test/c/reply_same.h: two redisReply trees alike, deeply (type, integer,
 * string bytes and their NUL, elements). For the tests that compare our
 * replies with hiredis' (test/c/reply_fast_test.c, fuzz/fuzz_reply.c).
 */
#ifndef REDISLOCK_TEST_REPLY_SAME_H
#define REDISLOCK_TEST_REPLY_SAME_H

#include <string.h>
#include <hiredis.h>

static inline int reply_same(const redisReply *a, const redisReply *b) {
    size_t i;
    if (a->type != b->type) return 0;
    switch (a->type) {
    case REDIS_REPLY_INTEGER:
        return a->integer == b->integer;
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
        return a->len == b->len && (a->len == 0 || memcmp(a->str, b->str, a->len) == 0) &&
               a->str[a->len] == '\0';
    case REDIS_REPLY_ARRAY:
        if (a->elements != b->elements) return 0;
        for (i = 0; i < a->elements; i++)
            if (!reply_same(a->element[i], b->element[i])) return 0;
        return 1;
    default:
        return 1;
    }
}

#endif
