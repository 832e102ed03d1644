/*
 * test/c/native_cmd_test.c: unit test of native_cmd.c and native_detect.c,
 * the code that stands native compare commands in for scripts. No server:
 * replies are RESP bytes written out here (a few captured from
 * redis-server 7.0, the others written after the servers' documentation),
 * parsed by hiredis' own reader, as conn.c does.
 *
 * Checks: the exact argv built for every feature combination and script;
 * the reply mapping (OK, nil, integers, errors, odd shapes) and the
 * in-place rewrite to an integer; the COMMAND INFO and SET probe parsers;
 * the detection requests; the Cluster probe key for every slot.
 *
 * Run by `make ctest` (and `make test`); exits non-zero on any failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis.h>

#include "check.h"
#include "parse_reply.h"
#include "net/conn.h"
#include "cmd/native_cmd.h"
#include "cmd/native_detect.h"
#include "cmd/script.h"
#include "base/slot.h"

#define PARSE(lit) parse((lit), sizeof(lit) - 1)

/* argv of c, joined with '|' (NUL bytes shown as \0), for comparisons. */
static const char *joined(const native_cmd *c) {
    static char buf[512];
    size_t n = 0;
    int i;
    size_t j;
    for (i = 0; i < c->argc; i++) {
        if (i > 0 && n < sizeof buf - 1) buf[n++] = '|';
        for (j = 0; j < c->lens[i] && n < sizeof buf - 3; j++) {
            if (c->argv[i][j] == '\0') {
                buf[n++] = '\\';
                buf[n++] = '0';
            } else {
                buf[n++] = c->argv[i][j];
            }
        }
    }
    buf[n] = '\0';
    return buf;
}

static unsigned build(unsigned f, const char *script, int n, const char **a, native_cmd *out) {
    size_t lens[4];
    int i;
    for (i = 0; i < n; i++) lens[i] = strlen(a[i]);
    return native_build(f, script_find(script), n, a, lens, out);
}

/* ---- native_build ---------------------------------------------------------- */

static void test_build_every_combination(void) {
    const char *ext[] = {"{job}", "tok123", "30000"};
    const char *rel[] = {"{job}", "tok123"};
    unsigned f;
    for (f = 0; f <= NATIVE_ALL; f++) {
        native_cmd c;
        unsigned op = build(f, "extend", 3, ext, &c);
        if (f & NATIVE_SET_IFEQ) {
            CHECK(op == NATIVE_SET_IFEQ && c.op == op, "f=%#x op=%#x", f, op);
            CHECK(strcmp(joined(&c), "SET|{job}|tok123|IFEQ|tok123|PX|30000") == 0, "f=%#x: %s", f, joined(&c));
        } else if (f & NATIVE_CAS) {
            CHECK(op == NATIVE_CAS, "f=%#x op=%#x", f, op);
            CHECK(strcmp(joined(&c), "CAS|{job}|tok123|tok123|PX|30000") == 0, "f=%#x: %s", f, joined(&c));
        } else {
            CHECK(op == 0 && c.op == 0 && c.argc == 0, "f=%#x: extend must stay a script", f);
        }
        op = build(f, "redlock_release", 2, rel, &c);
        if (f & NATIVE_DELIFEQ) {
            CHECK(op == NATIVE_DELIFEQ, "f=%#x op=%#x", f, op);
            CHECK(strcmp(joined(&c), "DELIFEQ|{job}|tok123") == 0, "f=%#x: %s", f, joined(&c));
        } else if (f & NATIVE_DELEX) {
            CHECK(op == NATIVE_DELEX, "f=%#x op=%#x", f, op);
            CHECK(strcmp(joined(&c), "DELEX|{job}|IFEQ|tok123") == 0, "f=%#x: %s", f, joined(&c));
        } else if (f & NATIVE_CAD) {
            CHECK(op == NATIVE_CAD, "f=%#x op=%#x", f, op);
            CHECK(strcmp(joined(&c), "CAD|{job}|tok123") == 0, "f=%#x: %s", f, joined(&c));
        } else {
            CHECK(op == 0, "f=%#x: redlock_release must stay a script", f);
        }
    }
}

/* Every other script stays a script, whatever the node has. */
static void test_build_other_scripts(void) {
    const char *a[] = {"k", "t", "1000", "x"};
    size_t i;
    for (i = 0; i < script_count(); i++) {
        const script_def *s = script_at(i);
        int n;
        if (strcmp(s->name, "extend") == 0 || strcmp(s->name, "redlock_release") == 0) continue;
        for (n = 1; n <= 4; n++) {
            native_cmd c;
            size_t lens[4] = {1, 1, 4, 1};
            CHECK(native_build(NATIVE_ALL, s, n, a, lens, &c) == 0, "%s with %d args", s->name, n);
        }
    }
}

static void test_build_edges(void) {
    native_cmd c;
    const script_def *ext = script_find("extend");
    static const char *bad_ms[] = {"0", "-5", "+5", "1.5", "", "0100", "1e3", " 100", "100 ",
                                   "1000000000000000", "12a"};
    size_t i;
    for (i = 0; i < sizeof bad_ms / sizeof bad_ms[0]; i++) {
        const char *a[] = {"{job}", "tok", bad_ms[i]};
        CHECK(build(NATIVE_ALL, "extend", 3, a, &c) == 0, "ms '%s' must go to the script", bad_ms[i]);
    }
    {
        const char *a[] = {"{job}", "tok", "1"};
        CHECK(build(NATIVE_ALL, "extend", 3, a, &c) == NATIVE_SET_IFEQ, "ms 1");
        CHECK(build(NATIVE_ALL, "extend", 2, a, &c) == 0, "extend with a missing ARGV");
        CHECK(build(NATIVE_ALL, "redlock_release", 3, a, &c) == 0, "redlock_release with an extra ARGV");
    }
    {
        /* binary safe: NUL bytes in the key and the token are kept */
        const char *a[] = {"a\0b", "t\0k", "250"};
        size_t lens[] = {3, 3, 3};
        CHECK(native_build(NATIVE_SET_IFEQ, ext, 3, a, lens, &c) == NATIVE_SET_IFEQ, "binary");
        CHECK(strcmp(joined(&c), "SET|a\\0b|t\\0k|IFEQ|t\\0k|PX|250") == 0, "%s", joined(&c));
        CHECK(c.argv[1] == a[0] && c.argv[2] == a[1] && c.argv[4] == a[1], "borrowed, not copied");
    }
    CHECK(native_build(NATIVE_ALL, NULL, 0, NULL, NULL, &c) == 0, "no script");
    CHECK(strcmp(native_name(NATIVE_SET_IFEQ), "set_ifeq") == 0 && native_name(0) == NULL &&
          native_name(NATIVE_DELIFEQ | NATIVE_CAD) == NULL, "names");
    for (i = 0; i < NATIVE_COUNT; i++) CHECK(native_name(native_bit((int)i)) != NULL, "bit %d", (int)i);
    CHECK(native_bit(NATIVE_COUNT) == 0, "past the last bit");
}

/* ---- native_reply ---------------------------------------------------------- */

struct reply_case {
    unsigned op;
    const char *bytes;
    int verdict;
    long long value;
};

static void test_reply_mapping(void) {
    static const struct reply_case cases[] = {
        {NATIVE_SET_IFEQ, "+OK\r\n", NATIVE_MAPPED, 1},
        {NATIVE_SET_IFEQ, "$-1\r\n", NATIVE_MAPPED, 0},
        {NATIVE_SET_IFEQ, "*-1\r\n", NATIVE_MAPPED, 0},
        {NATIVE_SET_IFEQ, "$2\r\nOK\r\n", NATIVE_UNSUPPORTED, 0},
        {NATIVE_SET_IFEQ, ":1\r\n", NATIVE_UNSUPPORTED, 0},
        {NATIVE_SET_IFEQ, "+QUEUED\r\n", NATIVE_UNSUPPORTED, 0},
        {NATIVE_SET_IFEQ, "-ERR syntax error\r\n", NATIVE_UNSUPPORTED, 0},
        {NATIVE_SET_IFEQ, "-NOPERM User locker has no permissions to access the 'x' key\r\n",
         NATIVE_UNSUPPORTED, 0},
        {NATIVE_SET_IFEQ, "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
         NATIVE_RETRY, 0},
        {NATIVE_SET_IFEQ, "-OOM command not allowed when used memory > 'maxmemory'.\r\n", NATIVE_RETRY, 0},
        {NATIVE_SET_IFEQ, "-MOVED 3999 127.0.0.1:7001\r\n", NATIVE_RETRY, 0},
        {NATIVE_SET_IFEQ, "-ASK 3999 127.0.0.1:7001\r\n", NATIVE_RETRY, 0},
        {NATIVE_SET_IFEQ, "-READONLY You can't write against a read only replica.\r\n", NATIVE_RETRY, 0},
        {NATIVE_CAS, ":1\r\n", NATIVE_MAPPED, 1},
        {NATIVE_CAS, ":0\r\n", NATIVE_MAPPED, 0},
        {NATIVE_CAS, ":-1\r\n", NATIVE_MAPPED, 0},
        {NATIVE_CAS, ":2\r\n", NATIVE_UNSUPPORTED, 0},
        {NATIVE_CAS, "+OK\r\n", NATIVE_UNSUPPORTED, 0},
        {NATIVE_CAS, "-ERR syntax error\r\n", NATIVE_UNSUPPORTED, 0},
        {NATIVE_CAD, ":1\r\n", NATIVE_MAPPED, 1},
        {NATIVE_CAD, ":0\r\n", NATIVE_MAPPED, 0},
        {NATIVE_CAD, ":-1\r\n", NATIVE_MAPPED, 0},
        {NATIVE_CAD, "$-1\r\n", NATIVE_UNSUPPORTED, 0},
        {NATIVE_DELIFEQ, ":1\r\n", NATIVE_MAPPED, 1},
        {NATIVE_DELIFEQ, ":0\r\n", NATIVE_MAPPED, 0},
        {NATIVE_DELIFEQ, ":-1\r\n", NATIVE_UNSUPPORTED, 0},
        {NATIVE_DELIFEQ, "$1\r\n1\r\n", NATIVE_UNSUPPORTED, 0},
        {NATIVE_DELIFEQ, "-ERR unknown command 'DELIFEQ', with args beginning with: \r\n",
         NATIVE_UNSUPPORTED, 0},
        {NATIVE_DELIFEQ, "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
         NATIVE_RETRY, 0},
        {NATIVE_DELIFEQ, "-BUSY Redis is busy running a script.\r\n", NATIVE_RETRY, 0},
        {NATIVE_DELEX, ":1\r\n", NATIVE_MAPPED, 1},
        {NATIVE_DELEX, ":0\r\n", NATIVE_MAPPED, 0},
        {NATIVE_DELEX, ":3\r\n", NATIVE_UNSUPPORTED, 0},
        {NATIVE_DELEX, "-ERR wrong number of arguments for 'delex' command\r\n", NATIVE_UNSUPPORTED, 0},
        {NATIVE_DELEX, "-LOADING Redis is loading the dataset in memory\r\n", NATIVE_RETRY, 0},
        {0, ":1\r\n", NATIVE_UNSUPPORTED, 0},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct reply_case *k = &cases[i];
        redisReply *r = parse(k->bytes, strlen(k->bytes));
        long long v = -42;
        int verdict = native_reply(k->op, r, &v);
        CHECK(verdict == k->verdict, "%s to %s: verdict %d, expected %d",
              native_name(k->op) ? native_name(k->op) : "?", k->bytes, verdict, k->verdict);
        if (verdict == NATIVE_MAPPED) {
            CHECK(v == k->value, "%s to %s: %lld, expected %lld", native_name(k->op), k->bytes, v, k->value);
            /* rewritten in place to what the script answers, then freed by
             * hiredis (ASan/valgrind would see a leak or a bad free) */
            native_reply_set_int(r, v);
            CHECK(r->type == REDIS_REPLY_INTEGER && r->integer == k->value && r->str == NULL,
                  "rewrite of %s", k->bytes);
        }
        freeReplyObject(r);
    }
    {
        long long v = 7;
        CHECK(native_reply(NATIVE_DELIFEQ, NULL, &v) == NATIVE_RETRY && v == 0, "no reply");
    }
}

/* ---- detection ---------------------------------------------------------------- */

/* A COMMAND INFO entry in Redis 7's layout (name, arity, flags, first key,
 * last key, step, ACL categories, tips, key specs, subcommands). */
#define ENTRY(name, len, arity) "*10\r\n$" #len "\r\n" name "\r\n:" #arity "\r\n*2\r\n+write\r\n+fast\r\n" \
    ":1\r\n:1\r\n:1\r\n*3\r\n+@write\r\n+@string\r\n+@fast\r\n*0\r\n*0\r\n*0\r\n"
#define NIL "$-1\r\n"

static void test_detect_commands(void) {
    static const struct {
        const char *what, *bytes;
        unsigned bits;
    } cases[] = {
        /* captured from redis-server 7.0.15 */
        {"redis 7.0", "*4\r\n$-1\r\n$-1\r\n$-1\r\n$-1\r\n", 0},
        {"nil arrays", "*4\r\n*-1\r\n*-1\r\n*-1\r\n*-1\r\n", 0},
        {"valkey 9", "*4\r\n" ENTRY("delifeq", 7, 3) NIL NIL NIL, NATIVE_DELIFEQ},
        {"valkey 9.2", "*4\r\n" ENTRY("delifeq", 7, 3) ENTRY("delex", 5, -4) NIL NIL,
         NATIVE_DELIFEQ | NATIVE_DELEX},
        {"redis 8.4", "*4\r\n" NIL ENTRY("delex", 5, -2) NIL NIL, NATIVE_DELEX},
        {"tair", "*4\r\n" NIL NIL ENTRY("cad", 3, -1) ENTRY("cas", 3, -1), NATIVE_CAD | NATIVE_CAS},
        {"upper case names", "*4\r\n" ENTRY("DELIFEQ", 7, 3) NIL ENTRY("CAD", 3, 3) NIL,
         NATIVE_DELIFEQ | NATIVE_CAD},
        {"misaligned", "*4\r\n" ENTRY("delex", 5, -2) NIL NIL NIL, 0},
        {"short", "*3\r\n" ENTRY("delifeq", 7, 3) NIL NIL, 0},
        {"long", "*5\r\n" ENTRY("delifeq", 7, 3) NIL NIL NIL NIL, 0},
        {"empty entry", "*4\r\n*0\r\n" NIL NIL NIL, 0},
        {"integer name", "*4\r\n*1\r\n:7\r\n" NIL NIL NIL, 0},
        {"name prefix", "*4\r\n*1\r\n$4\r\ndeli\r\n" NIL NIL NIL, 0},
        {"noperm", "-NOPERM this user has no permissions to run the 'command|info' command\r\n", 0},
        {"unknown", "-ERR unknown subcommand 'INFO'. Try COMMAND HELP.\r\n", 0},
        {"status", "+OK\r\n", 0},
        {"nil", "$-1\r\n", 0},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        redisReply *r = parse(cases[i].bytes, strlen(cases[i].bytes));
        unsigned bits = native_detect_commands(r);
        CHECK(bits == cases[i].bits, "%s: %#x, expected %#x", cases[i].what, bits, cases[i].bits);
        CHECK((bits & NATIVE_SET_IFEQ) == 0, "%s: COMMAND INFO never says SET IFEQ", cases[i].what);
        freeReplyObject(r);
    }
    CHECK(native_detect_commands(NULL) == 0, "no reply");
}

static void test_detect_probe(void) {
    static const struct {
        const char *bytes;
        unsigned bits;
    } cases[] = {
        {"$-1\r\n", NATIVE_SET_IFEQ},                         /* valkey 8.1+, redis 8.4+ */
        {"*-1\r\n", NATIVE_SET_IFEQ},
        {"-ERR syntax error\r\n", 0},                         /* captured from redis 7.0.15 */
        {"+OK\r\n", 0},                                       /* it wrote: not trusted */
        {"-MOVED 12182 127.0.0.1:7002\r\n", 0},
        {"-ASK 12182 127.0.0.1:7002\r\n", 0},
        {"-NOPERM No permissions to access a key\r\n", 0},
        {"-READONLY You can't write against a read only replica.\r\n", 0},
        {"-OOM command not allowed when used memory > 'maxmemory'.\r\n", 0},
        {":0\r\n", 0},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        redisReply *r = parse(cases[i].bytes, strlen(cases[i].bytes));
        CHECK(native_detect_probe(r) == cases[i].bits, "probe reply %s", cases[i].bytes);
        freeReplyObject(r);
    }
    CHECK(native_detect_probe(NULL) == 0, "no reply");
}

static void test_detect_requests(void) {
    const char *argv[NATIVE_DETECT_MAX_ARGS];
    size_t lens[NATIVE_DETECT_MAX_ARGS];
    native_cmd c;
    int n = native_detect_commands_argv(argv, lens), i;
    c.argc = n;
    for (i = 0; i < n; i++) {
        c.argv[i] = argv[i];
        c.lens[i] = lens[i];
    }
    CHECK(strcmp(joined(&c), "COMMAND|INFO|DELIFEQ|DELEX|CAD|CAS") == 0, "%s", joined(&c));
    n = native_detect_probe_argv("redislock:probe:{7}", argv, lens);
    c.argc = n;
    for (i = 0; i < n; i++) {
        c.argv[i] = argv[i];
        c.lens[i] = lens[i];
    }
    /* PX always: even a server that took it without IFEQ would keep
     * nothing longer than 1 ms; the two values differ, so nothing is
     * written on a server that has IFEQ */
    CHECK(strcmp(joined(&c), "SET|redislock:probe:{7}|redislock-probe|IFEQ|redislock-probe-absent|PX|1") == 0,
          "%s", joined(&c));
}

/* ---- the probe key ------------------------------------------------------------- */

static void test_probe_key(void) {
    static uint16_t map[SLOT_COUNT];
    char key[NATIVE_PROBE_KEY_MAX];
    int s, node;
    conn c;
    native_state ns;
    CHECK(native_probe_key(NULL, 0, key, sizeof key) == 0 && strcmp(key, "redislock:probe") == 0, "%s", key);
    /* three masters, as redis-cli --cluster create splits the slots */
    for (s = 0; s < SLOT_COUNT; s++) map[s] = (uint16_t)(s <= 5460 ? 0 : s <= 10922 ? 1 : 2);
    for (node = 0; node < 3; node++) {
        CHECK(native_probe_key(map, node, key, sizeof key) == 0, "node %d", node);
        CHECK(map[slot_of(key, strlen(key))] == node, "node %d: %s is in slot %d", node, key,
              slot_of(key, strlen(key)));
        CHECK(strncmp(key, "redislock:probe:{", 17) == 0, "%s", key);
    }
    CHECK(native_probe_key(map, 3, key, sizeof key) == -1 && key[0] == '\0', "a node without slots");
    CHECK(native_probe_key(map, 0, key, 8) == -1 && key[0] == '\0', "no room");
    /* every slot is reachable: a node serving one slot, any one, has a key */
    {
        static unsigned char seen[SLOT_COUNT];
        int missing = 0;
        long n, last = 0;
        char tag[24];
        memset(seen, 0, sizeof seen);
        for (n = 0; n < 1000000; n++) {
            int len = snprintf(tag, sizeof tag, "%ld", n);
            int slot = slot_crc16(tag, (size_t)len) & (SLOT_COUNT - 1);
            if (!seen[slot]) {
                seen[slot] = 1;
                last = n;
            }
        }
        for (s = 0; s < SLOT_COUNT; s++) missing += !seen[s];
        CHECK(missing == 0, "%d slots have no decimal tag below 1,000,000", missing);
        printf("native_cmd_test: every slot has a tag below %ld\n", last + 1);
    }
    for (s = 0; s < SLOT_COUNT; s += 4093) {
        int t;
        for (t = 0; t < SLOT_COUNT; t++) map[t] = (uint16_t)(t == s ? 5 : 0xffff);
        CHECK(native_probe_key(map, 5, key, sizeof key) == 0 && slot_of(key, strlen(key)) == s,
              "single slot %d: %s", s, key);
    }
    memset(&c, 0, sizeof c);
    memset(&ns, 0, sizeof ns);
    native_conn_setup(&c, &ns, NULL, 0);
    CHECK(c.hook != NULL && c.hook_ud == &ns && strcmp(ns.probe_key, "redislock:probe") == 0, "setup");
}

int main(void) {
    test_build_every_combination();
    test_build_other_scripts();
    test_build_edges();
    test_reply_mapping();
    test_detect_commands();
    test_detect_probe();
    test_detect_requests();
    test_probe_key();
    return check_report("native_cmd_test");
}
