/*
 * intr.h: lets a blocking wait on the Lua side's thread end when a signal
 * has asked the interpreter to stop. No Lua here.
 *
 * lua.c (and luajit.c) answer SIGINT by setting a debug hook that raises
 * "interrupted!" at the next instruction: the interpreter's own interrupt.
 * A wait in C (poll, recv, nanosleep) sees the signal as EINTR, and if it
 * went on waiting, that hook would not run until the wait ended on its own
 * (a Ctrl-C ignored for as long as another process held the lock). So a
 * binding that may block arms a check first (intr_arm), which tells from
 * its Lua state whether a hook was set since; a wait that sees EINTR, or is
 * about to sleep, asks intr_pending() and, if so, gives up: the call
 * returns to Lua, where the hook raises. A signal that sets no hook (one
 * the host handles its own way) changes nothing: the wait goes on.
 *
 * Thread-local: the watchdog and Sentinel follower threads never arm, so
 * their waits never give up this way.
 */
#ifndef REDISLOCK_INTR_H
#define REDISLOCK_INTR_H

/* 1 when the caller asked to stop. */
typedef int (*intr_check_fn)(void *ud);

/* Until intr_disarm, this thread's waits ask check(ud) after a signal. */
void intr_arm(intr_check_fn check, void *ud);
void intr_disarm(void);

/* Should this thread's wait give up now? 0 when nothing is armed. */
int intr_pending(void);

#endif
