/* test_sampler_fast.c — the sampler's fast paths (vectorisable maximum,
 * block-indexed draw, one-pass top-k selection, min-p cut without expf far
 * from it) choose exactly what the plain implementation of sampler_ref.h
 * chooses: the same token for the same seed, parameters and logits, and
 * bit-identical zl_sampler_probs, over random logit vectors of several
 * shapes (ties, -inf entries, repeated maxima, a NaN) and parameter sets.
 * The unfiltered draw's vector-exp path is compared on Qwen-sized
 * vocabularies at every ISA level, made to fall back, and its fallback share
 * measured. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
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

/* ---- the unfiltered draw's fast path (decode/sampler.c fast_draw) ------ */

enum { QWEN_VOCAB = 151936 };

/* Logits of Qwen's vocabulary size in one of ten shapes: Gaussian bodies of
 * sd 2, 3, 5 and 8; a language-model-like body (sd 2.5) with a head of 24
 * tokens 6..14 above it; coarse values (many ties); all equal; a few -inf
 * and hugely negative entries (underflow); one NaN; one +inf. */
static void fill_big(float *l, int n, int kind) {
    static const double sds[] = {2, 3, 5, 8, 2.5, 2, 1, 3, 3, 3};
    for (int i = 0; i < n; i++) l[i] = (float)(sds[kind] * normal());
    if (kind == 4)
        for (int h = 0; h < 24; h++) l[(int)(uni() * n)] = (float)(6.0 + 8.0 * uni()) + 2.5f * (float)normal();
    if (kind == 5)
        for (int i = 0; i < n; i++) l[i] = roundf(l[i]);
    if (kind == 6)
        for (int i = 0; i < n; i++) l[i] = -3.0f;
    if (kind == 7)
        for (int h = 0; h < 2000; h++) l[(int)(uni() * n)] = h % 2 ? -INFINITY : -1e30f;
    if (kind == 8) l[(int)(uni() * n)] = NAN;
    if (kind == 9) l[(int)(uni() * n)] = INFINITY;
}

/* draws of one sampler (fast path at level isa; -1: exact only) against the
 * reference; returns the sampler's exact-path count in *exact */
static void compare_unfiltered(const float *base, int n, float temp, uint64_t seed, int isa, int draws,
                               uint64_t *fast, uint64_t *exact) {
    zl_sampler_params p = zl_sampler_defaults();
    p.temp = temp, p.top_k = 0, p.top_p = 1.0f, p.min_p = 0.0f, p.seed = seed;
    zl_sampler *a = zl_sampler_new(&p, n);
    ref_sampler *b = ref_sampler_new(&p, n);
    float *la = malloc((size_t)n * sizeof *la), *lb = malloc((size_t)n * sizeof *lb);
    cr_assert(a && b && la && lb);
    zl_sampler_set_isa(a, isa);
    for (int d = 0; d < draws; d++) {
        memcpy(la, base, (size_t)n * sizeof *la);
        memcpy(lb, base, (size_t)n * sizeof *lb);
        int ta = zl_sampler_sample(a, la), tb = ref_sampler_sample(b, lb);
        if (ta != tb)
            cr_assert_fail("level %d temp %g seed %llu draw %d: %d vs reference %d", isa, temp,
                           (unsigned long long)seed, d, ta, tb);
    }
    zl_sampler_draw_counts(a, fast, exact);
    zl_sampler_free(a);
    ref_sampler_free(b);
    free(la);
    free(lb);
}

/* Every shape, four temperatures, every level the CPU has (the scalar
 * reference included, and the exact path alone): the same tokens as the
 * reference, bit for bit; a NaN or +inf logit always takes the exact path. */
Test(sampler_fast, unfiltered_every_level) {
    static const float temps[] = {1.0f, 0.8f, 0.3f, 2.0f};
    float *base = malloc(QWEN_VOCAB * sizeof *base);
    cr_assert(base);
    int top = zl_cpu_max_isa();
    for (int kind = 0; kind < 10; kind++) {
        fill_big(base, QWEN_VOCAB, kind);
        for (int ti = 0; ti < 4; ti++)
            for (int isa = -1; isa <= top; isa++) {
                uint64_t fast, exact;
                compare_unfiltered(base, QWEN_VOCAB, temps[ti], (uint64_t)(kind * 100 + ti * 10 + isa + 1), isa, 12,
                                   &fast, &exact);
                cr_assert_eq(fast + exact, 12);
                if (isa < 0 || kind >= 8) cr_assert_eq(exact, 12, "kind %d level %d: %llu fast draws", kind, isa,
                                                       (unsigned long long)fast);
            }
    }
    free(base);
}

/* Many seeds on the shapes a model gives and on small vocabularies, at the
 * process's level. */
Test(sampler_fast, unfiltered_many_seeds) {
    float *base = malloc(QWEN_VOCAB * sizeof *base);
    cr_assert(base);
    for (int v = 0; v < 24; v++) {
        fill_big(base, QWEN_VOCAB, v % 5);
        uint64_t fast, exact;
        compare_unfiltered(base, QWEN_VOCAB, v % 2 ? 0.8f : 1.0f, (uint64_t)v, zl_cpu_max_isa(), 40, &fast, &exact);
    }
    static const int sizes[] = {1, 2, 3, 17, 511, 512, 513, 4096, 32000};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (int kind = 0; kind < 10; kind++) {
            fill_big(base, sizes[si], kind);
            uint64_t fast, exact;
            compare_unfiltered(base, sizes[si], 1.0f, (uint64_t)(si * 10 + kind), zl_cpu_max_isa(), 30, &fast, &exact);
        }
    free(base);
}

/* The exact path decides the draws the bound cannot: with all logits equal
 * every boundary is an integer and r lands near one often (a few percent of
 * draws), and those tokens are still the reference's.  And a draw on a
 * boundary: two equal logits (the rest -inf), so S = 2 and the boundary is
 * at r = 1; the first seed whose first uniform u has |2u - 1| < 2^-24 (well
 * inside the margin, about 2^-22 there) must take the exact path and still
 * give the reference's token. */
Test(sampler_fast, fallback_is_exact) {
    float *base = malloc(QWEN_VOCAB * sizeof *base);
    cr_assert(base);
    for (int i = 0; i < QWEN_VOCAB; i++) base[i] = 0.5f;
    uint64_t fast_all = 0, exact_all = 0;
    for (int seed = 0; seed < 20; seed++) {
        uint64_t fast, exact;
        compare_unfiltered(base, QWEN_VOCAB, 1.0f, (uint64_t)seed, zl_cpu_max_isa(), 20, &fast, &exact);
        fast_all += fast, exact_all += exact;
    }
    fprintf(stderr, "all-equal logits: %llu of %llu draws by the exact path\n", (unsigned long long)exact_all,
                (unsigned long long)(fast_all + exact_all));
    if (zl_cpu_max_isa() > ZL_ISA_SCALAR) cr_assert(exact_all > 0 && fast_all > exact_all);
    zl_sampler_params p = zl_sampler_defaults();
    p.temp = 1.0f, p.top_k = 0, p.top_p = 1.0f, p.min_p = 0.0f;
    ref_sampler *r = ref_sampler_new(&p, 2);
    cr_assert(r);
    uint64_t seed = 0;
    for (;; seed++) {
        r->p.seed = seed;
        ref_sampler_reset(r);
        if (fabs(2.0 * ref_sampler_uniform(r) - 1.0) < 0x1p-24) break;
    }
    ref_sampler_free(r);
    for (int i = 0; i < 1000; i++) base[i] = -INFINITY;
    base[300] = base[700] = 2.0f;
    for (int isa = ZL_ISA_SCALAR; isa <= (int)zl_cpu_max_isa(); isa++) {
        uint64_t fast, exact;
        compare_unfiltered(base, 1000, 1.0f, seed, isa, 1, &fast, &exact);
        cr_assert(fast == 0 && exact == 1, "seed %llu level %d: the boundary draw took the fast path",
                  (unsigned long long)seed, isa);
    }
    free(base);
}

/* How often the exact path runs.  Its share is about the chance that r' lands
 * within the margin (~2^-22 of the running sum, weighted towards the middle)
 * of a boundary, so it grows with the number of tokens that carry the mass:
 * below 1e-3 on very peaked logits (sd 8; a head holding ~90% of the mass at
 * temp 0.8), a few 1e-3 where a body of thousands of tokens holds 10% of it
 * or a 24-token head shares it, a few percent on flat Gaussian logits of
 * sd 2.  (Each exact-path draw costs the fast attempt plus the expf pass.) */
static double exact_share(int kind, float temp, int draws) {
    float *base = malloc(QWEN_VOCAB * sizeof *base), *l = malloc(QWEN_VOCAB * sizeof *l);
    cr_assert(base && l);
    uint64_t fast_all = 0, exact_all = 0;
    for (int v = 0; v < 8; v++) {
        if (kind < 0) { /* a body of sd 2.5 (e^15 of mass) and a head: one token 17..19 above, five 12..15 */
            for (int i = 0; i < QWEN_VOCAB; i++) base[i] = (float)(2.5 * normal());
            base[(int)(uni() * QWEN_VOCAB)] = (float)(17.0 + 2.0 * uni());
            for (int h = 0; h < 5; h++) base[(int)(uni() * QWEN_VOCAB)] = (float)(12.0 + 3.0 * uni());
        } else
            fill_big(base, QWEN_VOCAB, kind);
        zl_sampler_params p = zl_sampler_defaults();
        p.temp = temp, p.top_k = 0, p.top_p = 1.0f, p.min_p = 0.0f, p.seed = (uint64_t)v;
        zl_sampler *s = zl_sampler_new(&p, QWEN_VOCAB);
        cr_assert(s);
        for (int d = 0; d < draws / 8; d++) {
            memcpy(l, base, QWEN_VOCAB * sizeof *l);
            zl_sampler_sample(s, l);
        }
        uint64_t fast, exact;
        zl_sampler_draw_counts(s, &fast, &exact);
        fast_all += fast, exact_all += exact;
        zl_sampler_free(s);
    }
    free(base);
    free(l);
    return (double)exact_all / (double)(fast_all + exact_all);
}

Test(sampler_fast, exact_path_share) {
    if (zl_cpu_max_isa() == ZL_ISA_SCALAR) cr_skip_test("no fast path at the scalar level");
    double peaked = exact_share(-1, 1.0f, 4000), sd8 = exact_share(3, 1.0f, 2000);
    double peaked08 = exact_share(-1, 0.8f, 2000), head = exact_share(4, 0.8f, 2000), flat = exact_share(0, 1.0f, 1000);
    fprintf(stderr, "exact-path share: peaked %.5f (temp 0.8: %.5f), sd 8 %.5f, sd 2.5 + 24-token head (temp 0.8) %.5f, "
                "flat sd 2 %.5f\n", peaked, peaked08, sd8, head, flat);
    cr_assert_lt(peaked08, 1e-3);
    cr_assert_lt(sd8, 1e-3);
    cr_assert_lt(peaked, 1e-2);
    cr_assert_lt(head, 1e-2);
    cr_assert_lt(flat, 0.05);
}

/* Top-p without top-k decides its cut with the vector exp's mass when
 * certain: the tokens and zl_sampler_probs are still the reference's bit for
 * bit, on Qwen-sized vocabularies of every shape (at every level for top-p
 * 0.5, at the process's for 0.9 and 0.99, whose heads grow long). */
Test(sampler_fast, top_p_only_every_level) {
    static const float tps[] = {0.9f, 0.5f, 0.99f};
    float *base = malloc(QWEN_VOCAB * sizeof *base), *la = malloc(QWEN_VOCAB * sizeof *la);
    float *lb = malloc(QWEN_VOCAB * sizeof *lb), *pa = malloc(QWEN_VOCAB * sizeof *pa), *pb = malloc(QWEN_VOCAB * sizeof *pb);
    cr_assert(base && la && lb && pa && pb);
    int top = zl_cpu_max_isa();
    uint64_t fast_all = 0, exact_all = 0;
    for (int kind = 0; kind < 10; kind++) {
        fill_big(base, QWEN_VOCAB, kind);
        for (int ti = 0; ti < 3; ti++)
            for (int isa = ti == 1 ? -1 : top; isa <= top; isa++) {
                zl_sampler_params p = zl_sampler_defaults();
                p.temp = 0.7f, p.top_k = 0, p.top_p = tps[ti], p.min_p = kind % 3 ? 0.0f : 0.05f;
                p.seed = (uint64_t)(kind * 10 + ti);
                zl_sampler *a = zl_sampler_new(&p, QWEN_VOCAB);
                ref_sampler *b = ref_sampler_new(&p, QWEN_VOCAB);
                cr_assert(a && b);
                zl_sampler_set_isa(a, isa);
                for (int d = 0; d < 3; d++) {
                    memcpy(la, base, QWEN_VOCAB * sizeof *la);
                    memcpy(lb, base, QWEN_VOCAB * sizeof *lb);
                    int ta = zl_sampler_sample(a, la), tb = ref_sampler_sample(b, lb);
                    cr_assert_eq(ta, tb, "kind %d top_p %g level %d draw %d: %d vs reference %d", kind, tps[ti], isa, d, ta, tb);
                }
                memcpy(la, base, QWEN_VOCAB * sizeof *la);
                memcpy(lb, base, QWEN_VOCAB * sizeof *lb);
                zl_sampler_probs(a, la, pa);
                ref_sampler_probs(b, lb, pb);
                cr_assert(memcmp(pa, pb, QWEN_VOCAB * sizeof *pa) == 0, "kind %d top_p %g level %d: probs differ", kind,
                          tps[ti], isa);
                uint64_t fast, exact;
                zl_sampler_draw_counts(a, &fast, &exact);
                if (isa < 0 || kind >= 8) cr_assert_eq(fast, 0);
                if (isa >= 0 && kind < 8) fast_all += fast, exact_all += exact;
                zl_sampler_free(a);
                ref_sampler_free(b);
            }
    }
    fprintf(stderr, "top-p cuts: %llu of %llu by the exact path\n", (unsigned long long)exact_all,
            (unsigned long long)(fast_all + exact_all));
    if (top > ZL_ISA_SCALAR) cr_assert_gt(fast_all, exact_all);
    free(base);
    free(la);
    free(lb);
    free(pa);
    free(pb);
}
