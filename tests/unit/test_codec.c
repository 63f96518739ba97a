/* test_codec.c — the learned KV state codec (src/codec) and the engine's
 * state access (zl_seq_kv_read / zl_seq_kv_write / zl_seq_adopt) on
 * stories260K: pre-RoPE keys rotate back to the cached ones; rows written
 * back unchanged continue with the same greedy tokens; a fitted codec meets
 * every ratio's byte budget; decoding matches an independent double-precision
 * transcription of the scheme; distortion falls as the ratio grows; the .zlc
 * file round-trips, is bound to its model's fingerprint, and every malformed
 * variant is refused with a message naming what is wrong; additive fusion
 * merges the rows older than its window and keeps the rest. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "codec/fingerprint.h"
#include "codec/fusion.h"
#include "state/coded.h"
#include "zerolayer.h"

#define MODEL ZL_ROOT "/models/stories260K.gguf"
#define MODEL_F16 ZL_ROOT "/tests/fixtures/models/stories260K-F16.gguf"
#define N_TRAIN 320

static zl_llm *g_llm;
static zl_seq *g_seq;   /* holds N_TRAIN greedy tokens of the model's own text */
static int32_t g_ids[N_TRAIN];
static uint8_t g_fp[32];

static int argmax(const float *l, int n) {
    int b = 0;
    for (int i = 1; i < n; i++) if (l[i] > l[b]) b = i;
    return b;
}

static void setup(void) {
    zl_llm_opts lo = {.n_threads = 1};
    cr_assert_eq(zl_llm_open(&g_llm, MODEL, &lo, NULL), 0);
    zl_seq_opts so = {512, ZL_KV_F16, zl_sampling_defaults()};
    cr_assert_eq(zl_seq_new(&g_seq, g_llm, &so, NULL), 0);
    int32_t *p;
    size_t n;
    cr_assert_eq(zl_llm_tokenize(g_llm, "Once upon a time", 16, 1, 0, &p, &n, NULL), 0);
    memcpy(g_ids, p, n * sizeof *p);
    cr_assert_eq(zl_seq_eval(g_seq, p, (int)n, 64, NULL, NULL), 0);
    free(p);
    for (int i = (int)n; i < N_TRAIN; i++) {
        g_ids[i] = argmax(zl_seq_logits(g_seq), zl_llm_n_vocab(g_llm));
        cr_assert_eq(zl_seq_eval(g_seq, &g_ids[i], 1, 1, NULL, NULL), 0);
    }
    zl_err err = {0};
    cr_assert_eq(zl_fingerprint_llm(g_llm, g_fp, &err), 0, "%s", err.msg);
}
static void teardown(void) {
    zl_seq_free(g_seq);
    zl_llm_close(g_llm);
}

TestSuite(codec, .init = setup, .fini = teardown);

static zl_codec *fit(double ratio) {
    zl_codec *c = NULL;
    zl_err err = {0};
    cr_assert_eq(zl_codec_fit(&c, g_seq, g_fp, ratio, &err), 0, "%s", err.msg);
    return c;
}

/* A fresh sequence fed ids[0..n). */
static zl_seq *fed(int n) {
    zl_seq_opts so = {512, ZL_KV_F16, zl_sampling_defaults()};
    zl_seq *s;
    cr_assert_eq(zl_seq_new(&s, g_llm, &so, NULL), 0);
    cr_assert_eq(zl_seq_eval(s, g_ids, n, 64, NULL, NULL), 0);
    return s;
}

Test(codec, pre_rope_keys_rotate_back_to_the_cached_ones) {
    zl_kv_shape sh = zl_llm_kv_shape(g_llm);
    int d = sh.n_kv_heads * sh.head_dim, n = 40;
    float *k = malloc(sizeof(float) * d * n), *pre = malloc(sizeof(float) * d * n), *back = malloc(sizeof(float) * d * n);
    zl_seq *s = fed(n);
    for (int l = 0; l < sh.n_layers; l++) {
        cr_assert_eq(zl_seq_kv_read(s, l, ZL_STATE_K, 0, n, k, NULL), 0);
        cr_assert_eq(zl_seq_kv_read(s, l, ZL_STATE_K_PRE_ROPE, 0, n, pre, NULL), 0);
        /* position 0 is not rotated at all */
        for (int j = 0; j < d; j++) cr_assert_float_eq(pre[j], k[j], 1e-6);
        cr_assert_eq(zl_seq_kv_write(s, l, ZL_STATE_K_PRE_ROPE, 0, n, pre, NULL), 0);
        cr_assert_eq(zl_seq_kv_read(s, l, ZL_STATE_K, 0, n, back, NULL), 0);
        for (int i = 0; i < d * n; i++)
            cr_assert(fabsf(back[i] - k[i]) <= 2e-3f * (1 + fabsf(k[i])), "layer %d elt %d: %g vs %g", l, i, back[i], k[i]);
    }
    zl_err err = {0};
    cr_assert_eq(zl_seq_kv_read(s, 0, ZL_STATE_V, n - 1, 2, k, &err), ZL_ERANGE);
    cr_assert(strstr(err.msg, "not all cached"), "%s", err.msg);
    cr_assert_eq(zl_seq_kv_read(s, sh.n_layers, ZL_STATE_V, 0, 1, k, &err), ZL_ERANGE);
    zl_seq_free(s);
    free(k); free(pre); free(back);
}

Test(codec, adopted_rows_continue_with_the_same_greedy_tokens) {
    zl_kv_shape sh = zl_llm_kv_shape(g_llm);
    int d = sh.n_kv_heads * sh.head_dim, n = 100, nv = zl_llm_n_vocab(g_llm);
    zl_seq *a = fed(n), *b;
    zl_seq_opts so = {512, ZL_KV_F16, zl_sampling_defaults()};
    cr_assert_eq(zl_seq_new(&b, g_llm, &so, NULL), 0);
    cr_assert_eq(zl_seq_adopt(b, g_ids, n, NULL), 0);
    cr_assert_eq(zl_seq_n_past(b), n);
    cr_assert_null(zl_seq_logits(b));
    float *rows = malloc(sizeof(float) * d * n);
    for (int l = 0; l < sh.n_layers; l++)
        for (int part = 0; part < 2; part++) {
            zl_state_part p = part ? ZL_STATE_V : ZL_STATE_K;
            cr_assert_eq(zl_seq_kv_read(a, l, p, 0, n, rows, NULL), 0);
            cr_assert_eq(zl_seq_kv_write(b, l, p, 0, n, rows, NULL), 0);
        }
    /* both feed the same next token; every later greedy token must agree */
    int32_t ta = g_ids[n], tb = g_ids[n];
    for (int i = 0; i < 40; i++) {
        cr_assert_eq(zl_seq_eval(a, &ta, 1, 1, NULL, NULL), 0);
        cr_assert_eq(zl_seq_eval(b, &tb, 1, 1, NULL, NULL), 0);
        ta = argmax(zl_seq_logits(a), nv);
        tb = argmax(zl_seq_logits(b), nv);
        cr_assert_eq(ta, tb, "step %d", i);
        cr_assert_eq(memcmp(zl_seq_logits(a), zl_seq_logits(b), sizeof(float) * nv), 0, "step %d", i);
    }
    free(rows);
    zl_seq_free(a);
    zl_seq_free(b);
}

Test(codec, every_ratio_meets_its_byte_budget) {
    zl_codec *c = fit(0.0625);
    const double ratios[] = {0.5, 0.25, 0.125, 0.0625};
    for (int r = 0; r < 4; r++) {
        cr_assert_eq(zl_codec_set_ratio(c, ratios[r], NULL), 0);
        long budget = (long)(ratios[r] * 16 * c->head_dim);
        long total = 0;
        for (int l = 0; l < c->n_layers; l++)
            for (int h = 0; h < c->n_kv_heads; h++)
                for (int part = 0; part < 2; part++) {
                    const zl_codec_table *t = zl_codec_tab(c, l, h, part);
                    long spent = 0;
                    for (int k = 0; k < c->head_dim; k++) {
                        cr_assert_leq(t->bits[k], ZL_CODEC_MAX_BITS);
                        spent += t->bits[k];
                        /* bits follow the variance: a weaker direction never gets more bits than the one
                           before it by more than the quantiser's shape can explain (1 bit) */
                        if (k) cr_assert_leq(t->bits[k], t->bits[k - 1] + 1, "table %d/%d/%d comp %d", l, h, part, k);
                    }
                    cr_assert_leq(spent, budget);
                    cr_assert_geq(spent, budget - 1, "the budget is spent");
                    total += spent;
                }
        cr_assert_eq(total, c->bits_per_token);
        cr_assert_leq(zl_codec_token_bytes(c), (size_t)(ratios[r] * zl_codec_f16_token_bytes(c)));
    }
    zl_err err = {0};
    cr_assert_eq(zl_codec_set_ratio(c, 0, &err), ZL_EINVAL);
    cr_assert_eq(zl_codec_set_ratio(c, 1.0 / 1024, &err), ZL_EINVAL);
    cr_assert(strstr(err.msg, "leaves no bit"), "%s", err.msg);
    zl_codec_free(c);
}

/* The scheme transcribed independently, in double: project on the basis,
 * quantise with the midrise quantiser of the table's step, rebuild. */
static void reference_row(const zl_codec_table *t, int hd, const float *x, double *out) {
    for (int j = 0; j < hd; j++) out[j] = t->mean[j];
    for (int k = 0; k < hd; k++) {
        int b = t->bits[k];
        if (!b) continue;
        double y = 0, step = t->step[k * ZL_CODEC_MAX_BITS + b - 1], L = (double)(1 << b);
        for (int j = 0; j < hd; j++) y += (double)t->basis[k * hd + j] * (x[j] - t->mean[j]);
        double q = fmin(fmax(floor(y / step) + L / 2, 0), L - 1), v = (q - L / 2 + 0.5) * step;
        for (int j = 0; j < hd; j++) out[j] += v * t->basis[k * hd + j];
    }
}

static double code_mse(zl_codec *c, double ratio, int check_reference) {
    cr_assert_eq(zl_codec_set_ratio(c, ratio, NULL), 0);
    zl_kv_shape sh = zl_llm_kv_shape(g_llm);
    int n = 64, pos = 200, d = sh.n_kv_heads * sh.head_dim, hd = sh.head_dim;
    zl_seq *s = fed(pos + n);
    float *before = malloc(sizeof(float) * d * n * sh.n_layers * 2), *after = malloc(sizeof(float) * d * n);
    for (int l = 0; l < sh.n_layers; l++)
        for (int part = 0; part < 2; part++)
            cr_assert_eq(zl_seq_kv_read(s, l, part ? ZL_STATE_V : ZL_STATE_K_PRE_ROPE, pos, n,
                                        before + ((size_t)l * 2 + part) * d * n, NULL), 0);
    uint8_t *code = malloc(zl_codec_token_bytes(c) * n);
    zl_err err = {0};
    cr_assert_eq(zl_codec_encode(c, s, pos, n, code, NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(zl_codec_decode(c, s, pos, n, code, &err), 0, "%s", err.msg);
    double se = 0, energy = 0;
    for (int l = 0; l < sh.n_layers; l++)
        for (int part = 0; part < 2; part++) {
            const float *b = before + ((size_t)l * 2 + part) * d * n;
            cr_assert_eq(zl_seq_kv_read(s, l, part ? ZL_STATE_V : ZL_STATE_K_PRE_ROPE, pos, n, after, NULL), 0);
            for (int i = 0; i < n; i++)
                for (int h = 0; h < sh.n_kv_heads; h++) {
                    const float *x = b + (size_t)i * d + h * hd, *y = after + (size_t)i * d + h * hd;
                    double ref[1024];
                    reference_row(zl_codec_tab(c, l, h, part), hd, x, ref);
                    for (int j = 0; j < hd; j++) {
                        if (check_reference) /* f16 storage and the RoPE round trip on top of the scheme */
                            cr_assert(fabs(y[j] - ref[j]) <= 4e-3 * (1 + fabs(ref[j])) + 1e-3,
                                      "layer %d part %d pos %d: %g vs reference %g", l, part, pos + i, y[j], ref[j]);
                        se += (y[j] - x[j]) * (y[j] - x[j]);
                        energy += (double)x[j] * x[j];
                    }
                }
        }
    free(before); free(after); free(code);
    zl_seq_free(s);
    return se / energy;
}

Test(codec, decoding_matches_the_reference_and_distortion_falls_with_the_ratio) {
    zl_codec *c = fit(0.0625);
    double e16 = code_mse(c, 0.0625, 1), e8 = code_mse(c, 0.125, 1), e4 = code_mse(c, 0.25, 0), e2 = code_mse(c, 0.5, 1);
    cr_assert(e2 < e4 && e4 < e8 && e8 < e16, "relative errors 1/2 %g, 1/4 %g, 1/8 %g, 1/16 %g", e2, e4, e8, e16);
    cr_assert_lt(e2, 1e-3, "1/2 (8 bits per value) loses %g of the energy", e2);
    cr_assert_lt(e16, 0.5);
    zl_codec_free(c);
}

Test(codec, entropy_of_the_symbols_is_at_most_the_allocation) {
    zl_codec *c = fit(0.125);
    zl_codec_hist h;
    cr_assert_eq(zl_codec_hist_new(&h, c, NULL), 0);
    uint8_t *code = malloc(zl_codec_token_bytes(c) * 200);
    cr_assert_eq(zl_codec_encode(c, g_seq, 100, 200, code, &h, NULL), 0);
    double ent = zl_codec_hist_entropy(&h, c), alloc = (double)c->bits_per_token / (zl_codec_f16_token_bytes(c) / 2);
    cr_assert(ent > 0.2 * alloc && ent <= alloc + 1e-9, "entropy %g, allocated %g", ent, alloc);
    zl_codec_hist_free(&h);
    free(code);
    zl_codec_free(c);
}

static uint8_t *serialize(const zl_codec *c, size_t *n) {
    uint8_t *b;
    cr_assert_eq(zl_codec_serialize(c, &b, n, NULL), 0);
    return b;
}

Test(codec, the_file_round_trips_and_is_bound_to_its_model) {
    zl_codec *c = fit(0.125), *d;
    size_t n;
    uint8_t *b = serialize(c, &n);
    zl_err err = {0};
    cr_assert_eq(zl_codec_parse(&d, b, n, &err), 0, "%s", err.msg);
    cr_assert_eq(memcmp(c->id, d->id, 32), 0);
    cr_assert_eq(d->bits_per_token, c->bits_per_token);
    cr_assert_eq(d->n_sink, ZL_CODEC_SINKS);
    cr_assert_eq(zl_codec_check_model(d, g_fp, zl_llm_kv_shape(g_llm), &err), 0, "%s", err.msg);
    /* the same weights in F16 are another model */
    zl_llm *other;
    zl_llm_opts lo = {.n_threads = 1};
    cr_assert_eq(zl_llm_open(&other, MODEL_F16, &lo, NULL), 0);
    uint8_t fp2[32], fp3[32];
    cr_assert_eq(zl_fingerprint_llm(other, fp2, NULL), 0);
    cr_assert_eq(zl_fingerprint_llm(g_llm, fp3, NULL), 0);
    cr_assert_eq(memcmp(g_fp, fp3, 32), 0, "a fingerprint is a pure function of the model");
    cr_assert_neq(memcmp(g_fp, fp2, 32), 0);
    cr_assert_eq(zl_codec_check_model(d, fp2, zl_llm_kv_shape(other), &err), ZL_EINVAL);
    cr_assert(strstr(err.msg, "model_mismatch"), "%s", err.msg);
    zl_kv_shape wrong = zl_llm_kv_shape(g_llm);
    wrong.n_layers++;
    cr_assert_eq(zl_codec_check_model(d, g_fp, wrong, &err), ZL_EINVAL);
    cr_assert(strstr(err.msg, "layers"), "%s", err.msg);
    zl_llm_close(other);
    /* a different ratio is a different codec id */
    cr_assert_eq(zl_codec_set_ratio(d, 0.25, NULL), 0);
    cr_assert_neq(memcmp(c->id, d->id, 32), 0);
    zl_codec_free(d);
    free(b);
    zl_codec_free(c);
}

static void expect_bad(const uint8_t *b, size_t n, const char *needle) {
    zl_codec *c = NULL;
    zl_err err = {0};
    cr_assert_neq(zl_codec_parse(&c, b, n, &err), 0, "accepted, expected '%s'", needle);
    cr_assert_null(c);
    cr_assert(strstr(err.msg, needle), "message '%s' lacks '%s'", err.msg, needle);
}

Test(codec, malformed_files_are_refused_precisely) {
    zl_codec *c = fit(0.0625);
    size_t n;
    uint8_t *good = serialize(c, &n), *b = malloc(n + 1);
    const size_t hdr = 68, hd = (size_t)c->head_dim, floats = hd * (1 + hd + 1 + 12 + 13);
#define FRESH() memcpy(b, good, n)
    FRESH(); b[0] = 'X'; expect_bad(b, n, "no ZLCODEC magic");
    expect_bad(good, 4, "no ZLCODEC magic");
    expect_bad(good, 40, "header needs");
    FRESH(); b[8] = 9; expect_bad(b, n, "version 9 is not supported");
    FRESH(); b[12] = 13; expect_bad(b, n, "13 bits at most");
    float bad = 0;
    FRESH(); memcpy(b + 48, &bad, 4); expect_bad(b, n, "ratio 0 is not in (0, 1]");
    bad = NAN;
    FRESH(); memcpy(b + 48, &bad, 4); expect_bad(b, n, "is not in (0, 1]");
    uint32_t big = 5000;
    FRESH(); memcpy(b + 52, &big, 4); expect_bad(b, n, "out of range");
    FRESH(); memcpy(b + 64, &big, 4); expect_bad(b, n, "sink positions");
    expect_bad(good, n - 1, "truncated");
    expect_bad(good, hdr + 10, "truncated");
    FRESH(); b[n] = 0; expect_bad(b, n + 1, "1 bytes after its tables");
    FRESH(); b[n - 3] ^= 1; expect_bad(b, n, "ZLCEND");
    /* table 3 (layer 1, head 0 of 4 KV heads? the index names it): a NaN mean */
    size_t t3 = hdr + 3 * (floats * 4 + hd);
    bad = NAN;
    FRESH(); memcpy(b + t3, &bad, 4); expect_bad(b, n, "not finite");
    bad = 2.0f; /* basis direction 0's first element: norm no longer 1 */
    FRESH(); memcpy(b + t3 + hd * 4, &bad, 4); expect_bad(b, n, "direction 0 has norm");
    bad = -1.0f;
    FRESH(); memcpy(b + t3 + (hd + hd * hd) * 4, &bad, 4); expect_bad(b, n, "variance 0 is negative");
    bad = 0.0f;
    FRESH(); memcpy(b + t3 + (2 * hd + hd * hd) * 4, &bad, 4); expect_bad(b, n, "quantiser step 0/1 is not positive");
    FRESH(); b[t3 + floats * 4] = 13; expect_bad(b, n, "13 bits, more than 12");
    FRESH(); memset(b + t3 + floats * 4, 12, hd); expect_bad(b, n, "more than ratio");
    /* every truncation fails cleanly */
    for (size_t k = 0; k < n; k += 97) {
        zl_codec *x = NULL;
        cr_assert_neq(zl_codec_parse(&x, good, k, NULL), 0, "length %zu accepted", k);
    }
    zl_err err = {0};
    zl_codec *x;
    cr_assert_eq(zl_codec_load(&x, "/nonexistent/c.zlc", &err), ZL_EIO);
    cr_assert(strstr(err.msg, "/nonexistent/c.zlc"), "%s", err.msg);
#undef FRESH
    free(b);
    free(good);
    zl_codec_free(c);
}

Test(codec, a_packed_state_rebuilds_the_sequence) {
    zl_codec *c = fit(0.125);
    zl_kv_shape sh = zl_llm_kv_shape(g_llm);
    int n = 150, d = sh.n_kv_heads * sh.head_dim;
    zl_seq *a = fed(n), *b;
    zl_seq_opts so = {512, ZL_KV_F16, zl_sampling_defaults()};
    cr_assert_eq(zl_seq_new(&b, g_llm, &so, NULL), 0);
    uint8_t *buf;
    size_t len;
    zl_err err = {0};
    cr_assert_eq(zl_coded_pack(c, a, &buf, &len, NULL, &err), 0, "%s", err.msg);
    size_t want = 4 + 4 * (size_t)n + (size_t)sh.n_layers * 2 * ZL_CODEC_SINKS * d * 2 +
                  (size_t)(n - ZL_CODEC_SINKS) * zl_codec_token_bytes(c);
    cr_assert_eq(len, want);
    cr_assert_eq(zl_coded_unpack(c, b, buf, len, &err), 0, "%s", err.msg);
    cr_assert_eq(zl_seq_n_past(b), n);
    int nt;
    cr_assert_eq(memcmp(zl_seq_tokens(a, &nt), zl_seq_tokens(b, &nt), 4 * (size_t)n), 0);
    /* sinks exact; the rest what coding a in place gives */
    cr_assert_eq(zl_codec_encode(c, a, ZL_CODEC_SINKS, n - ZL_CODEC_SINKS, buf + len - (size_t)(n - ZL_CODEC_SINKS) *
                                 zl_codec_token_bytes(c), NULL, NULL), 0);
    cr_assert_eq(zl_codec_decode(c, a, ZL_CODEC_SINKS, n - ZL_CODEC_SINKS, buf + len - (size_t)(n - ZL_CODEC_SINKS) *
                                 zl_codec_token_bytes(c), NULL), 0);
    float *ra = malloc(sizeof(float) * d * n), *rb = malloc(sizeof(float) * d * n);
    for (int l = 0; l < sh.n_layers; l++)
        for (int p = 0; p < 2; p++) {
            zl_state_part part = p ? ZL_STATE_V : ZL_STATE_K;
            cr_assert_eq(zl_seq_kv_read(a, l, part, 0, n, ra, NULL), 0);
            cr_assert_eq(zl_seq_kv_read(b, l, part, 0, n, rb, NULL), 0);
            cr_assert_eq(memcmp(ra, rb, sizeof(float) * d * n), 0, "layer %d part %d", l, p);
        }
    /* a damaged length is refused and leaves nothing */
    cr_assert_neq(zl_coded_unpack(c, b, buf, len - 1, &err), 0);
    cr_assert(strstr(err.msg, "does not match"), "%s", err.msg);
    cr_assert_eq(zl_seq_n_past(b), 0);
    free(ra); free(rb); free(buf);
    zl_seq_free(a);
    zl_seq_free(b);
    zl_codec_free(c);
}

/* state_fusion_mode additive (codec/fusion.c): rows older than the window are
 * merged `merge` to one, weights decaying towards the older; the sinks and the
 * window are kept as they were (moved to their new slots); the shortened
 * sequence goes on evaluating; coding and snapshots refuse it. */
Test(codec, additive_fusion_merges_the_old_rows_and_keeps_the_window) {
    zl_kv_shape sh = zl_llm_kv_shape(g_llm);
    int n = 100, d = sh.n_kv_heads * sh.head_dim;
    zl_seq *a = fed(n), *ref = fed(n);
    zl_fusion f = zl_fusion_defaults(ZL_FUSION_ADDITIVE);
    cr_assert_eq(f.merge, 4);
    cr_assert_eq(f.window, 3);
    cr_assert_float_eq(f.decay, 0.7f, 1e-6);
    int groups = (n - ZL_CODEC_SINKS - 3 * 4) / 4, rows = 0;
    zl_err err = {0};
    cr_assert_eq(zl_fusion_apply(&f, a, NULL, &rows, &err), 0, "%s", err.msg);
    int kept = n - groups * 4 + groups;
    cr_assert_eq(rows, groups);
    cr_assert_eq(zl_seq_n_cached(a), kept);
    cr_assert_eq(zl_seq_n_past(a), n, "the tokens stay");
    cr_assert_eq(f.merged, groups);
    float w[4], sum = 0;
    for (int i = 0; i < 4; i++) sum += w[i] = powf(0.7f, (float)(3 - i));
    float *ra = malloc(sizeof(float) * d * n), *rb = malloc(sizeof(float) * d * n);
    for (int l = 0; l < sh.n_layers; l++)
        for (int p = 0; p < 2; p++) {
            zl_state_part part = p ? ZL_STATE_V : ZL_STATE_K_PRE_ROPE;
            cr_assert_eq(zl_seq_kv_read(ref, l, part, 0, n, ra, NULL), 0);
            cr_assert_eq(zl_seq_kv_read(a, l, part, 0, kept, rb, NULL), 0);
            for (int j = 0; j < d; j++) {
                for (int s = 0; s < ZL_CODEC_SINKS; s++)
                    cr_assert_float_eq(rb[s * d + j], ra[s * d + j], 1e-3, "sink %d", s);
                for (int g = 0; g < groups; g++) { /* a merged row: the weighted mean of its chunk */
                    float m = 0;
                    for (int i = 0; i < 4; i++) m += w[i] / sum * ra[(ZL_CODEC_SINKS + 4 * g + i) * d + j];
                    cr_assert_float_eq(rb[(ZL_CODEC_SINKS + g) * d + j], m, 2e-2 + 2e-3 * fabsf(m),
                                       "layer %d part %d group %d", l, p, g);
                }
                for (int t = ZL_CODEC_SINKS + 4 * groups; t < n; t++) /* the window, moved down */
                    cr_assert_float_eq(rb[(t - 3 * groups) * d + j], ra[t * d + j], 2e-2 + 2e-3 * fabsf(ra[t * d + j]),
                                       "layer %d part %d position %d", l, p, t);
            }
        }
    /* nothing more to merge until a whole chunk leaves the window; then it goes on */
    cr_assert_eq(zl_fusion_apply(&f, a, NULL, &rows, &err), 0);
    cr_assert_eq(rows, 0);
    int32_t more[8];
    memcpy(more, g_ids + n, sizeof more);
    cr_assert_eq(zl_seq_eval(a, more, 8, 8, NULL, &err), 0, "%s", err.msg);
    cr_assert_not_null(zl_seq_logits(a));
    cr_assert_eq(zl_seq_n_cached(a), kept + 8);
    cr_assert_eq(zl_fusion_apply(&f, a, NULL, &rows, &err), 0);
    cr_assert_eq(rows, 2);
    /* a shortened sequence is not positions = slots: coding refuses it */
    zl_codec *c = fit(0.25);
    uint8_t *buf = NULL;
    size_t len;
    cr_assert_neq(zl_coded_pack(c, a, &buf, &len, NULL, &err), 0);
    /* bad settings are named */
    zl_fusion bad = zl_fusion_defaults(ZL_FUSION_ADDITIVE);
    bad.merge = 1;
    cr_assert_neq(zl_fusion_apply(&bad, a, NULL, NULL, &err), 0);
    cr_assert(strstr(err.msg, "merge"), "%s", err.msg);
    bad = zl_fusion_defaults(ZL_FUSION_ADDITIVE);
    bad.decay = 0;
    cr_assert_neq(zl_fusion_apply(&bad, a, NULL, NULL, &err), 0);
    cr_assert(strstr(err.msg, "decay"), "%s", err.msg);
    cr_assert_neq(zl_seq_kv_shorten(a, zl_seq_n_cached(a) + 1, &err), 0);
    zl_fusion_mode m;
    cr_assert_eq(zl_fusion_from_name("additive", &m), 0);
    cr_assert_eq(m, ZL_FUSION_ADDITIVE);
    cr_assert_eq(zl_fusion_from_name("cross_attention", &m), 0);
    cr_assert_eq(m, ZL_FUSION_CROSS_ATTENTION);
    cr_assert_eq(zl_fusion_from_name("sum", &m), -1);
    /* cross_attention changes nothing */
    zl_fusion ca = zl_fusion_defaults(ZL_FUSION_CROSS_ATTENTION);
    cr_assert_eq(zl_fusion_apply(&ca, ref, c, &rows, &err), 0);
    cr_assert_eq(zl_seq_n_cached(ref), n);
    free(ra); free(rb);
    zl_codec_free(c);
    zl_seq_free(a);
    zl_seq_free(ref);
}
