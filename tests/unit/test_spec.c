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

static int g_top_k; /* top-k of generate's sampler (0: off) */
static const zl_logit_bias *g_bias; /* logit_bias of generate's sampler */
static int g_n_bias;
static unsigned long long g_drafted, g_accepted; /* ring statistics summed over generate's runs */

static int generate(zl_llm *llm, const char *prompt, const zl_spec_opts *spec, float temp, uint64_t seed, int n,
                    int32_t *out) {
    zl_err err = {0};
    int32_t *ids;
    size_t nid;
    cr_assert_eq(zl_llm_tokenize(llm, prompt, strlen(prompt), 1, 0, &ids, &nid, &err), 0, "%s", err.msg);
    zl_seq_opts so = {512, ZL_KV_F16, zl_sampling_defaults()};
    so.sampling.temp = temp;
    so.sampling.top_k = g_top_k;
    so.sampling.top_p = 1.0f;
    so.sampling.min_p = 0.0f;
    so.sampling.seed = seed;
    so.sampling.logit_bias = g_bias;
    so.sampling.n_logit_bias = g_n_bias;
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
    zl_spec_stats st;
    zl_seq_spec_stats(s, &st);
    g_drafted += st.drafted;
    g_accepted += st.accepted;
    free(ids);
    zl_seq_free(s);
    return got;
}

static void greedy_identity(const char *path, int draft_layers) {
    zl_err err = {0};
    zl_llm_opts lo = {1, 0, 0, 0, -1, 0, NULL};
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

/* logit_bias reaches the verification ring: greedy decoding with a banned
 * token equals plain decoding with the same ban (and differs from unbiased
 * decoding); the banned token never appears, though the lookup drafter keeps
 * proposing it from the prompt; at temperature 1 a +100 token is all the
 * ring emits. */
Test(spec, logit_bias_honoured_by_the_ring) {
    zl_err err = {0};
    zl_llm_opts lo = {1, 0, 0, 0, -1, 0, NULL};
    zl_llm *llm;
    cr_assert_eq(zl_llm_open(&llm, STORIES, &lo, &err), 0, "%s", err.msg);
    enum { N = 48 };
    const char *prompt = k_prompts[2]; /* "Tom had a red ball. Tom had a red ball. Tom had a red" */
    zl_spec_opts off = {ZL_SPEC_OFF, 0, 0, NULL}, on = {ZL_SPEC_LOOKUP, 5, 16, NULL};
    int32_t free_run[N], plain[N], ring[N];
    g_bias = NULL;
    g_n_bias = 0;
    generate(llm, prompt, &off, 0, 0, N, free_run);
    int32_t *pids;
    size_t np;
    cr_assert_eq(zl_llm_tokenize(llm, prompt, strlen(prompt), 1, 0, &pids, &np, &err), 0, "%s", err.msg);
    /* ban the first token the model would pick and one it repeats from the prompt */
    zl_logit_bias ban[2] = {{free_run[0], -100.0f}, {pids[np - 1], -100.0f}};
    free(pids);
    g_bias = ban;
    g_n_bias = ban[0].token == ban[1].token ? 1 : 2;
    g_drafted = g_accepted = 0;
    generate(llm, prompt, &off, 0, 0, N, plain);
    generate(llm, prompt, &on, 0, 0, N, ring);
    cr_assert_neq(plain[0], free_run[0], "the ban changes the first token");
    for (int i = 0; i < N; i++) {
        cr_assert_eq(ring[i], plain[i], "token %d: ring %d vs plain %d under the same bias", i, ring[i], plain[i]);
        for (int b = 0; b < g_n_bias; b++) cr_assert_neq(plain[i], ban[b].token, "banned token %d at %d", ban[b].token, i);
    }
    cr_assert_gt(g_drafted, 0, "the ring drafted");
    fprintf(stderr, "logit_bias ring: drafted %llu, accepted %llu\n", g_drafted, g_accepted);
    zl_logit_bias force = {free_run[5] == 7 ? 8 : 7, 100.0f};
    g_bias = &force;
    g_n_bias = 1;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        generate(llm, prompt, &on, 1.0f, seed, N, ring);
        for (int i = 0; i < N; i++) cr_assert_eq(ring[i], force.token, "seed %llu token %d: %d, not the forced %d",
                                                 (unsigned long long)seed, i, ring[i], force.token);
    }
    g_bias = NULL;
    g_n_bias = 0;
    zl_llm_close(llm);
}

/* Two-sample chi-square of token counts a vs b (n_vocab bins; rare bins
 * pooled); asserts at p = 0.001. */
static void chi_square(const int *a, const int *b, int nv, const char *what) {
    double chi = 0;
    int df = -1, oa = 0, ob = 0;
    for (int t = 0; t < nv; t++) {
        if (a[t] + b[t] < 10) { oa += a[t]; ob += b[t]; continue; }
        chi += (double)(a[t] - b[t]) * (a[t] - b[t]) / (a[t] + b[t]);
        df++;
    }
    if (oa + ob >= 10) { chi += (double)(oa - ob) * (oa - ob) / (oa + ob); df++; }
    /* p = 0.001 critical value, approximated for df up to ~60 */
    double crit = df + 3.1 * sqrt(2.0 * df) + 6;
    fprintf(stderr, "%s ring vs plain: chi2 = %.1f, df = %d (critical %.1f)\n", what, chi, df, crit);
    cr_assert_gt(df, 1, "%s: the test needs a spread of outcomes", what);
    cr_assert_lt(chi, crit, "%s: chi2 %.1f >= %.1f (df %d): the ring changed the distribution", what, chi, crit, df);
}

/* Distribution of the 4th and 5th tokens at temperature 1 (top-k 5) after a
 * grounded prompt, ring vs plain.  The ring decodes its first two steps
 * plainly (the baseline it must beat), so the third step -- emitting tokens
 * 3.. -- is the first verification; tokens 4 and 5 are drafts accepted by
 * rejection sampling or drawn from the residual distribution. */
Test(spec, sampling_distribution_preserved) {
    zl_err err = {0};
    zl_llm_opts lo = {1, 0, 0, 0, -1, 0, NULL};
    zl_llm *llm;
    cr_assert_eq(zl_llm_open(&llm, STORIES, &lo, &err), 0, "%s", err.msg);
    const char *prompt = "Tom had a red ball. Tom had a red ball. Tom had a";
    enum { RUNS = 1000, K = 5 };
    static int32_t plain[RUNS][K], ring[RUNS][K];
    zl_spec_opts off = {ZL_SPEC_OFF, 0, 0, NULL}, on = {ZL_SPEC_LOOKUP, 4, 16, NULL};
    g_top_k = 5;
    g_drafted = g_accepted = 0;
    for (int r = 0; r < RUNS; r++) {
        generate(llm, prompt, &off, 1.0f, 1000 + r, K, plain[r]);
        generate(llm, prompt, &on, 1.0f, 500000 + r, K, ring[r]);
    }
    g_top_k = 0;
    fprintf(stderr, "sampling: ring drafted %llu accepted %llu\n", g_drafted, g_accepted);
    cr_assert_gt(g_drafted, RUNS / 4, "the ring must have drafted in many runs");
    int nv = zl_llm_n_vocab(llm);
    for (int p = 3; p < K; p++) {
        int *ca = calloc((size_t)nv, sizeof *ca), *cb = calloc((size_t)nv, sizeof *cb);
        for (int r = 0; r < RUNS; r++) { ca[plain[r][p]]++; cb[ring[r][p]]++; }
        char what[64];
        snprintf(what, sizeof what, "token %d", p + 1);
        chi_square(ca, cb, nv, what);
        free(ca);
        free(cb);
    }
    zl_llm_close(llm);
}

/* After steps with rejections, the sequence's logits equal a plain replay of
 * its tokens: lookup drafts on a quantised synth model and on stories260K,
 * and a one-layer draft of the synth model (it drafts whenever asked). */
static void rollback_case(const char *path, int draft_layers) {
    zl_err err = {0};
    zl_llm_opts lo = {1, 0, 0, 0, -1, 0, NULL};
    zl_llm *llm, *draft = NULL;
    cr_assert_eq(zl_llm_open(&llm, path, &lo, &err), 0, "%s", err.msg);
    if (draft_layers) cr_assert_eq(zl_llm_open_truncated(&draft, llm, draft_layers, &err), 0, "%s", err.msg);
    const char *prompt = "The cat sat on the mat. The dog sat on the log. The cat sat on the";
    int32_t *ids;
    size_t nid;
    cr_assert_eq(zl_llm_tokenize(llm, prompt, strlen(prompt), 1, 0, &ids, &nid, &err), 0);
    zl_seq_opts so = {256, ZL_KV_F16, zl_sampling_defaults()};
    so.sampling.temp = 0;
    zl_seq *a, *b;
    cr_assert_eq(zl_seq_new(&a, llm, &so, &err), 0);
    cr_assert_eq(zl_seq_new(&b, llm, &so, &err), 0);
    zl_spec_opts on = {draft ? ZL_SPEC_DRAFT : ZL_SPEC_LOOKUP, 8, 16, draft};
    cr_assert_eq(zl_seq_set_spec(a, &on, &err), 0);
    cr_assert_eq(zl_seq_eval(a, ids, (int)nid, 0, NULL, &err), 0);
    int32_t out[32];
    for (int i = 0; i < 60; i++) cr_assert_gt(zl_seq_step(a, out, 16, &err), 0, "%s", err.msg);
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
    fprintf(stderr, "rollback (%s): %d tokens, drafted %llu accepted %llu, max |logit diff| vs replay %.2e\n",
            draft ? "draft" : "lookup", n, (unsigned long long)st.drafted, (unsigned long long)st.accepted, md);
    cr_assert_lt(md, 1e-3);
    free(ids);
    zl_seq_free(a);
    zl_seq_free(b);
    zl_llm_close(draft);
    zl_llm_close(llm);
}

Test(spec, rollback_restores_kv) {
    rollback_case(SYNTH("Q8_0"), 0);
    rollback_case(SYNTH("Q8_0"), 1);
    rollback_case(STORIES, 0); /* partial acceptances: some drafts of a step kept, the rest rolled back */
}

Test(spec, ring_bounds_and_compatible_draft) {
    zl_err err = {0};
    zl_llm_opts lo = {1, 0, 0, 0, -1, 0, NULL};
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

/* ---- self-speculation in the target's own cache (spec.c, self_draft) ---- */
#include "engine/engine_internal.h"

/* Layers [0, a) then [a, L) with the residual handed over give bit for bit
 * the logits and the cache of one full pass: what lets the verify pass
 * resume after a self-draft's layers. */
Test(spec, partial_forward_equals_full_pass) {
    const char *paths[] = {STORIES, SYNTH("Q4_0"), SYNTH("Q4_K_M")};
    for (int pi = 0; pi < 3; pi++) {
        zl_err err = {0};
        zl_model *m;
        cr_assert_eq(zl_model_load(&m, paths[pi], NULL, &err), 0, "%s", err.msg);
        const zl_hparams *hp = &m->hp;
        enum { N = 7, PRE = 5 };
        zl_pool *pool = zl_pool_new(2);
        zl_fwd *f = zl_fwd_new();
        float *la = malloc((size_t)N * hp->n_vocab * sizeof(float)), *lb = malloc((size_t)N * hp->n_vocab * sizeof(float));
        float *x = malloc((size_t)N * hp->dim * sizeof(float));
        for (int a = 1; a < hp->n_layers; a++) {
            zl_kv *ka, *kb;
            int kvd = hp->n_kv_heads * hp->head_dim;
            cr_assert_eq(zl_kv_new(&ka, hp->n_layers, 64, kvd, ZL_TYPE_F16, &err), 0);
            cr_assert_eq(zl_kv_new(&kb, hp->n_layers, 64, kvd, ZL_TYPE_F16, &err), 0);
            zl_batch_tok t[PRE + N];
            for (int i = 0; i < PRE + N; i++) t[i] = (zl_batch_tok){(int32_t)(1 + (i * 37) % (hp->n_vocab - 1)), i, 0, 1};
            cr_assert_eq(zl_forward(m, &ka, t, PRE, la, f, pool, &err), 0, "%s", err.msg);
            cr_assert_eq(zl_forward(m, &kb, t, PRE, lb, f, pool, &err), 0, "%s", err.msg);
            cr_assert_eq(zl_forward(m, &ka, t + PRE, N, la, f, pool, &err), 0, "%s", err.msg);
            /* the draft's way: one token at a time through [0, a), scratch rows past n_used */
            for (int i = 0; i < N; i++) {
                zl_fwd_part p0 = {0, a, NULL, x + (size_t)i * hp->dim, 1};
                cr_assert_eq(zl_forward_part(m, &kb, t + PRE + i, 1, &p0, lb, f, pool, &err), 0, "%s", err.msg);
            }
            cr_assert_eq(kb->n_used, PRE, "a draft pass leaves n_used");
            cr_assert_eq(kb->n_dirty, PRE + N);
            zl_fwd_part p1 = {a, hp->n_layers, x, NULL, 0};
            cr_assert_eq(zl_forward_part(m, &kb, t + PRE, N, &p1, lb, f, pool, &err), 0, "%s", err.msg);
            cr_assert_eq(kb->n_used, PRE + N);
            cr_assert(!memcmp(la, lb, (size_t)N * hp->n_vocab * sizeof(float)), "%s split at %d: logits differ",
                      paths[pi], a);
            cr_assert(!memcmp(ka->k, kb->k, zl_kv_bytes(ka) / 2) && !memcmp(ka->v, kb->v, zl_kv_bytes(ka) / 2),
                      "%s split at %d: caches differ", paths[pi], a);
            zl_kv_free(ka);
            zl_kv_free(kb);
        }
        zl_fwd_part bad = {2, 1, NULL, NULL, 0};
        zl_kv *kv;
        cr_assert_eq(zl_kv_new(&kv, hp->n_layers, 8, hp->n_kv_heads * hp->head_dim, ZL_TYPE_F16, &err), 0);
        zl_batch_tok t0 = {1, 0, 0, 1};
        cr_assert_neq(zl_forward_part(m, &kv, &t0, 1, &bad, la, f, pool, &err), 0);
        bad = (zl_fwd_part){1, hp->n_layers, NULL, NULL, 0};
        cr_assert_neq(zl_forward_part(m, &kv, &t0, 1, &bad, la, f, pool, &err), 0);
        cr_assert(strstr(err.msg, "residual"), "%s", err.msg);
        zl_kv_free(kv);
        free(la);
        free(lb);
        free(x);
        zl_fwd_free(f);
        zl_pool_free(pool);
        zl_model_free(m);
    }
}

/* A truncated view of the target drafts in the target's own cache: the
 * verify passes resume after its layers, the text equals plain decoding, and
 * truncation zeroes the draft's scratch rows past the sequence's end too. */
Test(spec, self_draft_shares_the_cache) {
    zl_err err = {0};
    zl_llm_opts lo = {2, 0, 0, 0, -1, 0, NULL};
    zl_llm *llm, *draft;
    cr_assert_eq(zl_llm_open(&llm, SYNTH("Q4_0"), &lo, &err), 0, "%s", err.msg);
    cr_assert_eq(zl_llm_open_truncated(&draft, llm, 1, &err), 0, "%s", err.msg);
    enum { N = 48 };
    int32_t plain[N], ring[N];
    zl_spec_opts off = {ZL_SPEC_OFF, 0, 0, NULL}, on = {ZL_SPEC_DRAFT, 6, 16, draft};
    const char *prompt = "Tom had a red ball. Tom had a red ball. Tom had a";
    generate(llm, prompt, &off, 0, 0, N, plain);
    int32_t *ids;
    size_t nid;
    cr_assert_eq(zl_llm_tokenize(llm, prompt, strlen(prompt), 1, 0, &ids, &nid, &err), 0);
    zl_seq_opts so = {256, ZL_KV_F16, zl_sampling_defaults()};
    so.sampling.temp = 0;
    zl_seq *s;
    cr_assert_eq(zl_seq_new(&s, llm, &so, &err), 0);
    cr_assert_eq(zl_seq_set_spec(s, &on, &err), 0, "%s", err.msg);
    cr_assert_eq(zl_seq_eval(s, ids, (int)nid, 0, NULL, &err), 0);
    cr_assert_str_eq(s->drafter->name, "self");
    int got = 0;
    while (got < N) {
        int32_t out[17];
        int k = zl_seq_step(s, out, 17, &err);
        cr_assert_gt(k, 0, "%s", err.msg);
        for (int i = 0; i < k && got < N; i++) ring[got++] = out[i];
    }
    for (int i = 0; i < N; i++) cr_assert_eq(ring[i], plain[i], "token %d differs (%d vs %d)", i, ring[i], plain[i]);
    zl_spec_stats st;
    zl_seq_spec_stats(s, &st);
    fprintf(stderr, "self draft: %llu verify steps, %llu resumed, drafted %llu accepted %llu\n",
            (unsigned long long)st.verify_steps, (unsigned long long)st.resumed, (unsigned long long)st.drafted,
            (unsigned long long)st.accepted);
    cr_assert_gt(st.verify_steps, 0);
    cr_assert_eq(st.resumed, st.verify_steps, "every verify step resumes after the draft's layer");
    /* a draft's scratch rows past the end, then a truncation: nothing is left past it */
    int n = s->n_tokens;
    cr_assert_eq(zl_seq_reserve_tokens(s, n + 1), 0);
    s->tokens[n] = 5; /* the token about to be verified */
    int32_t d[8];
    cr_assert_eq(s->drafter->draft(s->drafter, s->tokens, n + 1, d, 8), 8);
    zl_kv *kv = s->kv;
    cr_assert_gt(kv->n_dirty, kv->n_used);
    int keep = kv->n_used / 2;
    zl_seq_truncate(s, keep);
    const uint8_t *kb = kv->k, *vb = kv->v;
    for (int l = 0; l < kv->n_layers; l++)
        for (size_t b = (size_t)keep * kv->row_bytes; b < (size_t)kv->n_ctx * kv->row_bytes; b++) {
            size_t o = (size_t)l * kv->n_ctx * kv->row_bytes + b;
            cr_assert(!kb[o] && !vb[o], "layer %d: byte %zu past the end is not zero", l, b);
        }
    free(ids);
    zl_seq_free(s);
    zl_llm_close(draft);
    zl_llm_close(llm);
}

/* ---- the ring inside continuous batching (engine/sched.c) ----
 * Ring sequences put their next token + drafts into the one batched forward
 * of each engine step, next to plain sequences and prompt chunks, and accept
 * or roll back after it.  Greedy: every job's tokens and finish reason equal
 * plain decoding, whatever rides along in the batch. */
#include "engine/sched.h"

enum { SJ_MAX = 24, SJ_TOK = 512 };
typedef struct {
    int32_t tok[SJ_TOK];
    int n;
    zl_finish fin;
    zl_job_report times;
    int n_prompt, n_past_at_end; /* tokens the sequence had fed when the job handed it back */
    unsigned long long resumed;   /* verify steps that resumed after a self-draft's layers */
} sj_out;

/* release hook: what the sequence holds when the job ends (sessions and the
 * prefix cache keep it), then free it */
static void sj_release(void *ud, zl_seq *seq, zl_finish why) {
    (void)why;
    ((sj_out *)ud)->n_past_at_end = zl_seq_n_past(seq);
    zl_spec_stats st;
    zl_seq_spec_stats(seq, &st);
    ((sj_out *)ud)->resumed = st.resumed;
    zl_seq_free(seq);
}

typedef struct {
    const char *prompt;
    int ring_on, ring, max_tokens;
    float temp;
    uint64_t seed;
    int top_k; /* 0: off */
} sj_in;

/* Run every job of in[] at once through one scheduler; wait for all. */
static void sched_run(zl_llm *llm, zl_llm *draft, const sj_in *in, int n, int n_ctx, int step_tokens, sj_out *out) {
    zl_err err = {0};
    zl_sched_opts so = {.n_parallel = n, .max_queue = SJ_MAX, .n_ctx = n_ctx, .step_tokens = step_tokens,
                        .draft = draft};
    zl_sched *s;
    cr_assert_eq(zl_sched_new(&s, llm, &so, &err), 0, "%s", err.msg);
    zl_job *jobs[SJ_MAX];
    cr_assert_leq(n, SJ_MAX);
    for (int i = 0; i < n; i++) {
        int32_t *ids;
        size_t nid;
        cr_assert_eq(zl_llm_tokenize(llm, in[i].prompt, strlen(in[i].prompt), 1, 0, &ids, &nid, &err), 0);
        zl_sampling sp = zl_sampling_defaults();
        sp.temp = in[i].temp;
        sp.top_k = in[i].top_k;
        sp.top_p = 1.0f;
        sp.min_p = 0.0f;
        sp.seed = in[i].seed;
        jobs[i] = zl_job_new(ids, (int)nid, &sp, in[i].max_tokens, -1);
        free(ids);
        cr_assert_not_null(jobs[i]);
        zl_job_ctl c = {0};
        c.spec = in[i].ring_on ? ZL_SPEC_LOOKUP : ZL_SPEC_OFF;
        c.ring = in[i].ring;
        zl_job_set_ctl(jobs[i], &c);
        out[i].n_prompt = (int)nid;
        out[i].n_past_at_end = -1;
        zl_job_hooks hk = {NULL, sj_release, NULL, &out[i]};
        zl_job_set_hooks(jobs[i], &hk);
        cr_assert_eq(zl_sched_submit(s, jobs[i]), 0);
    }
    for (int i = 0; i < n; i++) {
        out[i].n = 0;
        for (;;) {
            zl_job_tok t[64];
            zl_finish f;
            int k = zl_job_read(s, jobs[i], out[i].n, t, 64, &f);
            for (int x = 0; x < k; x++) {
                cr_assert_lt(out[i].n, SJ_TOK);
                out[i].tok[out[i].n++] = t[x].id;
            }
            if (f != ZL_FINISH_NONE) { out[i].fin = f; break; }
            if (!k) zl_sched_wait(s, 50);
        }
        zl_job_get_report(s, jobs[i], &out[i].times);
        zl_job_release(jobs[i]);
    }
    zl_sched_free(s);
}

static const char *k_grounded[] = {
    "Tom had a big red ball. Tom had a big red ball. Tom had a big red ball. Tom",
    "Sue saw a cat. The cat saw Sue. Sue saw a dog. The dog saw Sue. Sue saw a",
    "Once upon a time, there was a little girl named Lily. She loved to play with her toys. One day, Lily",
    "The dog said, \"I am hungry.\" The cat said, \"I am hungry too.\" The dog said, \"I am",
};

static void sched_greedy_identity(zl_llm *llm, zl_llm *draft, int n_ctx, int max_tokens, int step_tokens) {
    enum { NJ = 12 };
    static sj_in in[NJ];
    static sj_out plain[NJ], mixed[NJ], all[NJ];
    int rings[] = {1, 5, 16, 3};
    for (int i = 0; i < NJ; i++) {
        const char *p = i < NPROMPTS ? k_prompts[i] : k_grounded[i - NPROMPTS];
        in[i] = (sj_in){p, 0, rings[i % 4], max_tokens, 0, 0, 0};
    }
    sched_run(llm, NULL, in, NJ, n_ctx, step_tokens, plain);
    /* half the jobs with the ring, next to plain ones, then all of them */
    for (int i = 0; i < NJ; i++) in[i].ring_on = i % 2;
    sched_run(llm, draft, in, NJ, n_ctx, step_tokens, mixed);
    for (int i = 0; i < NJ; i++) in[i].ring_on = 1;
    sched_run(llm, draft, in, NJ, n_ctx, step_tokens, all);
    unsigned long long dr = 0, ac = 0;
    for (int i = 0; i < NJ; i++) {
        const sj_out *v[2] = {&mixed[i], &all[i]};
        for (int m = 0; m < 2; m++) {
            cr_assert_eq(v[m]->fin, plain[i].fin, "job %d (%s): finish %d vs plain %d", i, m ? "all ring" : "mixed",
                         v[m]->fin, plain[i].fin);
            cr_assert_eq(v[m]->n, plain[i].n, "job %d (%s): %d tokens vs plain %d", i, m ? "all ring" : "mixed", v[m]->n,
                         plain[i].n);
            /* the sequence handed back holds what plain decoding fed: the prompt and every token but the last */
            cr_assert_eq(v[m]->n_past_at_end, plain[i].n_past_at_end, "job %d (%s): sequence holds %d tokens, plain %d",
                         i, m ? "all ring" : "mixed", v[m]->n_past_at_end, plain[i].n_past_at_end);
            for (int t = 0; t < plain[i].n; t++)
                cr_assert_eq(v[m]->tok[t], plain[i].tok[t], "job %d (%s): token %d differs", i,
                             m ? "all ring" : "mixed", t);
        }
        cr_assert_eq(plain[i].n_past_at_end, plain[i].n_prompt + plain[i].n - 1);
        cr_assert_eq(all[i].times.ring_on, 1);
        cr_assert_eq(plain[i].times.ring_on, 0);
        dr += all[i].times.ring_drafted;
        ac += all[i].times.ring_accepted;
    }
    fprintf(stderr, "sched ring (ctx %d, max %d, %s): drafted %llu accepted %llu\n", n_ctx, max_tokens,
            draft ? "draft model" : "lookup", dr, ac);
    cr_assert_gt(dr, 0);
    cr_assert_gt(ac, 0);
}

Test(spec_sched, greedy_identity_in_batch_lookup) {
    zl_err err = {0};
    zl_llm_opts lo = {1, 0, 0, 0, -1, 0, NULL};
    zl_llm *llm;
    cr_assert_eq(zl_llm_open(&llm, STORIES, &lo, &err), 0, "%s", err.msg);
    sched_greedy_identity(llm, NULL, 512, 100, 64);  /* length-limited; prompt chunks share steps */
    sched_greedy_identity(llm, NULL, 96, 0, 256);    /* until the context is full: finish = context */
    sched_greedy_identity(llm, NULL, 512, 7, 20);    /* tiny step budget: drafts clipped by it */
    zl_llm_close(llm);
}

Test(spec_sched, greedy_identity_in_batch_draft_model) {
    zl_err err = {0};
    zl_llm_opts lo = {1, 0, 0, 0, -1, 0, NULL};
    zl_llm *llm, *draft;
    cr_assert_eq(zl_llm_open(&llm, STORIES, &lo, &err), 0, "%s", err.msg);
    cr_assert_eq(zl_llm_open_truncated(&draft, llm, 2, &err), 0, "%s", err.msg);
    sched_greedy_identity(llm, draft, 512, 60, 64);
    /* one stream alone in its batches: the verify resumes after the draft's layers */
    sj_in one = {k_grounded[0], 0, 5, 60, 0, 0, 0};
    sj_out plain, ring;
    sched_run(llm, NULL, &one, 1, 512, 64, &plain);
    one.ring_on = 1;
    sched_run(llm, draft, &one, 1, 512, 64, &ring);
    cr_assert_eq(ring.n, plain.n);
    for (int t = 0; t < plain.n; t++) cr_assert_eq(ring.tok[t], plain.tok[t], "lone job: token %d differs", t);
    fprintf(stderr, "lone self-draft job: %llu verify steps resumed, drafted %llu accepted %llu\n", ring.resumed,
            ring.times.ring_drafted, ring.times.ring_accepted);
    cr_assert_gt(ring.resumed, 0);
    zl_llm_close(draft);
    zl_llm_close(llm);
}

Test(spec_sched, greedy_identity_in_batch_q4_0) {
    zl_err err = {0};
    zl_llm_opts lo = {1, 0, 0, 0, -1, 0, NULL};
    zl_llm *llm;
    cr_assert_eq(zl_llm_open(&llm, SYNTH("Q4_0"), &lo, &err), 0, "%s", err.msg);
    sched_greedy_identity(llm, NULL, 256, 40, 64);
    zl_llm_close(llm);
}

/* Sampling inside the batch keeps rejection sampling: the distributions of
 * the 4th and 5th generated tokens (emitted by the ring's first verify step:
 * the ring times two plain steps first) match plain decoding at temperature 1. */








Test(spec_sched, sampling_distribution_in_batch) {
    zl_err err = {0};
    zl_llm_opts lo = {1, 0, 0, 0, -1, 0, NULL};
    zl_llm *llm;
    cr_assert_eq(zl_llm_open(&llm, STORIES, &lo, &err), 0, "%s", err.msg);
    const char *prompt = "Tom had a red ball. Tom had a red ball. Tom had a";
    enum { RUNS = 960, B = 16 };
    int nv = zl_llm_n_vocab(llm);
    int *cnt[2][2];
    for (int m = 0; m < 2; m++)
        for (int p = 0; p < 2; p++) cnt[m][p] = calloc((size_t)nv, sizeof(int));
    unsigned long long dr = 0, ac = 0;
    for (int m = 0; m < 2; m++) {
        for (int r = 0; r < RUNS; r += B) {
            sj_in in[B];
            static sj_out out[B];
            for (int i = 0; i < B; i++) in[i] = (sj_in){prompt, m, 4, 5, 1.0f, (uint64_t)(m * 1000003 + r + i + 1), 5};
            sched_run(llm, NULL, in, B, 256, 256, out);
            for (int i = 0; i < B; i++) {
                cr_assert_eq(out[i].n, 5);
                cnt[m][0][out[i].tok[3]]++;
                cnt[m][1][out[i].tok[4]]++;
                dr += out[i].times.ring_drafted;
                ac += out[i].times.ring_accepted;
            }
        }
    }
    fprintf(stderr, "sched sampling: ring drafted %llu accepted %llu\n", dr, ac);
    cr_assert_gt(dr, RUNS / 4, "the ring must have drafted in many runs");
    for (int p = 0; p < 2; p++) {
        char what[64];
        snprintf(what, sizeof what, "in batch, token %d", p + 4);
        chi_square(cnt[0][p], cnt[1][p], nv, what);
    }
    for (int m = 0; m < 2; m++)
        for (int p = 0; p < 2; p++) free(cnt[m][p]);
    zl_llm_close(llm);
}

/* ---- the ring's draft length under a verify-cost curve (decode/ring.c) ---- */
#include "decode/ring.h"

/* k the ring drafts after `steps` verify steps that each accepted `acc` of `drafted` */
static int ring_k(const float *cost, int n, int steps, int drafted, int acc) {
    zl_ring r;
    zl_ring_init(&r, 5, 16);
    zl_ring_set_cost(&r, cost, n);
    r.cooldown = 0;
    for (int i = 0; i < steps; i++) zl_ring_update(&r, drafted, acc, 0, 1 + acc);
    return zl_ring_budget(&r);
}

Test(spec_ring, draft_length_follows_the_cost_curve) {
    /* the 1.1B Q4_0 curve: four tokens (k = 3 drafts) cost less than three */
    const float q4[] = {1, 1.46f, 1.81f, 1.39f, 1.63f, 1.87f, 2.11f, 2.35f};
    /* before any verify step: the configured initial size */
    cr_assert_eq(ring_k(q4, 8, 0, 0, 0), 5);
    cr_assert_eq(ring_k(q4, 8, 20, 4, 2), 3, "moderate acceptance -> the cheap four-token forward");
    cr_assert_geq(ring_k(q4, 8, 20, 4, 4), 5, "full acceptance -> longer drafts");
    cr_assert_eq(ring_k(q4, 8, 20, 3, 0), 0, "only rejections, drafts cost 39%%+: drafting stops (cool-down)");
    /* near-perfect acceptance on a flat curve (weight-bound decode): draft the most */
    const float flat[] = {1, 1, 1, 1};
    cr_assert_eq(ring_k(flat, 4, 20, 16, 16), 16);
    /* a compute-bound model (k tokens cost k): no draft length beats a plain step */
    const float lin[] = {1, 2, 3, 4, 5};
    cr_assert_eq(ring_k(lin, 5, 20, 5, 4), 0);
    /* higher acceptance -> longer drafts on a sub-linear curve */
    const float sub[] = {1, 1.2f, 1.4f, 1.6f, 1.8f};
    int lo = ring_k(sub, 5, 20, 8, 2), hi = ring_k(sub, 5, 20, 8, 7);
    cr_assert_lt(lo, hi, "k %d at low acceptance, %d at high", lo, hi);
    /* no curve: grow by one after a fully accepted step, as before */
    cr_assert_eq(ring_k(NULL, 0, 1, 5, 5), 6);
    zl_ring r;
    zl_ring_init(&r, 5, 16);
    cr_assert_float_eq(zl_ring_acceptance(&r), 0.5, 1e-9);
}

/* ---- the learned cost curve: timed steps teach the ring what drafting costs ---- */

/* Feed `steps` timed steps: plain ones (seconds t(1)) and verify steps of up
 * to `drafted` tokens (the drafter's proposal, cut to the ring's budget), each
 * draft accepted with probability p while the previous ones were (a fixed
 * pseudo-random sequence), timed at t(1 + drafted). */
static void ring_feed(zl_ring *r, double (*t)(int), int steps, int drafted, double p) {
    uint32_t x = 12345;
    for (int i = 0; i < steps; i++) {
        int k = zl_ring_budget(r);
        if (k == 0) { zl_ring_update(r, 0, 0, t(1), 1); continue; }
        int d = k < drafted ? k : drafted, a = 0;
        while (a < d) {
            x = x * 1664525u + 1013904223u;
            if ((x >> 8) * (1.0 / 16777216.0) >= p) break;
            a++;
        }
        zl_ring_update(r, d, a, t(1 + d), 1 + a);
    }
}
static double t_weight(int n) { return 0.040 * (1 + 0.08 * (n - 1)); } /* weight-bound: +8% a token */
static double t_compute(int n) { return 0.001 * (0.3 + 0.7 * n); }     /* nearly compute-bound: +70% a token */

Test(spec_ring, learns_the_cost_curve_from_step_times) {
    zl_ring r;
    zl_ring_init(&r, 5, 16);
    cr_assert_float_eq(zl_ring_cost(&r, 3), 0, 1e-12, "nothing timed yet");
    ring_feed(&r, t_weight, 2, 0, 0); /* the two plain steps */
    cr_assert_float_eq(zl_ring_cost(&r, 4), 0, 1e-12, "only plain steps seen: no slope");
    cr_assert_eq(zl_ring_budget(&r), 5, "first verify step: the configured size");
    zl_ring_update(&r, 5, 5, 10 * t_weight(6), 6);
    cr_assert_float_eq(zl_ring_cost(&r, 6), 0, 1e-12, "the first verify step (catching up) is not timed");
    zl_ring_update(&r, 5, 5, t_weight(6), 6);
    cr_assert_float_eq(zl_ring_cost(&r, 1), 1, 1e-9);
    cr_assert_float_eq(zl_ring_cost(&r, 6), 1.40, 1e-6);
    cr_assert_float_eq(zl_ring_cost(&r, 3), 1.16, 1e-6, "between the counts seen");
    cr_assert_float_eq(zl_ring_cost(&r, 11), 1.80, 1e-6, "past them, on the same line");
    /* a given curve overrides what was learned; removing it returns to the learned one */
    const float flat[] = {1, 1, 1};
    zl_ring_set_cost(&r, flat, 3);
    cr_assert_float_eq(zl_ring_cost(&r, 6), 1, 1e-6);
    zl_ring_set_cost(&r, NULL, 0);
    cr_assert_float_eq(zl_ring_cost(&r, 6), 1.40, 1e-6);
}

Test(spec_ring, weight_bound_keeps_drafting_at_low_acceptance) {
    /* a draft costs 8%: a per-draft acceptance of 25% still pays */
    zl_ring r;
    zl_ring_init(&r, 5, 16);
    ring_feed(&r, t_weight, 200, 4, 0.25);
    cr_assert_gt(r.verify_steps, 150, "drafting stopped: %llu verify steps of 200",
                 (unsigned long long)r.verify_steps);
    /* high acceptance: long drafts */
    zl_ring_init(&r, 5, 16);
    ring_feed(&r, t_weight, 100, 16, 1.0);
    cr_assert_geq(zl_ring_budget(&r), 12, "k %d at full acceptance", zl_ring_budget(&r));
}

Test(spec_ring, compute_bound_stops_drafting_when_it_does_not_pay) {
    /* a draft costs 70%: at 25% per-draft acceptance drafting loses; the ring
     * spends most steps plain (cool-downs grow 16 .. 512) */
    zl_ring r;
    zl_ring_init(&r, 5, 16);
    ring_feed(&r, t_compute, 400, 4, 0.25);
    cr_assert_lt(r.verify_steps, 40, "%llu verify steps of 400", (unsigned long long)r.verify_steps);
    /* ... while near-perfect acceptance pays even there */
    zl_ring_init(&r, 5, 16);
    ring_feed(&r, t_compute, 100, 8, 1.0);
    cr_assert_gt(r.verify_steps, 50, "%llu verify steps of 100", (unsigned long long)r.verify_steps);
}

/* the measured guard: a model that looks right but is not (steps far slower
 * than their token count suggests) is caught on whole windows of ring steps */
static int slow_calls;
static double t_lying(int n) { return n == 1 ? 0.040 : (slow_calls++ % 2 ? 0.040 * 1.08 : 0.40); }
Test(spec_ring, guard_stops_drafting_that_measures_slower_than_plain) {
    zl_ring r;
    zl_ring_init(&r, 5, 16);
    ring_feed(&r, t_lying, 300, 3, 0.5);
    cr_assert_lt(r.verify_steps, 100, "%llu verify steps of 300", (unsigned long long)r.verify_steps);
}
