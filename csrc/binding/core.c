/*
 * core.c: the entry point of redislock.core.
 *
 * The C core holds the mechanics (connections, scripts, tokens, the clock);
 * lua/redislock.lua holds the policy (options, waiting, guards). This file
 * only wires the pieces into one module table.
 */
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/hostport.h"
#include "base/intr.h"
#include "base/proc_id.h"
#include "lua.h"
#include "lauxlib.h"
#include "binding/compat.h"
#include "binding/client.h"
#include "net/conn.h"
#include "binding/hist.h"
#include "base/lease.h"
#include "base/monotime.h"
#include "exec/recovery.h"
#include "cmd/script.h"
#include "base/slot.h"
#include "net/tls.h"
#include "base/token.h"
#include "watchdog/wd_ids.h"

#define CORE_VERSION "0.1.0"

/* core.token() -> 32 hex chars of kernel randomness | nil, err */
static int global_token(lua_State *L) {
    char buf[TOKEN_HEX_LEN + 1];
    if (token_new(buf) != 0) {
        lua_pushnil(L);
        lua_pushfstring(L, "no randomness: %s", strerror(errno));
        return 2;
    }
    lua_pushlstring(L, buf, TOKEN_HEX_LEN);
    return 1;
}

/* core.monotime() -> seconds on CLOCK_MONOTONIC (float) */
static int global_monotime(lua_State *L) {
    lua_pushnumber(L, (lua_Number)monotime_seconds());
    return 1;
}

/* core.sleep(seconds) -> true | false: blocks the calling thread; restarts
 * after signals so the full time passes, unless a signal asked the
 * interpreter to stop (intr.h): then false, at once. Hosts with an event
 * loop (nginx) sleep their own way. */
static int global_sleep(lua_State *L) {
    lua_Number s = luaL_checknumber(L, 1);
    struct timespec ts, rem;
    int stopped = 0;
    if (!(s >= 0 && s <= 86400.0 * 365)) return luaL_argerror(L, 1, "seconds out of range");
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (lua_Number)ts.tv_sec) * 1e9);
    client_intr_arm(L);
    while (nanosleep(&ts, &rem) != 0 && errno == EINTR && !(stopped = intr_pending())) ts = rem;
    intr_disarm();
    lua_pushboolean(L, !stopped);
    return 1;
}

/* core.drift(ttl) -> seconds: the part of a ttl-second lease not counted
 * on (lease.h), the same the watchdog uses. */
static int global_drift(lua_State *L) {
    lua_Number ttl = luaL_checknumber(L, 1);
    if (!(ttl >= 0 && ttl <= 1e10)) return luaL_argerror(L, 1, "ttl out of range");
    lua_pushnumber(L, (lua_Number)lease_drift_ms((int64_t)(ttl * 1000 + 0.5)) / 1000);
    return 1;
}

/* core.hostname() -> this host's name (gethostname), or nil, err: the
 * default holder label's first part. */
static int global_hostname(lua_State *L) {
    char buf[256];
    if (gethostname(buf, sizeof buf - 1) != 0) {
        lua_pushnil(L);
        lua_pushfstring(L, "gethostname: %s", strerror(errno));
        return 2;
    }
    buf[sizeof buf - 1] = '\0';
    lua_pushstring(L, buf);
    return 1;
}

/* core.getpid() -> this process' pid: tells a forked child from its parent. */
static int global_getpid(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)proc_id());
    return 1;
}

/* core.slot(key) -> the key's Redis Cluster hash slot (slot.h), and
 * core.crc16(s) -> CRC16-XMODEM of s: the one definition the router and the
 * watchdog use, for specs and for transports that route themselves. */
static int global_slot(lua_State *L) {
    size_t len;
    const char *key = luaL_checklstring(L, 1, &len);
    lua_pushinteger(L, slot_of(key, len));
    return 1;
}

static int global_crc16(lua_State *L) {
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    lua_pushinteger(L, slot_crc16(s, len));
    return 1;
}

#ifdef REDISLOCK_TESTING
/* core.recovery(mode, err) -> class, todo [, target]
 * core.recovery_failure(mode, kind, sent) -> class, todo
 * core.recovery_pause(waits) -> seconds
 * What to do after Redis refused a request (err: its error text as Redis
 * sends it, after the '-') or a connection failed (kind: "refused",
 * "timeout" or "reset"; sent: the request had gone out), in mode
 * ("single", "sentinel", "cluster" or "redlock"): recovery.h's rules, the
 * ones every request follows (exec.h), for spec/01-core_spec.lua to read the table
 * through. A test hook: every transport is driven by exec.h's machine, so
 * nothing of redislock's own asks these. class: "moved", "ask", ... or "none";
 * todo: a table with true at each of retry, resolve, drop, asking, pause
 * and eval that applies (recovery.h says what each asks for); target:
 * "host:port" of a MOVED or an ASK. recovery_pause: the pause before the
 * waits-th retry of a refusal that asks for one. */
static const char *const core_modes[] = {"single", "sentinel", "cluster", "redlock", NULL};

static int core_push_recovery(lua_State *L, const recovery *rc) {
    static const struct {
        unsigned bit;
        const char *name;
    } bits[] = {
        {RECOVERY_RETRY, "retry"}, {RECOVERY_RESOLVE, "resolve"}, {RECOVERY_DROP, "drop"},
        {RECOVERY_ASKING, "asking"}, {RECOVERY_PAUSE, "pause"}, {RECOVERY_EVAL, "eval"},
    };
    size_t i;
    lua_pushstring(L, recovery_name(rc->cls));
    lua_createtable(L, 0, 4);
    for (i = 0; i < sizeof bits / sizeof bits[0]; i++)
        if (rc->todo & bits[i].bit) {
            lua_pushboolean(L, 1);
            lua_setfield(L, -2, bits[i].name);
        }
    if (rc->target == NULL) return 2;
    lua_pushlstring(L, rc->target, rc->target_len);
    return 3;
}

static int global_recovery(lua_State *L) {
    int mode = luaL_checkoption(L, 1, NULL, core_modes);
    size_t len;
    const char *err = luaL_checklstring(L, 2, &len);
    recovery rc;
    recovery_of_error(err, len, mode, &rc);
    return core_push_recovery(L, &rc);
}

static int global_recovery_failure(lua_State *L) {
    static const char *const kinds[] = {"refused", "timeout", "reset", NULL};
    static const int errs[] = {CONN_ECONNECT, CONN_ETIMEOUT, CONN_ELOST};
    int mode = luaL_checkoption(L, 1, NULL, core_modes);
    int kind = luaL_checkoption(L, 2, NULL, kinds);
    recovery rc;
    luaL_checktype(L, 3, LUA_TBOOLEAN);
    recovery_of_failure(errs[kind], lua_toboolean(L, 3), mode, &rc);
    return core_push_recovery(L, &rc);
}

static int global_recovery_pause(lua_State *L) {
    lua_Integer waits = luaL_checkinteger(L, 1);
    if (waits < 1 || waits > 1000000) return luaL_argerror(L, 1, "waits out of range");
    lua_pushnumber(L, (lua_Number)recovery_pause_ms((int)waits) / 1000);
    return 1;
}

/* core._test_next_id(n): the next lock id drawn is n (a test hook: specs
 * reach ids near 2^53, where a double stops telling neighbours apart, at
 * once instead of after billions of locks). */
static int global_test_next_id(lua_State *L) {
    lua_Number n = luaL_checknumber(L, 1);
    if (!(n >= 1 && n <= 9007199254740992.0)) return luaL_argerror(L, 1, "id out of range");
    wd_ids_set_next((uint64_t)n);
    return 0;
}
#endif

/* core.hostport(s) -> host, port (nil: none given) | nil, err
 * "host[:port]" or "[v6][:port]" by the one parser (csrc/base/hostport.h), for
 * URLs and connect()'s host lists; err names the part that is wrong. */
static int global_hostport(lua_State *L) {
    size_t len, hostlen;
    const char *s = luaL_checklstring(L, 1, &len), *host;
    char err[200];
    int port;
    if (hostport_parse(s, len, &host, &hostlen, &port, err, sizeof err) != 0) {
        lua_pushnil(L);
        lua_pushstring(L, err);
        return 2;
    }
    lua_pushlstring(L, host, hostlen);
    if (port == 0) lua_pushnil(L);
    else lua_pushinteger(L, port);
    return 2;
}

/* core.valid_host(host) -> whether it is a name or an address we may look
 * up (csrc/base/hostport.h); false for anything but a string. */
static int global_valid_host(lua_State *L) {
    size_t len;
    const char *host = lua_type(L, 1) == LUA_TSTRING ? lua_tolstring(L, 1, &len) : NULL;
    lua_pushboolean(L, host != NULL && hostport_valid_host(host, len));
    return 1;
}

/* Pushes core.scripts: { name = { source = ..., sha = ..., keys = n } }.
 * The very bytes and SHA the C side sends, so Lua code and specs can check
 * them against SCRIPT LOAD. */
static void core_push_scripts(lua_State *L) {
    size_t i, n = script_count();
    lua_createtable(L, 0, (int)n);                  /* scripts */
    for (i = 0; i < n; i++) {
        const script_def *s = script_at(i);
        lua_createtable(L, 0, 3);                   /* scripts, entry */
        lua_pushlstring(L, s->source, s->len);
        lua_setfield(L, -2, "source");
        lua_pushlstring(L, s->sha, 40);
        lua_setfield(L, -2, "sha");
        lua_pushinteger(L, s->nkeys);
        lua_setfield(L, -2, "keys");
        lua_setfield(L, -2, s->name);               /* scripts */
    }
}

static const luaL_Reg core_functions[] = {
    {"connect", client_global_connect},
    {"number_arg", client_global_number_arg},
    {"token", global_token},
    {"monotime", global_monotime},
    {"getpid", global_getpid},
    {"hostname", global_hostname},
    {"drift", global_drift},
    {"sleep", global_sleep},
    {"slot", global_slot},
    {"crc16", global_crc16},
    {"recorder", hist_global_recorder},
    {"hostport", global_hostport},
    {"valid_host", global_valid_host},
#ifdef REDISLOCK_TESTING
    /* the test hooks: only in the specs' build (Makefile TESTING_SRCS) */
    {"hist_bucket", hist_global_bucket},
    {"_test_next_id", global_test_next_id},
    {"recovery", global_recovery},
    {"recovery_failure", global_recovery_failure},
    {"recovery_pause", global_recovery_pause},
#endif
    {NULL, NULL}
};

__attribute__((visibility("default")))
int luaopen_redislock_core(lua_State *L) {
    client_register(L);
    hist_register(L);
    luaL_newlib(L, core_functions);                 /* core */
    core_push_scripts(L);                           /* core, scripts */
    lua_setfield(L, -2, "scripts");                 /* core */
    lua_pushliteral(L, CORE_VERSION);
    lua_setfield(L, -2, "_VERSION");
    lua_pushinteger(L, HIREDIS_MAJOR * 10000 + HIREDIS_MINOR * 100 + HIREDIS_PATCH);
    lua_setfield(L, -2, "hiredis_version");
    lua_pushboolean(L, tls_built());                /* core.tls: TLS in this build */
    lua_setfield(L, -2, "tls");
    lua_pushstring(L, tls_library());               /* "OpenSSL 3.0.19 ..." or "none" */
    lua_setfield(L, -2, "tls_library");
#ifdef REDISLOCK_TESTING
    lua_pushboolean(L, 1);                          /* core.testing: the hooks are here */
    lua_setfield(L, -2, "testing");
#endif
    return 1;
}
