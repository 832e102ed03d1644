/*
 * native_detect.c: the detection requests of a handshake and what their
 * replies mean (see native_detect.h).
 */
#include "cmd/native_detect.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "net/conn.h"
#include "cmd/native_cmd.h"
#include "base/slot.h"

/* The commands COMMAND INFO asks about, in the order of its reply. */
static const struct {
    const char *name;
    unsigned bit;
} native_detect_names[] = {
    {"DELIFEQ", NATIVE_DELIFEQ},
    {"DELEX", NATIVE_DELEX},
    {"CAD", NATIVE_CAD},
    {"CAS", NATIVE_CAS},
};

#define NATIVE_DETECT_NAMES (sizeof native_detect_names / sizeof native_detect_names[0])

/* The probe's value and its comparison value: distinct, so even a server
 * that has IFEQ writes nothing unless the key already holds exactly the
 * second one (then the first one, for 1 ms). */
#define NATIVE_PROBE_VALUE "redislock-probe"
#define NATIVE_PROBE_CMP "redislock-probe-absent"

int native_detect_commands_argv(const char **argv, size_t *lens) {
    size_t i;
    argv[0] = "COMMAND";
    lens[0] = 7;
    argv[1] = "INFO";
    lens[1] = 4;
    for (i = 0; i < NATIVE_DETECT_NAMES; i++) {
        argv[2 + i] = native_detect_names[i].name;
        lens[2 + i] = strlen(native_detect_names[i].name);
    }
    return (int)(2 + NATIVE_DETECT_NAMES);
}

int native_detect_probe_argv(const char *key, const char **argv, size_t *lens) {
    static const char *const tail[] = {NATIVE_PROBE_VALUE, "IFEQ", NATIVE_PROBE_CMP, "PX", "1"};
    int i;
    argv[0] = "SET";
    lens[0] = 3;
    argv[1] = key;
    lens[1] = strlen(key);
    for (i = 0; i < 5; i++) {
        argv[2 + i] = tail[i];
        lens[2 + i] = strlen(tail[i]);
    }
    return 7;
}

/* An entry of COMMAND INFO's reply: nil for an unknown command, else an
 * array whose first element is the command's name (lower case). */
static int native_detect_entry(const redisReply *e, const char *name) {
    const redisReply *n;
    if (e == NULL || e->type != REDIS_REPLY_ARRAY || e->elements < 1) return 0;
    n = e->element[0];
    if (n == NULL || (n->type != REDIS_REPLY_STRING && n->type != REDIS_REPLY_STATUS)) return 0;
    return n->len == strlen(name) && strncasecmp(n->str, name, n->len) == 0;
}

unsigned native_detect_commands(const redisReply *r) {
    unsigned bits = 0;
    size_t i;
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != NATIVE_DETECT_NAMES) return 0;
    for (i = 0; i < NATIVE_DETECT_NAMES; i++)
        if (native_detect_entry(r->element[i], native_detect_names[i].name))
            bits |= native_detect_names[i].bit;
    return bits;
}

unsigned native_detect_probe(const redisReply *r) {
    /* nil: the server took IFEQ and found no match. +OK would mean it
     * wrote (it ignored IFEQ, or the key held the comparison value):
     * not to be trusted either way. */
    return r != NULL && r->type == REDIS_REPLY_NIL ? NATIVE_SET_IFEQ : 0;
}

/* A hash tag N (decimal) whose slot node `node` serves. Nodes serve
 * thousands of slots in practice, so this ends within a few tries; a node
 * with a single slot takes about 16,000 (a fraction of a millisecond).
 * The decimals below the limit cover every slot (test/c checks it). */
#define NATIVE_PROBE_TAG_LIMIT 1000000

static int native_decimal(long n, char *out) {
    char rev[16];
    int k = 0, i;
    do {
        rev[k++] = (char)('0' + n % 10);
        n /= 10;
    } while (n > 0 && k < (int)sizeof rev);
    for (i = 0; i < k; i++) out[i] = rev[k - 1 - i];
    out[k] = '\0';
    return k;
}

int native_probe_key(const uint16_t *slot_node, int node, char *buf, size_t len) {
    char tag[24];
    long n;
    if (len > 0) buf[0] = '\0';
    if (slot_node == NULL) {
        if (len <= strlen(NATIVE_PROBE_KEY)) return -1;
        snprintf(buf, len, "%s", NATIVE_PROBE_KEY);
        return 0;
    }
    for (n = 0; n < NATIVE_PROBE_TAG_LIMIT; n++) {
        int tlen = native_decimal(n, tag);
        if (slot_node[slot_crc16(tag, (size_t)tlen) & (SLOT_COUNT - 1)] != node) continue;
        if ((size_t)snprintf(buf, len, "%s:{%s}", NATIVE_PROBE_KEY, tag) >= len) break;
        return 0;
    }
    if (len > 0) buf[0] = '\0';
    return -1;
}

/* The hook (conn.h): COMMAND INFO, then the SET IFEQ probe where the
 * connection has a probe key; ud is the native_state. Each handshake
 * learns anew. */
static int native_hook_queue(struct conn *c, void *ud) {
    native_state *ns = ud;
    const char *argv[NATIVE_DETECT_MAX_ARGS];
    size_t lens[NATIVE_DETECT_MAX_ARGS];
    int argc;
    ns->bits = 0;
    if (ns->off) return 0;
    argc = native_detect_commands_argv(argv, lens);
    if (conn_hook_queue(c, argc, argv, lens) != 0) return -1;
    if (!ns->probe_key[0]) return 1;
    argc = native_detect_probe_argv(ns->probe_key, argv, lens);
    if (conn_hook_queue(c, argc, argv, lens) != 0) return -1;
    return 2;
}

static void native_hook_reply(struct conn *c, void *ud, int i, const redisReply *r) {
    native_state *ns = ud;
    (void)c;
    if (i == 0) ns->bits |= native_detect_commands(r) | ns->assume;
    else ns->bits |= native_detect_probe(r);
}

static const conn_hook native_hook = {native_hook_queue, native_hook_reply};

void native_conn_setup(struct conn *c, native_state *ns, const uint16_t *slot_node, int node) {
    c->hook = &native_hook;
    c->hook_ud = ns;
    native_probe_key(slot_node, node, ns->probe_key, sizeof ns->probe_key);
}
