/*
 * test/c/topo_fork_test.c: fork while another thread holds a topology's
 * mutex (the topology's thread publishing, a watchdog reading its
 * snapshot): the child must find every topology mutex free (topo_share.c's
 * pthread_atfork handlers), never held by a thread that does not exist in
 * it, which would hang its first request for good.
 *
 * A thread takes and gives back the topology's mutex in a tight loop (as
 * topo_snap_get does) while the main thread forks 2,000 times; each child
 * takes the mutex itself under a 1 s alarm. Without the handlers about
 * half the children hang (the test stops at ten); with them none may.
 *
 * Run by `make ctest`; exits non-zero on any failure.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "topo/topo.h"

#define FORKS 2000

static volatile int stop;

static void *hammer(void *arg) {
    topo *t = arg;
    while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) topo_snap_put(t, topo_snap_get(t));
    return NULL;
}

int main(void) {
    conn_config cfg;
    char err[200];
    pthread_t th;
    topo *t;
    int i, hung = 0, failed = 0;
    memset(&cfg, 0, sizeof cfg);
    cfg.host = (char *)"127.0.0.1";
    cfg.port = 6379;
    t = topo_new(TOPO_SINGLE, &cfg, NULL, 0, NULL, NULL, NULL, err, sizeof err);
    CHECK(t != NULL, "topo_new: %s", err);
    if (t == NULL) return check_report("topo_fork_test");
    pthread_create(&th, NULL, hammer, t);
    for (i = 0; i < FORKS && hung < 10; i++) {   /* (ten hung: enough said) */
        int status;
        pid_t pid = fork();
        if (pid == 0) {
            alarm(1);
            topo_snap_put(t, topo_snap_get(t));
            _exit(0);
        }
        if (pid < 0 || waitpid(pid, &status, 0) != pid) {
            failed++;
            continue;
        }
        if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) hung++;
        else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed++;
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    CHECK(hung == 0, "%d of %d children hung on the topology's mutex", hung, i);
    CHECK(failed == 0, "%d children failed otherwise", failed);
    topo_release(t);
    return check_report("topo_fork_test");
}
