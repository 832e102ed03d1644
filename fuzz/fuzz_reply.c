/*
 * fuzz/fuzz_reply.c: a libFuzzer target over the C core's code that handles
 * untrusted data, without any network.
 *
 * The code that turns Redis replies into Lua values (client_result;
 * luaval.c has the reply conversion) and the client userdata layout
 * (client_ud) come from client_ud.h; every csrc file is compiled and
 * linked next to this one (fuzz/Makefile). They need build/scripts_gen.h,
 * which the top-level `make` generates. Names in this file start with fz_.
 *
 * The input's first byte picks a mode; the readable letters are what the seed
 * corpus uses, any other byte is taken modulo 5:
 *
 *   'R' + bytes   server bytes through the reply guard and hiredis' reader
 *                 (redisReaderFeed, in chunks, as a conn feeds it) into
 *                 redisReply trees, then a script's answer shape check,
 *                 luaval_push_reply and client_result; the Lua value is
 *                 checked against the tree.
 *                 First, the bytes are read by reply_fast.c too, which must
 *                 agree with hiredis: a reply it calls whole and simple is
 *                 one hiredis reads from exactly those bytes, built alike;
 *                 one it waits on is neither a reply nor an error to it.
 *   'T' + bytes   a redisReply tree built directly from the bytes (deeper
 *                 than hiredis' reader allows, unknown reply types), then
 *                 the same conversion and check.
 *   'C' + ops     a client userdata whose connection is one end of a
 *                 socketpair; the other end holds the rest of the input as
 *                 the "server's" answer (then EOF). Runs conn:command and
 *                 conn:script (EVALSHA, EVAL after NOSCRIPT) through Lua.
 *   'V' + values  Lua values decoded from the bytes (strings with NULs,
 *                 integers, floats incl. NaN/inf, booleans, nil, tables,
 *                 cyclic tables, metatables, functions, coroutines, foreign
 *                 userdata) passed to the module's functions with lua_pcall.
 *   'U' + string  url.parse (lua/redislock/url.lua) on the string.
 *
 * Safety: core.connect always gets host 127.0.0.1 and port 1 (or a unix path
 * that does not exist), so it never reaches a real service; core.sleep only
 * ever sleeps 0 s; the process functions (fork, spawn, waitpid, kill, _exit,
 * signalfd, signal_wait, readable) are removed from the module table and
 * never called.
 *
 * Reproducing: `fuzz/out/fuzz_reply FILE` runs one input; FZ_TRACE=1 prints
 * every call's outcome; FZ_MEM=1 prints heap sizes every 100000 inputs.
 *
 * Every lua_pcall may fail; the contract checked here is the library's:
 * errors are strings, nil is followed by a string whose first word is
 * "connection" or "redis" (and a kind: connection, timeout, redis or
 * memory), a closed client raises, url errors start with
 * "redislock:". A violation aborts (libFuzzer records the input).
 */
#define _GNU_SOURCE
#include "binding/client.h"
#include "binding/client_ud.h"
#include "net/conn.h"
#include "binding/luaval.h"
#include "base/monotime.h"
#include "exec/recovery.h"
#include "cmd/script_answer.h"
#include "net/reply_guard.h"
#include "topo/topo.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lualib.h"
#include <sanitizer/allocator_interface.h>

#include "net/reply_fast.h"
#include "../test/c/reply_same.h"

int luaopen_redislock_core(lua_State *L);

#define FZ_WATCH_MT "redislock.watch" /* watch.c */

#ifndef FZ_ROOT
#define FZ_ROOT "."
#endif

/* hiredis 0.14 allocates an array reply's element vector up front from the
 * announced count ("*100000000\r\n" asks for 800 MB). That is hiredis, not
 * us; allocations above 256 MB fail (NULL) instead of aborting, and hiredis
 * and Lua handle NULL. Built in so that a crash file reproduces alone. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
    return "allocator_may_return_null=1:max_allocation_size_mb=256";
}

static lua_State *G;
static int fz_ref_parse = LUA_NOREF;  /* url.parse */
static int fz_ref_luafn = LUA_NOREF;  /* a Lua function (not a C one) */

#define FZ_MAX_PEERS 16
static int fz_peers[FZ_MAX_PEERS];
static int fz_npeers;

static void fz_fail(const char *what, const char *detail) {
    fprintf(stderr, "\n*** redislock fuzz contract violation: %s: %s\n", what,
            detail ? detail : "(null)");
    abort();
}

/* ---- input cursor ---------------------------------------------------------- */

typedef struct fz_in {
    const uint8_t *p;
    size_t n;
} fz_in;

static unsigned fz_u8(fz_in *in) {
    if (in->n == 0) return 0;
    in->n--;
    return *in->p++;
}

static unsigned fz_u16(fz_in *in) {
    unsigned hi = fz_u8(in);
    return (hi << 8) | fz_u8(in);
}

static uint64_t fz_u64(fz_in *in) {
    uint64_t v = 0;
    int i;
    for (i = 0; i < 8; i++) v = (v << 8) | fz_u8(in);
    return v;
}

static const char *fz_take(fz_in *in, size_t *len) {
    const char *s = (const char *)in->p;
    if (*len > in->n) *len = in->n;
    in->p += *len;
    in->n -= *len;
    return s;
}

/* ---- replies --------------------------------------------------------------- */

/* Checks that the Lua value at idx is what luaval_push_reply must make of r. */
static void fz_check_value(lua_State *L, int idx, const redisReply *r, int depth) {
    size_t len, i;
    const char *s;
    idx = lua_absindex(L, idx);
    switch (r->type) {
    case REDIS_REPLY_INTEGER:
        if (!lua_isinteger(L, idx) || lua_tointeger(L, idx) != (lua_Integer)r->integer)
            fz_fail("reply", "integer reply converted wrongly");
        break;
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
        if (lua_type(L, idx) != LUA_TSTRING) fz_fail("reply", "string reply is not a string");
        s = lua_tolstring(L, idx, &len);
        if (len != r->len || (len && memcmp(s, r->str, len) != 0))
            fz_fail("reply", "string reply bytes differ");
        break;
    case REDIS_REPLY_ARRAY:
        if (depth >= LUAVAL_MAX_DEPTH) {
            if (!lua_isboolean(L, idx) || lua_toboolean(L, idx))
                fz_fail("reply", "array past the depth limit is not false");
            break;
        }
        if (lua_type(L, idx) != LUA_TTABLE) fz_fail("reply", "array reply is not a table");
        if (lua_rawlen(L, idx) != r->elements) fz_fail("reply", "array length differs");
        for (i = 0; i < r->elements; i++) {
            lua_rawgeti(L, idx, (lua_Integer)i + 1);
            fz_check_value(L, -1, r->element[i], depth + 1);
            lua_pop(L, 1);
        }
        break;
    default:
        if (!lua_isboolean(L, idx) || lua_toboolean(L, idx))
            fz_fail("reply", "nil/unknown reply is not false");
        break;
    }
}

/* The recovery classifier over any reply: a target it names lies inside
 * the error text. */
static void fz_recovery(const redisReply *r) {
    recovery rc;
    int mode;
    for (mode = TOPO_SINGLE; mode <= TOPO_REDLOCK; mode++) {
        recovery_of_reply(r, mode, &rc);
        if (rc.cls < RECOVERY_NONE || rc.cls >= RECOVERY_CLASSES)
            fz_fail("recovery", "class out of range");
        if (rc.target != NULL && (r->type != REDIS_REPLY_ERROR || rc.target < r->str ||
                                  rc.target + rc.target_len > r->str + r->len || rc.target_len == 0))
            fz_fail("recovery", "target outside the error text");
    }
}

/* Converts r as a command's reply (luaval_push_reply) and checks the Lua
 * value against the tree. Does not free r. */
static void fz_convert(lua_State *L, const redisReply *r) {
    int top = lua_gettop(L);
    luaval_push_reply(L, r, 0);
    if (lua_gettop(L) != top + 1) fz_fail("reply", "luaval_push_reply left the stack unbalanced");
    fz_check_value(L, -1, r, 0);
    lua_settop(L, top);
    fz_recovery(r);
}

static int fz_result_owned(lua_State *L) {
    /* client_result with a closed-state client_ud: it looks at u only when r
     * is NULL, which never happens here. */
    client_ud *u = (client_ud *)lua_touserdata(L, 1);
    redisReply *r = (redisReply *)lua_touserdata(L, 2);
    lua_settop(L, 0);
    return client_result(L, u, r);
}

/* client_result frees r; run it under pcall (lua_pushstring may raise on
 * out-of-memory) and check its shape. */
static void fz_result(lua_State *L, redisReply *r) {
    client_ud dummy;
    int top = lua_gettop(L), st, nres;
    int is_error = r->type == REDIS_REPLY_ERROR;
    memset(&dummy, 0, sizeof dummy);
    lua_pushcfunction(L, fz_result_owned);
    lua_pushlightuserdata(L, &dummy);
    lua_pushlightuserdata(L, r);
    st = lua_pcall(L, 2, LUA_MULTRET, 0);
    nres = lua_gettop(L) - top;
    if (st == LUA_OK && is_error) {
        if (nres != 3 || !lua_isnil(L, top + 1) || lua_type(L, top + 2) != LUA_TSTRING ||
            strncmp(lua_tostring(L, top + 2), "redis error: ", 13) != 0 ||
            lua_type(L, top + 3) != LUA_TSTRING || strcmp(lua_tostring(L, top + 3), "redis") != 0)
            fz_fail("reply", "an error reply does not give nil, \"redis error: ...\", \"redis\"");
    } else if (st == LUA_OK && nres != 1) {
        fz_fail("reply", "a reply does not give one value");
    }
    lua_settop(L, top);
}

/* reply_fast.c against hiredis on the same bytes (see 'R' above). */
static void fz_fast_check(const char *p, size_t n) {
    long m = reply_fast_scan(p, n);
    redisReader *rd;
    void *rep = NULL;
    int st;
    if (m < 0) return;   /* left to hiredis */
    rd = redisReaderCreate();
    if (rd == NULL) return;
    if (redisReaderFeed(rd, p, m > 0 ? (size_t)m : n) != REDIS_OK) {
        redisReaderFree(rd);
        return;
    }
    st = redisReaderGetReply(rd, &rep);
    if (m == 0) {
        if (st != REDIS_OK || rep != NULL)
            fz_fail("fast", "what reply_fast waits on is a reply or an error to hiredis");
    } else {
        size_t used = 0, k;
        long long v = 0;
        redisReply *ours;
        if (st != REDIS_OK || rep == NULL || rd->pos != rd->len)
            fz_fail("fast", "hiredis does not read a simple reply from exactly its bytes");
        ours = reply_fast_build(p, (size_t)m, &used);
        if (ours == NULL) abort();
        if (used != (size_t)m || !reply_same(ours, (redisReply *)rep))
            fz_fail("fast", "a simple reply is built unlike hiredis'");
        k = reply_fast_int(p, (size_t)m, &v);
        if (k != 0 && (k != (size_t)m || ((redisReply *)rep)->type != REDIS_REPLY_INTEGER ||
                       ((redisReply *)rep)->integer != v))
            fz_fail("fast", "an integer read in place differs from hiredis'");
        if (k == 0 && ((redisReply *)rep)->type == REDIS_REPLY_INTEGER)
            fz_fail("fast", "an integer reply is not read in place");
        freeReplyObject(ours);
    }
    if (rep) freeReplyObject(rep);
    redisReaderFree(rd);
}

/* The bytes reach hiredis' reader as a conn hands them over: through
 * the guard (reply_guard.h), which lets through only what keeps its
 * bounds; each reply is also checked against a script's answer shape
 * (script_answer.h), which must take any tree. */
static void fz_mode_reader(lua_State *L, fz_in *in) {
    redisReader *rd = redisReaderCreate();
    reply_guard g;
    size_t chunk = (fz_u8(in) % 64) + 1;
    int replies = 0;
    if (rd == NULL) return;
    reply_guard_reset(&g);
    fz_fast_check((const char *)in->p, in->n);
    while (in->n > 0 && replies < 64) {
        size_t len = chunk, ok;
        const char *p = fz_take(in, &len);
        void *reply = NULL;
        ok = reply_guard_feed(&g, p, len);
        if (ok > 0 && redisReaderFeed(rd, p, ok) != REDIS_OK) break;
        while (redisReaderGetReply(rd, &reply) == REDIS_OK && reply != NULL) {
            (void)script_answer_ok(script_at((size_t)replies % script_count()), (redisReply *)reply);
            fz_convert(L, (redisReply *)reply);
            fz_result(L, (redisReply *)reply); /* frees it */
            reply = NULL;
            replies++;
        }
        if (rd->err || ok < len) break;
    }
    redisReaderFree(rd);
}

/* A reply tree made directly from bytes: any depth up to 40, unknown types. */
static redisReply *fz_tree(fz_in *in, int depth, int *budget) {
    redisReply *r = calloc(1, sizeof *r);
    unsigned b = fz_u8(in);
    if (r == NULL) abort();
    if (--*budget < 0) b = 3;
    r->type = (int)(b % 10); /* 0, 7, 8, 9 are not hiredis 0.14 types */
    if (r->type == REDIS_REPLY_ARRAY && depth < 40) {
        size_t i;
        r->elements = fz_u8(in) % 5;
        r->element = calloc(r->elements ? r->elements : 1, sizeof *r->element);
        if (r->element == NULL) abort();
        for (i = 0; i < r->elements; i++) r->element[i] = fz_tree(in, depth + 1, budget);
    } else if (r->type == REDIS_REPLY_ARRAY) {
        r->type = REDIS_REPLY_NIL;
    } else if (r->type == REDIS_REPLY_INTEGER) {
        r->integer = (long long)fz_u64(in);
    } else {
        size_t len = fz_u8(in) % 40;
        const char *s = fz_take(in, &len);
        r->str = malloc(len + 1);
        if (r->str == NULL) abort();
        memcpy(r->str, s, len);
        r->str[len] = '\0';
        r->len = len;
    }
    return r;
}

static void fz_tree_free(redisReply *r) {
    size_t i;
    for (i = 0; i < r->elements; i++) fz_tree_free(r->element[i]);
    free(r->element);
    free(r->str);
    free(r);
}

static void fz_mode_tree(lua_State *L, fz_in *in) {
    int budget = 300;
    redisReply *r = fz_tree(in, 0, &budget);
    fz_convert(L, r);
    fz_tree_free(r);
}

/* ---- clients without a server ---------------------------------------------- */

/* Pushes a client userdata (the real metatable) whose connection is a
 * socketpair: `server` bytes are waiting to be read, then EOF. Settings say
 * 127.0.0.1:1, so a reconnect after EOF is refused at once. */
static void fz_push_pair_client(lua_State *L, const char *server, size_t n) {
    conn_config cfg;
    client_ud *u;
    exec_conn *x;
    char err[CONN_ERRSTR_LEN];
    int sv[2];
    u = client_push_closed(L);
    memset(&cfg, 0, sizeof cfg);
    cfg.host = (char *)"127.0.0.1";
    cfg.port = 1;
    cfg.connect_timeout_ms = 100;
    cfg.timeout_ms = 200;
    u->t = topo_new(TOPO_SINGLE, &cfg, NULL, 0, NULL, NULL, NULL, err, sizeof err);
    if (u->t == NULL) return;
    u->r = router_new(u->t, 0);
    /* a numeric address: loading the topology does no I/O */
    if (u->r == NULL || router_sync(u->r) != 0 || (x = router_conn(u->r, 0)) == NULL) return;
    if (fz_npeers >= FZ_MAX_PEERS) return;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return;
    /* Non-blocking: never wait on our own socket buffer. */
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    if (n > 0 && write(sv[1], server, n) < 0) { /* a partial answer is fine too */ }
    shutdown(sv[1], SHUT_WR);
    fz_peers[fz_npeers++] = sv[1];
    conn_adopt_fd(x->c, sv[0]);
}

/* Pushes a client userdata that is already closed. */
static void fz_push_closed_client(lua_State *L) {
    client_push_closed(L);
}

static void fz_close_peers(void) {
    while (fz_npeers > 0) close(fz_peers[--fz_npeers]);
}

/* ---- Lua values from bytes ------------------------------------------------- */

static const char *const fz_strings[] = {
    "", "0", "1", "-1", "1.5", "nan", "inf", "-inf", "0x10", "1e308", "  12  ", "65536",
    "GET", "SET", "PING", "EVAL", "release", "extend", "acquire", "nope", "127.0.0.1",
    "redis://127.0.0.1:1", "unix:///nonexistent/x", "%s%s%n%p", "\r\n", "*1\r\n$3\r\nfoo\r\n",
    "host", "port", "path", "password", "username", "db", "timeout", "connect_timeout",
    "TERM", "KILL", "held", "__index", "\xff\xfe", "0123456789abcdef0123456789abcdef",
};
static const char *const fz_fields[] = {
    "host", "port", "path", "username", "password", "db", "connect_timeout", "timeout",
    "url", "prefix", "ttl", "wait",
};
#define FZ_COUNT(a) (sizeof(a) / sizeof((a)[0]))

static int fz_noop(lua_State *L) {
    (void)L;
    return 0;
}

/* __index for fuzz metatables: raise, or make up a value on the fly. A made-
 * up string is referenced from nowhere else, which is what client_connect.c's
 * "left on the stack" comment is about. */
static int fz_index(lua_State *L) {
    lua_Integer mode = lua_tointeger(L, lua_upvalueindex(1));
    const char *key = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "?";
    switch (mode % 5) {
    case 0: return luaL_error(L, "fuzz __index raised for '%s'", key);
    case 1: lua_pushfstring(L, "fz-%s-index-value", key); lua_gc(L, LUA_GCCOLLECT, 0); return 1;
    case 2: lua_pushnumber(L, 0.0 / 0.0); return 1;
    case 3: lua_pushinteger(L, LUA_MININTEGER); return 1;
    default: lua_newtable(L); return 1;
    }
}

static void fz_push_value(lua_State *L, fz_in *in, int depth);

static void fz_push_table(lua_State *L, fz_in *in, int depth, int record) {
    unsigned i, n = fz_u8(in) % 6;
    lua_newtable(L);
    for (i = 0; i < n; i++) {
        if (record) {
            unsigned k = fz_u8(in);
            if (k < 200) {
                lua_pushstring(L, fz_fields[k % FZ_COUNT(fz_fields)]);
            } else {
                fz_push_value(L, in, depth + 1);
                if (lua_isnil(L, -1) || (lua_type(L, -1) == LUA_TNUMBER &&
                                         lua_tonumber(L, -1) != lua_tonumber(L, -1))) {
                    lua_pop(L, 1);
                    continue;
                }
            }
            fz_push_value(L, in, depth + 1);
            lua_rawset(L, -3);
        } else {
            fz_push_value(L, in, depth + 1);
            lua_rawseti(L, -2, (lua_Integer)i + 1);
        }
    }
}

static void fz_push_value(lua_State *L, fz_in *in, int depth) {
    static const lua_Integer ints[] = {
        0, 1, -1, LUA_MININTEGER, LUA_MAXINTEGER, (lua_Integer)1 << 53, -((lua_Integer)1 << 53),
        65535, 65536, 6379, 86400, (lua_Integer)1 << 31, (lua_Integer)1 << 20,
    };
    static const double floats[] = {
        0.0 / 0.0, -(0.0 / 0.0), 1.0 / 0.0, -1.0 / 0.0, -0.0, 0.5, 1e308, -1e308, 5e-324,
        9223372036854775808.0, -9223372036854775808.0, 9007199254740993.0, 0.001, 0.0005,
        86400.5, 1e12, 1e10, 2147483648.0, 1.5, 65535.5,
    };
    unsigned tag = fz_u8(in);
    luaL_checkstack(L, 8, "fuzz value");
    if (depth > 3) tag = 0;
    switch (tag % 16) {
    case 0: lua_pushnil(L); break;
    case 1: lua_pushboolean(L, 0); break;
    case 2: lua_pushboolean(L, 1); break;
    case 3: lua_pushinteger(L, (lua_Integer)(int8_t)fz_u8(in)); break;
    case 4: lua_pushinteger(L, ints[fz_u8(in) % FZ_COUNT(ints)]); break;
    case 5: lua_pushinteger(L, (lua_Integer)fz_u64(in)); break;
    case 6: lua_pushnumber(L, floats[fz_u8(in) % FZ_COUNT(floats)]); break;
    case 7: {
        uint64_t bits = fz_u64(in);
        double d;
        memcpy(&d, &bits, sizeof d);
        lua_pushnumber(L, d);
        break;
    }
    case 8: {
        size_t len = fz_u8(in);
        const char *s = fz_take(in, &len);
        lua_pushlstring(L, s, len);
        break;
    }
    case 9: { /* a long run of one byte, up to 2 KB */
        unsigned c = fz_u8(in);
        size_t len = fz_u16(in) % 2049;
        luaL_Buffer b;
        char *p = luaL_buffinitsize(L, &b, len);
        memset(p, (int)c, len);
        luaL_pushresultsize(&b, len);
        break;
    }
    case 10: lua_pushstring(L, fz_strings[fz_u8(in) % FZ_COUNT(fz_strings)]); break;
    case 11: fz_push_table(L, in, depth, 0); break;
    case 12: fz_push_table(L, in, depth, 1); break;
    case 13:
        switch (fz_u8(in) % 6) {
        case 0: lua_pushcfunction(L, fz_noop); break;
        case 1: lua_rawgeti(L, LUA_REGISTRYINDEX, fz_ref_luafn); break;
        case 2: lua_newthread(L); break;
        case 3: /* a userdata of another type */
            lua_getglobal(L, "io");
            lua_getfield(L, -1, "stdout");
            lua_remove(L, -2);
            break;
        case 4: lua_newuserdatauv(L, 16, 1); break; /* no metatable */
        default: lua_pushlightuserdata(L, (void *)in); break;
        }
        break;
    case 14: { /* a table with a metatable: __index raises or makes values up */
        unsigned m = fz_u8(in);
        fz_push_table(L, in, depth, 1);
        lua_newtable(L);
        if (m % 6 == 5) {
            lua_pushvalue(L, -2);     /* __index = the table itself: a loop */
        } else {
            lua_pushinteger(L, (lua_Integer)m);
            lua_pushcclosure(L, fz_index, 1);
        }
        lua_setfield(L, -2, "__index");
        lua_setmetatable(L, -2);
        break;
    }
    default: { /* a cyclic table, or our own userdata in the wrong place */
        unsigned m = fz_u8(in) % 3;
        if (m == 0) {
            lua_newtable(L);
            lua_pushvalue(L, -1);
            lua_rawseti(L, -2, 1);
            lua_pushvalue(L, -1);
            lua_setfield(L, -2, "host");
        } else if (m == 1) {
            fz_push_closed_client(L);
        } else {
            fz_push_pair_client(L, "", 0);
        }
        break;
    }
    }
}

/* ---- calling the module ---------------------------------------------------- */

/* Makes a core.connect argument safe: a table gets host 127.0.0.1 and port 1,
 * a unix path that does not exist; values of the wrong type stay (they must
 * raise before any connect). */
static void fz_force_endpoint(lua_State *L, int idx) {
    int t;
    idx = lua_absindex(L, idx);
    if (lua_type(L, idx) != LUA_TTABLE) return;
    /* host: absent or a string -> 127.0.0.1; other types stay. */
    lua_pushliteral(L, "host");
    t = lua_rawget(L, idx);
    lua_pop(L, 1);
    if (t == LUA_TNIL || t == LUA_TSTRING) {
        lua_pushliteral(L, "host");
        lua_pushliteral(L, "127.0.0.1");
        lua_rawset(L, idx);
    }
    /* port: absent or in range -> 1; NaN, out of range, wrong type stay. */
    lua_pushliteral(L, "port");
    lua_rawget(L, idx);
    if (lua_isnil(L, -1) || (lua_type(L, -1) == LUA_TNUMBER && lua_tonumber(L, -1) >= 1 &&
                             lua_tonumber(L, -1) <= 65535)) {
        lua_pushliteral(L, "port");
        lua_pushinteger(L, 1);
        lua_rawset(L, idx);
    }
    lua_pop(L, 1);
    lua_pushliteral(L, "path");
    if (lua_rawget(L, idx) == LUA_TSTRING) {
        lua_pushliteral(L, "path");
        lua_pushliteral(L, "/nonexistent/redislock-fuzz.sock");
        lua_rawset(L, idx);
    }
    lua_pop(L, 1);
}

#define FZ_WORLD        1  /* nil, err: err's first word is connection/redis */
#define FZ_MUST_RAISE   2  /* a closed client: must raise "... closed ..." */
#define FZ_NEVER_OK     4  /* core.connect to port 1 cannot succeed */

static const char *fz_what = "";
static int fz_trace;  /* FZ_TRACE=1: print every call's outcome (reproducing) */
static int fz_mem;    /* FZ_MEM=1: print heap sizes every 100000 inputs */
static unsigned long fz_inputs;

/* Calls the function below nargs arguments on the stack and checks the
 * outcome against the contract. Leaves the stack as it was before the
 * function was pushed. */
static void fz_call(lua_State *L, int nargs, int flags) {
    int base = lua_gettop(L) - nargs - 1;
    int st = lua_pcall(L, nargs, LUA_MULTRET, 0);
    int nres = lua_gettop(L) - base;
    if (fz_trace)
        fprintf(stderr, "fz: %s -> %s %s%s%s\n", fz_what, st == LUA_OK ? "returned" : "raised",
                luaL_typename(L, base + 1), nres > 1 ? " " : "",
                nres > 1 ? luaL_typename(L, base + 2) : "");
    if (fz_trace && (st != LUA_OK || (nres > 1 && lua_type(L, base + 2) == LUA_TSTRING)))
        fprintf(stderr, "    %s\n", lua_tostring(L, st != LUA_OK ? -1 : base + 2));
    if (st != LUA_OK) {
        const char *msg;
        if (lua_type(L, -1) != LUA_TSTRING) fz_fail(fz_what, "raised a non-string error");
        msg = lua_tostring(L, -1);
        if ((flags & FZ_MUST_RAISE) && strstr(msg, "closed") == NULL)
            fz_fail(fz_what, msg);
    } else {
        if (flags & FZ_MUST_RAISE) fz_fail(fz_what, "a closed client did not raise");
        if (nres >= 1 && lua_isnil(L, base + 1)) {
            const char *err;
            if (nres < 2 || lua_type(L, base + 2) != LUA_TSTRING)
                fz_fail(fz_what, "nil without a string error");
            err = lua_tostring(L, base + 2);
            if ((flags & FZ_WORLD) && strncmp(err, "connection ", 11) != 0 &&
                strncmp(err, "redis error", 11) != 0)
                fz_fail(fz_what, err);
            /* a third value, when given, is the error's kind */
            if ((flags & FZ_WORLD) && nres >= 3 && lua_type(L, base + 3) == LUA_TSTRING) {
                const char *kind = lua_tostring(L, base + 3);
                if (strcmp(kind, "connection") != 0 && strcmp(kind, "timeout") != 0 &&
                    strcmp(kind, "redis") != 0 && strcmp(kind, "memory") != 0)
                    fz_fail(fz_what, kind);
            }
        } else if ((flags & FZ_NEVER_OK) && nres >= 1) {
            fz_fail(fz_what, "core.connect to 127.0.0.1:1 succeeded");
        }
    }
    lua_settop(L, base);
}

/* url.parse(value at top), popped: a table of sane fields, or an error string
 * starting with "redislock:". */
static void fz_url(lua_State *L) {
    int base = lua_gettop(L) - 1, st, t;
    lua_rawgeti(L, LUA_REGISTRYINDEX, fz_ref_parse);
    lua_insert(L, -2);
    st = lua_pcall(L, 1, 1, 0);
    if (st != LUA_OK) {
        if (lua_type(L, -1) != LUA_TSTRING) fz_fail("url.parse", "raised a non-string error");
        if (strncmp(lua_tostring(L, -1), "redislock:", 10) != 0)
            fz_fail("url.parse", lua_tostring(L, -1));
        lua_settop(L, base);
        return;
    }
    if (lua_type(L, -1) != LUA_TTABLE) fz_fail("url.parse", "returned no table");
    t = lua_getfield(L, -1, "host");
    if (t != LUA_TNIL && (t != LUA_TSTRING || lua_rawlen(L, -1) == 0))
        fz_fail("url.parse", "host is not a non-empty string");
    lua_pop(L, 1);
    t = lua_getfield(L, -1, "path");
    if (t != LUA_TNIL && (t != LUA_TSTRING || lua_tostring(L, -1)[0] != '/'))
        fz_fail("url.parse", "path is not absolute");
    lua_pop(L, 1);
    t = lua_getfield(L, -1, "port");
    if (t != LUA_TNIL && (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1 ||
                          lua_tointeger(L, -1) > 65535))
        fz_fail("url.parse", "port is not an integer in 1-65535");
    lua_pop(L, 1);
    t = lua_getfield(L, -1, "db");
    if (t != LUA_TNIL && (t != LUA_TNUMBER || !(lua_tonumber(L, -1) >= 0)))
        fz_fail("url.parse", "db is not a non-negative number");
    lua_pop(L, 1);
    lua_getfield(L, -1, "host");
    lua_getfield(L, -2, "path");
    if (lua_isnil(L, -1) == lua_isnil(L, -2)) fz_fail("url.parse", "not exactly one of host/path");
    lua_settop(L, base);
}

/* Pushes client method `name` (from the real metatable). */
static void fz_push_method(lua_State *L, const char *mt, const char *name) {
    luaL_getmetatable(L, mt);
    if (name[0] == '_' && name[1] == '_') {
        lua_getfield(L, -1, name);
    } else {
        lua_getfield(L, -1, "__index");
        lua_getfield(L, -1, name);
        lua_remove(L, -2);
    }
    lua_remove(L, -2);
}

static void fz_push_core(lua_State *L, const char *name) {
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_getfield(L, -1, "redislock.core");
    lua_getfield(L, -1, name);
    lua_replace(L, -3);
    lua_pop(L, 1);
}

static int fz_push_values(lua_State *L, fz_in *in, int n) {
    int i;
    for (i = 0; i < n; i++) fz_push_value(L, in, 0);
    return n;
}

/* 'C': server bytes for a client over a socketpair. */
static void fz_mode_client(lua_State *L, fz_in *in) {
    unsigned sel = fz_u8(in);
    int nvals = (int)(fz_u8(in) % 8), base = lua_gettop(L), cl, k, i;
    size_t n;
    const char *server;
    fz_push_values(L, in, nvals);
    n = in->n > 32768 ? 32768 : in->n;
    server = fz_take(in, &n);
    fz_push_pair_client(L, server, n);
    cl = lua_gettop(L);
    for (k = 0; k < 3; k++) {
        unsigned op = (sel >> (2 * k)) & 3;
        int use_vals = k == 0 && nvals > 0, nargs;
        fz_what = "client over a socketpair";
        if (op == 0) {
            fz_push_method(L, CLIENT_MT, "command");
            lua_pushvalue(L, cl);
            if (use_vals) {
                for (i = 1; i <= nvals; i++) lua_pushvalue(L, base + i);
                nargs = 1 + nvals;
            } else {
                lua_pushliteral(L, "GET");
                lua_pushliteral(L, "fz");
                nargs = 3;
            }
        } else if (op == 1) {
            fz_push_method(L, CLIENT_MT, "script");
            lua_pushvalue(L, cl);
            lua_pushliteral(L, "release");
            lua_pushliteral(L, "k");
            lua_pushliteral(L, "w");
            lua_pushliteral(L, "s");
            lua_pushliteral(L, "tok");
            nargs = 6;
        } else if (op == 2) {
            fz_push_method(L, CLIENT_MT, "script");
            lua_pushvalue(L, cl);
            lua_pushliteral(L, "acquire");
            lua_pushliteral(L, "l");
            lua_pushliteral(L, "f");
            lua_pushliteral(L, "w");
            lua_pushliteral(L, "tok");
            lua_pushinteger(L, 1000);
            lua_pushliteral(L, "0");
            nargs = 8;
        } else {
            fz_push_method(L, CLIENT_MT, "script");
            lua_pushvalue(L, cl);
            if (use_vals) {
                for (i = 1; i <= nvals; i++) lua_pushvalue(L, base + i);
                nargs = 1 + nvals;
            } else {
                lua_pushliteral(L, "extend");
                lua_pushliteral(L, "k");
                lua_pushliteral(L, "tok");
                lua_pushnumber(L, 1000.0);
                nargs = 5;
            }
        }
        fz_call(L, nargs, FZ_WORLD);
    }
    fz_what = "close";
    fz_push_method(L, CLIENT_MT, "close");
    lua_pushvalue(L, cl);
    fz_call(L, 1, 0);
    lua_settop(L, base);
}

static const char *const fz_client_methods[] = {
    "command", "script", "watch", "fd", "set_timeout",          /* check the state */
    "losses", "stats", "close", "closed", "__tostring", "__gc", "__close",
};
#define FZ_CHECKED_METHODS 5
static const char *const fz_watch_methods[] = {
    "state", "renewed", "id", "unwatch", "__tostring", "__close", "__gc",
};

/* Caps a core.sleep argument: anything that would sleep more than 0 s. */
static void fz_cap_sleep(lua_State *L, int idx) {
    if (lua_isnumber(L, idx) && lua_tonumber(L, idx) > 0) {
        lua_pushinteger(L, 0);
        lua_replace(L, idx);
    }
}

/* 'V': values through the module's functions. */
static void fz_mode_values(lua_State *L, fz_in *in) {
    int calls, base = lua_gettop(L);
    for (calls = 0; calls < 8 && in->n > 0; calls++) {
        unsigned sel = fz_u8(in) % 9;
        int nargs = (int)(fz_u8(in) % 6), self_fuzz = 0, m, flags = 0;
        switch (sel) {
        case 0:
            fz_what = "core.connect";
            fz_push_core(L, "connect");
            fz_push_values(L, in, nargs);
            if (nargs > 0) fz_force_endpoint(L, base + 2);
            fz_call(L, nargs, FZ_WORLD | FZ_NEVER_OK);
            break;
        case 1:
        case 2:
        case 3: {
            static const char *const names[] = {"token", "monotime", "getpid"};
            fz_what = names[sel - 1];
            fz_push_core(L, names[sel - 1]);
            fz_push_values(L, in, nargs);
            fz_call(L, nargs, 0);
            break;
        }
        case 4:
            fz_what = "core.sleep";
            fz_push_core(L, "sleep");
            fz_push_values(L, in, nargs);
            if (nargs > 0) fz_cap_sleep(L, base + 2);
            fz_call(L, nargs, 0);
            break;
        case 5: /* a closed client */
            m = (int)(fz_u8(in) % FZ_COUNT(fz_client_methods));
            fz_what = fz_client_methods[m];
            fz_push_method(L, CLIENT_MT, fz_client_methods[m]);
            fz_push_closed_client(L);
            fz_push_values(L, in, nargs);
            fz_call(L, nargs + 1, m < FZ_CHECKED_METHODS ? FZ_MUST_RAISE : 0);
            break;
        case 6: /* an open client (socketpair, no answer), or a wrong self */
            m = (int)(fz_u8(in) % FZ_COUNT(fz_client_methods));
            self_fuzz = (int)(fz_u8(in) % 4 == 0);
            fz_what = fz_client_methods[m];
            fz_push_method(L, CLIENT_MT, fz_client_methods[m]);
            if (self_fuzz) fz_push_value(L, in, 0);
            else fz_push_pair_client(L, "", 0);
            fz_push_values(L, in, nargs);
            if (m == 0 || m == 1) flags = FZ_WORLD;
            fz_call(L, nargs + 1, flags);
            break;
        case 7: { /* a watch handle (the watchdog thread dials 127.0.0.1:1) */
            int cl, w;
            fz_push_pair_client(L, "", 0);
            cl = lua_gettop(L);
            fz_push_method(L, CLIENT_MT, "watch");
            lua_pushvalue(L, cl);
            lua_pushliteral(L, "fz:watch");
            lua_pushliteral(L, "0123456789abcdef0123456789abcdef");
            lua_pushnumber(L, 0.5);
            lua_pushnumber(L, (lua_Number)monotime_seconds() + 0.4);
            if (lua_pcall(L, 5, 2, 0) != LUA_OK || lua_isnil(L, -2)) {
                lua_settop(L, base);
                break;
            }
            lua_pop(L, 1);
            w = lua_gettop(L);
            m = (int)(fz_u8(in) % FZ_COUNT(fz_watch_methods));
            self_fuzz = (int)(fz_u8(in) % 4 == 0);
            fz_what = fz_watch_methods[m];
            fz_push_method(L, FZ_WATCH_MT, fz_watch_methods[m]);
            if (self_fuzz) fz_push_value(L, in, 0);
            else lua_pushvalue(L, w);
            fz_push_values(L, in, nargs);
            fz_call(L, nargs + 1, 0);
            fz_what = "close";
            fz_push_method(L, CLIENT_MT, "close");
            lua_pushvalue(L, cl);
            fz_call(L, 1, 0);
            break;
        }
        default:
            fz_what = "url.parse";
            fz_push_value(L, in, 0);
            fz_url(L);
            break;
        }
        lua_settop(L, base);
    }
}

static void fz_mode_url(lua_State *L, fz_in *in) {
    size_t n = in->n;
    const char *s = fz_take(in, &n);
    lua_pushlstring(L, s, n);
    fz_url(L);
}

/* ---- libFuzzer -------------------------------------------------------------- */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    static const char *const process_fns[] = {
        "fork", "spawn", "waitpid", "kill", "_exit", "signalfd", "signal_wait", "readable",
    };
    const char *root = getenv("REDISLOCK_ROOT");
    size_t i;
    (void)argc;
    (void)argv;
    if (root == NULL) root = FZ_ROOT;
    fz_trace = getenv("FZ_TRACE") != NULL;
    fz_mem = getenv("FZ_MEM") != NULL;
    G = luaL_newstate();
    if (G == NULL) abort();
    luaL_openlibs(G);
    lua_getglobal(G, "package");
    lua_pushfstring(G, "%s/lua/?.lua", root);
    lua_setfield(G, -2, "path");
    lua_pushliteral(G, "");
    lua_setfield(G, -2, "cpath");   /* only the core linked in here */
    lua_pop(G, 1);
    luaL_requiref(G, "redislock.core", luaopen_redislock_core, 0);
    for (i = 0; i < FZ_COUNT(process_fns); i++) {
        lua_pushnil(G);
        lua_setfield(G, -2, process_fns[i]);
    }
    lua_pop(G, 1);
    lua_getglobal(G, "require");
    lua_pushliteral(G, "redislock.url");
    if (lua_pcall(G, 1, 1, 0) != LUA_OK) {
        fprintf(stderr, "fuzz_reply: cannot load redislock.url from %s/lua: %s\n", root,
                lua_tostring(G, -1));
        exit(2);
    }
    lua_getfield(G, -1, "parse");
    fz_ref_parse = luaL_ref(G, LUA_REGISTRYINDEX);
    lua_pop(G, 1);
    if (luaL_loadstring(G, "return ...") != LUA_OK) abort();
    fz_ref_luafn = luaL_ref(G, LUA_REGISTRYINDEX);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_in in;
    unsigned mode;
    if (size == 0) return 0;
    in.p = data + 1;
    in.n = size - 1;
    switch (data[0]) {
    case 'R': mode = 0; break;
    case 'T': mode = 1; break;
    case 'C': mode = 2; break;
    case 'V': mode = 3; break;
    case 'U': mode = 4; break;
    default: mode = data[0] % 5; break;
    }
    lua_settop(G, 0);
    switch (mode) {
    case 0: fz_mode_reader(G, &in); break;
    case 1: fz_mode_tree(G, &in); break;
    case 2: fz_mode_client(G, &in); break;
    case 3: fz_mode_values(G, &in); break;
    default: fz_mode_url(G, &in); break;
    }
    lua_settop(G, 0);
    /* Collect now: clients close (joining watchdog threads) every input. */
    lua_gc(G, LUA_GCCOLLECT, 0);
    fz_close_peers();
    if (fz_mem && ++fz_inputs % 100000 == 0)
        fprintf(stderr, "fz: %lu inputs, Lua heap %d KB, malloc'd now %zu KB\n", fz_inputs,
                lua_gc(G, LUA_GCCOUNT, 0), __sanitizer_get_current_allocated_bytes() / 1024);
    return 0;
}
