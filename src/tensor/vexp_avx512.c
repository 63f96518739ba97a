/* vexp_avx512.c — vexp.h with 8-lane double vectors; compiled with
 * -mavx512f and only reached after run-time detection.  Sixteen floats per
 * step (two vectors of eight widened lanes), FMA in the reduction and the
 * polynomial, the scale 2^k by VSCALEFPD (exact: p·2^k stays normal), two
 * running sums per lane; the tail under a mask. */
#include <immintrin.h>

#include "vexp.h"

#define ZL_INLINE static inline __attribute__((always_inline))

ZL_INLINE __m512d exp8d(__m256 xf) {
    __m512d x = _mm512_cvtps_pd(xf);
    /* max/min return their second operand when either is NaN: NaN stays */
    x = _mm512_max_pd(_mm512_set1_pd(-200.0), x);
    x = _mm512_min_pd(_mm512_setzero_pd(), x);
    __m512d k = _mm512_roundscale_pd(_mm512_mul_pd(x, _mm512_set1_pd(1.4426950408889634)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512d r = _mm512_fnmadd_pd(k, _mm512_set1_pd(0x1.62e42feep-1), x);
    r = _mm512_fnmadd_pd(k, _mm512_set1_pd(1.9082149292705877e-10), r);
    __m512d p = _mm512_set1_pd(1.0 / 362880);
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 40320));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 5040));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 720));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 120));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 24));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 6));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(0.5));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0));
    return _mm512_scalef_pd(p, k);
}

static double vexp_sum_avx512(const float *l, float m, float t, int n, double *e) {
    __m512 vm = _mm512_set1_ps(m), vt = _mm512_set1_ps(t);
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_div_ps(_mm512_sub_ps(_mm512_loadu_ps(l + i), vm), vt);
        __m512d a = exp8d(_mm512_castps512_ps256(v)), b = exp8d(_mm512_extractf32x8_ps(v, 1));
        if (e) {
            _mm512_storeu_pd(e + i, a);
            _mm512_storeu_pd(e + i + 8, b);
        }
        s0 = _mm512_add_pd(s0, a);
        s1 = _mm512_add_pd(s1, b);
    }
    for (; i < n; i += 8) {
        int m = n - i < 8 ? n - i : 8;
        __mmask8 k = (__mmask8)((1u << m) - 1);
        __m512d a = _mm512_maskz_mov_pd(k, exp8d(_mm256_div_ps(_mm256_sub_ps(_mm256_maskz_loadu_ps(k, l + i), _mm512_castps512_ps256(vm)), _mm512_castps512_ps256(vt))));
        if (e) _mm512_mask_storeu_pd(e + i, k, a);
        s0 = _mm512_add_pd(s0, a);
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
}

zl_vexp_sum_fn zl_vexp_sum_fn_avx512(void) { return vexp_sum_avx512; }
