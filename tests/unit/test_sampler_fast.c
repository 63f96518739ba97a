/* test_sampler_fast.c — the sampler's fast paths (vectorisable maximum,
 * block-indexed draw, one-pass top-k selection, min-p cut without expf far
 * from it) choose exactly what the plain implementation of sampler_ref.h
 * chooses: the same token for the same seed, parameters and logits, and
 * bit-identical zl_sampler_probs, over random logit vectors of several
 * shapes (ties, -inf entries, repeated maxima, a NaN) and parameter sets. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "decode/sampler.h"
#include "sampler_ref.h"

static uint64_t rs = 0x9e3779b97f4a7c15ull;
static double uni(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (double)(rs >> 11) * (1.0 / 9007199254740992.0);
}
static double normal(void) { return sqrt(-2.0 * log(uni() + 1e-300)) * cos(6.283185307179586 * uni()); }

/* Logits of one of seven shapes: a normal body with a head; coarse values
 * (many ties); a few -inf entries; several equal maxima; a flat vector;
 * one NaN (kind 5); a rising ramp in steps of 0.01 with pairs of equal
 * values (every value beats the selection's floor, so it moves often). */
static void fill(float *l, int n, int kind) {
    double sd = 0.5 + 4.0 * uni();
    for (int i = 0; i < n; i++) l[i] = (float)(sd * normal());
    if (kind == 0)
        for (int h = 0; h < 8; h++) l[(int)(uni() * n)] = (float)(5.0 + 10.0 * uni());
    if (kind == 1)
        for (int i = 0; i < n; i++) l[i] = roundf(l[i] * 2.0f) / 2.0f;
    if (kind == 2)
        for (int h = 0; h < n / 10 + 1; h++) l[(int)(uni() * n)] = -INFINITY;
    if (kind == 3) {
        float top = 20.0f;
        for (int h = 0; h < 3; h++) l[(int)(uni() * n)] = top;
    }
    if (kind == 4)
        for (int i = 0; i < n; i++) l[i] = 1.0f;
    if (kind == 5) l[1 + (int)(uni() * (n - 1))] = NAN;
    if (kind == 6)
        for (int i = 0; i < n; i++) l[i] = (float)(i / 2) * 0.01f - 5.0f;
}

static int n_checked;

static void compare(const float *base, int n, const zl_sampler_params *p) {
    zl_sampler *a = zl_sampler_new(p, n);
    ref_sampler *b = ref_sampler_new(p, n);
    cr_assert(a && b);
    float *la = malloc((size_t)n * sizeof *la), *lb = malloc((size_t)n * sizeof *lb);
    float *pa = malloc((size_t)n * sizeof *pa), *pb = malloc((size_t)n * sizeof *pb);
    cr_assert(la && lb && pa && pb);
    for (int h = 0; h < 16; h++) {
        int t = (int)(uni() * n);
        zl_sampler_accept(a, t);
        ref_sampler_accept(b, t);
    }
    for (int d = 0; d < 4; d++) {
        memcpy(la, base, (size_t)n * sizeof *la);
        memcpy(lb, base, (size_t)n * sizeof *lb);
        int ta = zl_sampler_sample(a, la), tb = ref_sampler_sample(b, lb);
        cr_assert_eq(ta, tb, "n %d temp %g top_k %d top_p %g min_p %g draw %d: %d vs reference %d", n, p->temp,
                     p->top_k, p->top_p, p->min_p, d, ta, tb);
        n_checked++;
    }
    memcpy(la, base, (size_t)n * sizeof *la);
    memcpy(lb, base, (size_t)n * sizeof *lb);
    zl_sampler_probs(a, la, pa);
    ref_sampler_probs(b, lb, pb);
    cr_assert(memcmp(pa, pb, (size_t)n * sizeof *pa) == 0, "n %d temp %g top_k %d top_p %g min_p %g: probs differ",
              n, p->temp, p->top_k, p->top_p, p->min_p);
    zl_sampler_free(a);
    ref_sampler_free(b);
    free(la);
    free(lb);
    free(pa);
    free(pb);
}

Test(sampler_fast, same_tokens_as_the_reference) {
    static const int sizes[] = {7, 64, 1000, 6000, 12000};
    static const float temps[] = {0.0f, 0.3f, 0.7f, 1.0f, 1.5f};
    static const int ks[] = {0, 1, 5, 40, 300};
    static const float tps[] = {1.0f, 0.9f, 0.5f};
    static const float mps[] = {0.0f, 0.05f, 0.3f};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        int n = sizes[si];
        float *base = malloc((size_t)n * sizeof *base);
        cr_assert(base);
        for (int kind = 0; kind < 7; kind++) {
            fill(base, n, kind);
            for (size_t a = 0; a < 5; a++)
                for (size_t b = 0; b < 5; b++)
                    for (size_t c = 0; c < 3; c++)
                        for (size_t d = 0; d < 3; d++) {
                            zl_sampler_params p = zl_sampler_defaults();
                            p.temp = temps[a], p.top_k = ks[b], p.top_p = tps[c], p.min_p = mps[d];
                            p.seed = (uint64_t)(si * 1000 + kind * 100 + a * 20 + b * 5 + c * 2 + d);
                            if ((a + b + c + d) % 4 == 0) p.repeat_penalty = 1.3f, p.presence_penalty = 0.5f;
                            compare(base, n, &p);
                        }
        }
        free(base);
    }
    cr_assert_gt(n_checked, 10000);
}

/* Logit bias and penalties feed every path; the draw also matches with a
 * bias that lifts one token to the top and penalties over a long window. */
Test(sampler_fast, bias_and_penalties) {
    enum { N = 20000 };
    float *base = malloc(N * sizeof *base);
    cr_assert(base);
    zl_sampler_bias bias[3] = {{17, 30.0f}, {N - 1, -5.0f}, {N + 5, 1.0f}};
    for (int r = 0; r < 20; r++) {
        fill(base, N, r % 5);
        zl_sampler_params p = zl_sampler_defaults();
        p.temp = r % 3 ? 0.8f : 0.0f;
        p.top_k = r % 2 ? 0 : 40;
        p.top_p = r % 4 < 2 ? 1.0f : 0.95f;
        p.min_p = r % 5 ? 0.0f : 0.05f;
        p.repeat_penalty = 1.1f, p.frequency_penalty = 0.2f, p.repeat_last_n = -1;
        p.bias = bias, p.n_bias = 3, p.seed = (uint64_t)r;
        compare(base, N, &p);
    }
    free(base);
}
