/* vexp_avx2.c — vexp.h with 4-lane double vectors; compiled with -mavx2
 * -mfma and only reached after run-time detection.  Eight floats per step
 * (two vectors of four widened lanes), FMA in the reduction and the
 * polynomial; k comes from the shift constant (x·log2e + 1.5·2^52 holds k in
 * its low mantissa bits), 2^k is built in the exponent field (k + 1023 in
 * [734, 1023]); two running sums per lane; the tail by the reference. */
#include <immintrin.h>
#include <stddef.h>

#include "vexp.h"

#define ZL_INLINE static inline __attribute__((always_inline))

ZL_INLINE __m256d exp4d(__m128 xf) {
    __m256d x = _mm256_cvtps_pd(xf);
    /* max/min return their second operand when either is NaN: NaN stays */
    x = _mm256_max_pd(_mm256_set1_pd(-200.0), x);
    x = _mm256_min_pd(_mm256_setzero_pd(), x);
    __m256d shift = _mm256_set1_pd(0x1.8p52);
    __m256d t = _mm256_fmadd_pd(x, _mm256_set1_pd(1.4426950408889634), shift);
    __m256d k = _mm256_sub_pd(t, shift);
    __m256d r = _mm256_fnmadd_pd(k, _mm256_set1_pd(0x1.62e42feep-1), x);
    r = _mm256_fnmadd_pd(k, _mm256_set1_pd(1.9082149292705877e-10), r);
    __m256d p = _mm256_set1_pd(1.0 / 362880);
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 40320));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 5040));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 720));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 120));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 24));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 6));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(0.5));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0));
    __m256i bits = _mm256_slli_epi64(_mm256_add_epi64(_mm256_castpd_si256(t), _mm256_set1_epi64x(1023)), 52);
    return _mm256_mul_pd(p, _mm256_castsi256_pd(bits));
}

static double vexp_sum_avx2(const float *l, float m, float t, int n, double *e) {
    __m256 vm = _mm256_set1_ps(m), vt = _mm256_set1_ps(t);
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_div_ps(_mm256_sub_ps(_mm256_loadu_ps(l + i), vm), vt);
        __m256d a = exp4d(_mm256_castps256_ps128(v)), b = exp4d(_mm256_extractf128_ps(v, 1));
        if (e) {
            _mm256_storeu_pd(e + i, a);
            _mm256_storeu_pd(e + i + 4, b);
        }
        s0 = _mm256_add_pd(s0, a);
        s1 = _mm256_add_pd(s1, b);
    }
    __m256d s = _mm256_add_pd(s0, s1);
    __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
    double sum = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
    if (i < n) sum += zl_vexp_sum_ref(l + i, m, t, n - i, e ? e + i : NULL);
    return sum;
}

zl_vexp_sum_fn zl_vexp_sum_fn_avx2(void) { return vexp_sum_avx2; }
