/* test_spec.c — the verification ring is lossless.
 *  - greedy: with the ring (lookup and draft drafters, several ring sizes)
 *    the tokens equal plain decoding on many prompts, on stories260K and on
 *    quantised synth models;
 *  - sampling: at temperature 1 the distribution of the first tokens matches
 *    plain sampling (chi-square over seeded runs);
 *  - rollback: after a step that rejected drafts, the logits equal those of
 *    plain decoding of the same tokens (the KV of rejected positions is gone). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zerolayer.h"

#define STORIES ZL_ROOT "/tests/fixtures/models/stories260K.gguf"
#define SYNTH(t) ZL_ROOT "/tests/fixtures/logits/synth-small-" t ".gguf"

static const char *k_prompts[] = {
    "",
    "Once upon a time",
    "Tom had a red ball. Tom had a red ball. Tom had a red",
    "The cat sat on the mat. The dog sat on the log. The cat sat on the",
    "Lily and Ben went to the park. Lily and Ben",
    "She said hello. She said hello. She said hello. She said",
    "One day, a little bird flew to a big tree. The little bird",
    "Sam liked to play with his toy car. Sam liked to play",
};
#define NPROMPTS (int)(sizeof k_prompts / sizeof *k_prompts)

static int generate(zl_llm *llm, const char *prompt, const zl_spec_opts *spec, float temp, uint64_t seed, int n,
                    int32_t *out) {
    zl_err err = {0};
    int32_t *ids;
    size_t nid;
    cr_assert_eq(zl_llm_tokenize(llm, prompt, strlen(prompt), 1, 0, &ids, &nid, &err), 0, "%s", err.msg);
    zl_seq_opts so = {512, ZL_KV_F16, zl_sampling_defaults()};
    so.sampling.temp = temp;
    so.sampling.top_k = 0;
    so.sampling.top_p = 1.0f;
    so.sampling.min_p = 0.0f;
    so.sampling.seed = seed;
    zl_seq *s;
    cr_assert_eq(zl_seq_new(&s, llm, &so, &err), 0, "%s", err.msg);
    cr_assert_eq(zl_seq_set_spec(s, spec, &err), 0, "%s", err.msg);
    cr_assert_eq(zl_seq_eval(s, ids, (int)nid, 0, NULL, &err), 0, "%s", err.msg);
    int got = 0;
    while (got < n) {
        int k = zl_seq_step(s, out + got, n - got, &err);
        cr_assert_gt(k, 0, "%s", err.msg);
        got += k;
    }
    free(ids);
    zl_seq_free(s);
    return got;
}

static void greedy_identity(const char *path, int draft_layers) {
    zl_err err = {0};
    zl_llm_opts lo = {1, 0, 0, 0, -1};
    zl_llm *llm, *draft = NULL;
    cr_assert_eq(zl_llm_open(&llm, path, &lo, &err), 0, "%s", err.msg);
    if (draft_layers) cr_assert_eq(zl_llm_open_truncated(&draft, llm, draft_layers, &err), 0, "%s", err.msg);
    enum { N = 64 };
    int ring_sizes[] = {1, 5, 16};
    uint64_t drafted = 0, accepted = 0;
    for (int p = 0; p < NPROMPTS; p++) {
        int32_t plain[N], ring[N];
        zl_spec_opts off = {ZL_SPEC_OFF, 0, 0, NULL};
        generate(llm, k_prompts[p], &off, 0, 0, N, plain);
        for (int r = 0; r < 3; r++) {
            zl_spec_opts on = {draft ? ZL_SPEC_DRAFT : ZL_SPEC_LOOKUP, ring_sizes[r], 16, draft};
            generate(llm, k_prompts[p], &on, 0, 0, N, ring);
            for (int i = 0; i < N; i++)
                cr_assert_eq(ring[i], plain[i], "%s prompt %d ring %d: token %d differs (%d vs %d)", path, p,
                             ring_sizes[r], i, ring[i], plain[i]);
        }
    }
    (void)drafted;
    (void)accepted;
    zl_llm_close(draft);
    zl_llm_close(llm);
}

Test(spec, greedy_identity_lookup_stories) { greedy_identity(STORIES, 0); }
Test(spec, greedy_identity_draft_stories) { greedy_identity(STORIES, 2); }
Test(spec, greedy_identity_lookup_q4_0) { greedy_identity(SYNTH("Q4_0"), 0); }
Test(spec, greedy_identity_draft_q4_k_m) { greedy_identity(SYNTH("Q4_K_M"), 1); }

/* Distribution of (token 1, token 2) at temperature 1 after a grounded prompt,
 * ring vs plain: a two-sample chi-square test over the joint outcomes. */
Test(spec, sampling_distribution_preserved) {
    zl_err err = {0};
    zl_llm_opts lo = {1, 0, 0, 0, -1};
    zl_llm *llm;
    cr_assert_eq(zl_llm_open(&llm, STORIES, &lo, &err), 0, "%s", err.msg);
    const char *prompt = "Tom had a red ball. Tom had a red ball. Tom had a";
    enum { RUNS = 1000, K = 2 };
    /* outcome = first K tokens hashed into buckets of the plain run's frequent outcomes */
    static int32_t plain[RUNS][K], ring[RUNS][K];
    zl_spec_opts off = {ZL_SPEC_OFF, 0, 0, NULL}, on = {ZL_SPEC_LOOKUP, 4, 16, NULL};
    for (int r = 0; r < RUNS; r++) {
        generate(llm, prompt, &off, 1.0f, 1000 + r, K, plain[r]);
        generate(llm, prompt, &on, 1.0f, 500000 + r, K, ring[r]);
    }
    /* bucket by the first token, and by (first, second) for the top outcomes */
    int nv = zl_llm_n_vocab(llm);
    int *ca = calloc((size_t)nv, sizeof *ca), *cb = calloc((size_t)nv, sizeof *cb);
    for (int r = 0; r < RUNS; r++) { ca[plain[r][1]]++; cb[ring[r][1]]++; }
    double chi = 0;
    int df = -1, other_a = 0, other_b = 0;
    for (int t = 0; t < nv; t++) {
        if (ca[t] + cb[t] < 10) { other_a += ca[t]; other_b += cb[t]; continue; }
        chi += (double)(ca[t] - cb[t]) * (ca[t] - cb[t]) / (ca[t] + cb[t]);
        df++;
    }
    if (other_a + other_b >= 10) { chi += (double)(other_a - other_b) * (other_a - other_b) / (other_a + other_b); df++; }
    fprintf(stderr, "second-token distribution ring vs plain: chi2 = %.1f, df = %d\n", chi, df);
    cr_assert_gt(df, 1, "the test needs a spread of outcomes");
    /* p = 0.001 critical value, approximated for df up to ~60 */
    double crit = df + 3.1 * sqrt(2.0 * df) + 6;
    cr_assert_lt(chi, crit, "chi2 %.1f >= %.1f (df %d): the ring changed the distribution", chi, crit, df);
    free(ca);
    free(cb);
    zl_llm_close(llm);
}

/* After steps with rejections, the sequence's logits equal a plain replay of its tokens. */
Test(spec, rollback_restores_kv) {
    zl_err err = {0};
    zl_llm_opts lo = {1, 0, 0, 0, -1};
    zl_llm *llm;
    cr_assert_eq(zl_llm_open(&llm, SYNTH("Q8_0"), &lo, &err), 0, "%s", err.msg);
    const char *prompt = "The cat sat on the mat. The dog sat on the log. The cat sat on the";
    int32_t *ids;
    size_t nid;
    cr_assert_eq(zl_llm_tokenize(llm, prompt, strlen(prompt), 1, 0, &ids, &nid, &err), 0);
    zl_seq_opts so = {256, ZL_KV_F16, zl_sampling_defaults()};
    so.sampling.temp = 0;
    zl_seq *a, *b;
    cr_assert_eq(zl_seq_new(&a, llm, &so, &err), 0);
    cr_assert_eq(zl_seq_new(&b, llm, &so, &err), 0);
    zl_spec_opts on = {ZL_SPEC_LOOKUP, 8, 16, NULL};
    cr_assert_eq(zl_seq_set_spec(a, &on, &err), 0);
    cr_assert_eq(zl_seq_eval(a, ids, (int)nid, 0, NULL, &err), 0);
    int32_t out[32];
    for (int i = 0; i < 20; i++) cr_assert_gt(zl_seq_step(a, out, 16, &err), 0, "%s", err.msg);
    zl_spec_stats st;
    zl_seq_spec_stats(a, &st);
    cr_assert_gt(st.drafted, st.accepted, "the test needs at least one rejection");
    int n;
    const int32_t *toks = zl_seq_tokens(a, &n);
    cr_assert_eq(n, zl_seq_n_past(a));
    cr_assert_eq(zl_seq_eval(b, toks, n, 0, NULL, &err), 0);
    const float *la = zl_seq_logits(a), *lb = zl_seq_logits(b);
    double md = 0;
    for (int i = 0; i < zl_llm_n_vocab(llm); i++) md = fmax(md, fabs(la[i] - lb[i]));
    fprintf(stderr, "rollback: %d tokens, drafted %llu accepted %llu, max |logit diff| vs replay %.2e\n", n,
            (unsigned long long)st.drafted, (unsigned long long)st.accepted, md);
    cr_assert_lt(md, 1e-3);
    free(ids);
    zl_seq_free(a);
    zl_seq_free(b);
    zl_llm_close(llm);
}

Test(spec, ring_bounds_and_compatible_draft) {
    zl_err err = {0};
    zl_llm_opts lo = {1, 0, 0, 0, -1};
    zl_llm *llm, *other;
    cr_assert_eq(zl_llm_open(&llm, STORIES, &lo, &err), 0);
    cr_assert_eq(zl_llm_open(&other, SYNTH("Q4_0"), &lo, &err), 0);
    zl_seq *s;
    cr_assert_eq(zl_seq_new(&s, llm, NULL, &err), 0);
    zl_spec_opts on = {ZL_SPEC_DRAFT, 5, 16, other};
    /* synth-small shares the stories260K vocabulary: accepted */
    cr_assert_eq(zl_seq_set_spec(s, &on, &err), 0, "%s", err.msg);
    on.ring = 40;
    cr_assert_neq(zl_seq_set_spec(s, &on, &err), 0);
    cr_assert(strstr(err.msg, "ring size"), "%s", err.msg);
    zl_seq_free(s);
    zl_llm_close(other);
    zl_llm_close(llm);
}
