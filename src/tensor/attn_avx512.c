/* attn_avx512.c — AVX-512 attention loops (16 lanes); only reached after
 * run-time detection.  Head dimensions below 16 use the AVX2 version. */
#include <immintrin.h>

#include "attn.h"

static float kdot_f16(const void *k, const float *q, int n) {
    const zl_f16 *r = k;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(r + i))), _mm512_loadu_ps(q + i), a0);
        a1 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(r + i + 16))), _mm512_loadu_ps(q + i + 16), a1);
    }
    for (; i + 16 <= n; i += 16)
        a0 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(r + i))), _mm512_loadu_ps(q + i), a0);
    float s = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
    for (; i < n; i++) s += zl_f16_to_f32(r[i]) * q[i];
    return s;
}

static void vaxpy_f16(float a, const void *v, float *out, int n) {
    const zl_f16 *r = v;
    __m512 va = _mm512_set1_ps(a);
    int i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(out + i, _mm512_fmadd_ps(va, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(r + i))),
                                                  _mm512_loadu_ps(out + i)));
    for (; i < n; i++) out[i] += a * zl_f16_to_f32(r[i]);
}

static float kdot_f32(const void *k, const float *q, int n) {
    const float *r = k;
    __m512 a0 = _mm512_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(r + i), _mm512_loadu_ps(q + i), a0);
    float s = _mm512_reduce_add_ps(a0);
    for (; i < n; i++) s += r[i] * q[i];
    return s;
}

static void vaxpy_f32(float a, const void *v, float *out, int n) {
    const float *r = v;
    __m512 va = _mm512_set1_ps(a);
    int i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(out + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(r + i), _mm512_loadu_ps(out + i)));
    for (; i < n; i++) out[i] += a * r[i];
}

zl_attn_kernels zl_attn_kernels_avx512(zl_type t) {
    if (t == ZL_TYPE_F16) return (zl_attn_kernels){kdot_f16, vaxpy_f16};
    return (zl_attn_kernels){kdot_f32, vaxpy_f32};
}
