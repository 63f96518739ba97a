/* vexp_ref.c — the scalar reference of vexp.h, and the choice of level.
 * Plain double arithmetic in the order vexp.h describes (no FMA: the
 * build is ISO C, so nothing is contracted); its terms are what the SIMD
 * levels compute up to the rounding differences the bound covers. */
#include <stdint.h>
#include <string.h>

#include "../base/cpu.h"
#include "vexp.h"

/* the constants every level uses */
#define VEXP_LOG2E 1.4426950408889634
#define VEXP_LN2_HI 0x1.62e42feep-1 /* 32 significant bits */
#define VEXP_LN2_LO 1.9082149292705877e-10
#define VEXP_SHIFT 0x1.8p52 /* x + SHIFT - SHIFT: x rounded to an integer */

static double exp_one(float xf) {
    double x = xf;
    if (x != x) return x;
    x = x < -200.0 ? -200.0 : x > 0.0 ? 0.0 : x;
    double t = x * VEXP_LOG2E + VEXP_SHIFT, k = t - VEXP_SHIFT;
    double r = (x - k * VEXP_LN2_HI) - k * VEXP_LN2_LO;
    double p = 1.0 / 362880;
    p = p * r + 1.0 / 40320;
    p = p * r + 1.0 / 5040;
    p = p * r + 1.0 / 720;
    p = p * r + 1.0 / 120;
    p = p * r + 1.0 / 24;
    p = p * r + 1.0 / 6;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    uint64_t bits = (uint64_t)((int64_t)k + 1023) << 52;
    double scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

double zl_vexp_sum_ref(const float *l, float m, float t, int n, double *e) {
    double sum = 0;
    for (int i = 0; i < n; i++) {
        double v = exp_one((l[i] - m) / t);
        if (e) e[i] = v;
        sum += v;
    }
    return sum;
}

zl_vexp_sum_fn zl_vexp_sum_fn_for(int isa) {
    zl_vexp_sum_fn f = NULL;
    isa = zl_cpu_cap_isa((zl_isa)isa);
#if defined(__aarch64__)
    if (isa >= ZL_ISA_NEON) f = zl_vexp_sum_fn_neon();
#else
    if (isa >= ZL_ISA_AVX512) f = zl_vexp_sum_fn_avx512();
    if (!f && isa >= ZL_ISA_AVX2) f = zl_vexp_sum_fn_avx2();
#endif
    return f ? f : zl_vexp_sum_ref;
}
