/* fingerprint.c — sha256 (OpenSSL EVP) of a model's identity bytes and of
 * buffers.  Owns no state; never reads files itself (the mapping is hashed in
 * place through zl_llm_identity). */
#include <openssl/evp.h>
#include <stdio.h>

#include "../base/err.h"
#include "fingerprint.h"

typedef struct { EVP_MD_CTX *md; int failed; } hash_ctx;

static void feed(void *ctx, const void *p, size_t n) {
    hash_ctx *h = ctx;
    if (!h->failed && n && EVP_DigestUpdate(h->md, p, n) != 1) h->failed = 1;
}

int zl_fingerprint_llm(const zl_llm *llm, uint8_t out[32], zl_err *err) {
    hash_ctx h = {EVP_MD_CTX_new(), 0};
    unsigned len = 0;
    if (!h.md || EVP_DigestInit_ex(h.md, EVP_sha256(), NULL) != 1) h.failed = 1;
    if (!h.failed) zl_llm_identity(llm, feed, &h);
    if (!h.failed && (EVP_DigestFinal_ex(h.md, out, &len) != 1 || len != 32)) h.failed = 1;
    EVP_MD_CTX_free(h.md);
    return h.failed ? zl_errf(err, ZL_ENOMEM, "sha256 of the model failed (OpenSSL)") : 0;
}

int zl_fingerprint_bytes(const void *p, size_t n, uint8_t out[32], zl_err *err) {
    unsigned len = 0;
    if (EVP_Digest(p, n, out, &len, EVP_sha256(), NULL) != 1 || len != 32)
        return zl_errf(err, ZL_ENOMEM, "sha256 failed (OpenSSL)");
    return 0;
}

void zl_fingerprint_hex(const uint8_t fp[32], char out[65]) {
    for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", fp[i]);
}
