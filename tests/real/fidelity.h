/* fidelity.h — zerolayer against llama.cpp on a trained model, from the
 * fixtures of tests/fixtures/real/<model>/ (see the README there).  Owns the
 * reading of those fixtures and the three checks; the bounds are the
 * caller's, one fid_bounds per model, set from the spread between two
 * references measured on the same fixture.  Never writes a fixture.
 *
 *   fid_logits     512 positions of GPL-3 ids: fast mode vs llama.cpp's and
 *                  the exact reference's top-32 (mean |d| over that set, top-1
 *                  agreement); exact mode on a prefix reproduces the exact
 *                  fixture, and its distance from llama.cpp there is printed
 *   fid_greedy     128 greedy steps of a chat answer (fed llama.cpp's tokens)
 *                  pick llama.cpp's token, or another only where llama.cpp's
 *                  own top-2 margin is below a threshold
 *   fid_perplexity llama-perplexity's protocol (chunks of ctx tokens, BOS in
 *                  front when the vocabulary adds one, second half scored) on
 *                  the same ids, against its printed estimate */
#ifndef ZL_TEST_FIDELITY_H
#define ZL_TEST_FIDELITY_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "real_models.h"
#include "zerolayer.h"

#define FID_DIR ZL_ROOT "/tests/fixtures/real/"
#define FID_CHUNK 64

typedef struct {
    const char *model;    /* name in tools/models.tsv = fixture directory */
    double mean_llama;    /* fast mode vs llama.cpp: most mean |d| over its top-32 */
    double top1_llama;    /* fast mode vs llama.cpp: least top-1 agreement */
    double mean_exact;    /* fast mode vs the exact reference: most mean |d| */
    double top1_exact;    /* ... least top-1 agreement */
    int exact_positions;  /* exact mode is run on this many leading positions */
    double greedy_margin; /* a greedy divergence is accepted below this llama.cpp top-2 margin */
    double ppl_rel;       /* perplexity: most relative difference from llama-perplexity (0 = not checked) */
} fid_bounds;

typedef struct {
    uint32_t nv, n, k;
    int32_t *id;  /* [n][k], largest logit first */
    float *logit; /* [n][k] */
    float *lse;   /* [n] logsumexp over the whole vocabulary */
    float *next;  /* [n] logit of the next id (NaN at the last position) */
} fid_topk;

static inline int32_t *fid_read_ids(const char *model, const char *file, int *n) {
    char path[1024];
    snprintf(path, sizeof path, FID_DIR "%s/%s", model, file);
    FILE *f = fopen(path, "r");
    cr_assert(f, "cannot open %s", path);
    int cap = 256, k = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    long v;
    while (fscanf(f, "%ld", &v) == 1) {
        if (k == cap) ids = realloc(ids, (cap *= 2) * sizeof *ids);
        ids[k++] = (int32_t)v;
    }
    cr_assert(feof(f), "%s: not a list of token ids", path);
    fclose(f);
    *n = k;
    return ids;
}

static inline void fid_read_topk(const char *model, const char *file, fid_topk *t) {
    char path[1024];
    snprintf(path, sizeof path, FID_DIR "%s/%s", model, file);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    char magic[4];
    uint32_t h[4];
    cr_assert(fread(magic, 1, 4, f) == 4 && !memcmp(magic, "ZLTK", 4) && fread(h, 4, 4, f) == 4 && h[0] == 1,
              "%s: not a ZLTK version 1 file", path);
    t->nv = h[1], t->n = h[2], t->k = h[3];
    t->id = malloc((size_t)t->n * t->k * 4);
    t->logit = malloc((size_t)t->n * t->k * 4);
    t->lse = malloc(t->n * 4);
    t->next = malloc(t->n * 4);
    for (uint32_t p = 0; p < t->n; p++) {
        int ok = fread(t->id + (size_t)p * t->k, 4, t->k, f) == t->k &&
                 fread(t->logit + (size_t)p * t->k, 4, t->k, f) == t->k && fread(t->lse + p, 4, 1, f) == 1 &&
                 fread(t->next + p, 4, 1, f) == 1;
        cr_assert(ok, "%s: truncated at position %u", path, p);
    }
    fclose(f);
}

static inline void fid_free_topk(fid_topk *t) { free(t->id), free(t->logit), free(t->lse), free(t->next); }

/* running comparison of full logit rows against one reference's top-K */
typedef struct {
    double sum_abs, max_abs;
    long n_vals, n_pos, top1;
    int first_miss;
} fid_agree;

static inline void fid_agree_row(fid_agree *a, const fid_topk *t, uint32_t p, const float *row) {
    for (uint32_t k = 0; k < t->k; k++) {
        double d = fabs((double)t->logit[(size_t)p * t->k + k] - row[t->id[(size_t)p * t->k + k]]);
        a->sum_abs += d;
        if (d > a->max_abs) a->max_abs = d;
    }
    a->n_vals += t->k;
    uint32_t best = 0;
    for (uint32_t i = 1; i < t->nv; i++)
        if (row[i] > row[best]) best = i;
    int hit = (int32_t)best == t->id[(size_t)p * t->k];
    a->top1 += hit;
    if (!hit && a->first_miss < 0) a->first_miss = (int)p;
    a->n_pos++;
}

static inline double fid_mean(const fid_agree *a) { return a->sum_abs / (double)a->n_vals; }
static inline double fid_top1(const fid_agree *a) { return (double)a->top1 / (double)a->n_pos; }

static inline double fid_lse(const float *l, int nv) {
    float mx = l[0];
    for (int i = 1; i < nv; i++) if (l[i] > mx) mx = l[i];
    double s = 0;
    for (int i = 0; i < nv; i++) s += exp((double)l[i] - mx);
    return log(s) + mx;
}

static inline zl_llm *fid_open(const char *model) {
    zl_err err = {0};
    zl_llm_opts lo = {2, 0, 0, 0, 0, 0, NULL};
    zl_llm *llm = NULL;
    cr_assert_eq(zl_llm_open(&llm, zl_real_model(model), &lo, &err), 0, "%s", err.msg);
    return llm;
}

static inline zl_seq *fid_seq(zl_llm *llm, int n_ctx, int exact) {
    zl_err err = {0};
    zl_seq_opts so = {n_ctx, exact ? ZL_KV_F32 : ZL_KV_F16, zl_sampling_defaults()};
    zl_seq *s = NULL;
    cr_assert_eq(zl_seq_new(&s, llm, &so, &err), 0, "%s", err.msg);
    zl_seq_set_exact(s, exact);
    return s;
}

/* Evaluate ids[0..n) in one sequence, FID_CHUNK tokens a call, comparing every
 * row with the references as it comes. */
static inline void fid_eval_compare(zl_llm *llm, int exact, const int32_t *ids, int n, const fid_topk *ra,
                                    fid_agree *a, const fid_topk *rb, fid_agree *b, double *ppl) {
    zl_err err = {0};
    int nv = zl_llm_n_vocab(llm);
    zl_seq *s = fid_seq(llm, n, exact);
    float *buf = malloc((size_t)FID_CHUNK * nv * sizeof *buf);
    cr_assert(buf);
    double nll = 0;
    for (int p = 0; p < n; p += FID_CHUNK) {
        int len = n - p < FID_CHUNK ? n - p : FID_CHUNK;
        cr_assert_eq(zl_seq_eval(s, ids + p, len, FID_CHUNK, buf, &err), 0, "%s", err.msg);
        for (int i = 0; i < len; i++) {
            const float *row = buf + (size_t)i * nv;
            fid_agree_row(a, ra, (uint32_t)(p + i), row);
            if (rb && (uint32_t)(p + i) < rb->n) fid_agree_row(b, rb, (uint32_t)(p + i), row);
            if (p + i + 1 < n) nll += fid_lse(row, nv) - row[ids[p + i + 1]];
        }
    }
    if (ppl) *ppl = exp(nll / (n - 1));
    free(buf);
    zl_seq_free(s);
}

static inline double fid_ref_ppl(const fid_topk *t, uint32_t n) {
    double nll = 0;
    for (uint32_t p = 0; p + 1 < n; p++) nll += t->lse[p] - t->next[p];
    return exp(nll / (n - 1));
}

static inline void fid_logits(const fid_bounds *B) {
    fid_topk L, E;
    fid_read_topk(B->model, "llamacpp.topk", &L);
    fid_read_topk(B->model, "exact.topk", &E);
    int n_ids;
    int32_t *ids = fid_read_ids(B->model, "gpl3.ids", &n_ids);
    cr_assert(E.n <= L.n && (int)L.n <= n_ids, "%s: fixtures disagree on the positions", B->model);
    zl_llm *llm = fid_open(B->model);
    cr_assert_eq((uint32_t)zl_llm_n_vocab(llm), L.nv, "%s: vocabulary %d, fixture %u", B->model, zl_llm_n_vocab(llm),
                 L.nv);
    int n = (int)L.n;

    fid_agree fl = {.first_miss = -1}, fe = {.first_miss = -1};
    double ppl;
    fid_eval_compare(llm, 0, ids, n, &L, &fl, &E, &fe, &ppl);
    fprintf(stderr,
            "%s fast, %d positions: vs llama.cpp mean|d| %.4f max %.3f top1 %.1f%% (first miss %d) | vs exact (%u "
            "positions) mean|d| %.4f max %.3f top1 %.1f%% | ppl %.4f (llama.cpp %.4f)\n",
            B->model, n, fid_mean(&fl), fl.max_abs, 100 * fid_top1(&fl), fl.first_miss, E.n, fid_mean(&fe),
            fe.max_abs, 100 * fid_top1(&fe), ppl, fid_ref_ppl(&L, L.n));
    cr_expect(fid_mean(&fl) <= B->mean_llama, "%s fast vs llama.cpp: mean |d| %.4f > %.4f", B->model, fid_mean(&fl),
              B->mean_llama);
    cr_expect(fid_top1(&fl) >= B->top1_llama, "%s fast vs llama.cpp: top-1 %.3f < %.3f", B->model, fid_top1(&fl),
              B->top1_llama);
    cr_expect(fid_mean(&fe) <= B->mean_exact, "%s fast vs exact: mean |d| %.4f > %.4f", B->model, fid_mean(&fe),
              B->mean_exact);
    cr_expect(fid_top1(&fe) >= B->top1_exact, "%s fast vs exact: top-1 %.3f < %.3f", B->model, fid_top1(&fe),
              B->top1_exact);

    /* exact mode reproduces the exact fixture (it was made by this mode, and
     * the mode is pinned to independent exact references in test_logits);
     * its distance from llama.cpp on the prefix is the spread, stated */
    int ne = B->exact_positions < (int)E.n ? B->exact_positions : (int)E.n;
    fid_agree xl = {.first_miss = -1}, xe = {.first_miss = -1};
    fid_eval_compare(llm, 1, ids, ne, &L, &xl, &E, &xe, NULL);
    fprintf(stderr, "%s exact, %d positions: vs exact fixture mean|d| %.2e max %.2e | vs llama.cpp mean|d| %.4f top1 %.1f%%\n",
            B->model, ne, fid_mean(&xe), xe.max_abs, fid_mean(&xl), 100 * fid_top1(&xl));
    cr_expect(xe.max_abs <= 1e-3 && fid_top1(&xe) == 1.0, "%s exact mode: max |d| %.2e from the exact fixture",
              B->model, xe.max_abs);
    zl_llm_close(llm);
    free(ids);
    fid_free_topk(&L);
    fid_free_topk(&E);
}

/* greedy.txt: "# ..." header, then "step token logit second_token second_logit" */
static inline int fid_read_greedy(const char *model, int32_t *tok, float *margin, int max) {
    char path[1024], line[256];
    snprintf(path, sizeof path, FID_DIR "%s/greedy.txt", model);
    FILE *f = fopen(path, "r");
    cr_assert(f, "cannot open %s", path);
    int n = 0;
    while (n < max && fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        int step, t, t2;
        float l1, l2;
        cr_assert(sscanf(line, "%d %d %f %d %f", &step, &t, &l1, &t2, &l2) == 5 && step == n, "%s: bad line %d",
                  path, n);
        tok[n] = t, margin[n] = l1 - l2;
        n++;
    }
    fclose(f);
    return n;
}

/* Each step's argmax must be llama.cpp's token, or differ only where
 * llama.cpp's own top-2 margin is below the threshold.  The sequence always
 * continues with llama.cpp's token, so after a near-tie the remaining steps
 * are still checked on the same context. */
static inline void fid_greedy(const fid_bounds *B) {
    int32_t ref[256];
    float margin[256];
    int n_ref = fid_read_greedy(B->model, ref, margin, 256);
    cr_assert_eq(n_ref, 128, "%s: greedy fixture has %d steps", B->model, n_ref);
    int n_prompt;
    int32_t *prompt = fid_read_ids(B->model, "chat.ids", &n_prompt);
    zl_llm *llm = fid_open(B->model);
    int nv = zl_llm_n_vocab(llm);
    zl_seq *s = fid_seq(llm, n_prompt + n_ref + 8, 0);
    zl_err err = {0};
    cr_assert_eq(zl_seq_eval(s, prompt, n_prompt, FID_CHUNK, NULL, &err), 0, "%s", err.msg);
    int parted = 0, first = -1;
    for (int step = 0; step < n_ref; step++) {
        const float *l = zl_seq_logits(s);
        int32_t b1 = 0, b2 = -1;
        for (int i = 1; i < nv; i++)
            if (l[i] > l[b1]) b2 = b1, b1 = i;
            else if (b2 < 0 || l[i] > l[b2]) b2 = i;
        if (b1 != ref[step]) {
            fprintf(stderr,
                    "%s greedy: step %d of %d: llama.cpp %d (its top-2 margin %.4f), zerolayer %d (ahead of llama.cpp's "
                    "token by %.4f)\n",
                    B->model, step, n_ref, ref[step], margin[step], b1, l[b1] - l[ref[step]]);
            cr_expect(margin[step] < B->greedy_margin,
                      "%s greedy: differs at step %d where llama.cpp's top-2 margin %.4f >= %.4f", B->model, step,
                      margin[step], B->greedy_margin);
            if (first < 0) first = step;
            parted++;
        }
        cr_assert_eq(zl_seq_eval(s, &ref[step], 1, 1, NULL, &err), 0, "%s", err.msg);
    }
    float least = margin[0];
    int at = 0;
    for (int i = 1; i < n_ref; i++)
        if (margin[i] < least) least = margin[i], at = i;
    fprintf(stderr,
            "%s greedy: %d of %d steps equal llama.cpp's (first difference at %d; smallest llama.cpp top-2 margin %.4f at "
            "step %d)\n",
            B->model, n_ref - parted, n_ref, first, least, at);
    zl_seq_free(s);
    zl_llm_close(llm);
    free(prompt);
}

/* ppl.txt: lines "CTX PPL" from llama-perplexity's "Final estimate" */
static inline void fid_perplexity(const fid_bounds *B) {
    char path[1024];
    snprintf(path, sizeof path, FID_DIR "%s/ppl.txt", B->model);
    FILE *f = fopen(path, "r");
    cr_assert(f, "cannot open %s", path);
    int n_ids;
    int32_t *ids = fid_read_ids(B->model, "gpl3.ids", &n_ids);
    zl_llm *llm = fid_open(B->model);
    int nv = zl_llm_n_vocab(llm);
    /* llama-perplexity puts BOS over the first token of each chunk when the
     * vocabulary adds one: the first id of gpl3.ids is then BOS itself */
    int add_bos = ids[0] == zl_llm_bos(llm);
    int ctx, checked = 0;
    double ref_ppl;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || sscanf(line, "%d %lf", &ctx, &ref_ppl) != 2) continue;
        int n_chunk = 2048 / ctx;
        cr_assert(n_chunk * ctx <= n_ids, "%s: %d ids, need %d", B->model, n_ids, n_chunk * ctx);
        zl_seq *s = fid_seq(llm, ctx, 0);
        float *logits = malloc((size_t)ctx * nv * sizeof *logits);
        int32_t *chunk = malloc(ctx * sizeof *chunk);
        double nll = 0;
        long count = 0;
        zl_err err = {0};
        for (int c = 0; c < n_chunk; c++) {
            memcpy(chunk, ids + (size_t)c * ctx, ctx * sizeof *chunk);
            if (add_bos) chunk[0] = zl_llm_bos(llm);
            zl_seq_truncate(s, 0);
            cr_assert_eq(zl_seq_eval(s, chunk, ctx, FID_CHUNK, logits, &err), 0, "%s", err.msg);
            for (int i = ctx / 2; i < ctx - 1; i++) {
                const float *row = logits + (size_t)i * nv;
                nll += fid_lse(row, nv) - row[chunk[i + 1]];
                count++;
            }
        }
        double ppl = exp(nll / count), rel = ppl / ref_ppl - 1;
        fprintf(stderr, "%s perplexity ctx %4d, %d chunks (%ld scored): zerolayer %.4f llama-perplexity %.4f (%+.3f%%)\n",
                B->model, ctx, n_chunk, count, ppl, ref_ppl, 100 * rel);
        if (B->ppl_rel > 0)
            cr_expect(fabs(rel) <= B->ppl_rel, "%s ctx %d: perplexity %.4f vs llama.cpp %.4f (%+.3f%%)", B->model, ctx,
                      ppl, ref_ppl, 100 * rel);
        checked++;
        free(chunk);
        free(logits);
        zl_seq_free(s);
    }
    fclose(f);
    cr_assert(checked >= 3, "%s: ppl.txt holds %d contexts", B->model, checked);
    zl_llm_close(llm);
    free(ids);
}

#endif
