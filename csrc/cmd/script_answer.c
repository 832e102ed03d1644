/* script_answer.c: see script_answer.h. */
#include "cmd/script_answer.h"

#include <stdio.h>
#include <string.h>

/* Each script's answers, as its header comment lists them, in the order of
 * the scripts' table (by name): script_answer_shape finds a script's line
 * by its index, and checks the name. */
static const struct {
    const char *name;
    const char *shape;
} shapes[] = {
    {"acquire", "[1i]|[0i]|[0isi]"},
    {"acquire_all", "[1a]|[0ii]|[0iisi]"},
    {"acquire_fair", "[1i]|[1ii]|[0i]"},
    {"acquire_reentrant", "[1ii]|[0i]|[0isi]"},
    {"adopt", "[1i]|[0]"},
    {"dequeue", "1"},
    {"extend", "0|1"},
    {"extend_all", "0|1"},
    {"extend_grant", "0|1"},
    {"extend_reentrant", "0|1"},
    {"fenced_get", "[1n]|[0]"},
    {"fenced_set", "i"},
    {"inspect", "[ninnnji]"},
    {"redlock_acquire", "[1]|[0i]|[0isi]"},
    {"redlock_acquire_all", "[1]|[0i]|[0isi]"},
    {"redlock_inspect", "[ninnj]"},
    {"redlock_ping", "1"},
    {"redlock_release", "0|1"},
    {"redlock_renew", "0|1|2|3"},
    {"release", "0|1"},
    {"release_reentrant", "0|1|2"},
    {"release_share", "0|1"},
    {"rw_break", "0|1"},
    {"rw_inspect", "[innjiiaiiii]"},
    {"rw_read", "[1]|[0i]"},
    {"rw_read_reentrant", "[1ii]|[0i]"},
    {"rw_release_reentrant", "0|1|2"},
    {"rw_renew_reentrant", "0|1"},
    {"rw_write", "[1i]|[0i]"},
    {"rw_write_reentrant", "[1ii]|[0i]"},
    {"sem_acquire", "[1i]|[0i]"},
    {"sem_inspect", "[iiai]"},
    {"sem_limit", "[ii]"},
    {"sem_release", "0|1"},
    {"zset_renew", "0|1"},
};

#define SHAPES (sizeof shapes / sizeof shapes[0])

const char *script_answer_shape(const script_def *s) {
    size_t i = script_index(s), k;
    if (i < SHAPES && strcmp(shapes[i].name, s->name) == 0) return shapes[i].shape;
    for (k = 0; k < SHAPES; k++)   /* (the table out of step: still right, slower) */
        if (strcmp(shapes[k].name, s->name) == 0) return shapes[k].shape;
    return NULL;
}

/* Whether reply e fits code c (script_answer.h). */
static int answer_code(char c, const redisReply *e) {
    switch (c) {
    case 'i':
        return e->type == REDIS_REPLY_INTEGER;
    case 's':
        return e->type == REDIS_REPLY_STRING;
    case 'n':
        return e->type == REDIS_REPLY_STRING || e->type == REDIS_REPLY_NIL;
    case 'j':
        return e->type == REDIS_REPLY_INTEGER || e->type == REDIS_REPLY_NIL;
    case 'a':
        return e->type == REDIS_REPLY_ARRAY;
    default:   /* a digit */
        return e->type == REDIS_REPLY_INTEGER && e->integer == c - '0';
    }
}

/* Whether r fits the form f[0..n). */
static int answer_form(const char *f, size_t n, const redisReply *r) {
    size_t i;
    if (f[0] != '[') return n == 1 && answer_code(f[0], r);
    if (r->type != REDIS_REPLY_ARRAY || r->elements != n - 2) return 0;
    for (i = 0; i < r->elements; i++)
        if (!answer_code(f[i + 1], r->element[i])) return 0;
    return 1;
}

int script_answer_ok(const script_def *s, const redisReply *r) {
    const char *shape, *f;
    if (r->type == REDIS_REPLY_ERROR || (shape = script_answer_shape(s)) == NULL) return 1;
    for (f = shape;;) {
        const char *bar = strchr(f, '|');
        size_t n = bar ? (size_t)(bar - f) : strlen(f);
        if (answer_form(f, n, r)) return 1;
        if (bar == NULL) return 0;
        f = bar + 1;
    }
}

int script_answer_int_ok(const script_def *s, long long v) {
    redisReply r;
    memset(&r, 0, sizeof r);
    r.type = REDIS_REPLY_INTEGER;
    r.integer = v;
    return script_answer_ok(s, &r);
}

void script_answer_describe(const redisReply *r, char *buf, size_t len) {
    switch (r->type) {
    case REDIS_REPLY_INTEGER:
        snprintf(buf, len, "the integer %lld", r->integer);
        break;
    case REDIS_REPLY_ARRAY:
        snprintf(buf, len, "an array of %zu", r->elements);
        break;
    case REDIS_REPLY_STATUS:
        snprintf(buf, len, "a status");
        break;
    case REDIS_REPLY_STRING:
        snprintf(buf, len, "a string");
        break;
    case REDIS_REPLY_NIL:
        snprintf(buf, len, "nil");
        break;
    default:
        snprintf(buf, len, "a reply of type %d", r->type);
        break;
    }
}
