/* vexp_neon.c — vexp.h with 2-lane double vectors; AArch64 only (ASIMD is
 * part of the base architecture, so every NEON level uses this file).
 * Four floats per step (two vectors of two widened lanes), FMA in the
 * reduction and the polynomial, k by round-to-nearest (FRINTN), 2^k built in
 * the exponent field (k + 1023 in [734, 1023]); the tail by the reference.
 * Never called on another architecture; owns no dispatch (vexp_ref.c). */
#if defined(__aarch64__)
#include <arm_neon.h>
#include <stddef.h>

#include "vexp.h"

#define ZL_INLINE static inline __attribute__((always_inline))

ZL_INLINE float64x2_t exp2d(float32x2_t xf) {
    float64x2_t x = vcvt_f64_f32(xf);
    /* FMAX/FMIN return NaN when either operand is NaN: NaN stays */
    x = vminq_f64(vmaxq_f64(x, vdupq_n_f64(-200.0)), vdupq_n_f64(0.0));
    float64x2_t k = vrndnq_f64(vmulq_n_f64(x, 1.4426950408889634));
    float64x2_t r = vfmsq_f64(x, k, vdupq_n_f64(0x1.62e42feep-1));
    r = vfmsq_f64(r, k, vdupq_n_f64(1.9082149292705877e-10));
    float64x2_t p = vdupq_n_f64(1.0 / 362880);
    p = vfmaq_f64(vdupq_n_f64(1.0 / 40320), p, r);
    p = vfmaq_f64(vdupq_n_f64(1.0 / 5040), p, r);
    p = vfmaq_f64(vdupq_n_f64(1.0 / 720), p, r);
    p = vfmaq_f64(vdupq_n_f64(1.0 / 120), p, r);
    p = vfmaq_f64(vdupq_n_f64(1.0 / 24), p, r);
    p = vfmaq_f64(vdupq_n_f64(1.0 / 6), p, r);
    p = vfmaq_f64(vdupq_n_f64(0.5), p, r);
    p = vfmaq_f64(vdupq_n_f64(1.0), p, r);
    p = vfmaq_f64(vdupq_n_f64(1.0), p, r);
    int64x2_t bits = vshlq_n_s64(vaddq_s64(vcvtq_s64_f64(k), vdupq_n_s64(1023)), 52);
    return vmulq_f64(p, vreinterpretq_f64_s64(bits));
}

static double vexp_sum_neon(const float *l, float m, float t, int n, double *e) {
    float32x4_t vm = vdupq_n_f32(m), vt = vdupq_n_f32(t);
    float64x2_t s0 = vdupq_n_f64(0), s1 = vdupq_n_f64(0);
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t v = vdivq_f32(vsubq_f32(vld1q_f32(l + i), vm), vt);
        float64x2_t a = exp2d(vget_low_f32(v)), b = exp2d(vget_high_f32(v));
        if (e) {
            vst1q_f64(e + i, a);
            vst1q_f64(e + i + 2, b);
        }
        s0 = vaddq_f64(s0, a);
        s1 = vaddq_f64(s1, b);
    }
    double sum = vaddvq_f64(vaddq_f64(s0, s1));
    if (i < n) sum += zl_vexp_sum_ref(l + i, m, t, n - i, e ? e + i : NULL);
    return sum;
}

zl_vexp_sum_fn zl_vexp_sum_fn_neon(void) { return vexp_sum_neon; }
#endif
