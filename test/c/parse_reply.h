/*
 * test/c/parse_reply.h: one reply parsed from RESP bytes written out in a
 * test, by hiredis' reader; the test stops (exit 2) if the bytes are not
 * one whole reply: the test itself is wrong. For the tests that feed the
 * core replies (test/c/recovery_test.c, test/c/native_cmd_test.c).
 */
#ifndef REDISLOCK_TEST_PARSE_REPLY_H
#define REDISLOCK_TEST_PARSE_REPLY_H

#include <stdio.h>
#include <stdlib.h>
#include <hiredis.h>

/* The reply (the caller frees it with freeReplyObject). */
static inline redisReply *parse(const char *bytes, size_t len) {
    redisReader *rd = redisReaderCreate();
    void *rep = NULL;
    if (rd == NULL || redisReaderFeed(rd, bytes, len) != REDIS_OK ||
        redisReaderGetReply(rd, &rep) != REDIS_OK || rep == NULL) {
        fprintf(stderr, "cannot parse test reply %.*s\n", (int)len, bytes);
        exit(2);
    }
    redisReaderFree(rd);
    return rep;
}

#endif
