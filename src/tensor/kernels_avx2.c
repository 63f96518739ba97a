/* kernels_avx2.c — AVX2 + FMA + F16C dot products and activation quantisers.
 *
 * Compiled with AVX2 flags but only reached through matmul.c's dispatch
 * after run-time detection.  Integer products use maddubs (u8 x s8 -> s16
 * pairs) followed by madd (s16 x s16 -> s32), so every kernel keeps its
 * 16-bit pair sums below 32767: weights enter as small unsigned values
 * (nibbles, 5- or 6-bit codes) or, for Q8_0, as |w| with the sign moved onto
 * the activation (|x| <= 127 by construction of our quantisers).  The block
 * layouts are the same as in kernels_avx512.c; see the notes there. */
#include "kernels_isa.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>
#include <string.h>

#define ZL_INLINE static inline __attribute__((always_inline))

ZL_INLINE float h2f(zl_f16 h) { return _cvtsh_ss(h); }

ZL_INLINE float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

ZL_INLINE int hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

ZL_INLINE __m256i pair_sum_s16(__m256i p) { return _mm256_madd_epi16(p, _mm256_set1_epi16(1)); }

/* ---- float weights ---------------------------------------------------- */

ZL_INLINE __m256 load_f16x8(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
ZL_INLINE __m256 load_bf16x8(const uint16_t *p) {
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
/* 8 weights from element i as floats; kind 0 F32, 1 F16, 2 BF16 */
ZL_INLINE __m256 load_w8(const void *w, int64_t i, const int kind) {
    return kind == 0 ? _mm256_loadu_ps((const float *)w + i)
         : kind == 1 ? load_f16x8((const uint16_t *)w + i) : load_bf16x8((const uint16_t *)w + i);
}
ZL_INLINE float load_w1(const void *w, int64_t k, const int kind) {
    return kind == 0 ? ((const float *)w)[k]
         : kind == 1 ? zl_f16_to_f32(((const uint16_t *)w)[k]) : zl_bf16_to_f32(((const uint16_t *)w)[k]);
}

/* Float weights, one token.  Two 8-lane accumulators, elements [16j, 16j+8)
 * into the first and [16j+8, 16j+16) into the second (a last 8 into the
 * first), added, summed across lanes, then a scalar tail: dot4_float's
 * order per token, so results do not depend on how many tokens share a
 * matmul call.  One accumulator would be a chain of dependent FMAs (4
 * cycles each): 8 weights per 4 cycles held F16 decode at 10 GB/s a core. */
ZL_INLINE float dot_float(const void *w, const void *x, int64_t n, const int kind) {
    const float *b = x;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(load_w8(w, i, kind), _mm256_loadu_ps(b + i), acc0);
        acc1 = _mm256_fmadd_ps(load_w8(w, i + 8, kind), _mm256_loadu_ps(b + i + 8), acc1);
    }
    if (i + 8 <= n) {
        acc0 = _mm256_fmadd_ps(load_w8(w, i, kind), _mm256_loadu_ps(b + i), acc0);
        i += 8;
    }
    float sum = hsum_ps(_mm256_add_ps(acc0, acc1));
    for (; i < n; i++) sum += load_w1(w, i, kind) * b[i];
    return sum;
}

static float dot_f32(const void *w, const void *x, int64_t n) { return dot_float(w, x, n, 0); }
static float dot_f16(const void *w, const void *x, int64_t n) { return dot_float(w, x, n, 1); }
static float dot_bf16(const void *w, const void *x, int64_t n) { return dot_float(w, x, n, 2); }

/* ---- Q8_0 · Q8_0 and Q4_0 · Q8_0 --------------------------------------- */

ZL_INLINE __m256 q8_0_block(const zl_block_q8_0 *a, const zl_block_q8_0 *b) {
    __m256i wv = _mm256_loadu_si256((const __m256i *)a->qs);
    __m256i xv = _mm256_loadu_si256((const __m256i *)b->qs);
    __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(wv, wv), _mm256_sign_epi8(xv, wv));
    return _mm256_cvtepi32_ps(pair_sum_s16(p));
}

static float dot_q8_0(const void *w, const void *x, int64_t n) {
    const zl_block_q8_0 *a = w, *b = x;
    const int64_t nb = n / ZL_QK;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        acc0 = _mm256_fmadd_ps(q8_0_block(a + i, b + i), _mm256_set1_ps(h2f(a[i].d) * h2f(b[i].d)), acc0);
        acc1 = _mm256_fmadd_ps(q8_0_block(a + i + 1, b + i + 1), _mm256_set1_ps(h2f(a[i + 1].d) * h2f(b[i + 1].d)),
                               acc1);
    }
    if (i < nb) acc0 = _mm256_fmadd_ps(q8_0_block(a + i, b + i), _mm256_set1_ps(h2f(a[i].d) * h2f(b[i].d)), acc0);
    return hsum_ps(_mm256_add_ps(acc0, acc1));
}

/* nibbles as 0..15 against x, minus 8*x, both as s16 pair sums (<= 3810). */
ZL_INLINE __m256 q4_0_block(const zl_block_q4_0 *a, const zl_block_q8_0 *b) {
    __m128i q = _mm_loadu_si128((const __m128i *)a->qs);
    __m256i t = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0F));
    __m256i xv = _mm256_loadu_si256((const __m256i *)b->qs);
    __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(t, xv), _mm256_maddubs_epi16(_mm256_set1_epi8(8), xv));
    return _mm256_cvtepi32_ps(pair_sum_s16(p));
}

static float dot_q4_0(const void *w, const void *x, int64_t n) {
    const zl_block_q4_0 *a = w;
    const zl_block_q8_0 *b = x;
    const int64_t nb = n / ZL_QK;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        acc0 = _mm256_fmadd_ps(q4_0_block(a + i, b + i), _mm256_set1_ps(h2f(a[i].d) * h2f(b[i].d)), acc0);
        acc1 = _mm256_fmadd_ps(q4_0_block(a + i + 1, b + i + 1), _mm256_set1_ps(h2f(a[i + 1].d) * h2f(b[i + 1].d)),
                               acc1);
    }
    if (i < nb) acc0 = _mm256_fmadd_ps(q4_0_block(a + i, b + i), _mm256_set1_ps(h2f(a[i].d) * h2f(b[i].d)), acc0);
    return hsum_ps(_mm256_add_ps(acc0, acc1));
}

/* ---- Q4_1 / Q5_0 / Q5_1 ----------------------------------------------- */

/* 32 bits of qh -> 32 bytes of 0x10 where the bit is set. */
ZL_INLINE __m256i q5_high_bits(const uint8_t *qh4) {
    uint32_t qh;
    memcpy(&qh, qh4, 4);
    /* byte j takes byte j/8 of qh, then tests bit j%8 */
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x(0x8040201008040201ll);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), spread);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

/* Nibbles of 16 bytes as 32 values 0..15, element order. */
ZL_INLINE __m256i nibbles32(const uint8_t *qs) {
    __m128i q = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0F));
}

/* sum over the block of u*x as 8 float lanes (u unsigned <= 31: pair sums <= 7874) */
ZL_INLINE __m256 udot32(__m256i u, const int8_t *x) {
    return _mm256_cvtepi32_ps(pair_sum_s16(_mm256_maddubs_epi16(u, _mm256_loadu_si256((const __m256i *)x))));
}

static float dot_q4_1(const void *w, const void *x, int64_t n) {
    const zl_block_q4_1 *a = w;
    const zl_block_q8_1 *b = x;
    __m256 acc = _mm256_setzero_ps();
    float summ = 0;
    for (int64_t i = 0; i < n / ZL_QK; i++) {
        acc = _mm256_fmadd_ps(udot32(nibbles32(a[i].qs), b[i].qs), _mm256_set1_ps(h2f(a[i].d) * h2f(b[i].d)), acc);
        summ += h2f(a[i].m) * h2f(b[i].s);
    }
    return hsum_ps(acc) + summ;
}

static float dot_q5_1(const void *w, const void *x, int64_t n) {
    const zl_block_q5_1 *a = w;
    const zl_block_q8_1 *b = x;
    __m256 acc = _mm256_setzero_ps();
    float summ = 0;
    for (int64_t i = 0; i < n / ZL_QK; i++) {
        __m256i u = _mm256_or_si256(nibbles32(a[i].qs), q5_high_bits(a[i].qh));
        acc = _mm256_fmadd_ps(udot32(u, b[i].qs), _mm256_set1_ps(h2f(a[i].d) * h2f(b[i].d)), acc);
        summ += h2f(a[i].m) * h2f(b[i].s);
    }
    return hsum_ps(acc) + summ;
}

/* Q5_0: values 0..31 minus 16, the offset as 16*x through a second maddubs. */
static float dot_q5_0(const void *w, const void *x, int64_t n) {
    const zl_block_q5_0 *a = w;
    const zl_block_q8_0 *b = x;
    const __m256i sixteen = _mm256_set1_epi8(16);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / ZL_QK; i++) {
        __m256i u = _mm256_or_si256(nibbles32(a[i].qs), q5_high_bits(a[i].qh));
        __m256i xv = _mm256_loadu_si256((const __m256i *)b[i].qs);
        __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(u, xv), _mm256_maddubs_epi16(sixteen, xv));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(pair_sum_s16(p)), _mm256_set1_ps(h2f(a[i].d) * h2f(b[i].d)), acc);
    }
    return hsum_ps(acc);
}

/* ---- K formats ---------------------------------------------------------- */

ZL_INLINE void kscales_unpack(const uint8_t *s, uint64_t *sc, uint64_t *mn) {
    uint32_t A, B, C;
    memcpy(&A, s, 4);
    memcpy(&B, s + 4, 4);
    memcpy(&C, s + 8, 4);
    uint32_t sc_hi = (C & 0x0f0f0f0fu) | ((A >> 2) & 0x30303030u);
    uint32_t mn_hi = ((C >> 4) & 0x0f0f0f0fu) | ((B >> 2) & 0x30303030u);
    *sc = (uint64_t)sc_hi << 32 | (A & 0x3f3f3f3fu);
    *mn = (uint64_t)mn_hi << 32 | (B & 0x3f3f3f3fu);
}

/* Broadcast 16-bit word k (0..7) of each 128-bit lane to the whole lane. */
ZL_INLINE __m256i bcast_word(__m256i v, int k) {
    return _mm256_shuffle_epi8(v, _mm256_set1_epi16((short)(((2 * k + 1) << 8) | (2 * k))));
}

/* The K formats' canonical arithmetic (kernels_ktile_avx512.c): each
 * super-block's integers reduced exactly, then one fma chain per sum, as the
 * tile kernels (kernels_ktile_avx2.c) compute per lane.  Q4_K / Q5_K: lanes
 * 0 and 2 of acc carry acc = fma(S, dw * dx, acc) and accm = fma(P, dmin *
 * -dx, accm), dd = [dw, dw, dmin, dmin]; the result is lane 0 + lane 2. */
ZL_INLINE __m128 k45_step(__m128 acc, __m256i sumi, __m256i pm, float dx, __m128 dd) {
    __m128i q = _mm_add_epi32(_mm256_castsi256_si128(sumi), _mm256_extracti128_si256(sumi, 1));
    __m128i p = _mm_add_epi32(_mm256_castsi256_si128(pm), _mm256_extracti128_si256(pm, 1));
    __m128i t = _mm_add_epi32(_mm_unpacklo_epi64(q, p), _mm_unpackhi_epi64(q, p));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, _MM_SHUFFLE(2, 3, 0, 1))); /* S, S, P, P */
    const __m128 neg_hi = _mm_castsi128_ps(_mm_set_epi32(INT32_MIN, INT32_MIN, 0, 0));
    return _mm_fmadd_ps(_mm_cvtepi32_ps(t), _mm_mul_ps(dd, _mm_xor_ps(_mm_set1_ps(dx), neg_hi)), acc);
}
ZL_INLINE __m128 k45_dd(const void *dpair) {
    int32_t v;
    memcpy(&v, dpair, 4);
    __m128 d = _mm_cvtph_ps(_mm_cvtsi32_si128(v));
    return _mm_unpacklo_ps(d, d);
}

/* Q4_K / Q5_K; pair sums <= 31*127*2 = 7874 fit s16, scaled sums fit s32. */
ZL_INLINE float dot_k45(const void *w, const void *x, int64_t n, const int hb) {
    const zl_block_q8_k *b = x;
    const int64_t nb = n / ZL_QK_K;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m128 acc = _mm_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *scales, *qs, *qh = NULL;
        const zl_f16 *dpair; /* d, dmin */
        if (hb) {
            const zl_block_q5_k *a = (const zl_block_q5_k *)w + i;
            scales = a->scales; qs = a->qs; qh = a->qh; dpair = &a->d;
        } else {
            const zl_block_q4_k *a = (const zl_block_q4_k *)w + i;
            scales = a->scales; qs = a->qs; dpair = &a->d;
        }
        uint64_t sc, mn;
        kscales_unpack(scales, &sc, &mn);
        const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc)));
        __m256i hv = _mm256_setzero_si256();
        if (hb) hv = _mm256_loadu_si256((const __m256i *)qh);
        __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            __m256i raw = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
            __m256i lo = _mm256_and_si256(raw, m4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
            if (hb) {
                const __m256i b0 = _mm256_set1_epi8((char)(1 << (2 * c))), b1 = _mm256_set1_epi8((char)(1 << (2 * c + 1)));
                const __m256i sixteen = _mm256_set1_epi8(16);
                lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hv, b0), b0), sixteen));
                hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hv, b1), b1), sixteen));
            }
            __m256i plo = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(b[i].qs + 64 * c)));
            __m256i phi = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(b[i].qs + 64 * c + 32)));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(plo, bcast_word(sc16, 2 * c)));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(phi, bcast_word(sc16, 2 * c + 1)));
        }
        __m128i mb = _mm_cvtsi64_si128((long long)mn);
        __m256i mdup = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mb, mb));
        __m256i pm = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)b[i].bsums), mdup);
        acc = k45_step(acc, sumi, pm, b[i].d, k45_dd(dpair));
    }
    return _mm_cvtss_f32(acc) + _mm_cvtss_f32(_mm_movehl_ps(acc, acc));
}

static float dot_q4_k(const void *w, const void *x, int64_t n) { return dot_k45(w, x, n, 0); }
static float dot_q5_k(const void *w, const void *x, int64_t n) { return dot_k45(w, x, n, 1); }

/* Scale vector for 32 Q6_K elements: word w of the low lane, word w+1 of the high lane. */
ZL_INLINE __m256i q6_scale_pair(__m256i s, int w) {
    const __m256i ctrl = _mm256_set_m128i(_mm_set1_epi16((short)(((2 * w + 3) << 8) | (2 * w + 2))),
                                          _mm_set1_epi16((short)(((2 * w + 1) << 8) | (2 * w))));
    return _mm256_shuffle_epi8(s, ctrl);
}

/* Q6_K: pair sums <= 63*127*2 = 16002 fit s16. */
static float dot_q6_k(const void *w, const void *x, int64_t n) {
    const zl_block_q6_k *a = w;
    const zl_block_q8_k *b = x;
    const int64_t nb = n / ZL_QK_K;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
    __m128 acc = _mm_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)a[i].scales));
        /* scales 0..7 and 8..15 each copied to both 128-bit lanes */
        const __m256i sA = _mm256_permute2x128_si256(s16, s16, 0x00), sB = _mm256_permute2x128_si256(s16, s16, 0x11);
        __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256i sh = h ? sB : sA;
            __m256i ql0 = _mm256_loadu_si256((const __m256i *)(a[i].ql + 64 * h));
            __m256i ql1 = _mm256_loadu_si256((const __m256i *)(a[i].ql + 64 * h + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)(a[i].qh + 32 * h));
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m3), 4));
            q[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m3), 4));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m3), 4));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m3), 4));
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                __m256i p = _mm256_maddubs_epi16(q[k], _mm256_loadu_si256((const __m256i *)(b[i].qs + 128 * h + 32 * k)));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, q6_scale_pair(sh, 2 * k)));
            }
        }
        __m256i off = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)b[i].bsums), s16);
        sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(off, 5));
        /* canonical: the exact super-block integer, one fma chain (see k45_step) */
        __m128i q = _mm_add_epi32(_mm256_castsi256_si128(sumi), _mm256_extracti128_si256(sumi, 1));
        q = _mm_add_epi32(q, _mm_shuffle_epi32(q, _MM_SHUFFLE(1, 0, 3, 2)));
        q = _mm_add_epi32(q, _mm_shuffle_epi32(q, _MM_SHUFFLE(2, 3, 0, 1)));
        acc = _mm_fmadd_ss(_mm_cvtepi32_ps(q), _mm_set_ss(b[i].d * h2f(a[i].d)), acc);
    }
    return _mm_cvtss_f32(acc);
}

zl_dot_fn zl_dot_fn_avx2(zl_type t) {
    switch (t) {
    case ZL_TYPE_F32: return dot_f32;
    case ZL_TYPE_F16: return dot_f16;
    case ZL_TYPE_BF16: return dot_bf16;
    case ZL_TYPE_Q8_0: return dot_q8_0;
    case ZL_TYPE_Q4_0: return dot_q4_0;
    case ZL_TYPE_Q4_1: return dot_q4_1;
    case ZL_TYPE_Q5_0: return dot_q5_0;
    case ZL_TYPE_Q5_1: return dot_q5_1;
    case ZL_TYPE_Q4_K: return dot_q4_k;
    case ZL_TYPE_Q5_K: return dot_q5_k;
    case ZL_TYPE_Q6_K: return dot_q6_k;
    default: return NULL;
    }
}

/* Float weights, four tokens: each 8 weights widened once, dot_float's
 * two accumulators per token. */
ZL_INLINE void dot4_float(const void *w, const void *x, size_t xs, int64_t n, float *out, const int kind) {
    const float *xr[4];
    for (int t = 0; t < 4; t++) xr[t] = (const float *)((const uint8_t *)x + (size_t)t * xs);
    __m256 a0[4], a1[4];
    for (int t = 0; t < 4; t++) a0[t] = a1[t] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 w0 = load_w8(w, i, kind), w1 = load_w8(w, i + 8, kind);
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++) {
            a0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xr[t] + i), a0[t]);
            a1[t] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xr[t] + i + 8), a1[t]);
        }
    }
    if (i + 8 <= n) {
        __m256 w0 = load_w8(w, i, kind);
        for (int t = 0; t < 4; t++) a0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xr[t] + i), a0[t]);
        i += 8;
    }
    for (int t = 0; t < 4; t++) {
        float sum = hsum_ps(_mm256_add_ps(a0[t], a1[t]));
        for (int64_t k = i; k < n; k++) sum += load_w1(w, k, kind) * xr[t][k];
        out[t] = sum;
    }
}

static void dot4_f32(const void *w, const void *x, size_t xs, int64_t n, float *out) { dot4_float(w, x, xs, n, out, 0); }
static void dot4_f16(const void *w, const void *x, size_t xs, int64_t n, float *out) { dot4_float(w, x, xs, n, out, 1); }
static void dot4_bf16(const void *w, const void *x, size_t xs, int64_t n, float *out) { dot4_float(w, x, xs, n, out, 2); }

zl_dot_multi_fn zl_dot4_fn_avx2(zl_type t) {
    switch (t) {
    case ZL_TYPE_F32: return dot4_f32;
    case ZL_TYPE_F16: return dot4_f16;
    case ZL_TYPE_BF16: return dot4_bf16;
    default: return NULL;
    }
}

/* ---- prepared activations for Q4_1 / Q5_0 / Q5_1 -------------------------
 * Each partner block with its scale (and Q8_1's s) already a float, and for
 * Q5_0 the -16 * x offset of each 4-quant lane as int32 (added after madd):
 * per token and block only the quant products and one multiply-add remain.
 * The one-token kernel is the T = 1 instance of the T-token body. */
typedef struct { int8_t qs[32]; float d, s; } q81p_block;
typedef struct { int8_t qs[32]; int32_t off[8]; float d; } q80p_block;
_Static_assert(sizeof(q81p_block) == 40 && sizeof(q80p_block) == 68, "prepared block sizes");

static size_t q81p_size(int64_t n) { return (size_t)(n / ZL_QK) * sizeof(q81p_block); }
static size_t q80p_size(int64_t n) { return (size_t)(n / ZL_QK) * sizeof(q80p_block); }

static void q81p_prep(const void *xq, void *xp, int64_t n) {
    const zl_block_q8_1 *b = xq;
    q81p_block *p = xp;
    for (int64_t i = 0; i < n / ZL_QK; i++) {
        memcpy(p[i].qs, b[i].qs, 32);
        p[i].d = h2f(b[i].d);
        p[i].s = h2f(b[i].s);
    }
}

static void q80p_prep(const void *xq, void *xp, int64_t n) {
    const zl_block_q8_0 *b = xq;
    q80p_block *p = xp;
    for (int64_t i = 0; i < n / ZL_QK; i++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)b[i].qs);
        _mm256_storeu_si256((__m256i *)p[i].qs, v);
        __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(16), v), _mm256_set1_epi16(1));
        _mm256_storeu_si256((__m256i *)p[i].off, _mm256_sub_epi32(_mm256_setzero_si256(), s));
        p[i].d = h2f(b[i].d);
    }
}

ZL_INLINE void dotT_q45_prep(const void *w, const void *xp, size_t xs, int64_t n, float *out, const int f,
                             const int T) {
    const int64_t nb = n / ZL_QK;
    const uint8_t *xr[8];
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) xr[t] = (const uint8_t *)xp + (size_t)t * xs;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[8];
    float summ[8];
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) {
        acc[t] = _mm256_setzero_ps();
        summ[t] = 0;
    }
    for (int64_t i = 0; i < nb; i++) {
        __m256i u;
        __m256 dw;
        float mw = 0;
        if (f == 0) {
            const zl_block_q4_1 *a = (const zl_block_q4_1 *)w + i;
            u = nibbles32(a->qs);
            dw = _mm256_set1_ps(h2f(a->d));
            mw = h2f(a->m);
        } else if (f == 1) {
            const zl_block_q5_0 *a = (const zl_block_q5_0 *)w + i;
            u = _mm256_or_si256(nibbles32(a->qs), q5_high_bits(a->qh));
            dw = _mm256_set1_ps(h2f(a->d));
        } else {
            const zl_block_q5_1 *a = (const zl_block_q5_1 *)w + i;
            u = _mm256_or_si256(nibbles32(a->qs), q5_high_bits(a->qh));
            dw = _mm256_set1_ps(h2f(a->d));
            mw = h2f(a->m);
        }
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            if (f == 1) {
                const q80p_block *b = (const q80p_block *)xr[t] + i;
                __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(u, _mm256_loadu_si256((const __m256i *)b->qs)), ones);
                p = _mm256_add_epi32(p, _mm256_loadu_si256((const __m256i *)b->off));
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(dw, _mm256_broadcast_ss(&b->d)), acc[t]);
            } else {
                const q81p_block *b = (const q81p_block *)xr[t] + i;
                acc[t] = _mm256_fmadd_ps(udot32(u, b->qs), _mm256_mul_ps(dw, _mm256_broadcast_ss(&b->d)), acc[t]);
                summ[t] += mw * b->s;
            }
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) out[t] = f == 1 ? hsum_ps(acc[t]) : hsum_ps(acc[t]) + summ[t];
}

#define ZL_Q45P_SET(name, f)                                                                                  \
    static float name(const void *w, const void *x, int64_t n) {                                              \
        float o[1];                                                                                           \
        dotT_q45_prep(w, x, 0, n, o, f, 1);                                                                   \
        return o[0];                                                                                          \
    }                                                                                                         \
    static void name##_t2(const void *w, const void *x, size_t xs, int64_t n, float *out) { dotT_q45_prep(w, x, xs, n, out, f, 2); } \
    static void name##_t3(const void *w, const void *x, size_t xs, int64_t n, float *out) { dotT_q45_prep(w, x, xs, n, out, f, 3); } \
    static void name##_t4(const void *w, const void *x, size_t xs, int64_t n, float *out) { dotT_q45_prep(w, x, xs, n, out, f, 4); } \
    static void name##_t5(const void *w, const void *x, size_t xs, int64_t n, float *out) { dotT_q45_prep(w, x, xs, n, out, f, 5); } \
    static void name##_t6(const void *w, const void *x, size_t xs, int64_t n, float *out) { dotT_q45_prep(w, x, xs, n, out, f, 6); } \
    static void name##_t7(const void *w, const void *x, size_t xs, int64_t n, float *out) { dotT_q45_prep(w, x, xs, n, out, f, 7); } \
    static void name##_t8(const void *w, const void *x, size_t xs, int64_t n, float *out) { dotT_q45_prep(w, x, xs, n, out, f, 8); }
ZL_Q45P_SET(dot_q4_1_prep, 0)
ZL_Q45P_SET(dot_q5_0_prep, 1)
ZL_Q45P_SET(dot_q5_1_prep, 2)
#undef ZL_Q45P_SET

int zl_prep_kernel_avx2(zl_type t, zl_prep_kernel *out) {
#define ZL_SET_T(out, base)                                                                    \
    do {                                                                                       \
        (out)->dot = base;                                                                     \
        (out)->dot2 = base##_t2, (out)->dot3 = base##_t3, (out)->dot4 = base##_t4;             \
        (out)->dot5 = base##_t5, (out)->dot6 = base##_t6, (out)->dot7 = base##_t7;             \
        (out)->dot8 = base##_t8;                                                               \
    } while (0)
    switch (t) {
    case ZL_TYPE_Q4_1: out->size = q81p_size, out->prep = q81p_prep; ZL_SET_T(out, dot_q4_1_prep); return 1;
    case ZL_TYPE_Q5_1: out->size = q81p_size, out->prep = q81p_prep; ZL_SET_T(out, dot_q5_1_prep); return 1;
    case ZL_TYPE_Q5_0: out->size = q80p_size, out->prep = q80p_prep; ZL_SET_T(out, dot_q5_0_prep); return 1;
    default: break;
    }
#undef ZL_SET_T
    if (t == ZL_TYPE_Q4_0) { /* one block per lane, 1..8 tokens (kernels_q4l_avx2.c) */
        zl_prep_kernel_q4l_avx2(out);
        return 1;
    }
    if (t == ZL_TYPE_Q8_0) { /* kernels_q8l_avx2.c */
        zl_prep_kernel_q8l_avx2(out);
        return 1;
    }
    return 0;
}

/* ---- activation quantisers (bit-identical to the reference) ------------- */

ZL_INLINE float absmax_n(const float *x, int n8) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < n8; k++) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * k)));
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 32 floats times id -> 32 int8 at dst; returns the sums of the first and
 * second 16 in *s0, *s1. */
ZL_INLINE void quant32(const float *x, __m256 id, int8_t *dst, int *s0, int *s1) {
    __m256i v0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), id));
    __m256i v1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), id));
    __m256i v2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16), id));
    __m256i v3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 24), id));
    *s0 = hsum_epi32(_mm256_add_epi32(v0, v1));
    *s1 = hsum_epi32(_mm256_add_epi32(v2, v3));
    /* packs work within 128-bit lanes; the permute restores element order */
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(v0, v1), _mm256_packs_epi32(v2, v3));
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)dst, p);
}

static void quant_q8_0(const float *x, void *dst, int64_t n) {
    zl_block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / ZL_QK; i++) {
        const float *xb = x + i * ZL_QK;
        float amax = absmax_n(xb, 4);
        int s0, s1;
        quant32(xb, _mm256_set1_ps(amax > 0 ? 127.0f / amax : 0.0f), y[i].qs, &s0, &s1);
        y[i].d = zl_f32_to_f16(amax / 127.0f);
    }
}

static void quant_q8_1(const float *x, void *dst, int64_t n) {
    zl_block_q8_1 *y = dst;
    for (int64_t i = 0; i < n / ZL_QK; i++) {
        const float *xb = x + i * ZL_QK;
        float amax = absmax_n(xb, 4), d = amax / 127.0f;
        int s0, s1;
        quant32(xb, _mm256_set1_ps(amax > 0 ? 127.0f / amax : 0.0f), y[i].qs, &s0, &s1);
        y[i].d = zl_f32_to_f16(d);
        y[i].s = zl_f32_to_f16(d * (float)(s0 + s1));
    }
}

static void quant_q8_k(const float *x, void *dst, int64_t n) {
    zl_block_q8_k *y = dst;
    for (int64_t i = 0; i < n / ZL_QK_K; i++) {
        const float *xb = x + i * ZL_QK_K;
        float amax = absmax_n(xb, 32);
        __m256 id = _mm256_set1_ps(amax > 0 ? 127.0f / amax : 0.0f);
        y[i].d = amax / 127.0f;
        for (int g = 0; g < 8; g++) {
            int s0, s1;
            quant32(xb + 32 * g, id, y[i].qs + 32 * g, &s0, &s1);
            y[i].bsums[2 * g] = (int16_t)s0;
            y[i].bsums[2 * g + 1] = (int16_t)s1;
        }
    }
}

zl_quant_fn zl_quant_fn_avx2(zl_type partner) {
    switch (partner) {
    case ZL_TYPE_Q8_0: return quant_q8_0;
    case ZL_TYPE_Q8_1: return quant_q8_1;
    case ZL_TYPE_Q8_K: return quant_q8_k;
    default: return NULL;
    }
}

#else /* not x86 */

zl_dot_fn zl_dot_fn_avx2(zl_type t) { (void)t; return NULL; }
int zl_prep_kernel_avx2(zl_type t, zl_prep_kernel *out) { (void)t; (void)out; return 0; }
zl_dot_multi_fn zl_dot4_fn_avx2(zl_type t) { (void)t; return NULL; }
zl_quant_fn zl_quant_fn_avx2(zl_type partner) { (void)partner; return NULL; }

#endif
