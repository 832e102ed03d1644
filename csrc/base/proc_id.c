/*
 * proc_id.c: this process' pid, cached and refreshed across fork().
 *
 * The atfork child handler runs in the child only, single-threaded, before
 * fork() returns there, so nothing in the child ever sees the parent's pid
 * here. getpid() and a store are async-signal-safe.
 */
#include "base/proc_id.h"

#include <pthread.h>
#include <unistd.h>

static volatile pid_t proc_id_cached;
static pthread_once_t proc_id_once = PTHREAD_ONCE_INIT;

static void proc_id_child(void) { proc_id_cached = getpid(); }

static void proc_id_init(void) {
    proc_id_cached = getpid();
    pthread_atfork(NULL, NULL, proc_id_child);
}

pid_t proc_id(void) {
    pthread_once(&proc_id_once, proc_id_init);
    return proc_id_cached;
}
