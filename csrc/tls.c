/*
 * tls.c: TLS sessions over memory BIOs, on OpenSSL (see tls.h). Built with
 * -DREDISLOCK_TLS when the Makefile finds OpenSSL's headers (make TLS=no:
 * without); the stubs at the end stand in otherwise.
 */
#define _GNU_SOURCE
#include "tls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef REDISLOCK_TLS

#include <arpa/inet.h>
#include <errno.h>
#include <sys/stat.h>

#include <openssl/err.h>
#include <openssl/opensslv.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

struct tls_ctx {
    int refs;                /* atomic */
    SSL_CTX *ssl;
    char *server_name;
    int verify;
    int has_cert;            /* a client certificate was given */
};

struct tls_sess {
    SSL *ssl;
    BIO *rbio, *wbio;        /* ciphertext in (fed by conn.c), out (sent by it) */
    const tls_ctx *x;
    char name[256];          /* the name or address verified, for messages */
    int closed;              /* close_notify came */
    char err[TLS_ERR_LEN];
};

int tls_built(void) { return 1; }

const char *tls_library(void) { return OpenSSL_version(OPENSSL_VERSION); }

/* OpenSSL's reason for the oldest error queued, or "" (the queue cleared). */
static const char *tls_reason(unsigned long *code) {
    unsigned long e = ERR_peek_error();
    const char *why = e ? ERR_reason_error_string(e) : NULL;
    if (code) *code = e;
    ERR_clear_error();
    return why ? why : "";
}

/* An encrypted key must fail to load, not ask for a passphrase on the
 * terminal (OpenSSL's default callback reads /dev/tty). */
static int tls_no_passphrase(char *buf, int size, int rwflag, void *u) {
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)u;
    return 0;
}

tls_ctx *tls_ctx_new(const tls_opts *o, char *err, size_t errlen) {
    tls_ctx *x = calloc(1, sizeof *x);
    SSL_CTX *ctx = NULL;
    struct stat st;
    ERR_clear_error();
    if (x == NULL) goto nomem;
    x->refs = 1;
    x->verify = o->verify;
    if (o->server_name && !(x->server_name = strdup(o->server_name))) goto nomem;
    ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL) goto nomem;
    x->ssl = ctx;
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* idle connections give their record buffers back (2,000 clients) */
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_default_passwd_cb(ctx, tls_no_passphrase);
    if (o->verify) {
        int ok;
        if (o->ca == NULL) {
            ok = SSL_CTX_set_default_verify_paths(ctx);
        } else if (stat(o->ca, &st) != 0) {
            snprintf(err, errlen, "tls.ca: cannot read %.100s (%s)", o->ca, strerror(errno));
            goto fail;
        } else {
            ok = S_ISDIR(st.st_mode) ? SSL_CTX_load_verify_locations(ctx, NULL, o->ca)
                                     : SSL_CTX_load_verify_locations(ctx, o->ca, NULL);
        }
        if (ok != 1) {
            const char *why = tls_reason(NULL);
            snprintf(err, errlen, "tls.ca: cannot load %.100s (%s)", o->ca ? o->ca : "the system's CA store",
                     why[0] ? why : "no certificate in it");
            goto fail;
        }
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    } else {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    }
    if (o->cert || o->key) {
        if (!o->cert || !o->key) {
            snprintf(err, errlen, "tls.%s: a client certificate needs both tls.cert and tls.key",
                     o->cert ? "key" : "cert");
            goto fail;
        }
        if (SSL_CTX_use_certificate_chain_file(ctx, o->cert) != 1) {
            const char *why = tls_reason(NULL);
            snprintf(err, errlen, "tls.cert: cannot load %.100s (%s)", o->cert,
                     stat(o->cert, &st) != 0 ? strerror(errno) : why[0] ? why : "not a PEM certificate");
            goto fail;
        }
        /* (the reason only: never a byte of the key) */
        if (SSL_CTX_use_PrivateKey_file(ctx, o->key, SSL_FILETYPE_PEM) != 1) {
            unsigned long code;
            const char *why = tls_reason(&code);
            if (ERR_GET_LIB(code) == ERR_LIB_X509 && ERR_GET_REASON(code) == X509_R_KEY_VALUES_MISMATCH)
                snprintf(err, errlen, "tls.key: %.100s is not the key of tls.cert's certificate", o->key);
            else
                snprintf(err, errlen, "tls.key: cannot load %.100s (%s)", o->key,
                         stat(o->key, &st) != 0 ? strerror(errno)
                                                : why[0] ? why : "not an unencrypted PEM key");
            goto fail;
        }
        if (SSL_CTX_check_private_key(ctx) != 1) {
            ERR_clear_error();
            snprintf(err, errlen, "tls.key: %.100s is not the key of tls.cert's certificate", o->key);
            goto fail;
        }
        x->has_cert = 1;
    }
    return x;
nomem:
    snprintf(err, errlen, "out of memory");
fail:
    ERR_clear_error();
    if (x) {
        if (x->ssl) SSL_CTX_free(x->ssl);
        free(x->server_name);
        free(x);
    }
    return NULL;
}

void tls_ctx_retain(tls_ctx *x) {
    if (x) __atomic_add_fetch(&x->refs, 1, __ATOMIC_RELAXED);
}

void tls_ctx_release(tls_ctx *x) {
    if (x == NULL || __atomic_sub_fetch(&x->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    SSL_CTX_free(x->ssl);
    free(x->server_name);
    free(x);
}

int tls_ctx_verifies(const tls_ctx *x) { return x->verify; }

const char *tls_ctx_server_name(const tls_ctx *x) { return x->server_name; }

static int tls_is_ip(const char *s) {
    unsigned char buf[16];
    return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

tls_sess *tls_sess_new(tls_ctx *x, const char *host, char *err, size_t errlen) {
    tls_sess *s;
    const char *name = x->server_name ? x->server_name : host;
    if (name == NULL && x->verify) {
        snprintf(err, errlen, "tls: no name to verify the server against (set tls.server_name)");
        return NULL;
    }
    s = calloc(1, sizeof *s);
    if (s == NULL) goto nomem;
    s->x = x;
    snprintf(s->name, sizeof s->name, "%s", name ? name : "?");
    ERR_clear_error();
    s->ssl = SSL_new(x->ssl);
    s->rbio = BIO_new(BIO_s_mem());
    s->wbio = BIO_new(BIO_s_mem());
    if (s->ssl == NULL || s->rbio == NULL || s->wbio == NULL) goto nomem;
    /* an empty input BIO means "more to come", not end of file */
    BIO_set_mem_eof_return(s->rbio, -1);
    SSL_set_bio(s->ssl, s->rbio, s->wbio);   /* (the SSL owns them now) */
    SSL_set_connect_state(s->ssl);
    if (name && tls_is_ip(name)) {
        /* an address: checked against the certificate's IP entries; no SNI
         * (RFC 6066 allows only host names there) */
        if (x->verify && X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(s->ssl), name) != 1) goto bad;
    } else if (name) {
        if (SSL_set_tlsext_host_name(s->ssl, name) != 1) goto bad;
        if (x->verify) {
            SSL_set_hostflags(s->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
            if (SSL_set1_host(s->ssl, name) != 1) goto bad;
        }
    }
    return s;
bad:
    snprintf(err, errlen, "tls: cannot use '%.100s' as the server's name", name);
    tls_sess_free(s);
    ERR_clear_error();
    return NULL;
nomem:
    snprintf(err, errlen, "out of memory");
    if (s) {
        if (s->ssl) {
            SSL_free(s->ssl);
        } else {
            BIO_free(s->rbio);
            BIO_free(s->wbio);
        }
        free(s);
    }
    ERR_clear_error();
    return NULL;
}

void tls_sess_free(tls_sess *s) {
    if (s == NULL) return;
    /* Not resumable, not cached: SSL_free then takes no lock of the
     * context's session cache and sends nothing (no SSL_shutdown). */
    SSL_set_shutdown(s->ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    SSL_free(s->ssl);
    free(s);
}

/* Why a certificate was not accepted, in words (X509_V_ERR_*). */
static void tls_verify_failed(tls_sess *s, long v) {
    const char *what;
    switch (v) {
    case X509_V_ERR_CERT_HAS_EXPIRED:
        what = "the server's certificate has expired";
        break;
    case X509_V_ERR_CERT_NOT_YET_VALID:
        what = "the server's certificate is not valid yet";
        break;
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
        snprintf(s->err, sizeof s->err, "tls: the server's certificate is not for %.60s (wrong name)",
                 s->name);
        return;
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
    case X509_V_ERR_CERT_UNTRUSTED:
        snprintf(s->err, sizeof s->err, "tls: the server's certificate is from an unknown CA (%s)",
                 X509_verify_cert_error_string(v));
        return;
    default:
        snprintf(s->err, sizeof s->err, "tls: the server's certificate was refused (%s)",
                 X509_verify_cert_error_string(v));
        return;
    }
    snprintf(s->err, sizeof s->err, "tls: %s", what);
}

/* Records why the session failed (SSL_get_error gave e), from the
 * certificate check, the server's alert, or OpenSSL's reason. */
static void tls_failed(tls_sess *s, int e) {
    unsigned long code;
    long v = SSL_get_verify_result(s->ssl);
    const char *why;
    int reason;
    if (s->x->verify && v != X509_V_OK) {
        ERR_clear_error();
        tls_verify_failed(s, v);
        return;
    }
    why = tls_reason(&code);
    reason = ERR_GET_REASON(code);
    if (e == SSL_ERROR_SYSCALL && code == 0) why = "unexpected end of the stream";
    switch (reason) {
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
        snprintf(s->err, sizeof s->err, "tls: the server wants a client certificate (tls.cert, tls.key)");
        return;
    case SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE:
        if (!s->x->has_cert) {
            snprintf(s->err, sizeof s->err, "tls: handshake refused by the server (it may want a client"
                     " certificate: tls.cert, tls.key)");
            return;
        }
        break;
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
    case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
    case SSL_R_TLSV1_ALERT_DECRYPT_ERROR:
    case SSL_R_TLSV1_ALERT_ACCESS_DENIED:
        snprintf(s->err, sizeof s->err, "tls: the server refused our client certificate (%s)", why);
        return;
    case SSL_R_WRONG_VERSION_NUMBER:
    case SSL_R_PACKET_LENGTH_TOO_LONG:
    case SSL_R_UNKNOWN_PROTOCOL:
    case SSL_R_HTTP_REQUEST:
        snprintf(s->err, sizeof s->err, "tls: handshake refused: not a TLS port? (%s)", why);
        return;
    default:
        break;
    }
    if (reason >= SSL_AD_REASON_OFFSET && reason < SSL_AD_REASON_OFFSET + 256)
        snprintf(s->err, sizeof s->err, "tls: handshake refused by the server (alert: %s)",
                 SSL_alert_desc_string_long(reason - SSL_AD_REASON_OFFSET));
    else
        snprintf(s->err, sizeof s->err, "tls: %s", why[0] ? why : "failed");
}

int tls_sess_handshake(tls_sess *s) {
    int r, e;
    ERR_clear_error();
    r = SSL_do_handshake(s->ssl);
    if (r == 1) return 1;
    e = SSL_get_error(s->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return 0;
    tls_failed(s, e);
    return -1;
}

int tls_sess_write(tls_sess *s, const void *p, size_t n) {
    const char *q = p;
    while (n > 0) {
        int chunk = n > (1u << 30) ? (1 << 30) : (int)n, r;
        ERR_clear_error();
        r = SSL_write(s->ssl, q, chunk);
        if (r <= 0) {
            tls_failed(s, SSL_get_error(s->ssl, r));
            return -1;
        }
        q += r;
        n -= (size_t)r;
    }
    return 0;
}

size_t tls_sess_out(tls_sess *s, const char **p) {
    char *d = NULL;
    long n = BIO_get_mem_data(s->wbio, &d);
    *p = d;
    return n > 0 ? (size_t)n : 0;
}

void tls_sess_out_sent(tls_sess *s, size_t n) {
    char scratch[4096];
    while (n > 0) {
        int k = BIO_read(s->wbio, scratch, n > sizeof scratch ? (int)sizeof scratch : (int)n);
        if (k <= 0) break;
        n -= (size_t)k;
    }
}

size_t tls_sess_pending(const tls_sess *s) {
    return BIO_ctrl_pending(s->wbio);
}

int tls_sess_feed(tls_sess *s, const void *p, size_t n) {
    /* The thread's error queue must be empty for SSL_get_error to tell
     * "more to come" from a failure: emptied once here for the reads of
     * what is fed (a read that succeeds queues nothing; every failure
     * handled empties it again). */
    ERR_clear_error();
    if (n == 0) return 0;
    if (n > (1u << 30) || BIO_write(s->rbio, p, (int)n) != (int)n) {
        snprintf(s->err, sizeof s->err, "out of memory");
        return -1;
    }
    return 0;
}

ssize_t tls_sess_read(tls_sess *s, void *buf, size_t cap) {
    int r, e;
    r = SSL_read(s->ssl, buf, cap > (1u << 30) ? (1 << 30) : (int)cap);
    if (r > 0) return r;
    e = SSL_get_error(s->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return 0;
    if (e == SSL_ERROR_ZERO_RETURN) {
        s->closed = 1;
        snprintf(s->err, sizeof s->err, "closed by server");
        return -1;
    }
    tls_failed(s, e);
    return -1;
}

int tls_sess_drained(const tls_sess *s) {
    return BIO_ctrl_pending(s->rbio) == 0 && SSL_pending(s->ssl) == 0;
}

int tls_sess_closed(const tls_sess *s) { return s->closed; }

const char *tls_sess_error(const tls_sess *s) { return s->err; }

#else /* no TLS in this build */

struct tls_ctx { int unused; };
struct tls_sess { int unused; };

int tls_built(void) { return 0; }
const char *tls_library(void) { return "none"; }

tls_ctx *tls_ctx_new(const tls_opts *o, char *err, size_t errlen) {
    (void)o;
    snprintf(err, errlen, "this build has no TLS (built with TLS=no, or without OpenSSL's headers)");
    return NULL;
}
void tls_ctx_retain(tls_ctx *x) { (void)x; }
void tls_ctx_release(tls_ctx *x) { (void)x; }
int tls_ctx_verifies(const tls_ctx *x) { (void)x; return 0; }
const char *tls_ctx_server_name(const tls_ctx *x) { (void)x; return NULL; }
tls_sess *tls_sess_new(tls_ctx *x, const char *host, char *err, size_t errlen) {
    (void)x;
    (void)host;
    snprintf(err, errlen, "this build has no TLS");
    return NULL;
}
void tls_sess_free(tls_sess *s) { (void)s; }
int tls_sess_handshake(tls_sess *s) { (void)s; return -1; }
int tls_sess_write(tls_sess *s, const void *p, size_t n) { (void)s; (void)p; (void)n; return -1; }
size_t tls_sess_out(tls_sess *s, const char **p) { (void)s; *p = NULL; return 0; }
void tls_sess_out_sent(tls_sess *s, size_t n) { (void)s; (void)n; }
size_t tls_sess_pending(const tls_sess *s) { (void)s; return 0; }
int tls_sess_feed(tls_sess *s, const void *p, size_t n) { (void)s; (void)p; (void)n; return -1; }
ssize_t tls_sess_read(tls_sess *s, void *buf, size_t cap) { (void)s; (void)buf; (void)cap; return -1; }
int tls_sess_drained(const tls_sess *s) { (void)s; return 1; }
int tls_sess_closed(const tls_sess *s) { (void)s; return 0; }
const char *tls_sess_error(const tls_sess *s) { (void)s; return "this build has no TLS"; }

#endif
