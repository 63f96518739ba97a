/* test_sampler.c — sampling transforms and reproducibility.
 * The expected distributions are computed here independently (softmax in
 * double over hand-picked logits), not by calling the sampler's helpers. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "decode/sampler.h"

static zl_sampler_params plain(float temp) {
    zl_sampler_params p = {temp, 0, 1.0f, 0.0f, 1.0f, 64, 0.0f, 0.0f, 1, NULL, 0};
    return p;
}

Test(sampler, greedy_is_argmax_lowest_id_on_ties) {
    zl_sampler_params p = plain(0);
    zl_sampler *s = zl_sampler_new(&p, 5);
    float l[5] = {0.1f, 3.0f, -1.0f, 3.0f, 2.0f};
    cr_assert_eq(zl_sampler_sample(s, l), 1);
    zl_sampler_free(s);
}

Test(sampler, seed_reproduces_and_differs) {
    int n = 50, a[200], b[200], c[200];
    float base[50];
    for (int i = 0; i < n; i++) base[i] = sinf((float)i) * 2.0f;
    zl_sampler_params p = zl_sampler_defaults();
    p.temp = 1.0f; p.top_k = 0; p.top_p = 1.0f; p.min_p = 0;
    for (int run = 0; run < 3; run++) {
        p.seed = run == 2 ? 99 : 42;
        zl_sampler *s = zl_sampler_new(&p, n);
        for (int k = 0; k < 200; k++) {
            float l[50];
            memcpy(l, base, sizeof l);
            int t = zl_sampler_sample(s, l);
            (run == 0 ? a : run == 1 ? b : c)[k] = t;
        }
        zl_sampler_free(s);
    }
    cr_assert(memcmp(a, b, sizeof a) == 0, "same seed must give the same tokens");
    cr_assert(memcmp(a, c, sizeof a) != 0, "different seeds should differ");
}

/* Chi-square goodness of fit of 40000 draws against softmax(l / T). */
static void check_distribution(float temp) {
    enum { N = 6, DRAWS = 40000 };
    float base[N] = {1.0f, 0.5f, 0.0f, -0.5f, 2.0f, 1.5f};
    double expect[N], z = 0;
    for (int i = 0; i < N; i++) z += exp(base[i] / temp);
    for (int i = 0; i < N; i++) expect[i] = exp(base[i] / temp) / z * DRAWS;
    zl_sampler_params p = plain(temp);
    p.seed = 1234;
    zl_sampler *s = zl_sampler_new(&p, N);
    int cnt[N] = {0};
    for (int k = 0; k < DRAWS; k++) {
        float l[N];
        memcpy(l, base, sizeof l);
        cnt[zl_sampler_sample(s, l)]++;
    }
    double chi = 0;
    for (int i = 0; i < N; i++) chi += (cnt[i] - expect[i]) * (cnt[i] - expect[i]) / expect[i];
    /* 5 degrees of freedom: p = 0.001 at 20.5 */
    cr_assert_lt(chi, 20.5, "temp %.2f: chi-square %.2f too large", temp, chi);
    zl_sampler_free(s);
}

Test(sampler, temperature_one_matches_softmax) { check_distribution(1.0f); }
Test(sampler, temperature_half_matches_softmax) { check_distribution(0.5f); }

Test(sampler, top_k_top_p_min_p_filter) {
    float base[6] = {4.0f, 3.0f, 2.0f, 1.0f, 0.0f, -1.0f};
    float pr[6], l[6];
    zl_sampler_params p = plain(1.0f);
    p.top_k = 2;
    zl_sampler *s = zl_sampler_new(&p, 6);
    memcpy(l, base, sizeof l);
    zl_sampler_probs(s, l, pr);
    double z = exp(4.0) + exp(3.0);
    cr_assert_float_eq(pr[0], exp(4.0) / z, 1e-5);
    cr_assert_float_eq(pr[1], exp(3.0) / z, 1e-5);
    for (int i = 2; i < 6; i++) cr_assert_eq(pr[i], 0.0f);
    zl_sampler_free(s);

    /* top-p 0.7: p0 = 0.636 < 0.7, p0+p1 = 0.870 >= 0.7 -> keep two */
    p = plain(1.0f);
    p.top_p = 0.7f;
    s = zl_sampler_new(&p, 6);
    memcpy(l, base, sizeof l);
    zl_sampler_probs(s, l, pr);
    cr_assert(pr[0] > 0 && pr[1] > 0 && pr[2] == 0.0f);
    zl_sampler_free(s);

    /* min-p 0.3: keep tokens with p >= 0.3 * p_max, i.e. logit >= 4 + ln 0.3 = 2.796 */
    p = plain(1.0f);
    p.min_p = 0.3f;
    s = zl_sampler_new(&p, 6);
    memcpy(l, base, sizeof l);
    zl_sampler_probs(s, l, pr);
    cr_assert(pr[0] > 0 && pr[1] > 0 && pr[2] == 0.0f);
    zl_sampler_free(s);
}

Test(sampler, penalties) {
    float l[4] = {2.0f, -2.0f, 1.0f, 0.5f};
    zl_sampler_params p = plain(0);
    p.repeat_penalty = 2.0f;
    p.presence_penalty = 0.25f;
    p.frequency_penalty = 0.5f;
    zl_sampler *s = zl_sampler_new(&p, 4);
    zl_sampler_accept(s, 0);
    zl_sampler_accept(s, 0);
    zl_sampler_accept(s, 1);
    float pr[4];
    zl_sampler_probs(s, l, pr);
    /* token 0: 2/2 - 2*0.5 - 0.25 = -0.25; token 1: -2*2 - 0.5 - 0.25 = -4.75 */
    cr_assert_float_eq(l[0], -0.25f, 1e-6);
    cr_assert_float_eq(l[1], -4.75f, 1e-6);
    cr_assert_float_eq(l[2], 1.0f, 1e-6);
    cr_assert_eq(pr[2], 1.0f, "greedy picks token 2 after penalties");
    zl_sampler_free(s);
}

Test(sampler, top_k_with_huge_vocab_and_nan_safe) {
    int n = 100000;
    float *l = malloc(sizeof(float) * n);
    for (int i = 0; i < n; i++) l[i] = (float)((i * 7919) % n) / n;
    l[4242] = 5.0f;
    zl_sampler_params p = zl_sampler_defaults();
    p.top_k = 1;
    zl_sampler *s = zl_sampler_new(&p, n);
    cr_assert_eq(zl_sampler_sample(s, l), 4242);
    zl_sampler_free(s);
    free(l);
}

/* logit_bias: added to the raw logits before every other stage. */
Test(sampler, logit_bias_bans_forces_and_is_copied) {
    float base[5] = {0.1f, 3.0f, -1.0f, 2.5f, 2.0f}, l[5];
    zl_sampler_params p = plain(0);
    zl_sampler_bias *b = malloc(3 * sizeof *b);
    b[0] = (zl_sampler_bias){1, -100.0f}; /* ban the argmax: 3 (2.5) wins */
    b[1] = (zl_sampler_bias){7, 100.0f};  /* outside the vocabulary: ignored */
    b[2] = (zl_sampler_bias){-1, 100.0f};
    p.bias = b;
    p.n_bias = 3;
    zl_sampler *s = zl_sampler_new(&p, 5);
    free(b); /* the sampler holds its own copy */
    for (int k = 0; k < 3; k++) {
        memcpy(l, base, sizeof l);
        cr_assert_eq(zl_sampler_sample(s, l), 3);
        cr_assert_float_eq(l[1], 3.0f - 100.0f, 1e-4);
    }
    zl_sampler_free(s);

    zl_sampler_bias force = {2, 100.0f};
    p = plain(1.0f);
    p.bias = &force;
    p.n_bias = 1;
    s = zl_sampler_new(&p, 5);
    for (int k = 0; k < 200; k++) {
        memcpy(l, base, sizeof l);
        cr_assert_eq(zl_sampler_sample(s, l), 2, "+100 forces token 2 at temperature 1");
    }
    zl_sampler_free(s);
}

Test(sampler, logit_bias_precedes_penalties_and_shapes_probs) {
    float base[6] = {1.0f, 0.5f, 0.0f, -0.5f, 2.0f, 1.5f}, l[6], pr[6];
    zl_sampler_bias bias[2] = {{4, -3.0f}, {2, 2.0f}};
    zl_sampler_params p = plain(0);
    p.repeat_penalty = 2.0f;
    p.bias = bias;
    p.n_bias = 2;
    zl_sampler *s = zl_sampler_new(&p, 6);
    zl_sampler_accept(s, 4);
    memcpy(l, base, sizeof l);
    zl_sampler_probs(s, l, pr);
    /* token 4 (in the history): (2 - 3) * 2 = -2; token 2 (not): 0 + 2 */
    cr_assert_float_eq(l[4], -2.0f, 1e-6);
    cr_assert_float_eq(l[2], 2.0f, 1e-6);
    cr_assert_eq(pr[2], 1.0f, "greedy picks the biased token 2 (2.0 > 1.5)");
    zl_sampler_free(s);

    /* a positive logit shows the order: bias +1 on token 0 (1.0) with a
     * repeat penalty of 2: bias first = (1 + 1) / 2 = 1.0, after = 1.5 */
    zl_sampler_bias one = {0, 1.0f};
    p = plain(0);
    p.repeat_penalty = 2.0f;
    p.bias = &one;
    p.n_bias = 1;
    s = zl_sampler_new(&p, 6);
    zl_sampler_accept(s, 0);
    memcpy(l, base, sizeof l);
    zl_sampler_probs(s, l, pr);
    cr_assert_float_eq(l[0], 1.0f, 1e-6);
    zl_sampler_free(s);

    /* temperature 0.7, no filter: probabilities are softmax((l + bias) / T) */
    p = plain(0.7f);
    p.bias = bias;
    p.n_bias = 2;
    p.top_k = 3; /* through the filter path: the top three after the bias are 2, 5, 0 */
    s = zl_sampler_new(&p, 6);
    memcpy(l, base, sizeof l);
    zl_sampler_probs(s, l, pr);
    double e5 = exp(1.5 / 0.7), e2 = exp(2.0 / 0.7), e0 = exp(1.0 / 0.7), z = e5 + e2 + e0;
    cr_assert_float_eq(pr[5], e5 / z, 1e-5);
    cr_assert_float_eq(pr[2], e2 / z, 1e-5);
    cr_assert_float_eq(pr[0], e0 / z, 1e-5);
    cr_assert_eq(pr[4], 0.0f, "token 4 (2.0 - 3) falls out of the top 3");
    zl_sampler_free(s);
}

/* ---- constraint hook ---- */

typedef struct even_con {
    int masks, accepts, last;
} even_con;

static int even_mask(void *ud, float *l) {
    ((even_con *)ud)->masks++;
    for (int i = 1; i < 8; i += 2) l[i] = -INFINITY;
    return 4;
}
static int even_check(void *ud, int t) { return t % 2 == 0; }
static int even_accept(void *ud, int t) {
    ((even_con *)ud)->accepts++;
    ((even_con *)ud)->last = t;
    return 0;
}

/* Draw-then-check and mask-first must give the same distribution: p(t)/Z
 * over the allowed tokens, computed here by hand. */
Test(sampler, constraint_keeps_the_masked_distribution) {
    float base[8] = {0.5f, 2.0f, 1.0f, 1.5f, -1.0f, 0.0f, 0.7f, 3.0f};
    double w[8], z = 0;
    for (int i = 0; i < 8; i += 2) z += (w[i] = exp(base[i]));
    for (int with_check = 0; with_check < 2; with_check++) {
        zl_sampler_params p = plain(1.0f);
        p.seed = 7;
        zl_sampler *s = zl_sampler_new(&p, 8);
        even_con ec = {0};
        zl_sampler_constraint c = {&ec, even_mask, with_check ? even_check : NULL, even_accept, 0, NULL};
        zl_sampler_set_constraint(s, &c);
        int n = 40000, cnt[8] = {0};
        for (int k = 0; k < n; k++) {
            float l[8];
            memcpy(l, base, sizeof l);
            int t = zl_sampler_sample(s, l);
            cr_assert_eq(t % 2, 0, "odd token %d", t);
            cr_assert_eq(ec.last, t);
            cnt[t]++;
        }
        cr_assert_eq(ec.accepts, n);
        if (with_check) cr_assert_lt(ec.masks, n); /* the first draw was kept often */
        else cr_assert_eq(ec.masks, n);
        for (int i = 0; i < 8; i += 2) {
            double want = w[i] / z, got = (double)cnt[i] / n, sd = sqrt(want * (1 - want) / n);
            cr_assert(fabs(got - want) < 5 * sd, "check %d token %d: %.4f vs %.4f", with_check, i, got, want);
        }
        zl_sampler_free(s);
    }
}

static int none_mask(void *ud, float *l) { return 0; }
static int none_check(void *ud, int t) { return 0; }

Test(sampler, constraint_with_nothing_allowed_returns_the_fallback) {
    zl_sampler_params p = plain(1.0f);
    zl_sampler *s = zl_sampler_new(&p, 8);
    even_con ec = {0};
    zl_sampler_constraint c = {&ec, none_mask, none_check, even_accept, 5, NULL};
    zl_sampler_set_constraint(s, &c);
    float l[8] = {0};
    cr_assert_eq(zl_sampler_sample(s, l), 5);
    cr_assert_eq(ec.accepts, 0);
    zl_sampler_free(s);
}
