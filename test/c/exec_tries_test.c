/*
 * test/c/exec_tries_test.c: what the request machine (exec.c) says when a
 * request is redirected too many times, by what the redirects said. No
 * server, no Lua: replies are written out as RESP here.
 *
 * Checks, in Cluster's rules:
 * - MOVED after MOVED (the nodes disagree for a moment on who serves the
 *   slot, as during a CLUSTER FAILOVER): "no master confirmed yet", of kind
 *   connection, never "resharding";
 * - READONLY (our master became a replica): the same, "a failover";
 * - an ASK or a TRYAGAIN among them (a slot being migrated): "resharding",
 *   of kind connection too;
 * - fewer redirects than the cap: no failure.
 *
 * Run by `make ctest` (and `make test`, `make sanitize`).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis.h>

#include "check.h"
#include "conn_pair.h"
#include "parse_reply.h"
#include "exec/exec.h"
#include "exec/topo_mode.h"

/* A request for script "extend" redirected by the replies in turn (each
 * RESP), as a driver runs it: exec_try before each attempt. The step it
 * ends with, and x's errstr and err. */
static int run(const char *const *replies, int n, char *errstr, size_t errlen, int *err) {
    exec_req x;
    exec_conn xc;
    const char *args[3] = {"{k}", "tok", "1000"};
    size_t lens[3] = {3, 3, 4};
    int peer, step = EXEC_ROUTE, i = 0;
    memset(&xc, 0, sizeof xc);
    xc.c = conn_pair(0, &peer);
    xc.gen = xc.c->gen;
    exec_init(&x, script_find("extend"), 3, args, lens, "{k}", 3, TOPO_CLUSTER, 0, 1000, 0);
    while (step != EXEC_FAIL && step != EXEC_DONE) {
        if (step == EXEC_PAUSE) {
            step = exec_after_pause(&x);
            if (step == EXEC_DONE) break;
        }
        if ((step = exec_try(&x)) == EXEC_FAIL) break;
        (void)exec_resolve(&x);
        if (exec_write(&x, &xc) != 0) abort();
        step = exec_reply(&x, &xc, parse(replies[i % n], strlen(replies[i % n])));
        i++;
        if (i > 100) break;
    }
    snprintf(errstr, errlen, "%s", step == EXEC_FAIL ? x.errstr : "");
    *err = x.err;
    exec_clear(&x);
    conn_free(xc.c);
    close(peer);
    return step;
}

static void test_words(void) {
    static const char *const moved[] = {"-MOVED 3999 127.0.0.1:7001\r\n", "-MOVED 3999 127.0.0.1:7002\r\n"};
    static const char *const readonly[] = {"-READONLY You can't write against a read only replica.\r\n",
                                           "-MOVED 3999 127.0.0.1:7002\r\n"};
    static const char *const ask[] = {"-MOVED 3999 127.0.0.1:7001\r\n", "-ASK 3999 127.0.0.1:7002\r\n"};
    static const char *const settle[] = {"-MOVED 3999 127.0.0.1:7001\r\n", "-MOVED 3999 127.0.0.1:7001\r\n",
                                         ":1\r\n"};
    char errstr[CONN_ERRSTR_LEN];
    int err, step;

    step = run(moved, 2, errstr, sizeof errstr, &err);
    CHECK(step == EXEC_FAIL && err == CONN_ELOST && strcmp(conn_kind(err), "connection") == 0, "moved: %d %d", step, err);
    CHECK(strstr(errstr, "no master confirmed yet") && strstr(errstr, "failover") && !strstr(errstr, "resharding"),
          "moved: '%s'", errstr);

    step = run(readonly, 2, errstr, sizeof errstr, &err);
    CHECK(step == EXEC_FAIL && err == CONN_ELOST, "readonly: %d %d", step, err);
    CHECK(strstr(errstr, "no master confirmed yet") && strstr(errstr, "a failover in progress") &&
          strstr(errstr, "replica"), "readonly: '%s'", errstr);

    step = run(ask, 2, errstr, sizeof errstr, &err);
    CHECK(step == EXEC_FAIL && err == CONN_ELOST, "ask: %d %d", step, err);
    CHECK(strstr(errstr, "resharding") != NULL, "ask: '%s'", errstr);

    step = run(settle, 3, errstr, sizeof errstr, &err);
    CHECK(step == EXEC_DONE, "settled after two redirects: %d '%s'", step, errstr);
}

int main(void) {
    test_words();
    return check_report("exec_tries_test");
}
