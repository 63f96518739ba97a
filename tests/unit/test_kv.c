/* test_kv.c — KV slicing policies.
 *  - full is bit-identical to the engine without a policy, and any bounded
 *    policy whose budget covers the sequence equals full;
 *  - marked anchors survive any amount of eviction, bounded policies generate
 *    10x the context without error or NaN;
 *  - eviction re-rotates keys correctly: after compaction, a window policy's
 *    logits equal a fresh evaluation of exactly the kept tokens at their new
 *    positions;
 *  - bad budgets and unbalanced markers are clear errors;
 *  - per-layer slices (anchor policy on a layered cache), on the KV module
 *    alone: the budget ramp, exact re-rotation with layer offsets and the
 *    position clamp, truncation, anchors kept in every layer, and no
 *    eviction while the sequence fits the budget. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kv/kv.h"
#include "zerolayer.h"

#define STORIES ZL_ROOT "/tests/fixtures/models/stories260K.gguf"

static zl_llm *open_model(void) {
    zl_err err = {0};
    zl_llm_opts lo = {1, 0, 0, 0, -1, 0, NULL};
    zl_llm *llm;
    cr_assert_eq(zl_llm_open(&llm, STORIES, &lo, &err), 0, "%s", err.msg);
    return llm;
}

static zl_seq *new_seq(zl_llm *llm, int n_ctx, zl_kv_policy_kind k, int budget, zl_kv_type kt) {
    zl_err err = {0};
    zl_seq_opts so = {n_ctx, kt, zl_sampling_defaults()};
    so.sampling.temp = 0;
    zl_seq *s;
    cr_assert_eq(zl_seq_new(&s, llm, &so, &err), 0, "%s", err.msg);
    cr_assert_eq(zl_seq_set_kv_policy(s, k, budget, &err), 0, "%s", err.msg);
    return s;
}

static void greedy(zl_seq *s, const int32_t *prompt, int np, int n, int32_t *out) {
    zl_err err = {0};
    cr_assert_eq(zl_seq_eval(s, prompt, np, 0, NULL, &err), 0, "%s", err.msg);
    for (int i = 0; i < n; i++) {
        out[i] = zl_seq_sample(s);
        const float *l = zl_seq_logits(s);
        for (int j = 0; j < 512; j++) cr_assert(isfinite(l[j]), "NaN/inf logit at step %d", i);
        cr_assert_eq(zl_seq_eval(s, &out[i], 1, 1, NULL, &err), 0, "step %d: %s", i, err.msg);
    }
}

Test(kv, one_name_table) {
    const char *names[] = {"full", "window", "anchor"};
    cr_assert_eq(ZL_KV_POLICY_COUNT, 3);
    for (int k = 0; k < ZL_KV_POLICY_COUNT; k++) {
        zl_kv_policy_kind got = ZL_KV_POLICY_COUNT;
        cr_expect_str_eq(zl_kv_policy_name((zl_kv_policy_kind)k), names[k]);
        cr_expect_eq(zl_kv_policy_from_name(names[k], &got), 0);
        cr_expect_eq(got, k);
    }
    zl_kv_policy_kind kept = ZL_KV_POLICY_WINDOW;
    cr_expect_eq(zl_kv_policy_from_name("lru", &kept), -1);
    cr_expect_eq(zl_kv_policy_from_name(NULL, &kept), -1);
    cr_expect_eq(kept, ZL_KV_POLICY_WINDOW, "an unknown name leaves the kind as it was");
    cr_expect_str_eq(zl_kv_policy_name(ZL_KV_POLICY_COUNT), "full");
    cr_expect_str_eq(zl_kv_policy_names(), "full, window or anchor");
}

Test(kv, full_and_large_budgets_are_identical) {
    zl_llm *llm = open_model();
    int32_t bos = 1, a[300], b[300];
    zl_seq *plain = new_seq(llm, 512, ZL_KV_POLICY_FULL, 0, ZL_KV_F16);
    greedy(plain, &bos, 1, 300, a);
    zl_kv_policy_kind kinds[] = {ZL_KV_POLICY_FULL, ZL_KV_POLICY_WINDOW, ZL_KV_POLICY_ANCHOR};
    for (int k = 0; k < 3; k++) {
        zl_seq *s = new_seq(llm, 512, kinds[k], 400, ZL_KV_F16);
        greedy(s, &bos, 1, 300, b);
        cr_assert(memcmp(a, b, sizeof a) == 0, "policy %d with budget >= length must equal full", k);
        zl_kv_stats st;
        zl_seq_kv_stats(s, &st);
        cr_assert_eq(st.evicted, 0u);
        zl_seq_free(s);
    }
    zl_seq_free(plain);
    zl_llm_close(llm);
}

Test(kv, bounded_policies_run_10x_past_context) {
    zl_llm *llm = open_model();
    int32_t bos = 1;
    enum { CTX = 128, N = 10 * CTX };
    static int32_t out[N];
    zl_kv_policy_kind kinds[] = {ZL_KV_POLICY_WINDOW, ZL_KV_POLICY_ANCHOR};
    for (int k = 0; k < 2; k++) {
        zl_seq *s = new_seq(llm, CTX, kinds[k], 100, ZL_KV_F16);
        greedy(s, &bos, 1, N, out);
        zl_kv_stats st;
        zl_seq_kv_stats(s, &st);
        cr_assert_leq(st.cached, 100);
        cr_assert_gt(st.evicted, (uint64_t)(N - 100));
        cr_assert_eq(zl_seq_n_past(s), N + 1);
        zl_seq_free(s);
    }
    /* full policy: the context is a hard limit with a clear error */
    zl_err err = {0};
    zl_seq *s = new_seq(llm, CTX, ZL_KV_POLICY_FULL, 0, ZL_KV_F16);
    int32_t ids[CTX + 1];
    for (int i = 0; i <= CTX; i++) ids[i] = 1 + i % 400;
    cr_assert_neq(zl_seq_eval(s, ids, CTX + 1, 0, NULL, &err), 0);
    cr_assert(strstr(err.msg, "do not fit"), "%s", err.msg);
    zl_seq_free(s);
    zl_llm_close(llm);
}

Test(kv, anchors_survive_eviction) {
    zl_llm *llm = open_model();
    zl_err err = {0};
    const char *prompt = "Once upon a time <|anchor_start|>there was a girl named Lily who had a red ball<|anchor_end|> and she";
    int32_t *ids;
    uint8_t *mask;
    size_t n;
    cr_assert_eq(zl_llm_tokenize_anchored(llm, prompt, strlen(prompt), 1, 0, &ids, &mask, &n, &err), 0, "%s", err.msg);
    int n_anchor = 0;
    for (size_t i = 0; i < n; i++) n_anchor += mask[i];
    cr_assert_gt(n_anchor, 5);
    zl_seq *s = new_seq(llm, 128, ZL_KV_POLICY_ANCHOR, 80, ZL_KV_F16);
    cr_assert_eq(zl_seq_eval_anchored(s, ids, mask, (int)n, 0, NULL, &err), 0, "%s", err.msg);
    for (int i = 0; i < 1000; i++) {
        int32_t t = zl_seq_sample(s);
        cr_assert_eq(zl_seq_eval(s, &t, 1, 1, NULL, &err), 0, "%s", err.msg);
    }
    zl_kv_stats st;
    zl_seq_kv_stats(s, &st);
    cr_assert_eq(st.anchors, n_anchor, "all %d anchored tokens must still be cached (have %d)", n_anchor, st.anchors);
    cr_assert_gt(st.evicted, 900u);
    free(ids);
    free(mask);
    zl_seq_free(s);
    zl_llm_close(llm);
}

/* Compaction moves a key from position i to slot j and must leave exactly
 * R(j) u, as if the token had been rotated at j in the first place
 * (StreamingLLM cache-relative positions).  Checked on the KV module with
 * known vectors, for both rope layouts. */
Test(kv, rerotation_is_exact) {
    for (int neox = 0; neox < 2; neox++) {
        zl_err err = {0};
        enum { HD = 16, HEADS = 2, CTX = 128 };
        zl_kv *kv;
        cr_assert_eq(zl_kv_new(&kv, 2, CTX, HD * HEADS, ZL_TYPE_F32, &err), 0);
        zl_rope rope = {HD, 10000.0f, 1.0f, neox};
        zl_kv_policy p = {ZL_KV_POLICY_WINDOW, 100, 4, 0};
        cr_assert_eq(zl_kv_set_policy(kv, &p, &rope, HD, 1, &err), 0, "%s", err.msg);
        float u[CTX][HD * HEADS], cs[HD / 2], sn[HD / 2];
        for (int i = 0; i < CTX; i++) {
            for (int d = 0; d < HD * HEADS; d++) u[i][d] = sinf(i * 0.7f + d * 1.3f);
            zl_rope_table(&rope, i, cs, sn);
            for (int l = 0; l < 2; l++) {
                float *k = zl_kv_k(kv, l, i), *v = zl_kv_v(kv, l, i);
                memcpy(k, u[i], sizeof u[i]);
                memcpy(v, u[i], sizeof u[i]);
                for (int h = 0; h < HEADS; h++) zl_rope_apply(&rope, k + h * HD, cs, sn);
            }
        }
        kv->n_used = 100;
        cr_assert_eq(zl_kv_make_room(kv, 10, &err), 0, "%s", err.msg);
        int m = kv->n_used;
        cr_assert_lt(m, 100);
        for (int j = 0; j < m; j++) {
            int orig = j < 4 ? j : 100 - (m - j); /* sinks, then the most recent */
            float want[HD * HEADS];
            memcpy(want, u[orig], sizeof want);
            zl_rope_table(&rope, j, cs, sn);
            for (int h = 0; h < HEADS; h++) zl_rope_apply(&rope, want + h * HD, cs, sn);
            for (int l = 0; l < 2; l++) {
                const float *k = zl_kv_k(kv, l, j), *v = zl_kv_v(kv, l, j);
                for (int d = 0; d < HD * HEADS; d++) {
                    cr_assert(fabsf(k[d] - want[d]) < 1e-4f, "neox %d slot %d (from %d) dim %d: %g vs %g", neox, j, orig, d, k[d], want[d]);
                    cr_assert_eq(v[d], u[orig][d]);
                }
            }
        }
        /* freed slots are zeroed */
        for (int l = 0; l < 2; l++)
            for (int d = 0; d < HD * HEADS; d++) cr_assert_eq(((float *)zl_kv_k(kv, l, m))[d], 0.0f);
        zl_kv_free(kv);
    }
}

Test(kv, clear_errors_and_clamping) {
    zl_llm *llm = open_model();
    zl_err err = {0};
    zl_seq_opts so = {128, ZL_KV_F16, zl_sampling_defaults()};
    zl_seq *s;
    cr_assert_eq(zl_seq_new(&s, llm, &so, &err), 0);
    cr_assert_neq(zl_seq_set_kv_policy(s, ZL_KV_POLICY_ANCHOR, 10, &err), 0);
    cr_assert(strstr(err.msg, "too small"), "%s", err.msg);
    cr_assert_neq(zl_seq_set_kv_policy(s, ZL_KV_POLICY_WINDOW, -5, &err), 0);
    /* budget larger than the context is clamped to it; 0 means the context */
    cr_assert_eq(zl_seq_set_kv_policy(s, ZL_KV_POLICY_WINDOW, 100000, &err), 0, "%s", err.msg);
    zl_kv_stats st;
    zl_seq_kv_stats(s, &st);
    cr_assert_eq(st.budget, 128);
    int32_t *ids;
    uint8_t *mask;
    size_t n;
    const char *bad[] = {"a <|anchor_start|> b", "a <|anchor_end|> b", "<|anchor_start|>a<|anchor_start|>b<|anchor_end|>"};
    for (int i = 0; i < 3; i++) {
        cr_assert_neq(zl_llm_tokenize_anchored(llm, bad[i], strlen(bad[i]), 1, 0, &ids, &mask, &n, &err), 0, "%s", bad[i]);
        cr_assert(strstr(err.msg, "anchor"), "%s", err.msg);
    }
    /* anchors that cannot fit the budget */
    cr_assert_eq(zl_seq_set_kv_policy(s, ZL_KV_POLICY_ANCHOR, 80, &err), 0);
    int32_t ids2[100];
    uint8_t m2[100];
    for (int i = 0; i < 100; i++) { ids2[i] = 1 + i; m2[i] = 1; }
    int rc = 0;
    for (int i = 0; i < 100 && !rc; i += 10) rc = zl_seq_eval_anchored(s, ids2 + i, m2 + i, 10, 0, NULL, &err);
    cr_assert_neq(rc, 0);
    cr_assert(strstr(err.msg, "anchored"), "%s", err.msg);
    zl_seq_free(s);
    zl_llm_close(llm);
}

/* ---- per-layer slices, on the KV module alone (no forward pass) ---------- */

enum { LHD = 16, LHEADS = 2, LDIM = LHD * LHEADS };

/* The vector a token at index t stores (V as it is, K before rotation). */
static void token_vec(int64_t t, float *u) {
    for (int d = 0; d < LDIM; d++) u[d] = sinf((float)t * 0.37f + (float)d * 1.3f) + 0.1f * (float)d;
}

/* Feed tokens [from, to) the way the engine does: make room for a chunk,
 * write each token's rows at zl_kv_slot with its key rotated for its
 * position, then note them written. */
static void feed(zl_kv *kv, const zl_rope *rope, int64_t from, int64_t to, int chunk, const uint8_t *anchor) {
    zl_err err = {0};
    float u[LDIM], cs[LHD / 2], sn[LHD / 2];
    for (int64_t t = from; t < to; t += chunk) {
        int n = to - t < chunk ? (int)(to - t) : chunk;
        cr_assert_eq(zl_kv_make_room(kv, n, &err), 0, "%s", err.msg);
        int base = kv->n_used;
        for (int i = 0; i < n; i++) {
            token_vec(t + i, u);
            zl_rope_table(rope, base + i, cs, sn);
            for (int l = 0; l < kv->n_layers; l++) {
                float *k = zl_kv_k(kv, l, zl_kv_slot(kv, l, base + i)), *v = zl_kv_v(kv, l, zl_kv_slot(kv, l, base + i));
                memcpy(k, u, sizeof u);
                memcpy(v, u, sizeof u);
                for (int h = 0; h < LHEADS; h++) zl_rope_apply(rope, k + h * LHD, cs, sn);
            }
        }
        kv->n_used = base + n; /* what the forward pass does */
        zl_kv_note_written(kv, base, n);
        if (anchor)
            for (int i = 0; i < n; i++)
                if (anchor[t + i]) zl_kv_mark_anchor(kv, base + i, 1);
    }
}

/* Every entry of every layer holds its token's V, and its K rotated for
 * slot + layer offset + shift, never further back than the budget plus the
 * tokens fed since the layer's last compaction; freed slots are zero. */
static void check_layers(const zl_kv *kv, const zl_rope *rope, int chunk) {
    float u[LDIM], want[LDIM], cs[LHD / 2], sn[LHD / 2];
    for (int l = 0; l < kv->n_layers; l++) {
        int used = zl_kv_layer_used(kv, l), s = kv->slices > 1 ? l : 0;
        cr_assert_geq(used, 0);
        for (int j = 0; j < used; j++) {
            int64_t t = kv->birth[(size_t)s * kv->n_ctx + j];
            int pos = j + (kv->layer_off ? kv->layer_off[l] : 0) + kv->shift[(size_t)s * kv->n_ctx + j];
            cr_assert_geq(kv->shift[(size_t)s * kv->n_ctx + j], 0);
            int slack = (kv->slices > 1 ? kv->layer_budget[l] : zl_kv_budget(kv)) / 16;
            cr_assert_leq(kv->n_used - pos, zl_kv_budget(kv) + slack + chunk, "layer %d slot %d: distance %d", l, j,
                          kv->n_used - pos);
            token_vec(t, u);
            memcpy(want, u, sizeof u);
            zl_rope_table(rope, pos, cs, sn);
            for (int h = 0; h < LHEADS; h++) zl_rope_apply(rope, want + h * LHD, cs, sn);
            const float *k = zl_kv_k(kv, l, j), *v = zl_kv_v(kv, l, j);
            for (int d = 0; d < LDIM; d++) {
                cr_assert(fabsf(k[d] - want[d]) < 1e-3f, "layer %d slot %d (token %lld) dim %d: %g vs %g", l, j,
                          (long long)t, d, k[d], want[d]);
                cr_assert_eq(v[d], u[d]);
            }
            if (j > 0) cr_assert_gt(t, kv->birth[(size_t)s * kv->n_ctx + j - 1], "layer %d: tokens out of order", l);
        }
        for (int j = used; j < kv->n_ctx; j++)
            for (int d = 0; d < LDIM; d++) {
                cr_assert_eq(((const float *)zl_kv_k(kv, l, j))[d], 0.0f);
                cr_assert_eq(((const float *)zl_kv_v(kv, l, j))[d], 0.0f);
            }
    }
}

static zl_kv *layered_kv(int n_layers, int n_ctx, int budget, int layer_max, zl_rope *rope) {
    zl_err err = {0};
    zl_kv *kv;
    cr_assert_eq(zl_kv_new(&kv, n_layers, n_ctx, LDIM, ZL_TYPE_F32, &err), 0, "%s", err.msg);
    kv->layered = 1;
    kv->layer_max = layer_max;
    *rope = (zl_rope){LHD, 10000.0f, 1.0f, 0};
    zl_kv_policy p = {ZL_KV_POLICY_ANCHOR, budget, 0, 0};
    cr_assert_eq(zl_kv_set_policy(kv, &p, rope, LHD, 1, &err), 0, "%s", err.msg);
    return kv;
}

Test(kv, layer_budgets_ramp_up_with_depth) {
    zl_rope rope;
    int budgets[] = {68, 128, 256, 400, 512};
    for (size_t b = 0; b < sizeof budgets / sizeof *budgets; b++) {
        zl_kv *kv = layered_kv(5, 512, budgets[b], 0, &rope);
        cr_assert_eq(kv->slices, 5);
        long sum = 0;
        for (int l = 0; l < 5; l++) {
            sum += kv->layer_budget[l];
            cr_assert_geq(kv->layer_budget[l], 4 + 32 + (budgets[b] / 4 > 32 ? budgets[b] / 4 : 32) < budgets[b]
                                                   ? 4 + 32 + (budgets[b] / 4 > 32 ? budgets[b] / 4 : 32)
                                                   : budgets[b]);
            cr_assert_leq(kv->layer_budget[l], 512);
            if (l) cr_assert_geq(kv->layer_budget[l], kv->layer_budget[l - 1]);
        }
        if (budgets[b] * 5 / 3 <= 512) cr_assert_eq(sum, 5L * budgets[b], "budget %d: layers hold %ld", budgets[b], sum);
        else cr_assert_leq(sum, 5L * budgets[b]);
        if (budgets[b] == 128) cr_assert_gt(kv->layer_budget[4], 2 * kv->layer_budget[0]);
        zl_kv_free(kv);
    }
    /* a layer cap (the model's training context) keeps the ramp's shape below it */
    zl_kv *kv = layered_kv(5, 2048, 512, 512, &rope);
    cr_assert_eq(kv->layer_budget[4], 512);
    cr_assert_lt(kv->layer_budget[0], kv->layer_budget[4]);
    zl_kv_free(kv);
    /* without engine support (layered = 0) the anchor policy keeps one slice */
    zl_err err = {0};
    cr_assert_eq(zl_kv_new(&kv, 5, 512, LDIM, ZL_TYPE_F32, &err), 0);
    zl_kv_policy p = {ZL_KV_POLICY_ANCHOR, 128, 0, 0};
    cr_assert_eq(zl_kv_set_policy(kv, &p, &rope, LHD, 1, &err), 0, "%s", err.msg);
    cr_assert_eq(kv->slices, 1);
    cr_assert_null(kv->layer_off);
    zl_kv_free(kv);
}

Test(kv, layered_eviction_rerotates_exactly) {
    for (int chunk = 1; chunk <= 32; chunk += 31) {
        zl_rope rope;
        zl_kv *kv = layered_kv(3, 512, 128, 0, &rope);
        /* nothing is evicted while the sequence fits the budget, even in
         * layers whose own budget is smaller */
        feed(kv, &rope, 0, 128, chunk, NULL);
        cr_assert_eq(kv->evicted, 0u);
        for (int l = 0; l < 3; l++) cr_assert_eq(zl_kv_layer_used(kv, l), 128);
        check_layers(kv, &rope, chunk);
        feed(kv, &rope, 128, 1500, chunk, NULL);
        cr_assert_gt(kv->evicted, 1000u);
        long sum = 0;
        for (int l = 0; l < 3; l++) {
            int used = zl_kv_layer_used(kv, l);
            cr_assert_leq(used, kv->layer_budget[l]);
            sum += used;
            /* sinks, then the most recent tokens */
            for (int j = 0; j < used; j++) {
                int64_t t = kv->birth[(size_t)l * kv->n_ctx + j];
                cr_assert_eq(t, j < 4 ? j : 1500 - (used - j), "layer %d slot %d holds token %lld", l, j, (long long)t);
            }
            if (l) cr_assert_gt(used, zl_kv_layer_used(kv, l - 1) - chunk);
        }
        cr_assert_leq(sum, 3L * 128);
        cr_assert_eq(zl_kv_cached(kv), (int)((sum + 2) / 3));
        check_layers(kv, &rope, chunk);
        /* rollback drops the newest tokens of every layer */
        int before[3];
        for (int l = 0; l < 3; l++) before[l] = zl_kv_layer_used(kv, l);
        zl_kv_truncate(kv, kv->n_used - 5);
        for (int l = 0; l < 3; l++) cr_assert_eq(zl_kv_layer_used(kv, l), before[l] - 5);
        check_layers(kv, &rope, chunk);
        zl_kv_truncate(kv, 0);
        for (int l = 0; l < 3; l++) cr_assert_eq(kv->layer_off[l], 0);
        check_layers(kv, &rope, chunk);
        zl_kv_free(kv);
    }
}

Test(kv, layered_anchors_survive_in_every_layer) {
    zl_rope rope;
    zl_kv *kv = layered_kv(4, 256, 100, 0, &rope);
    enum { N = 2000 };
    static uint8_t anchor[N];
    int n_anchor = 0;
    for (int i = 40; i < 52; i++) anchor[i] = 1, n_anchor++;
    for (int i = 700; i < 705; i++) anchor[i] = 1, n_anchor++;
    feed(kv, &rope, 0, N, 7, anchor);
    cr_assert_eq(zl_kv_n_anchor(kv), n_anchor);
    for (int l = 0; l < 4; l++) {
        int found = 0;
        for (int j = 0; j < zl_kv_layer_used(kv, l); j++) {
            int64_t t = kv->birth[(size_t)l * kv->n_ctx + j];
            cr_assert_eq(kv->anchor[(size_t)l * kv->n_ctx + j], anchor[t]);
            found += anchor[t];
        }
        cr_assert_eq(found, n_anchor, "layer %d keeps %d of %d anchors", l, found, n_anchor);
    }
    check_layers(kv, &rope, 7);
    zl_kv_free(kv);
    /* more anchors than the first layers' shares hold: those layers use the
     * whole budget, as without slices; more than the budget is an error */
    memset(anchor, 0, sizeof anchor);
    for (int i = 100; i < 140; i++) anchor[i] = 1;
    kv = layered_kv(4, 256, 100, 0, &rope);
    cr_assert_lt(kv->layer_budget[0], 4 + 40 + 32 + 7);
    feed(kv, &rope, 0, 1000, 7, anchor);
    cr_assert_eq(zl_kv_n_anchor(kv), 40);
    for (int l = 0; l < 4; l++) cr_assert_leq(zl_kv_layer_used(kv, l), kv->layer_budget[l] > 100 ? kv->layer_budget[l] : 100);
    check_layers(kv, &rope, 7);
    zl_kv_free(kv);
    for (int i = 140; i < 200; i++) anchor[i] = 1;
    kv = layered_kv(4, 256, 100, 0, &rope);
    zl_err err = {0};
    int rc = 0;
    for (int64_t t = 0; t < 400 && !rc; t += 7) {
        int n = 7;
        if ((rc = zl_kv_make_room(kv, n, &err))) break;
        int base = kv->n_used;
        kv->n_used = base + n;
        zl_kv_note_written(kv, base, n);
        for (int i = 0; i < n; i++)
            if (anchor[t + i]) zl_kv_mark_anchor(kv, base + i, 1);
    }
    cr_assert_neq(rc, 0);
    cr_assert(strstr(err.msg, "anchored"), "%s", err.msg);
    zl_kv_free(kv);
}

/* Heavy hitters (policy.window > 0): beyond the recent window, the entries
 * with the highest mean attention received are kept, in each layer's slice. */
Test(kv, heavy_hitters_are_kept_beyond_the_window) {
    for (int layered = 0; layered < 2; layered++) {
        zl_err err = {0};
        zl_kv *kv;
        cr_assert_eq(zl_kv_new(&kv, 3, 512, LDIM, ZL_TYPE_F32, &err), 0);
        kv->layered = layered;
        zl_rope rope = {LHD, 10000.0f, 1.0f, 0};
        zl_kv_policy p = {ZL_KV_POLICY_ANCHOR, 128, 0, 48};
        cr_assert_eq(zl_kv_set_policy(kv, &p, &rope, LHD, 1, &err), 0, "%s", err.msg);
        cr_assert_not_null(kv->score_part);
        for (int64_t t = 0; t < 1000; t += 8) {
            /* token 10 draws all the attention, in every layer */
            for (int s = 0; s < kv->slices; s++)
                for (int j = 0; j < zl_kv_layer_used(kv, s); j++)
                    if (kv->birth[(size_t)s * kv->n_ctx + j] == 10) kv->score_part[(size_t)s * kv->n_ctx + j] += 8.0f;
            feed(kv, &rope, t, t + 8, 8, NULL);
        }
        for (int s = 0; s < kv->slices; s++) {
            int found = 0;
            for (int j = 0; j < zl_kv_layer_used(kv, s); j++) found |= kv->birth[(size_t)s * kv->n_ctx + j] == 10;
            cr_assert(found, "layered %d slice %d lost the heavy hitter", layered, s);
        }
        check_layers(kv, &rope, 8);
        zl_kv_free(kv);
    }
}

/* The KV layer's bookkeeping calls: zl_kv_cover raises n_used (or, for a
 * draft's scratch, only n_dirty), and the pieces of a region tile exactly the
 * first `rows` slots of every layer's K and V, in order, with nothing left
 * over and nothing outside. */
Test(kv, cover_and_pieces) {
    zl_kv *kv = NULL;
    zl_err err = {0};
    const int layers = 3, ctx = 40, dim = 24; /* F16 rows of 48 bytes */
    cr_assert_eq(zl_kv_new(&kv, layers, ctx, dim, ZL_TYPE_F16, &err), 0, "%s", err.msg);
    zl_kv_cover(kv, 4, 0);
    cr_expect_eq(kv->n_used, 5);
    zl_kv_cover(kv, 2, 0);
    cr_expect_eq(kv->n_used, 5, "an earlier position never lowers n_used");
    zl_kv_cover(kv, 9, 1);
    cr_expect_eq(kv->n_used, 5, "scratch leaves n_used");
    cr_expect_eq(kv->n_dirty, 10);
    zl_kv_truncate(kv, 5);
    cr_expect_eq(kv->n_dirty, 5);
    cr_expect_eq(zl_kv_token_bytes(kv), 2 * (size_t)layers * kv->row_bytes);
    const int rows_cases[] = {0, 1, 7, ctx};
    const size_t piece_cases[] = {1, 50, 100, 4096};
    for (size_t ri = 0; ri < sizeof rows_cases / sizeof *rows_cases; ri++)
        for (size_t pi = 0; pi < sizeof piece_cases / sizeof *piece_cases; pi++) {
            const int rows = rows_cases[ri];
            const size_t piece = piece_cases[pi], region = (size_t)rows * kv->row_bytes;
            int n = zl_kv_pieces(kv, rows, piece);
            cr_assert_eq(n, 2 * layers * (int)((region + piece - 1) / piece), "rows %d piece %zu", rows, piece);
            int p = 0;
            for (int l = 0; l < layers; l++)
                for (int which = 0; which < 2; which++) {
                    uint8_t *want = which ? zl_kv_v(kv, l, 0) : zl_kv_k(kv, l, 0);
                    size_t done = 0;
                    while (done < region) {
                        void *at = NULL;
                        size_t len = zl_kv_piece(kv, rows, piece, p++, &at);
                        cr_assert_eq((uint8_t *)at, want + done, "rows %d piece %zu: piece %d misplaced", rows, piece,
                                     p - 1);
                        cr_assert(len > 0 && len <= piece && done + len <= region);
                        done += len;
                    }
                }
            cr_expect_eq(p, n, "rows %d piece %zu: %d pieces walked, %d counted", rows, piece, p, n);
        }
    zl_kv_free(kv);
}
