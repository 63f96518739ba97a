/* test_kv.c — KV slicing policies.
 *  - full is bit-identical to the engine without a policy, and any bounded
 *    policy whose budget covers the sequence equals full;
 *  - marked anchors survive any amount of eviction, bounded policies generate
 *    10x the context without error or NaN;
 *  - eviction re-rotates keys correctly: after compaction, a window policy's
 *    logits equal a fresh evaluation of exactly the kept tokens at their new
 *    positions;
 *  - bad budgets and unbalanced markers are clear errors. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kv/kv.h"
#include "zerolayer.h"

#define STORIES ZL_ROOT "/tests/fixtures/models/stories260K.gguf"

static zl_llm *open_model(void) {
    zl_err err = {0};
    zl_llm_opts lo = {1, 0, 0, 0, -1};
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
        zl_kv_policy p = {ZL_KVP_WINDOW, 100, 4, 0};
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
