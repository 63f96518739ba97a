/* fuzz_snapshot.c — libFuzzer target: loading session snapshots
 * (zl_snap_import) into a stories260K sequence.  The first byte picks the
 * form: bit 0 clear, the rest is a blob as a client would send it (almost
 * always refused at the header or by authentication); bit 0 set, the rest is
 * a payload that the harness seals itself under the harness key (AES-256-GCM,
 * header token count from the payload's first word, bit 1: learned codec) so
 * the fuzzer reaches the payload parser behind authentication.  Every input
 * either loads exactly the tokens the header names or loads nothing. */
#include <openssl/evp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "codec/fingerprint.h"
#include "state/snapshot.h"
#include "zerolayer.h"

#ifndef ZL_ROOT
#define ZL_ROOT "."
#endif

static zl_llm *llm;
static zl_seq *seq;
static zl_codec *codec;
static uint8_t fp[32], key[32], tenant[32];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    zl_llm_opts lo = {.n_threads = 1};
    zl_seq_opts so = {64, ZL_KV_F16, zl_sampling_defaults()};
    if (zl_llm_open(&llm, ZL_ROOT "/models/stories260K.gguf", &lo, NULL) || zl_seq_new(&seq, llm, &so, NULL) ||
        zl_fingerprint_llm(llm, fp, NULL))
        abort();
    /* a codec of the model's shape: identity directions, unit variances */
    zl_kv_shape sh = zl_llm_kv_shape(llm);
    if (zl_codec_new(&codec, sh.n_layers, sh.n_kv_heads, sh.head_dim, NULL)) abort();
    memcpy(codec->fingerprint, fp, 32);
    codec->n_sink = ZL_CODEC_SINKS;
    for (int t = 0; t < sh.n_layers * sh.n_kv_heads * 2; t++)
        for (int k = 0; k < sh.head_dim; k++) {
            codec->t[t].basis[k * sh.head_dim + k] = 1;
            codec->t[t].var[k] = 1;
            for (int b = 0; b <= ZL_CODEC_MAX_BITS; b++) {
                if (b) codec->t[t].step[k * ZL_CODEC_MAX_BITS + b - 1] = 4.0f / (float)(1 << b);
                codec->t[t].mse[k * (ZL_CODEC_MAX_BITS + 1) + b] = 1.0f / (float)(1 << (2 * b));
            }
        }
    if (zl_codec_set_ratio(codec, 0.25, NULL)) abort();
    for (int i = 0; i < 32; i++) key[i] = (uint8_t)(i * 7 + 1), tenant[i] = (uint8_t)i;
    return 0;
}

/* The sealing of snapshot.c, redone here with the harness key. */
static uint8_t *seal(const uint8_t *payload, size_t n, int learned, size_t *len) {
    uint8_t *b = calloc(1, ZL_SNAP_HEADER + n + ZL_SNAP_TAG);
    memcpy(b, "ZLSNAP1", 8);
    b[8] = 1;
    b[13] = (uint8_t)learned;
    memcpy(b + 48, fp, 32);
    if (learned) memcpy(b + 80, codec->id, 32);
    memcpy(b + 112, tenant, 32);
    if (n >= 4) memcpy(b + 144, payload, 4);
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    int l = 0;
    EVP_EncryptInit_ex(x, EVP_aes_256_gcm(), NULL, NULL, NULL);
    EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_SET_IVLEN, 12, NULL);
    EVP_EncryptInit_ex(x, NULL, NULL, key, b + 148);
    EVP_EncryptUpdate(x, NULL, &l, b, ZL_SNAP_HEADER);
    if (n) EVP_EncryptUpdate(x, b + ZL_SNAP_HEADER, &l, payload, (int)n);
    EVP_EncryptFinal_ex(x, b + ZL_SNAP_HEADER + n, &l);
    EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_GET_TAG, ZL_SNAP_TAG, b + ZL_SNAP_HEADER + n);
    EVP_CIPHER_CTX_free(x);
    *len = ZL_SNAP_HEADER + n + ZL_SNAP_TAG;
    return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!size || size > (1 << 20)) return 0;
    int form = data[0];
    uint8_t *blob = NULL;
    size_t len = size - 1;
    const uint8_t *in = data + 1;
    if (form & 1) in = blob = seal(data + 1, size - 1, (form >> 1) & 1, &len);
    zl_snap_import_opts io = {{key, (form & 4) ? "pw" : NULL}, fp, codec, tenant};
    zl_snap_info info;
    zl_err err = {0};
    zl_snap_result r = zl_snap_import(seq, in, len, &io, &info, &err);
    if (r == ZL_SNAP_OK) {
        if (zl_seq_n_past(seq) != info.n_tokens) abort();
    } else if (zl_seq_n_past(seq) != 0 || !err.msg[0]) {
        abort(); /* a refusal loads nothing and says why */
    }
    free(info.history);
    zl_seq_truncate(seq, 0);
    free(blob);
    return 0;
}
