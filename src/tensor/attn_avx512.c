/* attn_avx512.c — the attention tile (attn.h) with 16-lane vectors; only
 * reached after run-time detection, for head dimensions that are multiples
 * of 16.
 *
 * Each block of keys is transposed once per tile (16x16 in-register
 * transposes), so a row's scores come sixteen positions per vector as
 * sequential sums over the head dimension, two rows at a time sharing the
 * key loads.  Probabilities come from a vector exp; the running
 * sum keeps 16 lanes (position mod 16) until the end.  Every step depends
 * only on the row itself, never on its tile neighbours. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "attn.h"

#define ZL_INLINE static inline __attribute__((always_inline))

/* exp(x) for x <= 0 (larger inputs are not used); exp(0) is exactly 1 */
ZL_INLINE __m512 exp16(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

static void widen(zl_type t, const uint8_t *src, size_t stride, int n, int hd, float *dst) {
    for (int j = 0; j < n; j++, src += stride, dst += hd) {
        if (t == ZL_TYPE_F16) {
            for (int d = 0; d < hd; d += 16)
                _mm512_storeu_ps(dst + d, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + 2 * d))));
        } else if (t == ZL_TYPE_F32) {
            memcpy(dst, src, (size_t)hd * sizeof(float));
        } else {
            const zl_block_q8_0 *b = (const zl_block_q8_0 *)src;
            for (int i = 0; i < hd / ZL_QK; i++) {
                __m512 s = _mm512_set1_ps(_cvtsh_ss(b[i].d));
                __m512 v0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)b[i].qs)));
                __m512 v1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b[i].qs + 16))));
                _mm512_storeu_ps(dst + i * ZL_QK, _mm512_mul_ps(s, v0));
                _mm512_storeu_ps(dst + i * ZL_QK + 16, _mm512_mul_ps(s, v1));
            }
        }
    }
}

/* In-register transpose of a 16x16 float block: r[e] becomes column e. */
ZL_INLINE void transpose16(__m512 r[16]) {
    __m512 t[16], u[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) { /* u[4i+k], 128-bit lane L: element 4L+k of rows 4i..4i+3 */
        u[4 * i + 0] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int k = 0; k < 4; k++) {
        __m512 v0 = _mm512_shuffle_f32x4(u[k], u[4 + k], 0x44), v1 = _mm512_shuffle_f32x4(u[k], u[4 + k], 0xEE);
        __m512 v2 = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0x44), v3 = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0xEE);
        r[k] = _mm512_shuffle_f32x4(v0, v2, 0x88);
        r[4 + k] = _mm512_shuffle_f32x4(v0, v2, 0xDD);
        r[8 + k] = _mm512_shuffle_f32x4(v1, v3, 0x88);
        r[12 + k] = _mm512_shuffle_f32x4(v1, v3, 0xDD);
    }
}

/* kt[d * ZL_ATTN_BLOCK + j] = kf[j * hd + d] for j < nk16 (a multiple of 16) */
static void transpose_keys(const float *kf, int nk16, int hd, float *kt) {
    for (int c = 0; c < nk16; c += 16)
        for (int d0 = 0; d0 < hd; d0 += 16) {
            __m512 r[16];
            for (int j = 0; j < 16; j++) r[j] = _mm512_loadu_ps(kf + (size_t)(c + j) * hd + d0);
            transpose16(r);
            for (int e = 0; e < 16; e++) _mm512_storeu_ps(kt + (size_t)(d0 + e) * ZL_ATTN_BLOCK + c, r[e]);
        }
}

/* The same from an f16 cache, widening on the way (nk keys; the rest of
 * the last chunk of 16 reads as zeros). */
static void transpose_keys_f16(const uint8_t *k, size_t stride, int nk, int hd, float *kt) {
    for (int c = 0; c < nk; c += 16)
        for (int d0 = 0; d0 < hd; d0 += 16) {
            __m512 r[16];
            for (int j = 0; j < 16; j++)
                r[j] = c + j < nk ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(k + (size_t)(c + j) * stride + 2 * d0)))
                                  : _mm512_setzero_ps();
            transpose16(r);
            for (int e = 0; e < 16; e++) _mm512_storeu_ps(kt + (size_t)(d0 + e) * ZL_ATTN_BLOCK + c, r[e]);
        }
}

/* Scores of NC chunks of 16 positions for NR rows (1 or 2) sharing the key
 * loads; each score is its row's own sequential sum over d. */
ZL_INLINE void scores_nc(const float *kt, const float *qa, const float *qb, int hd, __m512 *sa, __m512 *sb,
                         const int NR, const int NC) {
    __m512 a[4], b[4];
    for (int c = 0; c < NC; c++) a[c] = b[c] = _mm512_setzero_ps();
    for (int d = 0; d < hd; d++) {
        const float *kr = kt + (size_t)d * ZL_ATTN_BLOCK;
        __m512 xa = _mm512_set1_ps(qa[d]), xb = NR == 2 ? _mm512_set1_ps(qb[d]) : xa;
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) {
            __m512 kv = _mm512_loadu_ps(kr + 16 * c);
            a[c] = _mm512_fmadd_ps(xa, kv, a[c]);
            if (NR == 2) b[c] = _mm512_fmadd_ps(xb, kv, b[c]);
        }
    }
    for (int c = 0; c < NC; c++) {
        sa[c] = a[c];
        if (NR == 2) sb[c] = b[c];
    }
}

static void scores_t(const float *kt, const float *qa, const float *qb, int hd, int nc, __m512 *sa, __m512 *sb,
                     const int NR) {
    if (NR == 2) {
        switch (nc) {
        case 4: scores_nc(kt, qa, qb, hd, sa, sb, 2, 4); break;
        case 3: scores_nc(kt, qa, qb, hd, sa, sb, 2, 3); break;
        case 2: scores_nc(kt, qa, qb, hd, sa, sb, 2, 2); break;
        default: scores_nc(kt, qa, qb, hd, sa, sb, 2, 1); break;
        }
    } else {
        switch (nc) {
        case 4: scores_nc(kt, qa, qb, hd, sa, sb, 1, 4); break;
        case 3: scores_nc(kt, qa, qb, hd, sa, sb, 1, 3); break;
        case 2: scores_nc(kt, qa, qb, hd, sa, sb, 1, 2); break;
        default: scores_nc(kt, qa, qb, hd, sa, sb, 1, 1); break;
        }
    }
}

/* o[16*d0 .. 16*(d0+W)) = o * alpha + sum_j p[j] * v_j, W vectors in registers */
ZL_INLINE void pv(float *o, __m512 alpha, const float *p, const float *vf, int valid, int hd, int d0, const int W) {
    __m512 acc[4];
#pragma GCC unroll 4
    for (int i = 0; i < W; i++) acc[i] = _mm512_mul_ps(_mm512_loadu_ps(o + 16 * (d0 + i)), alpha);
    for (int j = 0; j < valid; j++) {
        __m512 pj = _mm512_set1_ps(p[j]);
        const float *vr = vf + (size_t)j * hd + 16 * d0;
    #pragma GCC unroll 4
    for (int i = 0; i < W; i++) acc[i] = _mm512_fmadd_ps(pj, _mm512_loadu_ps(vr + 16 * i), acc[i]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < W; i++) _mm512_storeu_ps(o + 16 * (d0 + i), acc[i]);
}

/* pv for two rows sharing the value loads (eight accumulator chains instead
 * of four); each row's sums are the same sequence of operations as in pv */
ZL_INLINE void pv2(float *oa, float *ob, __m512 aa, __m512 ab, const float *pa, const float *pb, const float *vf,
                   int valid, int hd, int d0, const int W) {
    __m512 xa[4], xb[4];
#pragma GCC unroll 4
    for (int i = 0; i < W; i++) {
        xa[i] = _mm512_mul_ps(_mm512_loadu_ps(oa + 16 * (d0 + i)), aa);
        xb[i] = _mm512_mul_ps(_mm512_loadu_ps(ob + 16 * (d0 + i)), ab);
    }
    for (int j = 0; j < valid; j++) {
        __m512 qa = _mm512_set1_ps(pa[j]), qb = _mm512_set1_ps(pb[j]);
        const float *vr = vf + (size_t)j * hd + 16 * d0;
#pragma GCC unroll 4
        for (int i = 0; i < W; i++) {
            __m512 v = _mm512_loadu_ps(vr + 16 * i);
            xa[i] = _mm512_fmadd_ps(qa, v, xa[i]);
            xb[i] = _mm512_fmadd_ps(qb, v, xb[i]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < W; i++) {
        _mm512_storeu_ps(oa + 16 * (d0 + i), xa[i]);
        _mm512_storeu_ps(ob + 16 * (d0 + i), xb[i]);
    }
}

/* the running state of the rows of one tile */
typedef struct {
    const zl_attn_tile *t;
    float *m, *lsum, *raw;
    int max_len;
} tile_state;

/* Masks, scales and exponentiates one row's scores of a block into p (nc
 * chunks; lanes past `valid` are zero), updates the row's running max and
 * sum, and returns the factor by which its partial output must shrink. */
ZL_INLINE __m512 softmax_block(const tile_state *st, int r, __m512 *s, int nc, int valid, int kb, float *p) {
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const zl_attn_tile *t = st->t;
    __m512 bm = _mm512_set1_ps(-INFINITY);
    for (int c = 0; c < nc; c++) {
        __mmask16 ok = _mm512_cmplt_epi32_mask(lane, _mm512_set1_epi32(valid - 16 * c));
        s[c] = _mm512_mask_blend_ps(ok, _mm512_set1_ps(-INFINITY), _mm512_mul_ps(s[c], _mm512_set1_ps(t->scale)));
        bm = _mm512_max_ps(bm, s[c]);
        if (t->probs) _mm512_mask_storeu_ps(st->raw + (size_t)r * st->max_len + kb + 16 * c, ok, s[c]);
    }
    float bmax = _mm512_reduce_max_ps(bm), mr = st->m[r], mn = mr > bmax ? mr : bmax;
    __m512 vmn = _mm512_set1_ps(mn);
    __m512 alpha = mr == -INFINITY ? _mm512_setzero_ps() : exp16(_mm512_set1_ps(mr - mn));
    __m512 ls = _mm512_mul_ps(_mm512_loadu_ps(st->lsum + 16 * r), alpha);
    for (int c = 0; c < nc; c++) {
        __mmask16 ok = _mm512_cmplt_epi32_mask(lane, _mm512_set1_epi32(valid - 16 * c));
        __m512 pc = _mm512_maskz_mov_ps(ok, exp16(_mm512_sub_ps(s[c], vmn)));
        ls = _mm512_add_ps(ls, pc);
        _mm512_storeu_ps(p + 16 * c, pc);
    }
    _mm512_storeu_ps(st->lsum + 16 * r, ls);
    st->m[r] = mn;
    return alpha;
}

static void tile_avx512(const zl_attn_tile *t) {
    const int hd = t->hd, rows = t->rows, nd = hd / 16;
    int max_len = 0;
    for (int r = 0; r < rows; r++)
        if (t->len[r] > max_len) max_len = t->len[r];
    float *kf = t->work, *vf = kf + (size_t)ZL_ATTN_BLOCK * hd, *kt = vf + (size_t)ZL_ATTN_BLOCK * hd;
    float *p = kt + (size_t)ZL_ATTN_BLOCK * hd, *lsum = p + ZL_ATTN_BLOCK, *raw = lsum + (size_t)ZL_ATTN_MAX_ROWS * 16;
    float m[ZL_ATTN_MAX_ROWS];
    for (int r = 0; r < rows; r++) {
        m[r] = -INFINITY;
        _mm512_storeu_ps(lsum + 16 * r, _mm512_setzero_ps());
        memset(t->out[r], 0, (size_t)hd * sizeof(float));
    }
    float p2[ZL_ATTN_BLOCK];
    tile_state st = {t, m, lsum, raw, max_len};
    for (int kb = 0; kb < max_len; kb += ZL_ATTN_BLOCK) {
        int nk = max_len - kb < ZL_ATTN_BLOCK ? max_len - kb : ZL_ATTN_BLOCK;
        int nk16 = (nk + 15) & ~15;
        widen(t->kv_type, t->v + (size_t)kb * t->kv_stride, t->kv_stride, nk, hd, vf);
        if (t->kv_type == ZL_TYPE_F16) {
            transpose_keys_f16(t->k + (size_t)kb * t->kv_stride, t->kv_stride, nk, hd, kt);
        } else {
            widen(t->kv_type, t->k + (size_t)kb * t->kv_stride, t->kv_stride, nk, hd, kf);
            /* the last chunk's missing positions read as zeros (masked below) */
            memset(kf + (size_t)nk * hd, 0, (size_t)(nk16 - nk) * hd * sizeof(float));
            transpose_keys(kf, nk16, hd, kt);
        }
        /* rows go in pairs where both see the same positions of this block
         * (the scores share key loads, the weighted sums value loads) */
        for (int r = 0; r < rows;) {
            if (kb >= t->len[r]) {
                r++;
                continue;
            }
            const int valid = t->len[r] - kb < nk ? t->len[r] - kb : nk, nc = (valid + 15) / 16;
            float *o = t->out[r];
            __m512 s[ZL_ATTN_BLOCK / 16], s2[ZL_ATTN_BLOCK / 16];
            if (r + 1 < rows && kb < t->len[r + 1] && (t->len[r + 1] - kb < nk ? t->len[r + 1] - kb : nk) == valid) {
                scores_t(kt, t->q[r], t->q[r + 1], hd, nc, s, s2, 2);
                __m512 aa = softmax_block(&st, r, s, nc, valid, kb, p);
                __m512 ab = softmax_block(&st, r + 1, s2, nc, valid, kb, p2);
                float *o2 = t->out[r + 1];
                int d0 = 0;
                for (; d0 + 4 <= nd; d0 += 4) pv2(o, o2, aa, ab, p, p2, vf, valid, hd, d0, 4);
                for (; d0 < nd; d0++) pv2(o, o2, aa, ab, p, p2, vf, valid, hd, d0, 1);
                r += 2;
                continue;
            }
            scores_t(kt, t->q[r], t->q[r], hd, nc, s, s2, 1);
            __m512 alpha = softmax_block(&st, r, s, nc, valid, kb, p);
            int d0 = 0;
            for (; d0 + 4 <= nd; d0 += 4) pv(o, alpha, p, vf, valid, hd, d0, 4);
            switch (nd - d0) {
            case 3: pv(o, alpha, p, vf, valid, hd, d0, 3); break;
            case 2: pv(o, alpha, p, vf, valid, hd, d0, 2); break;
            case 1: pv(o, alpha, p, vf, valid, hd, d0, 1); break;
            default: break;
            }
            r++;
        }
    }
    for (int r = 0; r < rows; r++) {
        float l = _mm512_reduce_add_ps(_mm512_loadu_ps(lsum + 16 * r)), inv = 1.0f / l;
        __m512 vinv = _mm512_set1_ps(inv);
        float *o = t->out[r];
        for (int d = 0; d < hd; d += 16) _mm512_storeu_ps(o + d, _mm512_mul_ps(_mm512_loadu_ps(o + d), vinv));
        if (t->probs) {
            const float *rr = raw + (size_t)r * max_len;
            __m512 vm = _mm512_set1_ps(m[r]);
            int j = 0;
            for (; j + 16 <= t->len[r]; j += 16)
                _mm512_storeu_ps(t->probs + j, _mm512_fmadd_ps(exp16(_mm512_sub_ps(_mm512_loadu_ps(rr + j), vm)), vinv,
                                                               _mm512_loadu_ps(t->probs + j)));
            for (; j < t->len[r]; j++) t->probs[j] += expf(rr[j] - m[r]) * inv;
        }
    }
}

zl_attn_fn zl_attn_fn_avx512(int hd) { return hd > 0 && hd % 16 == 0 ? tile_avx512 : NULL; }
