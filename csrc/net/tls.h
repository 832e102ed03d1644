/*
 * tls.h: TLS for the connections of conn.c, on OpenSSL. No Lua here.
 *
 * TLS is a transform between our socket and the bytes of requests and
 * replies: OpenSSL never touches the socket (its BIO is a pair of buffers).
 * conn.c sends the ciphertext a session has waiting and feeds it what it
 * receives, on its own non-blocking sockets with its own deadlines, in the
 * same poll loops as plain connections: no call here ever waits, a session
 * "wants to read" exactly when it has nothing to send and is not done, and
 * recv/send keep MSG_DONTWAIT and MSG_NOSIGNAL (OpenSSL's socket BIO would
 * write(2) and raise SIGPIPE).
 *
 * A tls_ctx holds what the connections of one client share (the CA store,
 * the client certificate and key, the name to verify, whether to verify):
 * made once on the Lua side at connect, where reading files is expected,
 * and reference-counted, so the watchdog thread's connections use it
 * without reading a file or taking a lock of ours. A tls_sess is one
 * connection's TLS state, used by one thread at a time like its conn.
 *
 * Built without OpenSSL (make TLS=no), tls_built() is 0 and tls_ctx_new
 * fails with a message that says so; nothing else is ever called.
 *
 * Errors name the failure in words a user can act on (an unknown CA, a
 * name mismatch, an expired certificate, a server that wants a client
 * certificate, a port that does not speak TLS), never key material.
 */
#ifndef REDISLOCK_TLS_H
#define REDISLOCK_TLS_H

#include <stddef.h>
#include <sys/types.h>

#define TLS_ERR_LEN 160

typedef struct tls_ctx tls_ctx;
typedef struct tls_sess tls_sess;

/* What connect's `tls` table says (strings borrowed for the call). */
typedef struct tls_opts {
    const char *ca;          /* CA bundle file or directory; NULL: the system's store */
    const char *cert;        /* client certificate chain (PEM), for mutual TLS, or NULL */
    const char *key;         /* its private key (PEM, unencrypted), or NULL */
    const char *server_name; /* the name to verify and send as SNI; NULL: the host */
    int verify;              /* 0: encrypt without checking who answers */
} tls_opts;

/* 1 when this build has TLS (OpenSSL), 0 with make TLS=no. */
int tls_built(void);
/* "OpenSSL 3.0.19 ..." or "none", for core.tls_library. */
const char *tls_library(void);

/* Loads the files of o now. NULL with a message in err (which option,
 * which file, why) when one cannot be used, or when this build has no TLS. */
tls_ctx *tls_ctx_new(const tls_opts *o, char *err, size_t errlen);
/* Both may be called from any thread (an atomic count). NULL is ignored. */
void tls_ctx_retain(tls_ctx *x);
void tls_ctx_release(tls_ctx *x);
int tls_ctx_verifies(const tls_ctx *x);
/* The configured server_name, or NULL. */
const char *tls_ctx_server_name(const tls_ctx *x);

/* A session to `host` (a name or an IP address; NULL for a unix socket),
 * ready to start its handshake: the name checked is the context's
 * server_name, else host; SNI is sent for names, never for addresses.
 * NULL with err when out of memory or when there is no name to verify. */
tls_sess *tls_sess_new(tls_ctx *x, const char *host, char *err, size_t errlen);
/* Frees it without a word to the peer (no close_notify: Redis needs none,
 * and it never blocks). NULL is ignored. */
void tls_sess_free(tls_sess *s);

/* Advances the handshake with what was fed so far: 1 done, 0 not yet (send
 * what tls_sess_out has, then wait for bytes), -1 failed (tls_sess_error). */
int tls_sess_handshake(tls_sess *s);
/* Encrypts n bytes of requests (after the handshake): they are waiting in
 * tls_sess_out when this returns 0; -1 failed. */
int tls_sess_write(tls_sess *s, const void *p, size_t n);
/* The ciphertext waiting to be sent: its length, *p pointing at it. */
size_t tls_sess_out(tls_sess *s, const char **p);
/* The first n bytes of it went out. */
void tls_sess_out_sent(tls_sess *s, size_t n);
/* Bytes waiting to be sent (0: none), without touching them. */
size_t tls_sess_pending(const tls_sess *s);
/* Hands it n bytes received from the server, borrowed (no copy) until the
 * reads and the handshake steps that follow have taken them, or until
 * tls_sess_keep_rest: 0, or -1 out of memory. */
int tls_sess_feed(tls_sess *s, const void *p, size_t n);
/* Copies what OpenSSL has not taken of what was fed (rare: it takes all
 * it is given down to "more to come") before that buffer goes: 0, or -1
 * out of memory. */
int tls_sess_keep_rest(tls_sess *s);
/* Decrypts into buf: bytes (> 0), 0 when what was fed holds no more whole
 * record, -1 when the server closed the session (tls_sess_closed) or it
 * failed (tls_sess_error). */
ssize_t tls_sess_read(tls_sess *s, void *buf, size_t cap);
/* 1 when nothing fed is left to decrypt: a read now would find no record
 * (the caller can skip it). */
int tls_sess_drained(const tls_sess *s);
/* After a -1: 1 when the server ended the session cleanly (close_notify). */
int tls_sess_closed(const tls_sess *s);
/* Why the last call failed, for "connection failed: <this> (host:port)". */
const char *tls_sess_error(const tls_sess *s);

#endif
