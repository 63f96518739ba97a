/* test_state_snapshot.c — sealed snapshots (src/state/snapshot.c) on
 * stories260K, below the server: an exact blob restores the same tokens,
 * history and raw K/V bytes; a learned one restores with its codec; every
 * header byte and a stride of the ciphertext and the whole tag, flipped, and
 * every truncation are ZL_SNAP_INVALID and leave the sequence empty; a wrong
 * server key or passphrase is INVALID; another model's fingerprint MODEL;
 * a learned blob without its codec (or with another codec) CODEC; another
 * tenant TENANT under the server key but not under a passphrase; exporting
 * with no key and no passphrase NEED_KEY; two exports of one state differ
 * (fresh nonce). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "codec/fingerprint.h"
#include "state/snapshot.h"
#include "zerolayer.h"

#define MODEL ZL_ROOT "/models/stories260K.gguf"
#define N_TOK 48

static zl_llm *g_llm;
static zl_seq *g_seq;
static uint8_t g_fp[32], g_key[32], g_tenant[32], g_other[32];

static zl_seq *fresh(void) {
    zl_seq_opts so = {256, ZL_KV_F16, zl_sampling_defaults()};
    zl_seq *s = NULL;
    cr_assert_eq(zl_seq_new(&s, g_llm, &so, NULL), 0);
    return s;
}

static void setup(void) {
    zl_llm_opts lo = {.n_threads = 1};
    cr_assert_eq(zl_llm_open(&g_llm, MODEL, &lo, NULL), 0);
    g_seq = fresh();
    int32_t ids[N_TOK];
    for (int i = 0; i < N_TOK; i++) ids[i] = 1 + (i * 37) % 400;
    cr_assert_eq(zl_seq_eval(g_seq, ids, N_TOK, 64, NULL, NULL), 0);
    zl_err err = {0};
    cr_assert_eq(zl_fingerprint_llm(g_llm, g_fp, &err), 0, "%s", err.msg);
    for (int i = 0; i < 32; i++) g_key[i] = (uint8_t)(7 * i + 1), g_tenant[i] = (uint8_t)i, g_other[i] = (uint8_t)(i + 1);
}

static void teardown(void) {
    zl_seq_free(g_seq);
    zl_llm_close(g_llm);
}

TestSuite(snapshot, .init = setup, .fini = teardown);

static uint8_t *seal(const zl_codec *c, const char *pass, size_t *len) {
    zl_snap_export_opts eo = {{g_key, pass}, g_fp, c, g_tenant, "hello history", 13, 1u << 10};
    uint8_t *blob = NULL;
    zl_err err = {0};
    cr_assert_eq(zl_snap_export(g_seq, &eo, &blob, len, &err), ZL_SNAP_OK, "%s", err.msg);
    return blob;
}

/* Import blob into a fresh sequence; the result, and the sequence's tokens
 * afterwards in *n_after. */
static zl_snap_result load(const uint8_t *blob, size_t len, const uint8_t *key, const char *pass, const uint8_t *fp,
                           const zl_codec *c, const uint8_t *tenant, int *n_after) {
    zl_seq *q = fresh();
    zl_snap_import_opts io = {{key, pass}, fp, c, tenant};
    zl_snap_info info = {0};
    zl_err err = {0};
    zl_snap_result r = zl_snap_import(q, blob, len, &io, &info, &err);
    if (r == ZL_SNAP_OK) cr_expect(info.history && !strcmp(info.history, "hello history"));
    else cr_expect(err.msg[0], "a refusal says why");
    free(info.history);
    *n_after = zl_seq_n_past(q);
    zl_seq_free(q);
    return r;
}

Test(snapshot, exact_restores_tokens_history_and_rows) {
    size_t len;
    uint8_t *blob = seal(NULL, NULL, &len);
    zl_seq *q = fresh();
    zl_snap_import_opts io = {{g_key, NULL}, g_fp, NULL, g_tenant};
    zl_snap_info info = {0};
    zl_err err = {0};
    cr_assert_eq(zl_snap_import(q, blob, len, &io, &info, &err), ZL_SNAP_OK, "%s", err.msg);
    cr_expect_eq(info.n_tokens, N_TOK);
    cr_expect(!info.learned && !info.passphrase);
    int na, nb;
    const int32_t *ta = zl_seq_tokens(g_seq, &na), *tb = zl_seq_tokens(q, &nb);
    cr_assert_eq(na, nb);
    cr_expect_eq(memcmp(ta, tb, (size_t)na * sizeof *ta), 0);
    zl_kv_shape sh = zl_llm_kv_shape(g_llm);
    size_t row = (size_t)sh.n_kv_heads * sh.head_dim * 2; /* f16 */
    uint8_t *a = malloc(row * N_TOK), *b = malloc(row * N_TOK);
    for (int l = 0; l < sh.n_layers; l++)
        for (int v = 0; v < 2; v++) {
            cr_assert_eq(zl_seq_kv_read_raw(g_seq, l, v, 0, N_TOK, a, NULL), 0);
            cr_assert_eq(zl_seq_kv_read_raw(q, l, v, 0, N_TOK, b, NULL), 0);
            cr_expect_eq(memcmp(a, b, row * N_TOK), 0, "layer %d %s differs", l, v ? "V" : "K");
        }
    free(a);
    free(b);
    free(info.history);
    zl_seq_free(q);
    size_t len2;
    uint8_t *again = seal(NULL, NULL, &len2);
    cr_expect(len2 == len && memcmp(again, blob, len), "two exports of one state are sealed under fresh nonces");
    free(again);
    free(blob);
}

Test(snapshot, any_altered_byte_or_truncation_loads_nothing) {
    size_t len;
    uint8_t *blob = seal(NULL, NULL, &len);
    cr_assert_gt(len, (size_t)ZL_SNAP_HEADER + ZL_SNAP_TAG);
    int n = -1, tried = 0;
    for (size_t i = 0; i < len; i++) {
        int in_header = i < ZL_SNAP_HEADER, in_tag = i >= len - ZL_SNAP_TAG;
        if (!in_header && !in_tag && i % 61) continue;
        blob[i] ^= 0x10;
        zl_snap_result r = load(blob, len, g_key, NULL, g_fp, NULL, g_tenant, &n);
        blob[i] ^= 0x10;
        /* a header byte may name another model or codec first: those are refusals too */
        cr_expect(r != ZL_SNAP_OK, "byte %zu of %zu flipped was accepted", i, len);
        if (!in_header) cr_expect_eq(r, ZL_SNAP_INVALID, "byte %zu: %d", i, r);
        cr_expect_eq(n, 0, "byte %zu flipped: the sequence holds %d tokens", i, n);
        tried++;
    }
    cr_expect_gt(tried, ZL_SNAP_HEADER + ZL_SNAP_TAG);
    for (size_t cut = 0; cut < len; cut += cut < ZL_SNAP_HEADER + 8 ? 1 : 97) {
        cr_expect_eq(load(blob, cut, g_key, NULL, g_fp, NULL, g_tenant, &n), ZL_SNAP_INVALID, "cut at %zu", cut);
        cr_expect_eq(n, 0);
    }
    cr_expect_eq(load(blob, len, g_key, NULL, g_fp, NULL, g_tenant, &n), ZL_SNAP_OK, "the unaltered blob loads");
    cr_expect_eq(n, N_TOK);
    free(blob);
}

Test(snapshot, keys_models_tenants_and_codecs_are_checked) {
    size_t len;
    uint8_t *blob = seal(NULL, NULL, &len);
    uint8_t wrong[32], fp2[32];
    memcpy(wrong, g_key, 32);
    wrong[5] ^= 1;
    memcpy(fp2, g_fp, 32);
    fp2[0] ^= 1;
    int n;
    cr_expect_eq(load(blob, len, wrong, NULL, g_fp, NULL, g_tenant, &n), ZL_SNAP_INVALID, "a wrong server key");
    cr_expect_eq(n, 0);
    cr_expect_eq(load(blob, len, NULL, NULL, g_fp, NULL, g_tenant, &n), ZL_SNAP_INVALID, "a server without the key");
    cr_expect_eq(load(blob, len, g_key, NULL, fp2, NULL, g_tenant, &n), ZL_SNAP_MODEL, "another model");
    cr_expect_eq(n, 0);
    cr_expect_eq(load(blob, len, g_key, NULL, g_fp, NULL, g_other, &n), ZL_SNAP_TENANT, "another tenant");
    cr_expect_eq(n, 0);
    free(blob);

    /* a passphrase: the explicit hand-off to another tenant */
    blob = seal(NULL, "correct horse", &len);
    cr_expect_eq(load(blob, len, g_key, "wrong horse", g_fp, NULL, g_other, &n), ZL_SNAP_INVALID, "a wrong passphrase");
    cr_expect_eq(n, 0);
    cr_expect_eq(load(blob, len, g_key, NULL, g_fp, NULL, g_other, &n), ZL_SNAP_INVALID,
                 "a passphrase blob opened with the server key");
    cr_expect_eq(load(blob, len, NULL, "correct horse", g_fp, NULL, g_other, &n), ZL_SNAP_OK,
                 "another tenant with the passphrase");
    cr_expect_eq(n, N_TOK);
    free(blob);

    zl_snap_export_opts none = {{NULL, NULL}, g_fp, NULL, g_tenant, NULL, 0, 0};
    uint8_t *b2 = NULL;
    size_t l2 = 0;
    zl_err err = {0};
    cr_expect_eq(zl_snap_export(g_seq, &none, &b2, &l2, &err), ZL_SNAP_NEED_KEY, "export with neither key");
    free(b2);
}

Test(snapshot, learned_blobs_need_their_codec) {
    zl_codec *c = NULL, *c2 = NULL;
    zl_err err = {0};
    cr_assert_eq(zl_codec_fit(&c, g_seq, g_fp, 0.25, &err), 0, "%s", err.msg);
    cr_assert_eq(zl_codec_fit(&c2, g_seq, g_fp, 0.125, &err), 0, "%s", err.msg);
    size_t len, exact_len;
    uint8_t *blob = seal(c, NULL, &len), *exact = seal(NULL, NULL, &exact_len);
    cr_expect_lt(len, exact_len, "the learned blob is smaller (%zu vs %zu)", len, exact_len);
    int n;
    cr_expect_eq(load(blob, len, g_key, NULL, g_fp, c, g_tenant, &n), ZL_SNAP_OK);
    cr_expect_eq(n, N_TOK);
    cr_expect_eq(load(blob, len, g_key, NULL, g_fp, NULL, g_tenant, &n), ZL_SNAP_CODEC, "no codec");
    cr_expect_eq(n, 0);
    cr_expect_eq(load(blob, len, g_key, NULL, g_fp, c2, g_tenant, &n), ZL_SNAP_CODEC, "another codec");
    cr_expect_eq(n, 0);
    blob[len / 2] ^= 4;
    cr_expect_eq(load(blob, len, g_key, NULL, g_fp, c, g_tenant, &n), ZL_SNAP_INVALID, "an altered code byte");
    cr_expect_eq(n, 0);
    free(blob);
    free(exact);
    zl_codec_free(c);
    zl_codec_free(c2);
}

/* The scrypt parameters of a passphrase blob are the client's: a header asking
 * for more memory or work than the bounds is refused before any key is derived
 * (a 178-byte fuzz input with N 2^16, r 16, p 6 cost 5 s of scrypt), and one
 * within them reaches authentication. */
Test(snapshot, scrypt_cost_is_bounded_before_deriving) {
    size_t len;
    uint8_t *blob = seal(NULL, "correct horse", &len);
    struct { uint64_t n; uint32_t r, p; int bounded; } cases[] = {
        {1u << 16, 16, 6, 0},  /* 128 MiB, 24x the work */
        {1u << 15, 8, 5, 0},   /* the memory, 5x the work */
        {1u << 17, 8, 1, 0},   /* 4x the memory */
        {1u << 16, 8, 1, 1},   /* 2x: within both */
        {1u << 15, 8, 4, 1},   /* 4x the work */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint8_t *b = malloc(len);
        cr_assert(b);
        memcpy(b, blob, len);
        memcpy(b + 16, &cases[i].n, 8);
        memcpy(b + 24, &cases[i].r, 4);
        memcpy(b + 28, &cases[i].p, 4);
        zl_seq *q = fresh();
        zl_snap_import_opts io = {{NULL, "correct horse"}, g_fp, NULL, g_tenant};
        zl_snap_info info = {0};
        zl_err err = {0};
        cr_expect_eq(zl_snap_import(q, b, len, &io, &info, &err), ZL_SNAP_INVALID, "case %zu", i);
        int out = strstr(err.msg, "scrypt parameters out of bounds") != NULL;
        cr_expect_eq(out, !cases[i].bounded, "case %zu: N %llu r %u p %u: %s", i, (unsigned long long)cases[i].n,
                     cases[i].r, cases[i].p, err.msg);
        cr_expect_eq(zl_seq_n_past(q), 0);
        free(info.history);
        zl_seq_free(q);
        free(b);
    }
    free(blob);
}
