/* kernels_avx512.c — AVX-512 (F/BW/VL/DQ, optionally VNNI) dot products and
 * activation quantisers.
 *
 * Compiled with AVX-512 flags but only reached through matmul.c's dispatch
 * after run-time detection.  Each integer kernel is written once against two
 * small helpers (u8·s8 and s16·s16 multiply-accumulate) and instantiated
 * twice: with VNNI (vpdpbusd / vpdpwssd) and without (maddubs + madd), the
 * variant being picked from the CPU flags when the table is asked.
 *
 * Layout tricks, per format:
 *  - Q8_0: two blocks per register; the signs of the weights are moved onto
 *    the activations so the unsigned×signed product applies.
 *  - Q4_0: two blocks per register, nibbles used as 0..15 and the -8 offset
 *    removed with a second product against a constant 8.
 *  - Q4_K/Q5_K: one 64-element chunk (32 bytes of nibbles) per register,
 *    laid out [low nibbles | high nibbles] which is exactly 64 consecutive
 *    activations; the 6-bit sub-block scales are applied to 16-bit pair sums
 *    and the mins come from the activation's bsums.
 *  - Q6_K: 64 elements per register, the -32 offset removed through bsums.
 * Integer partial sums never leave int32 within a super-block (see the bounds
 * next to each kernel); the float accumulation order differs from the
 * reference only by rounding. */
#include "kernels_isa.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>
#include <string.h>

#include "../base/cpu.h"

#define ZL_INLINE static inline __attribute__((always_inline))

ZL_INLINE float h2f(zl_f16 h) { return _cvtsh_ss(h); }

/* acc += sum over groups of 4 of u8(u) * s8(s) */
ZL_INLINE __m512i mac_u8s8(__m512i acc, __m512i u, __m512i s, const int vnni) {
    if (vnni) return _mm512_dpbusd_epi32(acc, u, s);
    return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1)));
}

/* acc += sum over pairs of s16(a) * s16(b) */
ZL_INLINE __m512i mac_s16(__m512i acc, __m512i a, __m512i b, const int vnni) {
    if (vnni) return _mm512_dpwssd_epi32(acc, a, b);
    return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b));
}

ZL_INLINE __m512i load_2x256(const void *lo, const void *hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)lo)),
                              _mm256_loadu_si256((const __m256i *)hi), 1);
}

/* 8 lanes of a, 8 lanes of b */
ZL_INLINE __m512 split_scale(float a, float b) {
    return _mm512_insertf32x8(_mm512_set1_ps(a), _mm256_set1_ps(b), 1);
}

ZL_INLINE float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* ---- float weights ---------------------------------------------------- */

static float dot_f32(const void *w, const void *x, int64_t n) {
    const float *a = w, *b = x;
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
        s2 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 32), _mm512_loadu_ps(b + i + 32), s2);
        s3 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 48), _mm512_loadu_ps(b + i + 48), s3);
    }
    for (; i + 16 <= n; i += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

ZL_INLINE __m512 load_f16x16(const uint16_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
ZL_INLINE __m512 load_bf16x16(const uint16_t *p) {
    __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}

/* F16 and BF16 share the loop shape; `bf` picks the widening. */
ZL_INLINE float dot_half(const void *w, const void *x, int64_t n, const int bf) {
    const uint16_t *a = w;
    const float *b = x;
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
#define ZL_HALF(p) (bf ? load_bf16x16(p) : load_f16x16(p))
    for (; i + 64 <= n; i += 64) {
        s0 = _mm512_fmadd_ps(ZL_HALF(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(ZL_HALF(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
        s2 = _mm512_fmadd_ps(ZL_HALF(a + i + 32), _mm512_loadu_ps(b + i + 32), s2);
        s3 = _mm512_fmadd_ps(ZL_HALF(a + i + 48), _mm512_loadu_ps(b + i + 48), s3);
    }
    for (; i + 16 <= n; i += 16) s0 = _mm512_fmadd_ps(ZL_HALF(a + i), _mm512_loadu_ps(b + i), s0);
#undef ZL_HALF
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        __m256i h = _mm512_castsi512_si256(_mm512_maskz_loadu_epi16((__mmask32)m, a + i));
        __m512 wf = bf ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)) : _mm512_cvtph_ps(h);
        s1 = _mm512_fmadd_ps(wf, _mm512_maskz_loadu_ps(m, b + i), s1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

static float dot_f16(const void *w, const void *x, int64_t n) { return dot_half(w, x, n, 0); }
static float dot_bf16(const void *w, const void *x, int64_t n) { return dot_half(w, x, n, 1); }

/* ---- Q8_0 · Q8_0 -------------------------------------------------------- */

/* One leftover block, scalar (rows of an odd number of 32-blocks are rare). */
static float q8_0_block_tail(const zl_block_q8_0 *a, const zl_block_q8_0 *b) {
    int s = 0;
    for (int j = 0; j < ZL_QK; j++) s += a->qs[j] * b->qs[j];
    return h2f(a->d) * h2f(b->d) * (float)s;
}

/* |w| <= 128, |x| <= 127: pair sums fit int16 even without VNNI. */
ZL_INLINE __m512i q8_pair_sum(const zl_block_q8_0 *a, const zl_block_q8_0 *b, const int vnni) {
    __m512i wv = load_2x256(a[0].qs, a[1].qs);
    __m512i xv = load_2x256(b[0].qs, b[1].qs);
    __mmask64 neg = _mm512_movepi8_mask(wv);
    __m512i sx = _mm512_mask_sub_epi8(xv, neg, _mm512_setzero_si512(), xv);
    return mac_u8s8(_mm512_setzero_si512(), _mm512_abs_epi8(wv), sx, vnni);
}

ZL_INLINE float dot_q8_0_impl(const void *w, const void *x, int64_t n, const int vnni) {
    const zl_block_q8_0 *a = w, *b = x;
    const int64_t nb = n / ZL_QK;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        __m512i s0 = q8_pair_sum(a + i, b + i, vnni);
        __m512i s1 = q8_pair_sum(a + i + 2, b + i + 2, vnni);
        __m512 d0 = split_scale(h2f(a[i].d) * h2f(b[i].d), h2f(a[i + 1].d) * h2f(b[i + 1].d));
        __m512 d1 = split_scale(h2f(a[i + 2].d) * h2f(b[i + 2].d), h2f(a[i + 3].d) * h2f(b[i + 3].d));
        acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s0), d0, acc0);
        acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s1), d1, acc1);
    }
    for (; i + 2 <= nb; i += 2) {
        __m512i s0 = q8_pair_sum(a + i, b + i, vnni);
        __m512 d0 = split_scale(h2f(a[i].d) * h2f(b[i].d), h2f(a[i + 1].d) * h2f(b[i + 1].d));
        acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s0), d0, acc0);
    }
    float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
    if (i < nb) sum += q8_0_block_tail(a + i, b + i);
    return sum;
}

/* ---- Q4_0 · Q8_0 -------------------------------------------------------- */

static float q4_0_block_tail(const zl_block_q4_0 *a, const zl_block_q8_0 *b) {
    int s = 0;
    for (int j = 0; j < ZL_QK / 2; j++)
        s += ((a->qs[j] & 0xF) - 8) * b->qs[j] + ((a->qs[j] >> 4) - 8) * b->qs[j + ZL_QK / 2];
    return h2f(a->d) * h2f(b->d) * (float)s;
}

/* Two blocks: nibbles 0..15 as [lo0 hi0 lo1 hi1] against [x0 x1], minus 8*sum(x). */
ZL_INLINE __m512i q4_0_pair_sum(const zl_block_q4_0 *a, const zl_block_q8_0 *b, const int vnni) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
    __m256i q = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)a[1].qs), _mm_loadu_si128((const __m128i *)a[0].qs));
    __m512i t = _mm512_inserti64x4(_mm512_castsi256_si512(q), _mm256_srli_epi16(q, 4), 1);
    t = _mm512_and_si512(t, m4);                       /* [lo0 lo1 hi0 hi1] */
    t = _mm512_shuffle_i64x2(t, t, _MM_SHUFFLE(3, 1, 2, 0)); /* [lo0 hi0 lo1 hi1] */
    __m512i xv = load_2x256(b[0].qs, b[1].qs);
    __m512i s = mac_u8s8(_mm512_setzero_si512(), t, xv, vnni);
    __m512i o = mac_u8s8(_mm512_setzero_si512(), eight, xv, vnni);
    return _mm512_sub_epi32(s, o);
}

ZL_INLINE float dot_q4_0_impl(const void *w, const void *x, int64_t n, const int vnni) {
    const zl_block_q4_0 *a = w;
    const zl_block_q8_0 *b = x;
    const int64_t nb = n / ZL_QK;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        __m512i s0 = q4_0_pair_sum(a + i, b + i, vnni);
        __m512i s1 = q4_0_pair_sum(a + i + 2, b + i + 2, vnni);
        __m512 d0 = split_scale(h2f(a[i].d) * h2f(b[i].d), h2f(a[i + 1].d) * h2f(b[i + 1].d));
        __m512 d1 = split_scale(h2f(a[i + 2].d) * h2f(b[i + 2].d), h2f(a[i + 3].d) * h2f(b[i + 3].d));
        acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s0), d0, acc0);
        acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s1), d1, acc1);
    }
    for (; i + 2 <= nb; i += 2) {
        __m512i s0 = q4_0_pair_sum(a + i, b + i, vnni);
        __m512 d0 = split_scale(h2f(a[i].d) * h2f(b[i].d), h2f(a[i + 1].d) * h2f(b[i + 1].d));
        acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s0), d0, acc0);
    }
    float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
    if (i < nb) sum += q4_0_block_tail(a + i, b + i);
    return sum;
}

/* ---- K formats ---------------------------------------------------------- */

/* The 8 six-bit scales and mins of a Q4_K/Q5_K super-block as bytes
 * (sc[0..7] in *sc, m[0..7] in *mn), unpacked four at a time. */
ZL_INLINE void kscales_unpack(const uint8_t *s, uint64_t *sc, uint64_t *mn) {
    uint32_t A, B, C;
    memcpy(&A, s, 4);
    memcpy(&B, s + 4, 4);
    memcpy(&C, s + 8, 4);
    uint32_t sc_lo = A & 0x3f3f3f3fu, mn_lo = B & 0x3f3f3f3fu;
    uint32_t sc_hi = (C & 0x0f0f0f0fu) | ((A >> 2) & 0x30303030u);
    uint32_t mn_hi = ((C >> 4) & 0x0f0f0f0fu) | ((B >> 2) & 0x30303030u);
    *sc = (uint64_t)sc_hi << 32 | sc_lo;
    *mn = (uint64_t)mn_hi << 32 | mn_lo;
}

/* vpermw index tables: which 16-bit scale each 16-bit lane takes. */
static const uint16_t k_idx_k4[4][32] = {
#define ZL_ROW(c) {2 * c, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c,      \
                   2 * c, 2 * c, 2 * c, 2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1,     \
                   2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1, \
                   2 * c + 1, 2 * c + 1}
    ZL_ROW(0), ZL_ROW(1), ZL_ROW(2), ZL_ROW(3)
#undef ZL_ROW
};
static const uint16_t k_idx_q6[4][32] = {
#define ZL_ROW(k) {4 * k, 4 * k, 4 * k, 4 * k, 4 * k, 4 * k, 4 * k, 4 * k,                                 \
                   4 * k + 1, 4 * k + 1, 4 * k + 1, 4 * k + 1, 4 * k + 1, 4 * k + 1, 4 * k + 1, 4 * k + 1, \
                   4 * k + 2, 4 * k + 2, 4 * k + 2, 4 * k + 2, 4 * k + 2, 4 * k + 2, 4 * k + 2, 4 * k + 2, \
                   4 * k + 3, 4 * k + 3, 4 * k + 3, 4 * k + 3, 4 * k + 3, 4 * k + 3, 4 * k + 3, 4 * k + 3}
    ZL_ROW(0), ZL_ROW(1), ZL_ROW(2), ZL_ROW(3)
#undef ZL_ROW
};

ZL_INLINE __m512i load_idx(const uint16_t *t) { return _mm512_loadu_si512((const void *)t); }

/* Shared body of Q4_K and Q5_K (hb: with the fifth bit from qh).
 * Bounds: q <= 31, |x| <= 127 -> pair sums <= 7874; times a 6-bit scale, 4
 * chunks: |sumi lane| < 4e6. */
ZL_INLINE float dot_k45_impl(const void *w, const void *x, int64_t n, const int vnni, const int hb) {
    const zl_block_q8_k *b = x;
    const int64_t nb = n / ZL_QK_K;
    const __m512i m4 = _mm512_set1_epi8(0x0F), sixteen = _mm512_set1_epi8(16);
    const __m512i idx0 = load_idx(k_idx_k4[0]), idx1 = load_idx(k_idx_k4[1]);
    const __m512i idx2 = load_idx(k_idx_k4[2]), idx3 = load_idx(k_idx_k4[3]);
    __m512 acc = _mm512_setzero_ps();
    __m256 accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *scales, *qs, *qh = NULL;
        zl_f16 dh, dminh;
        if (hb) {
            const zl_block_q5_k *a = (const zl_block_q5_k *)w + i;
            scales = a->scales; qs = a->qs; qh = a->qh; dh = a->d; dminh = a->dmin;
        } else {
            const zl_block_q4_k *a = (const zl_block_q4_k *)w + i;
            scales = a->scales; qs = a->qs; dh = a->d; dminh = a->dmin;
        }
        uint64_t sc, mn;
        kscales_unpack(scales, &sc, &mn);
        const __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc)));
        __m512i qhz = _mm512_setzero_si512();
        if (hb) qhz = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)qh));
        __m512i sumi = _mm512_setzero_si512();
        for (int c = 0; c < 4; c++) {
            __m256i raw = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
            __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(raw), _mm256_srli_epi16(raw, 4), 1);
            q = _mm512_and_si512(q, m4);
            if (hb) {
                /* low half takes qh bit 2c, high half bit 2c+1 */
                __m512i sel = _mm512_mask_blend_epi8(0xFFFFFFFF00000000ull, _mm512_set1_epi8((char)(1 << (2 * c))),
                                                     _mm512_set1_epi8((char)(1 << (2 * c + 1))));
                q = _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(qhz, sel), q, sixteen);
            }
            __m512i p = _mm512_maddubs_epi16(q, _mm512_loadu_si512((const void *)(b[i].qs + 64 * c)));
            __m512i idx = c == 0 ? idx0 : c == 1 ? idx1 : c == 2 ? idx2 : idx3;
            sumi = mac_s16(sumi, p, _mm512_permutexvar_epi16(idx, sc16), vnni);
        }
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi), _mm512_set1_ps(b[i].d * h2f(dh)), acc);
        /* mins: sum_j m_j * (bsum[2j] + bsum[2j+1]) */
        __m128i mb = _mm_cvtsi64_si128((long long)mn);
        __m256i mdup = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mb, mb));
        __m256i pm = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)b[i].bsums), mdup);
        accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(pm), _mm256_set1_ps(-b[i].d * h2f(dminh)), accm);
    }
    return _mm512_reduce_add_ps(acc) + hsum256(accm);
}

/* Q6_K: q in 0..63 -> pair sums <= 16002; times |scale| <= 128, two halves
 * of two registers each: |sumi lane| < 1.7e7 before the offset. */
ZL_INLINE float dot_q6_k_impl(const void *w, const void *x, int64_t n, const int vnni) {
    const zl_block_q6_k *a = w;
    const zl_block_q8_k *b = x;
    const int64_t nb = n / ZL_QK_K;
    const __m512i m4 = _mm512_set1_epi8(0x0F), m3 = _mm512_set1_epi8(3);
    const __m512i idx0 = load_idx(k_idx_q6[0]), idx1 = load_idx(k_idx_q6[1]);
    const __m512i idx2 = load_idx(k_idx_q6[2]), idx3 = load_idx(k_idx_q6[3]);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)a[i].scales));
        const __m512i sc16 = _mm512_castsi256_si512(s16);
        __m512i sumi = _mm512_setzero_si512();
        for (int h = 0; h < 2; h++) {
            __m512i ql = _mm512_loadu_si512((const void *)(a[i].ql + 64 * h));
            __m256i qh = _mm256_loadu_si256((const __m256i *)(a[i].qh + 32 * h));
            /* top bits: elements 0..63 use shifts 0 and 2, 64..127 shifts 4 and 6 */
            __m512i hA = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
            __m512i hB = _mm512_srli_epi16(hA, 4);
            __m512i q0 = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_slli_epi16(_mm512_and_si512(hA, m3), 4));
            __m512i q1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                         _mm512_slli_epi16(_mm512_and_si512(hB, m3), 4));
            __m512i p0 = _mm512_maddubs_epi16(q0, _mm512_loadu_si512((const void *)(b[i].qs + 128 * h)));
            __m512i p1 = _mm512_maddubs_epi16(q1, _mm512_loadu_si512((const void *)(b[i].qs + 128 * h + 64)));
            sumi = mac_s16(sumi, p0, _mm512_permutexvar_epi16(h ? idx2 : idx0, sc16), vnni);
            sumi = mac_s16(sumi, p1, _mm512_permutexvar_epi16(h ? idx3 : idx1, sc16), vnni);
        }
        /* remove the +32 offset: 32 * sum_g scale_g * bsum_g */
        __m256i off = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)b[i].bsums), s16);
        sumi = _mm512_sub_epi32(sumi, _mm512_zextsi256_si512(_mm256_slli_epi32(off, 5)));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi), _mm512_set1_ps(b[i].d * h2f(a[i].d)), acc);
    }
    return _mm512_reduce_add_ps(acc);
}

/* ---- instantiations ----------------------------------------------------- */

#define ZL_PAIR(name, body)                                                                      \
    static float name##_vnni(const void *w, const void *x, int64_t n) { return body(w, x, n, 1); } \
    static float name##_novnni(const void *w, const void *x, int64_t n) { return body(w, x, n, 0); }

ZL_INLINE float dot_q4_k_body(const void *w, const void *x, int64_t n, const int vnni) {
    return dot_k45_impl(w, x, n, vnni, 0);
}
ZL_INLINE float dot_q5_k_body(const void *w, const void *x, int64_t n, const int vnni) {
    return dot_k45_impl(w, x, n, vnni, 1);
}

ZL_PAIR(dot_q8_0, dot_q8_0_impl)
ZL_PAIR(dot_q4_0, dot_q4_0_impl)
ZL_PAIR(dot_q4_k, dot_q4_k_body)
ZL_PAIR(dot_q5_k, dot_q5_k_body)
ZL_PAIR(dot_q6_k, dot_q6_k_impl)

zl_dot_fn zl_dot_fn_avx512(zl_type t) {
    const int vnni = zl_cpu_get()->avx512vnni;
    switch (t) {
    case ZL_TYPE_F32: return dot_f32;
    case ZL_TYPE_F16: return dot_f16;
    case ZL_TYPE_BF16: return dot_bf16;
    case ZL_TYPE_Q8_0: return vnni ? dot_q8_0_vnni : dot_q8_0_novnni;
    case ZL_TYPE_Q4_0: return vnni ? dot_q4_0_vnni : dot_q4_0_novnni;
    case ZL_TYPE_Q4_K: return vnni ? dot_q4_k_vnni : dot_q4_k_novnni;
    case ZL_TYPE_Q5_K: return vnni ? dot_q5_k_vnni : dot_q5_k_novnni;
    case ZL_TYPE_Q6_K: return vnni ? dot_q6_k_vnni : dot_q6_k_novnni;
    default: return NULL;
    }
}

/* ---- activation quantisers ---------------------------------------------- */
/* Bit-identical to the reference: same max, same 127/amax multiplier, the
 * conversion rounds to nearest even as lrintf does in the default mode. */

ZL_INLINE float absmax_n(const float *x, int n16) {
    __m512 m = _mm512_setzero_ps();
    for (int k = 0; k < n16; k++) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + 16 * k)));
    return _mm512_reduce_max_ps(m);
}

/* Quantise 16 floats by id into int8 at dst; returns their int32 sum. */
ZL_INLINE int quant16(const float *x, __m512 id, int8_t *dst) {
    __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x), id));
    _mm_storeu_si128((__m128i *)dst, _mm512_cvtsepi32_epi8(v));
    return _mm512_reduce_add_epi32(v);
}

static void quant_q8_0(const float *x, void *dst, int64_t n) {
    zl_block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / ZL_QK; i++) {
        const float *xb = x + i * ZL_QK;
        float amax = absmax_n(xb, 2);
        __m512 id = _mm512_set1_ps(amax > 0 ? 127.0f / amax : 0.0f);
        y[i].d = zl_f32_to_f16(amax / 127.0f);
        quant16(xb, id, y[i].qs);
        quant16(xb + 16, id, y[i].qs + 16);
    }
}

static void quant_q8_1(const float *x, void *dst, int64_t n) {
    zl_block_q8_1 *y = dst;
    for (int64_t i = 0; i < n / ZL_QK; i++) {
        const float *xb = x + i * ZL_QK;
        float amax = absmax_n(xb, 2), d = amax / 127.0f;
        __m512 id = _mm512_set1_ps(amax > 0 ? 127.0f / amax : 0.0f);
        int s = quant16(xb, id, y[i].qs) + quant16(xb + 16, id, y[i].qs + 16);
        y[i].d = zl_f32_to_f16(d);
        y[i].s = zl_f32_to_f16(d * (float)s);
    }
}

static void quant_q8_k(const float *x, void *dst, int64_t n) {
    zl_block_q8_k *y = dst;
    for (int64_t i = 0; i < n / ZL_QK_K; i++) {
        const float *xb = x + i * ZL_QK_K;
        float amax = absmax_n(xb, 16);
        __m512 id = _mm512_set1_ps(amax > 0 ? 127.0f / amax : 0.0f);
        y[i].d = amax / 127.0f;
        for (int g = 0; g < 16; g++) y[i].bsums[g] = (int16_t)quant16(xb + 16 * g, id, y[i].qs + 16 * g);
    }
}

zl_quant_fn zl_quant_fn_avx512(zl_type partner) {
    switch (partner) {
    case ZL_TYPE_Q8_0: return quant_q8_0;
    case ZL_TYPE_Q8_1: return quant_q8_1;
    case ZL_TYPE_Q8_K: return quant_q8_k;
    default: return NULL;
    }
}

#else /* not x86 */

zl_dot_fn zl_dot_fn_avx512(zl_type t) { (void)t; return NULL; }
zl_quant_fn zl_quant_fn_avx512(zl_type partner) { (void)partner; return NULL; }

#endif
