/*
 * wait_cmd.c: WAIT numreplicas timeout, queued (see wait_cmd.h).
 */
#include "cmd/wait_cmd.h"

#include "base/resp.h"

int wait_cmd_append(conn *c, long long n, long long ms) {
    char n_txt[24], ms_txt[24];
    const char *argv[3];
    size_t lens[3];
    argv[0] = "WAIT";
    lens[0] = 4;
    argv[1] = n_txt;
    lens[1] = resp_i64(n_txt, n);
    argv[2] = ms_txt;
    lens[2] = resp_i64(ms_txt, ms);
    return conn_append(c, 3, argv, lens);
}
