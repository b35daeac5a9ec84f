#ifndef HERALD_COPENSSL_SHIM_H
#define HERALD_COPENSSL_SHIM_H
#include <openssl/ssl.h>
#include <openssl/pkcs12.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/rand.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/bn.h>
#include <openssl/rsa.h>
#include <openssl/sha.h>
#include <openssl/hmac.h>
#include <openssl/pkcs12.h>
#include <openssl/provider.h>

/* Macros Swift cannot call. */
static inline long herald_ssl_set_tlsext_host_name(SSL *ssl, const char *name) {
    return SSL_set_tlsext_host_name(ssl, name);
}
static inline long herald_ssl_ctx_set_min_proto_version(SSL_CTX *ctx, int version) {
    return SSL_CTX_set_min_proto_version(ctx, version);
}
static inline int herald_tls1_2_version(void) { return TLS1_2_VERSION; }
static inline int herald_evp_pkey_ec(void) { return EVP_PKEY_EC; }
static inline int herald_evp_pkey_rsa(void) { return EVP_PKEY_RSA; }
static inline long herald_ssl_ctx_set_mode(SSL_CTX *ctx, long mode) { return SSL_CTX_set_mode(ctx, mode); }
static inline long herald_ssl_mode_partial_write(void) {
    return SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS;
}
static inline long herald_ssl_ctx_set_client_session_cache(SSL_CTX *ctx) {
    return SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT);
}
static inline long herald_bio_mem_data(BIO *bio, char **data) { return BIO_get_mem_data(bio, data); }
static inline int herald_tlsext_err_ok(void) { return SSL_TLSEXT_ERR_OK; }
static inline int herald_tlsext_err_alert_fatal(void) { return SSL_TLSEXT_ERR_ALERT_FATAL; }
static inline int herald_ssl_error_want_read(void) { return SSL_ERROR_WANT_READ; }
static inline int herald_ssl_error_want_write(void) { return SSL_ERROR_WANT_WRITE; }
static inline int herald_ssl_error_zero_return(void) { return SSL_ERROR_ZERO_RETURN; }
/* AES-256-GCM control codes (macros aliasing other macros). */
static inline int herald_evp_ctrl_gcm_get_tag(void) { return EVP_CTRL_GCM_GET_TAG; }
static inline int herald_evp_ctrl_gcm_set_tag(void) { return EVP_CTRL_GCM_SET_TAG; }
/* A certificate's subjectAltName entries (the sk_GENERAL_NAME_* macros). */
static inline int herald_general_names_count(const GENERAL_NAMES *names) { return sk_GENERAL_NAME_num(names); }
static inline const GENERAL_NAME *herald_general_names_value(const GENERAL_NAMES *names, int index) {
    return sk_GENERAL_NAME_value(names, index);
}
/* The certificates a PKCS#12 file carries beside its own (sk_X509_pop_free). */
static inline void herald_x509_stack_free(STACK_OF(X509) *stack) { sk_X509_pop_free(stack, X509_free); }
#endif
