/*
 * conn.h: one hiredis connection with its settings, reconnecting lazily.
 * No Lua here: the watchdog thread uses the same code on its own connection.
 *
 * Not thread-safe (hiredis contexts are not): one conn per thread.
 */
#ifndef REDISLOCK_CONN_H
#define REDISLOCK_CONN_H

#include <stddef.h>
#include <sys/types.h>
#include <hiredis.h>

#define CONN_ERRSTR_LEN 192

typedef struct conn_config {
    char *host;              /* TCP host, or NULL when path is set */
    int port;
    char *path;              /* unix socket path, or NULL */
    char *username;          /* ACL user, or NULL for the default user */
    char *password;          /* NULL: no AUTH. Never copied into a message. */
    int db;                  /* SELECT after connect when > 0 */
    long connect_timeout_ms;
    long timeout_ms;         /* per command; 0 = block forever */
} conn_config;

typedef struct conn {
    conn_config cfg;
    redisContext *ctx;       /* NULL while disconnected */
    pid_t pid;               /* process that opened ctx: a forked child reconnects */
    long spin_us;            /* conn_command polls for its reply this long
                                before sleeping in read(2); 0: never */
    char errstr[CONN_ERRSTR_LEN];
} conn;

/* Deep copy of a config (strings duplicated). 0, or -1 when out of memory. */
int conn_config_copy(conn_config *dst, const conn_config *src);
/* Frees the strings, wiping the password first. */
void conn_config_free(conn_config *cfg);

/* A new, not yet connected conn with its own copy of cfg; NULL if no memory. */
conn *conn_new(const conn_config *cfg);
void conn_free(conn *c);

/* Connects now if not connected (or if the process forked since). 0 on
 * success; -1 with c->errstr set ("connection ..." or "redis error ..."). */
int conn_ensure(conn *c);

/* Drops the context after an I/O error: the next call reconnects. */
void conn_drop(conn *c);

/* Sends one command and reads its reply, binary safe. Returns the reply (the
 * caller frees it, an error reply included) or NULL after a connection
 * failure, with errstr set and the context dropped. Never retries: the
 * command may have run, and only the caller knows whether repeating is safe. */
redisReply *conn_command(conn *c, int argc, const char **argv, const size_t *lens);

/* Spin-then-block for conn_command (0 turns it off; see conn.c). */
void conn_set_spin(conn *c, long spin_us);

/* Pipelining: append commands, then read their replies in order. Same error
 * rules as conn_command; after a failure the remaining replies are lost. */
int conn_append(conn *c, int argc, const char **argv, const size_t *lens);
redisReply *conn_read(conn *c);

/* Changes the timeouts, for the live context too: the watchdog bounds each
 * round trip by the leases it is renewing. */
void conn_set_timeouts(conn *c, long connect_ms, long command_ms);

/* "127.0.0.1:6379" or "/tmp/redis.sock", for messages. */
void conn_describe(const conn *c, char *buf, size_t len);

#endif
