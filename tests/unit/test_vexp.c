/* test_vexp.c — the vector exp of tensor/vexp.h at every ISA level this CPU
 * has: each term within ZL_VEXP_REL_ERR of exp (libm's double exp, within
 * 2^-52 of the true value) and within the sampler's combined bound of libm's
 * expf, over a dense sweep of [-104, 0] (float bit patterns at a stride, and
 * a uniform grid) and special values (±0, subnormals, -inf, NaN, positive
 * inputs); the returned sum within n·2^-52 of its terms; every length (the
 * SIMD tails and masks); x = (l - m) / t exactly as C computes it. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "tensor/vexp.h"

#define REQUIRE(cond, ...)                        \
    do {                                          \
        if (!(cond)) cr_assert_fail(__VA_ARGS__); \
    } while (0)

enum { CHUNK = 4096 };

static const char *lvl(int isa) { return zl_isa_name((zl_isa)isa); }

/* A level whose kernel is the one below's (every NEON level shares one). */
static int same_as_below(int isa) { return isa > 0 && zl_vexp_sum_fn_for(isa) == zl_vexp_sum_fn_for(isa - 1); }

/* The worst relative error against exp seen at each level, for the log. */
static double worst[8];

/* Terms of x[0..n) at level isa against exp and expf; the sum against the terms. */
static void check(int isa, const float *x, int n) {
    zl_vexp_sum_fn f = zl_vexp_sum_fn_for(isa);
    static double e[CHUNK + 1];
    e[n] = 12345.0; /* sentinel: nothing past n is written */
    double sum = f(x, 0.0f, 1.0f, n, e), terms = 0;
    REQUIRE(e[n] == 12345.0, "%s: wrote past n = %d", lvl(isa), n);
    for (int i = 0; i < n; i++) {
        double xd = x[i], E = exp(xd), got = e[i];
        terms += got;
        if (xd > 0) {
            REQUIRE(got == 1.0, "%s: exp(%a) = %a, not 1 (clamped)", lvl(isa), xd, got);
            continue;
        }
        if (xd < -200) {
            REQUIRE(got >= 0 && got < ZL_VEXP_ABS_ERR, "%s: exp(%a) = %a", lvl(isa), xd, got);
            continue;
        }
        double err = fabs(got - E), rel = err / E;
        if (rel > worst[isa]) worst[isa] = rel;
        REQUIRE(err <= ZL_VEXP_REL_ERR * E + 0x1p-52 * E, "%s: exp(%a) = %a, libm %a: rel %g > %g", lvl(isa), xd,
                got, E, rel, ZL_VEXP_REL_ERR);
        /* what the sampler relies on: within (2^-22 + REL)·exp + 2^-148 + ABS of expf */
        double p = expf(x[i]);
        REQUIRE(fabs(got - p) <= (0x1p-22 + ZL_VEXP_REL_ERR) * E * (1 + 0x1p-40) + 0x1p-148 + ZL_VEXP_ABS_ERR,
                "%s: exp(%a) = %a vs expf %a", lvl(isa), xd, got, p);
    }
    REQUIRE(fabs(sum - terms) <= (double)n * 0x1p-52 * terms, "%s: sum %a vs terms %a (n %d)", lvl(isa), sum, terms, n);
    double alone = f(x, 0.0f, 1.0f, n, NULL);
    REQUIRE(alone == sum, "%s: sum without terms %a vs %a", lvl(isa), alone, sum);
}

Test(vexp, dense_sweep_every_level) {
    static float x[CHUNK];
    int top = zl_cpu_max_isa();
    for (int isa = ZL_ISA_SCALAR; isa <= top; isa++) {
        if (same_as_below(isa)) continue;
        /* float bit patterns from -0 down to -104 (0xc2d00000), every 61st */
        int m = 0;
        for (uint32_t b = 0x80000000u; b <= 0xc2d00000u; b += 61) {
            memcpy(&x[m++], &b, sizeof b);
            if (m == CHUNK) check(isa, x, m), m = 0;
        }
        /* a uniform grid over [-104, 0] */
        for (int i = 0; i <= 2000000; i++) {
            x[m++] = (float)(-104.0 * i / 2000000);
            if (m == CHUNK) check(isa, x, m), m = 0;
        }
        check(isa, x, m);
        fprintf(stderr, "vexp %s: worst relative error vs exp %.3g (bound %.3g)\n", lvl(isa), worst[isa], ZL_VEXP_REL_ERR);
    }
}

Test(vexp, special_values_every_level) {
    const float sp[] = {0.0f, -0.0f, -0x1p-149f, -0x1p-126f, -1e-30f, -1e-7f, -0.34657359f, -0.3465736f,
                        -87.33654f, -88.72283f, -103.27893f, -103.97208f, -104.0f, -150.0f, -200.0f, -200.5f,
                        -1e30f, -INFINITY, 1e-30f, 0.5f, 88.0f, INFINITY};
    int ns = (int)(sizeof sp / sizeof *sp), top = zl_cpu_max_isa();
    for (int isa = ZL_ISA_SCALAR; isa <= top; isa++) {
        if (same_as_below(isa)) continue;
        check(isa, sp, ns);
        zl_vexp_sum_fn f = zl_vexp_sum_fn_for(isa);
        double e[2];
        const float z[2] = {0.0f, -0.0f};
        f(z, 0.0f, 1.0f, 2, e);
        cr_assert(e[0] == 1.0 && e[1] == 1.0, "%s: exp(±0) = %a, %a", lvl(isa), e[0], e[1]);
        /* a NaN anywhere makes the sum NaN, at every position of a vector and its tail */
        for (int n = 1; n <= 40; n++)
            for (int at = 0; at < n; at++) {
                float v[40];
                for (int i = 0; i < n; i++) v[i] = -(float)i * 0.25f;
                v[at] = NAN;
                double s = f(v, 0.0f, 1.0f, n, NULL);
                REQUIRE(s != s, "%s: NaN at %d of %d: sum %a", lvl(isa), at, n, s);
            }
    }
}

/* Every length 0..70 (the vector bodies, tails and masks), and x = (l - m) / t
 * in float: the same terms as the kernel given those x with m = 0, t = 1. */
Test(vexp, lengths_and_scaled_input_every_level) {
    enum { N = 70 };
    float l[N], x[N];
    double e1[N + 1], e2[N + 1];
    uint64_t st = 0x243f6a8885a308d3ull;
    int top = zl_cpu_max_isa();
    for (int isa = ZL_ISA_SCALAR; isa <= top; isa++) {
        if (same_as_below(isa)) continue;
        zl_vexp_sum_fn f = zl_vexp_sum_fn_for(isa);
        for (int rep = 0; rep < 200; rep++) {
            float m = 0, t = 0.25f + (float)(rep % 9) * 0.3f;
            for (int i = 0; i < N; i++) {
                st = st * 6364136223846793005ull + 1442695040888963407ull;
                l[i] = (float)((double)(st >> 11) * 0x1p-53 * 40.0 - 30.0);
                m = l[i] > m ? l[i] : m;
            }
            for (int i = 0; i < N; i++) x[i] = (l[i] - m) / t;
            for (int n = 0; n <= N; n++) {
                check(isa, x, n);
                double s1 = f(l, m, t, n, e1), s2 = f(x, 0.0f, 1.0f, n, e2);
                REQUIRE(s1 == s2 && memcmp(e1, e2, (size_t)n * sizeof *e1) == 0, "%s: (l - m) / t differs at n %d",
                        lvl(isa), n);
            }
        }
    }
}
