/*
 * tls.c: TLS sessions on OpenSSL whose BIO is a pair of buffers (see tls.h).
 * Built with -DREDISLOCK_TLS when the Makefile finds OpenSSL's headers (make
 * TLS=no: without); the stubs at the end stand in otherwise.
 *
 * The BIO is ours rather than a pair of memory BIOs: what OpenSSL writes is
 * appended to the session's out buffer, which conn.c sends from in place,
 * and what it reads comes straight from the bytes conn.c received. A memory
 * BIO costs a copy each way and a BIO_ctrl for every "anything to send?" a
 * poll loop asks; measured with callgrind, those were a good part of what
 * TLS added to a lock cycle.
 */
#define _GNU_SOURCE
#include "net/tls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef REDISLOCK_TLS

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
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
    const char *in;          /* ciphertext fed and not yet taken by OpenSSL: */
    size_t in_len;           /* conn.c's receive buffer, or keep */
    char *keep;              /* a rest kept past the receive (tls_sess_keep_rest) */
    size_t keep_cap;
    char *out;               /* ciphertext to send: out[out_off..out_len) */
    size_t out_off, out_len, out_cap;
    const tls_ctx *x;
    char name[256];          /* the name or address verified, for messages */
    int closed;              /* close_notify came */
    char err[TLS_ERR_LEN];
};

/* ---- the BIO ---------------------------------------------------------------- */

static BIO_METHOD *tls_bio_method;
static pthread_once_t tls_bio_once = PTHREAD_ONCE_INIT;

/* OpenSSL's records out: appended to the session's out buffer. */
static int tls_bio_write(BIO *b, const char *p, int n) {
    tls_sess *s = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    if (n <= 0) return 0;
    if (s->out_off > 0 && s->out_off == s->out_len) s->out_off = s->out_len = 0;
    if (s->out_len + (size_t)n > s->out_cap) {
        size_t cap = s->out_cap ? s->out_cap : 4096;
        char *q;
        while (cap < s->out_len + (size_t)n) cap *= 2;
        q = realloc(s->out, cap);
        if (q == NULL) return -1;
        s->out = q;
        s->out_cap = cap;
    }
    memcpy(s->out + s->out_len, p, (size_t)n);
    s->out_len += (size_t)n;
    return n;
}

/* Records in: from what was fed; none left means "more to come". */
static int tls_bio_read(BIO *b, char *p, int n) {
    tls_sess *s = BIO_get_data(b);
    size_t k;
    BIO_clear_retry_flags(b);
    if (s->in_len == 0) {
        BIO_set_retry_read(b);
        return -1;
    }
    k = s->in_len < (size_t)n ? s->in_len : (size_t)n;
    memcpy(p, s->in, k);
    s->in += k;
    s->in_len -= k;
    return (int)k;
}

static long tls_bio_ctrl(BIO *b, int cmd, long num, void *ptr) {
    tls_sess *s = BIO_get_data(b);
    (void)num;
    (void)ptr;
    switch (cmd) {
    case BIO_CTRL_FLUSH: return 1;                        /* conn.c sends */
    case BIO_CTRL_PENDING: return s ? (long)s->in_len : 0;
    case BIO_CTRL_WPENDING: return s ? (long)(s->out_len - s->out_off) : 0;
    default: return 0;
    }
}

static int tls_bio_create(BIO *b) {
    BIO_set_init(b, 1);
    return 1;
}

static void tls_bio_make(void) {
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "redislock");
    if (m == NULL) return;
    if (BIO_meth_set_write(m, tls_bio_write) != 1 || BIO_meth_set_read(m, tls_bio_read) != 1 ||
        BIO_meth_set_ctrl(m, tls_bio_ctrl) != 1 || BIO_meth_set_create(m, tls_bio_create) != 1) {
        BIO_meth_free(m);
        return;
    }
    tls_bio_method = m;
}

/* When the core is unloaded (lua_close dlcloses C modules), the method
 * goes with it: no session of this process can use it any more. */
__attribute__((destructor)) static void tls_bio_unload(void) {
    if (tls_bio_method) BIO_meth_free(tls_bio_method);
    tls_bio_method = NULL;
}

/* OpenSSL reports a failure on the thread's error queue, and SSL_get_error
 * reads a stale entry there as the failure of the call at hand: it must be
 * empty before each call. Peeking is much cheaper than clearing. */
static void tls_err_reset(void) {
    if (ERR_peek_error() != 0) ERR_clear_error();
}

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
    /* (no SSL_MODE_RELEASE_BUFFERS: giving the record buffers back after
     * each record and taking them again cost about a tenth of what TLS adds
     * to a lock cycle, counted by callgrind; kept, they are some 34 KB per
     * connection) */
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
    pthread_once(&tls_bio_once, tls_bio_make);
    if (tls_bio_method == NULL) goto nomem;
    s->ssl = SSL_new(x->ssl);
    if (s->ssl == NULL) goto nomem;
    {
        BIO *b = BIO_new(tls_bio_method);
        if (b == NULL) goto nomem;
        BIO_set_data(b, s);
        SSL_set_bio(s->ssl, b, b);   /* (one BIO both ways; the SSL owns it) */
    }
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
        if (s->ssl) SSL_free(s->ssl);
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
    free(s->keep);
    free(s->out);
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
    tls_err_reset();
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
        tls_err_reset();
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
    *p = s->out + s->out_off;
    return s->out_len - s->out_off;
}

#define TLS_OUT_KEEP 65536   /* the out buffer kept between sends */

void tls_sess_out_sent(tls_sess *s, size_t n) {
    s->out_off += n;
    if (s->out_off < s->out_len) return;
    s->out_off = s->out_len = 0;
    if (s->out_cap > TLS_OUT_KEEP) {   /* (after a big request) */
        free(s->out);
        s->out = NULL;
        s->out_cap = 0;
    }
}

size_t tls_sess_pending(const tls_sess *s) {
    return s->out_len - s->out_off;
}

/* Room for n bytes in keep; 0, or -1 when out of memory. */
static int tls_keep_reserve(tls_sess *s, size_t n) {
    char *q;
    if (n <= s->keep_cap) return 0;
    q = malloc(n);
    if (q == NULL) return -1;
    if (s->in_len > 0) memcpy(q, s->in, s->in_len);   /* (in may point into keep) */
    free(s->keep);
    s->keep = q;
    s->keep_cap = n;
    s->in = q;
    return 0;
}

int tls_sess_feed(tls_sess *s, const void *p, size_t n) {
    tls_err_reset();
    if (n == 0) return 0;
    if (s->in_len == 0) {
        s->in = p;   /* borrowed until tls_sess_keep_rest */
        s->in_len = n;
        return 0;
    }
    /* a rest from before comes first */
    if (tls_keep_reserve(s, s->in_len + n) != 0) goto nomem;
    if (s->in != s->keep) memmove(s->keep, s->in, s->in_len);
    memcpy(s->keep + s->in_len, p, n);
    s->in = s->keep;
    s->in_len += n;
    return 0;
nomem:
    snprintf(s->err, sizeof s->err, "out of memory");
    return -1;
}

int tls_sess_keep_rest(tls_sess *s) {
    if (s->in_len == 0 || s->in == s->keep) return 0;
    if (s->in_len > s->keep_cap) {
        const char *in = s->in;
        char *q = malloc(s->in_len);
        if (q == NULL) {
            snprintf(s->err, sizeof s->err, "out of memory");
            return -1;
        }
        free(s->keep);
        s->keep = q;
        s->keep_cap = s->in_len;
        s->in = in;
    }
    memmove(s->keep, s->in, s->in_len);
    s->in = s->keep;
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
    return s->in_len == 0 && SSL_pending(s->ssl) == 0;
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
int tls_sess_keep_rest(tls_sess *s) { (void)s; return 0; }
ssize_t tls_sess_read(tls_sess *s, void *buf, size_t cap) { (void)s; (void)buf; (void)cap; return -1; }
int tls_sess_drained(const tls_sess *s) { (void)s; return 1; }
int tls_sess_closed(const tls_sess *s) { (void)s; return 0; }
const char *tls_sess_error(const tls_sess *s) { (void)s; return "this build has no TLS"; }

#endif
