/*
 * reply_obj.h: redisReply objects made or changed by us (the fast reader,
 * replies given back by the cosocket transport, a native command's answer
 * read as the script's), laid out as hiredis lays out its own, so that
 * freeReplyObject frees them: through free() in hiredis 0.14, through its
 * allocator hooks (hi_*) from 1.0 on. Allocation here, and nowhere else,
 * follows that rule. No Lua here.
 */
#ifndef REDISLOCK_REPLY_OBJ_H
#define REDISLOCK_REPLY_OBJ_H

#include <stdlib.h>
#include <string.h>
#include <hiredis.h>

/* (hi_malloc of 0.14 aborts when out of memory: plain malloc there) */
#if defined(HIREDIS_MAJOR) && HIREDIS_MAJOR >= 1
#define reply_obj_calloc hi_calloc
#define reply_obj_malloc hi_malloc
#define reply_obj_release hi_free
#else
#define reply_obj_calloc calloc
#define reply_obj_malloc malloc
#define reply_obj_release free
#endif

/* A reply of that type, every other field zero; NULL when out of memory. */
static inline redisReply *reply_obj_new(int type) {
    redisReply *r = reply_obj_calloc(1, sizeof *r);
    if (r != NULL) r->type = type;
    return r;
}

/* r's string: a NUL-terminated copy of s[0..len). 0, or -1 when out of
 * memory (r unchanged). */
static inline int reply_obj_set_str(redisReply *r, const char *s, size_t len) {
    char *copy = reply_obj_malloc(len + 1);
    if (copy == NULL) return -1;
    if (len) memcpy(copy, s, len);
    copy[len] = '\0';
    r->str = copy;
    r->len = len;
    return 0;
}

/* Room for n elements (none when n is 0, as hiredis does), all NULL;
 * r->elements is left to the caller, which sets it once they are filled
 * (freeReplyObject frees that many). 0, or -1 when out of memory. */
static inline int reply_obj_set_elements(redisReply *r, size_t n) {
    if (n == 0) return 0;
    r->element = reply_obj_calloc(n, sizeof *r->element);
    return r->element == NULL ? -1 : 0;
}

/* Frees a reply made by reply_obj_new that has nothing attached yet. */
static inline void reply_obj_free_bare(redisReply *r) {
    reply_obj_release(r);
}

/* r's string, if it has one, freed (the reply keeps its other fields). */
static inline void reply_obj_drop_str(redisReply *r) {
    if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_ERROR)
        reply_obj_release(r->str);
    r->str = NULL;
    r->len = 0;
}

#endif
