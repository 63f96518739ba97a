/* attn_avx2.c — AVX2/FMA/F16C attention loops; compiled with -mavx2 -mfma -mf16c
 * and only reached after run-time detection.  Tails fall back to scalar. */
#include <immintrin.h>

#include "attn.h"

static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static float kdot_f16(const void *k, const float *q, int n) {
    const zl_f16 *r = k;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(r + i))), _mm256_loadu_ps(q + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(r + i + 8))), _mm256_loadu_ps(q + i + 8), a1);
    }
    for (; i + 8 <= n; i += 8)
        a0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(r + i))), _mm256_loadu_ps(q + i), a0);
    float s = hsum256(_mm256_add_ps(a0, a1));
    for (; i < n; i++) s += zl_f16_to_f32(r[i]) * q[i];
    return s;
}

static void vaxpy_f16(float a, const void *v, float *out, int n) {
    const zl_f16 *r = v;
    __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_fmadd_ps(va, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(r + i))),
                                                  _mm256_loadu_ps(out + i)));
    for (; i < n; i++) out[i] += a * zl_f16_to_f32(r[i]);
}

static float kdot_f32(const void *k, const float *q, int n) {
    const float *r = k;
    __m256 a0 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(r + i), _mm256_loadu_ps(q + i), a0);
    float s = hsum256(a0);
    for (; i < n; i++) s += r[i] * q[i];
    return s;
}

static void vaxpy_f32(float a, const void *v, float *out, int n) {
    const float *r = v;
    __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(r + i), _mm256_loadu_ps(out + i)));
    for (; i < n; i++) out[i] += a * r[i];
}

static float kdot_q8_0(const void *k, const float *q, int n) {
    const zl_block_q8_0 *b = k;
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n / ZL_QK; i++) {
        __m256 d = _mm256_set1_ps(zl_f16_to_f32(b[i].d)), bs = _mm256_setzero_ps();
        for (int j = 0; j < ZL_QK; j += 8) {
            __m256 kv = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b[i].qs + j))));
            bs = _mm256_fmadd_ps(kv, _mm256_loadu_ps(q + i * ZL_QK + j), bs);
        }
        acc = _mm256_fmadd_ps(d, bs, acc);
    }
    return hsum256(acc);
}

static void vaxpy_q8_0(float a, const void *v, float *out, int n) {
    const zl_block_q8_0 *b = v;
    for (int i = 0; i < n / ZL_QK; i++) {
        __m256 ad = _mm256_set1_ps(a * zl_f16_to_f32(b[i].d));
        for (int j = 0; j < ZL_QK; j += 8) {
            __m256 vv = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b[i].qs + j))));
            float *o = out + i * ZL_QK + j;
            _mm256_storeu_ps(o, _mm256_fmadd_ps(ad, vv, _mm256_loadu_ps(o)));
        }
    }
}

zl_attn_kernels zl_attn_kernels_avx2(zl_type t) {
    if (t == ZL_TYPE_F16) return (zl_attn_kernels){kdot_f16, vaxpy_f16};
    if (t == ZL_TYPE_Q8_0) return (zl_attn_kernels){kdot_q8_0, vaxpy_q8_0};
    return (zl_attn_kernels){kdot_f32, vaxpy_f32};
}
