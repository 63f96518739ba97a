/* attn_avx2.c — the attention tile (attn.h) with 8-lane vectors; compiled
 * with -mavx2 -mfma -mf16c and only reached after run-time detection, for
 * head dimensions that are multiples of 8.  Same scheme as attn_avx512.c:
 * eight per-position accumulators over the head dimension, a fixed
 * transpose-and-add tree, a vector exp, 8-lane running sums. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "attn.h"

#define ZL_INLINE static inline __attribute__((always_inline))

ZL_INLINE float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

ZL_INLINE float hmax8(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* exp(x) for x <= 0; exp(0) is exactly 1 */
ZL_INLINE __m256 exp8(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    /* 2^n with n in [-126, 0]: build the exponent field */
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* a[j] holds 8 partial sums of position j; returns lane j = sum of a[j] */
ZL_INLINE __m256 reduce8(__m256 a[8]) {
    __m256 b[4], c[2];
    for (int k = 0; k < 4; k++) /* lanes 0..3: a[2k] halves summed, 4..7: a[2k+1] */
        b[k] = _mm256_add_ps(_mm256_permute2f128_ps(a[2 * k], a[2 * k + 1], 0x20),
                             _mm256_permute2f128_ps(a[2 * k], a[2 * k + 1], 0x31));
    for (int k = 0; k < 2; k++) /* [p4k 2 lanes, p4k+2 2 | p4k+1 2, p4k+3 2] */
        c[k] = _mm256_add_ps(_mm256_shuffle_ps(b[2 * k], b[2 * k + 1], 0x44), _mm256_shuffle_ps(b[2 * k], b[2 * k + 1], 0xEE));
    /* [p0 p2 p4 p6 | p1 p3 p5 p7] */
    __m256 d = _mm256_add_ps(_mm256_shuffle_ps(c[0], c[1], 0x88), _mm256_shuffle_ps(c[0], c[1], 0xDD));
    return _mm256_permutevar8x32_ps(d, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

static void widen(zl_type t, const uint8_t *src, size_t stride, int n, int hd, float *dst) {
    for (int j = 0; j < n; j++, src += stride, dst += hd) {
        if (t == ZL_TYPE_F16) {
            for (int d = 0; d < hd; d += 8)
                _mm256_storeu_ps(dst + d, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + 2 * d))));
        } else if (t == ZL_TYPE_F32) {
            memcpy(dst, src, (size_t)hd * sizeof(float));
        } else {
            zl_attn_widen_ref(t, src, stride, 1, hd, dst);
        }
    }
}

ZL_INLINE __m256 score8(const float *kf, const float *q, int hd) {
    __m256 a[8];
    for (int j = 0; j < 8; j++) a[j] = _mm256_setzero_ps();
    for (int d = 0; d < hd; d += 8) {
        __m256 qv = _mm256_loadu_ps(q + d);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) a[j] = _mm256_fmadd_ps(_mm256_loadu_ps(kf + (size_t)j * hd + d), qv, a[j]);
    }
    return reduce8(a);
}

ZL_INLINE void pv(float *o, __m256 alpha, const float *p, const float *vf, int valid, int hd, int d0, const int W) {
    __m256 acc[4];
#pragma GCC unroll 4
    for (int i = 0; i < W; i++) acc[i] = _mm256_mul_ps(_mm256_loadu_ps(o + 8 * (d0 + i)), alpha);
    for (int j = 0; j < valid; j++) {
        __m256 pj = _mm256_set1_ps(p[j]);
        const float *vr = vf + (size_t)j * hd + 8 * d0;
    #pragma GCC unroll 4
    for (int i = 0; i < W; i++) acc[i] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vr + 8 * i), acc[i]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < W; i++) _mm256_storeu_ps(o + 8 * (d0 + i), acc[i]);
}

static void tile_avx2(const zl_attn_tile *t) {
    const int hd = t->hd, rows = t->rows, nd = hd / 8;
    int max_len = 0;
    for (int r = 0; r < rows; r++)
        if (t->len[r] > max_len) max_len = t->len[r];
    float *kf = t->work, *vf = kf + (size_t)ZL_ATTN_BLOCK * hd, *p = vf + (size_t)ZL_ATTN_BLOCK * hd;
    float *lsum = p + ZL_ATTN_BLOCK, *raw = lsum + (size_t)ZL_ATTN_MAX_ROWS * 16;
    float m[ZL_ATTN_MAX_ROWS];
    for (int r = 0; r < rows; r++) {
        m[r] = -INFINITY;
        _mm256_storeu_ps(lsum + 16 * r, _mm256_setzero_ps());
        memset(t->out[r], 0, (size_t)hd * sizeof(float));
    }
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int kb = 0; kb < max_len; kb += ZL_ATTN_BLOCK) {
        int nk = max_len - kb < ZL_ATTN_BLOCK ? max_len - kb : ZL_ATTN_BLOCK;
        int nk8 = (nk + 7) & ~7;
        widen(t->kv_type, t->k + (size_t)kb * t->kv_stride, t->kv_stride, nk, hd, kf);
        widen(t->kv_type, t->v + (size_t)kb * t->kv_stride, t->kv_stride, nk, hd, vf);
        memset(kf + (size_t)nk * hd, 0, (size_t)(nk8 - nk) * hd * sizeof(float));
        for (int r = 0; r < rows; r++) {
            if (kb >= t->len[r]) continue;
            const int valid = t->len[r] - kb < nk ? t->len[r] - kb : nk, nc = (valid + 7) / 8;
            const float *q = t->q[r];
            __m256 s[ZL_ATTN_BLOCK / 8], okm[ZL_ATTN_BLOCK / 8];
            __m256 bm = _mm256_set1_ps(-INFINITY);
            for (int c = 0; c < nc; c++) {
                okm[c] = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(valid - 8 * c), lane));
                s[c] = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY),
                                        _mm256_mul_ps(score8(kf + (size_t)8 * c * hd, q, hd), _mm256_set1_ps(t->scale)), okm[c]);
                bm = _mm256_max_ps(bm, s[c]);
                if (t->probs) _mm256_maskstore_ps(raw + (size_t)r * max_len + kb + 8 * c, _mm256_castps_si256(okm[c]), s[c]);
            }
            float bmax = hmax8(bm), mn = m[r] > bmax ? m[r] : bmax;
            __m256 vmn = _mm256_set1_ps(mn);
            __m256 alpha = m[r] == -INFINITY ? _mm256_setzero_ps() : exp8(_mm256_set1_ps(m[r] - mn));
            __m256 ls = _mm256_mul_ps(_mm256_loadu_ps(lsum + 16 * r), alpha);
            for (int c = 0; c < nc; c++) {
                __m256 pc = _mm256_and_ps(okm[c], exp8(_mm256_sub_ps(s[c], vmn)));
                ls = _mm256_add_ps(ls, pc);
                _mm256_storeu_ps(p + 8 * c, pc);
            }
            _mm256_storeu_ps(lsum + 16 * r, ls);
            m[r] = mn;
            float *o = t->out[r];
            int d0 = 0;
            for (; d0 + 4 <= nd; d0 += 4) pv(o, alpha, p, vf, valid, hd, d0, 4);
            switch (nd - d0) {
            case 3: pv(o, alpha, p, vf, valid, hd, d0, 3); break;
            case 2: pv(o, alpha, p, vf, valid, hd, d0, 2); break;
            case 1: pv(o, alpha, p, vf, valid, hd, d0, 1); break;
            default: break;
            }
        }
    }
    for (int r = 0; r < rows; r++) {
        float l = hsum8(_mm256_loadu_ps(lsum + 16 * r)), inv = 1.0f / l;
        __m256 vinv = _mm256_set1_ps(inv);
        float *o = t->out[r];
        for (int d = 0; d < hd; d += 8) _mm256_storeu_ps(o + d, _mm256_mul_ps(_mm256_loadu_ps(o + d), vinv));
        if (t->probs) {
            const float *rr = raw + (size_t)r * max_len;
            __m256 vm = _mm256_set1_ps(m[r]);
            int j = 0;
            for (; j + 8 <= t->len[r]; j += 8)
                _mm256_storeu_ps(t->probs + j, _mm256_fmadd_ps(exp8(_mm256_sub_ps(_mm256_loadu_ps(rr + j), vm)), vinv,
                                                               _mm256_loadu_ps(t->probs + j)));
            for (; j < t->len[r]; j++) t->probs[j] += expf(rr[j] - m[r]) * inv;
        }
    }
}

zl_attn_fn zl_attn_fn_avx2(int hd) { return hd > 0 && hd % 8 == 0 ? tile_avx2 : NULL; }
