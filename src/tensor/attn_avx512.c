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

static float kdot_q8_0(const void *k, const float *q, int n) {
    const zl_block_q8_0 *b = k;
    __m512 acc = _mm512_setzero_ps();
    for (int i = 0; i < n / ZL_QK; i++) {
        __m512 d = _mm512_set1_ps(zl_f16_to_f32(b[i].d));
        __m512 k0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)b[i].qs)));
        __m512 k1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b[i].qs + 16))));
        __m512 bs = _mm512_fmadd_ps(k1, _mm512_loadu_ps(q + i * ZL_QK + 16), _mm512_mul_ps(k0, _mm512_loadu_ps(q + i * ZL_QK)));
        acc = _mm512_fmadd_ps(d, bs, acc);
    }
    return _mm512_reduce_add_ps(acc);
}

static void vaxpy_q8_0(float a, const void *v, float *out, int n) {
    const zl_block_q8_0 *b = v;
    for (int i = 0; i < n / ZL_QK; i++) {
        __m512 ad = _mm512_set1_ps(a * zl_f16_to_f32(b[i].d));
        float *o = out + i * ZL_QK;
        __m512 v0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)b[i].qs)));
        __m512 v1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b[i].qs + 16))));
        _mm512_storeu_ps(o, _mm512_fmadd_ps(ad, v0, _mm512_loadu_ps(o)));
        _mm512_storeu_ps(o + 16, _mm512_fmadd_ps(ad, v1, _mm512_loadu_ps(o + 16)));
    }
}

zl_attn_kernels zl_attn_kernels_avx512(zl_type t) {
    if (t == ZL_TYPE_F16) return (zl_attn_kernels){kdot_f16, vaxpy_f16};
    if (t == ZL_TYPE_Q8_0) return (zl_attn_kernels){kdot_q8_0, vaxpy_q8_0};
    return (zl_attn_kernels){kdot_f32, vaxpy_f32};
}
