/* proc_id.h: this process' pid, cached, and right again in a fork child.
 * No Lua here.
 *
 * glibc no longer caches getpid() (2.25+): every call is a system call, and
 * the hot path asks several times per lock (is this our lock, or a forked
 * child's copy?). The cache is set once and refreshed by a pthread_atfork
 * child handler, which runs in the child before fork() returns there. */
#ifndef REDISLOCK_PROC_ID_H
#define REDISLOCK_PROC_ID_H

#include <sys/types.h>

/* This process' pid (getpid() the first time, the cache after). */
pid_t proc_id(void);

#endif
