/*
 * native_cmd.c: building the native stand-ins for extend and
 * redlock_release, and reading their replies as the scripts' (see
 * native_cmd.h).
 *
 * The replies, as the servers document them:
 *   SET k v IFEQ c PX ms   +OK when set; nil when the key is missing or
 *                          holds another value (a missing key is never
 *                          created); WRONGTYPE for a non-string
 *   DELIFEQ k v            :1 deleted, :0 missing or another value
 *   DELEX k IFEQ v         :1 deleted, :0 missing or another value
 *   CAS k old new PX ms    :1 set (with the new ttl), :0 another value,
 *                          :-1 missing (not created)
 *   CAD k v                :1 deleted, :0 another value, :-1 missing
 * and the scripts answer 1 (renewed / deleted) or 0 (gone or someone
 * else's). Anything else is not a clean answer: the script decides.
 */
#include "cmd/native_cmd.h"
#include "base/reply_obj.h"

#include <stdlib.h>
#include <string.h>

static const struct {
    unsigned bit;
    const char *name;
} native_names[NATIVE_COUNT] = {
    {NATIVE_DELIFEQ, "delifeq"},
    {NATIVE_DELEX, "delex"},
    {NATIVE_SET_IFEQ, "set_ifeq"},
    {NATIVE_CAD, "cad"},
    {NATIVE_CAS, "cas"},
};

const char *native_name(unsigned op) {
    int i;
    for (i = 0; i < NATIVE_COUNT; i++)
        if (native_names[i].bit == op) return native_names[i].name;
    return NULL;
}

unsigned native_bit(int i) {
    return i >= 0 && i < NATIVE_COUNT ? native_names[i].bit : 0;
}

/* A lease in ms as PX takes it and PEXPIRE treats alike: a positive
 * decimal integer without sign or leading zero, that fits in 64 bits with
 * room for the server's clock. Anything else (which the Lua side never
 * sends) goes to the script, whose PEXPIRE then says what it says. */
static int native_ms_ok(const char *s, size_t len) {
    size_t i;
    if (len == 0 || len > 15 || s[0] < '1' || s[0] > '9') return 0;
    for (i = 1; i < len; i++)
        if (s[i] < '0' || s[i] > '9') return 0;
    return 1;
}

static void native_arg(native_cmd *out, const char *s, size_t len) {
    out->argv[out->argc] = s;
    out->lens[out->argc] = len;
    out->argc++;
}

#define NATIVE_LIT(out, lit) native_arg((out), (lit), sizeof(lit) - 1)

/* extend: KEYS[1] key, ARGV[1] token, ARGV[2] ms. Never SET IFEQ without
 * PX: that would drop the lease and leave an eternal lock. */
static unsigned native_extend(unsigned f, const char **a, const size_t *l, native_cmd *out) {
    if (!native_ms_ok(a[2], l[2])) return 0;
    if (f & NATIVE_SET_IFEQ) {
        NATIVE_LIT(out, "SET");
        native_arg(out, a[0], l[0]);
        native_arg(out, a[1], l[1]);
        NATIVE_LIT(out, "IFEQ");
        native_arg(out, a[1], l[1]);
        NATIVE_LIT(out, "PX");
        native_arg(out, a[2], l[2]);
        return out->op = NATIVE_SET_IFEQ;
    }
    if (f & NATIVE_CAS) {
        NATIVE_LIT(out, "CAS");
        native_arg(out, a[0], l[0]);
        native_arg(out, a[1], l[1]);
        native_arg(out, a[1], l[1]);
        NATIVE_LIT(out, "PX");
        native_arg(out, a[2], l[2]);
        return out->op = NATIVE_CAS;
    }
    return 0;
}

/* redlock_release: KEYS[1] key, ARGV[1] token. */
static unsigned native_release(unsigned f, const char **a, const size_t *l, native_cmd *out) {
    if (f & NATIVE_DELIFEQ) {
        NATIVE_LIT(out, "DELIFEQ");
        native_arg(out, a[0], l[0]);
        native_arg(out, a[1], l[1]);
        return out->op = NATIVE_DELIFEQ;
    }
    if (f & NATIVE_DELEX) {
        NATIVE_LIT(out, "DELEX");
        native_arg(out, a[0], l[0]);
        NATIVE_LIT(out, "IFEQ");
        native_arg(out, a[1], l[1]);
        return out->op = NATIVE_DELEX;
    }
    if (f & NATIVE_CAD) {
        NATIVE_LIT(out, "CAD");
        native_arg(out, a[0], l[0]);
        native_arg(out, a[1], l[1]);
        return out->op = NATIVE_CAD;
    }
    return 0;
}

unsigned native_build(unsigned features, const script_def *s, int nargs,
                      const char **args, const size_t *lens, native_cmd *out) {
    out->op = 0;
    out->argc = 0;
    if (s == NULL || (features & NATIVE_ALL) == 0 || s->nkeys != 1) return 0;
    if (nargs == 3 && strcmp(s->name, "extend") == 0)
        return native_extend(features, args, lens, out);
    if (nargs == 2 && strcmp(s->name, "redlock_release") == 0)
        return native_release(features, args, lens, out);
    return 0;
}

/* An error that says the node will not run this command at all on this
 * connection: an unknown command or option ("ERR unknown command",
 * "ERR syntax error", "ERR wrong number of arguments", a proxy's "ERR
 * command not supported"), or an ACL that does not allow it (NOPERM). Not
 * the errors of a command that ran into the data or the server's state
 * (WRONGTYPE, OOM, READONLY, MOVED, ASK, BUSY, LOADING, ...): those are
 * answered by running the script, which meets them in its own way. */
static int native_refused(const redisReply *r) {
    if (r->str == NULL) return 0;
    return (r->len >= 3 && memcmp(r->str, "ERR", 3) == 0) ||
           (r->len >= 6 && memcmp(r->str, "NOPERM", 6) == 0);
}

int native_reply(unsigned op, const redisReply *r, long long *value) {
    *value = 0;
    if (r == NULL) return NATIVE_RETRY;
    if (r->type == REDIS_REPLY_ERROR) return native_refused(r) ? NATIVE_UNSUPPORTED : NATIVE_RETRY;
    switch (op) {
    case NATIVE_SET_IFEQ:
        if (r->type == REDIS_REPLY_NIL) return NATIVE_MAPPED;
        if (r->type == REDIS_REPLY_STATUS && r->len == 2 && memcmp(r->str, "OK", 2) == 0) {
            *value = 1;
            return NATIVE_MAPPED;
        }
        break;
    case NATIVE_DELIFEQ:
    case NATIVE_DELEX:
        if (r->type == REDIS_REPLY_INTEGER && (r->integer == 0 || r->integer == 1)) {
            *value = r->integer;
            return NATIVE_MAPPED;
        }
        break;
    case NATIVE_CAS:
    case NATIVE_CAD:
        if (r->type == REDIS_REPLY_INTEGER && r->integer >= -1 && r->integer <= 1) {
            *value = r->integer == 1;
            return NATIVE_MAPPED;
        }
        break;
    default:
        break;
    }
    /* A shape no conforming server sends. Both commands are safe to follow
     * with the script: a compare-and-expire on our own token repeated
     * renews again, and a compare-and-delete repeated finds nothing (the
     * caller then hears "not held" for a key that is gone either way). */
    return NATIVE_UNSUPPORTED;
}

void native_reply_set_int(redisReply *r, long long value) {
    reply_obj_drop_str(r);
    r->type = REDIS_REPLY_INTEGER;
    r->integer = value;
}
