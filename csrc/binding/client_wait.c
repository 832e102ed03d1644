/*
 * client_wait.c: a waiter's BLPOP with its next attempt queued behind it
 * (route_wait.c), for the wait connection of redislock.native.
 */
#include "binding/client_ud.h"

#include "lauxlib.h"
#include "binding/compat.h"
#include "binding/client.h"
#include "base/intr.h"
#include "binding/luaval.h"
#include "topo/router.h"
#include "cmd/script.h"

/* client:blpop_script(key, seconds, script, keys..., args...)
 *   -> true, wakeup, reply | false | nil, err, kind [, "unsent"]
 * BLPOP key seconds (a string, as Redis reads it), and the embedded script
 * `script` in the same write, which Redis runs as soon as the BLPOP
 * returns. true: wakeup is the value popped, false when the BLPOP timed
 * out, nil when Redis refused the BLPOP (it did not wait: WRONGTYPE, an
 * ACL, a redirect); reply is the script's, or false when it did not run
 * (Redis refused it: NOSCRIPT after a flush, a redirect). false: nothing
 * was sent (the map must be refreshed, or a Sentinel's master connected):
 * wait the ordinary way. nil, err, kind: the connection failed, and the
 * script may have run; with a fourth value "unsent", nothing was sent (it
 * could not connect). */
static int meth_blpop_script(lua_State *L) {
    const char *argv[SCRIPT_MAX_ARGS];
    size_t lens[SCRIPT_MAX_ARGS];
    client_ud *u = client_check(L);
    size_t klen, slen;
    const char *key = luaL_checklstring(L, 2, &klen);
    const char *secs = luaL_checklstring(L, 3, &slen);
    redisReply *woken, *attempt;
    int n, k;
    const script_def *s = client_script_args(L, 4, argv, lens, &n);
    client_intr_arm(L);
    k = route_wait_try(u->r, key, klen, secs, slen, s, n, argv, lens, &woken, &attempt);
    intr_disarm();
    if (k == 0) {
        lua_pushboolean(L, 0);
        return 1;
    }
    if (k == -2) {
        client_result(L, u, NULL);
        lua_pushliteral(L, "unsent");
        return 4;
    }
    if (k < 0) return client_result(L, u, NULL);
    return luaval_push_wait(L, woken, attempt);
}

const luaL_Reg client_wait_methods[] = {
    {"blpop_script", meth_blpop_script},
    {NULL, NULL}
};
