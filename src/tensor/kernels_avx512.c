/* kernels_avx512.c — AVX-512 (F/BW/VL/DQ, optionally VNNI and VBMI) dot
 * products, prepared-activation and four-token kernels, activation
 * quantisers.
 *
 * Compiled with AVX-512 flags but only reached through matmul.c's dispatch
 * after run-time detection.  Integer kernels are written against two small
 * helpers (u8·s8 and s16·s16 multiply-accumulate) and instantiated with VNNI
 * (vpdpbusd / vpdpwssd) and without (maddubs + madd); the Q4_0/Q8_0 family
 * is further instantiated with 16-bit (BW) or byte (VBMI) permutes from
 * kernels_avx512_q8blk.inc.  VBMI is read from CPUID here, once.
 *
 * Layout tricks, per format:
 *  - Q8_0 / Q4_0: four blocks per step; permutes pull the quants of four
 *    18- or 34-byte blocks out of plain loads, together with their f16 scales.
 *    Q4_0 nibbles enter as 0..15 and the -8 comes off as 8*sum(x).
 *  - Q4_K/Q5_K: a 64-byte load of nibbles holds four 32-element sub-blocks
 *    (low and high nibbles of two chunks); the 6-bit sub-block scales are
 *    applied to 16-bit pair sums (vpdpwssd), the mins come from activation sums.
 *  - Q6_K: 64 elements per register, the -32 offset removed through bsums.
 *  - Q4_1 / Q5_0 / Q5_1 (kernels_avx512_q45.inc): four blocks per step from
 *    masked loads, the fifth bits as byte masks, the *_1 mins against the
 *    activation's d * sum(x); with VBMI, sixteen blocks per step, one block
 *    per int32 lane (kernels_avx512_q45l.inc).
 *  - Prepared activations (VNNI): zl_matmul rearranges each activation row
 *    once (q8p_group for the Q8_0 family, q8kp_block for Q4_K/Q5_K,
 *    q45p_group / q45l_chunk for Q4_1/Q5_0/Q5_1) so the per-row loop touches
 *    only weights.
 * Integer partial sums never leave int32 within a block or super-block (see
 * the bounds next to each kernel); the float accumulation order differs from
 * the reference only by rounding. */
#include "kernels_isa.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>
#include <stdatomic.h>
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

ZL_INLINE float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* ---- float weights ---------------------------------------------------- */

/* The single-token float kernels accumulate exactly like dot4_float (one
 * accumulator, 16 lanes, the same tail), so a row's result does not depend
 * on how many tokens share the call: batched decoding and verification give
 * bit-identical logits to one-token decoding.  Decode is memory-bound, so
 * the single dependency chain costs nothing measurable. */
static float dot_f32(const void *w, const void *x, int64_t n) {
    const float *a = w, *b = x;
    __m512 acc = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc);
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc);
    }
    return _mm512_reduce_add_ps(acc);
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
    __m512 acc = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        acc = _mm512_fmadd_ps(bf ? load_bf16x16(a + i) : load_f16x16(a + i), _mm512_loadu_ps(b + i), acc);
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        __m256i h = _mm512_castsi512_si256(_mm512_maskz_loadu_epi16((__mmask32)m, a + i));
        __m512 wf = bf ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)) : _mm512_cvtph_ps(h);
        acc = _mm512_fmadd_ps(wf, _mm512_maskz_loadu_ps(m, b + i), acc);
    }
    return _mm512_reduce_add_ps(acc);
}

static float dot_f16(const void *w, const void *x, int64_t n) { return dot_half(w, x, n, 0); }
static float dot_bf16(const void *w, const void *x, int64_t n) { return dot_half(w, x, n, 1); }

/* Four tokens: each 16 weights are widened once and meet four activation rows. */
ZL_INLINE void dotT_float(const void *w, const void *x, size_t xs, int64_t n, float *out, const int kind, const int T) {
    const float *xr[8];
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) xr[t] = (const float *)((const uint8_t *)x + (size_t)t * xs);
    __m512 acc[8];
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 wv = kind == 0 ? _mm512_loadu_ps((const float *)w + i)
                  : kind == 1 ? load_f16x16((const uint16_t *)w + i) : load_bf16x16((const uint16_t *)w + i);
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) acc[t] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(xr[t] + i), acc[t]);
    }
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        __m512 wv;
        if (kind == 0) {
            wv = _mm512_maskz_loadu_ps(m, (const float *)w + i);
        } else {
            __m256i h = _mm512_castsi512_si256(_mm512_maskz_loadu_epi16((__mmask32)m, (const uint16_t *)w + i));
            wv = kind == 1 ? _mm512_cvtph_ps(h) : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
        }
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) acc[t] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, xr[t] + i), acc[t]);
    }
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) out[t] = _mm512_reduce_add_ps(acc[t]);
}

/* T-token instantiations (T = 2..8) of a kernel body taking (..., T) */
#define ZL_DOTT_SET(name, body, ...)                                                                            \
    static void name##2(const void *w, const void *x, size_t xs, int64_t n, float *out) { body(w, x, xs, n, out, __VA_ARGS__, 2); } \
    static void name##3(const void *w, const void *x, size_t xs, int64_t n, float *out) { body(w, x, xs, n, out, __VA_ARGS__, 3); } \
    static void name##4(const void *w, const void *x, size_t xs, int64_t n, float *out) { body(w, x, xs, n, out, __VA_ARGS__, 4); } \
    static void name##5(const void *w, const void *x, size_t xs, int64_t n, float *out) { body(w, x, xs, n, out, __VA_ARGS__, 5); } \
    static void name##6(const void *w, const void *x, size_t xs, int64_t n, float *out) { body(w, x, xs, n, out, __VA_ARGS__, 6); } \
    static void name##7(const void *w, const void *x, size_t xs, int64_t n, float *out) { body(w, x, xs, n, out, __VA_ARGS__, 7); } \
    static void name##8(const void *w, const void *x, size_t xs, int64_t n, float *out) { body(w, x, xs, n, out, __VA_ARGS__, 8); }
ZL_DOTT_SET(dott_f32_, dotT_float, 0)
ZL_DOTT_SET(dott_f16_, dotT_float, 1)
ZL_DOTT_SET(dott_bf16_, dotT_float, 2)

/* ---- Q8_0 · Q8_0 and Q4_0 · Q8_0 --------------------------------------- */
/* Four blocks at a time.  A block row is not 64-byte friendly (18 or 34
 * bytes per block), so 16-bit permutes (vpermt2w, AVX512BW; every field of
 * these blocks starts at an even offset) pull the quants of four blocks out
 * of two plain loads: for Q8_0, the first and second 16 quants of each block
 * ("lo", "hi"), for Q4_0 the 16 nibble bytes, whose low nibbles then line up
 * with the activations' lo half and high nibbles with the hi half.  The
 * f16 scales of the four blocks come out of the same loads, one per 4 int32
 * lanes, so one convert + multiply scales all four partial sums. */
static const uint16_t k_w_q4_0_qs[32] = {1,  2,  3,  4,  5,  6,  7,  8,  10, 11, 12, 13, 14, 15, 16, 17,
                                       19, 20, 21, 22, 23, 24, 25, 26, 28, 29, 30, 31, 32, 33, 34, 35};
static const uint16_t k_w_q4_0_d[32] = {0, 0, 0, 0, 9, 9, 9, 9, 18, 18, 18, 18, 27, 27, 27, 27};
/* Word-permute tables (AVX512BW).  lo: words 17k+1..17k+8 of bytes 0..127; hi: words 17k+9..17k+16 of bytes 8..135 */
static const uint16_t k_w_q8_0_lo[32] = {1,  2,  3,  4,  5,  6,  7,  8,  18, 19, 20, 21, 22, 23, 24, 25,
                                       35, 36, 37, 38, 39, 40, 41, 42, 52, 53, 54, 55, 56, 57, 58, 59};
static const uint16_t k_w_q8_0_hi[32] = {5,  6,  7,  8,  9,  10, 11, 12, 22, 23, 24, 25, 26, 27, 28, 29,
                                       39, 40, 41, 42, 43, 44, 45, 46, 56, 57, 58, 59, 60, 61, 62, 63};
static const uint16_t k_w_q8_0_d[32] = {0, 0, 0, 0, 17, 17, 17, 17, 34, 34, 34, 34, 51, 51, 51, 51};

/* Byte-permute tables (AVX512_VBMI): the same selections, byte by byte. */
static const uint8_t k_b_q4_0_qs[64] = {
      2,   3,   4,   5,   6,   7,   8,   9,  10,  11,  12,  13,  14,  15,  16,  17,
     20,  21,  22,  23,  24,  25,  26,  27,  28,  29,  30,  31,  32,  33,  34,  35,
     38,  39,  40,  41,  42,  43,  44,  45,  46,  47,  48,  49,  50,  51,  52,  53,
     56,  57,  58,  59,  60,  61,  62,  63,  64,  65,  66,  67,  68,  69,  70,  71};
static const uint8_t k_b_q4_0_d[64] = {
      0,   1,   0,   1,   0,   1,   0,   1,  18,  19,  18,  19,  18,  19,  18,  19,
     36,  37,  36,  37,  36,  37,  36,  37,  54,  55,  54,  55,  54,  55,  54,  55};
static const uint8_t k_b_q8_0_lo[64] = {
      2,   3,   4,   5,   6,   7,   8,   9,  10,  11,  12,  13,  14,  15,  16,  17,
     36,  37,  38,  39,  40,  41,  42,  43,  44,  45,  46,  47,  48,  49,  50,  51,
     70,  71,  72,  73,  74,  75,  76,  77,  78,  79,  80,  81,  82,  83,  84,  85,
    104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119};
static const uint8_t k_b_q8_0_hi[64] = {
     10,  11,  12,  13,  14,  15,  16,  17,  18,  19,  20,  21,  22,  23,  24,  25,
     44,  45,  46,  47,  48,  49,  50,  51,  52,  53,  54,  55,  56,  57,  58,  59,
     78,  79,  80,  81,  82,  83,  84,  85,  86,  87,  88,  89,  90,  91,  92,  93,
    112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127};
static const uint8_t k_b_q8_0_d[64] = {
      0,   1,   0,   1,   0,   1,   0,   1,  34,  35,  34,  35,  34,  35,  34,  35,
     68,  69,  68,  69,  68,  69,  68,  69, 102, 103, 102, 103, 102, 103, 102, 103};

ZL_INLINE __m512i load_idx(const void *t) { return _mm512_loadu_si512(t); }

/* Four Q8_0 blocks as lo / hi quant vectors and 16 scales (see the .inc). */
typedef struct { __m512i lo, hi; __m512 d; } q8x4;

/* One leftover block, scalar (rows of 32-blocks not a multiple of 4 are rare). */
static float q8_0_block_tail(const zl_block_q8_0 *a, const zl_block_q8_0 *b) {
    int s = 0;
    for (int j = 0; j < ZL_QK; j++) s += a->qs[j] * b->qs[j];
    return h2f(a->d) * h2f(b->d) * (float)s;
}

static float q4_0_block_tail(const zl_block_q4_0 *a, const zl_block_q8_0 *b) {
    int s = 0;
    for (int j = 0; j < ZL_QK / 2; j++)
        s += ((a->qs[j] & 0xF) - 8) * b->qs[j] + ((a->qs[j] >> 4) - 8) * b->qs[j + ZL_QK / 2];
    return h2f(a->d) * h2f(b->d) * (float)s;
}

/* s8 x s8 into int32 lanes.  VNNI: x+128 is unsigned, and
 * sum((x+128)*w) - sum(128*w) = sum(x*w) with no saturation anywhere.
 * Without VNNI maddubs would saturate on that, so the sign of w moves onto x
 * instead (|w| <= 128, |x| <= 127: pair sums fit int16). */
ZL_INLINE __m512i mac_s8s8(__m512i acc, __m512i w, __m512i x, const int vnni) {
    if (vnni) {
        const __m512i bias = _mm512_set1_epi8((char)0x80);
        acc = _mm512_dpbusd_epi32(acc, _mm512_xor_si512(x, bias), w);
        return _mm512_sub_epi32(acc, _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, w));
    }
    __m512i sx = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w), _mm512_setzero_si512(), x);
    return mac_u8s8(acc, _mm512_abs_epi8(w), sx, 0);
}


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

/* Prepared Q8_K activation for Q4_K / Q5_K (VNNI only): the eight 32-quant
 * sub-blocks in the order the nibble registers produce them (a 64-byte load
 * of weight nibbles holds sub-blocks 2c and 2c+2 in its low nibbles, 2c+1 and
 * 2c+3 in its high ones), the scale, and each sub-block's quant sum for the
 * mins.  320 bytes keeps every super-block 64-byte aligned. */
/* (q8kp_block itself is declared in kernels_isa.h: the tile kernels read it too.) */

static size_t q8kp_size(int64_t n) { return (size_t)(n / ZL_QK_K) * sizeof(q8kp_block); }

static void q8kp_prep(const void *xq, void *xp, int64_t n) {
    static const int order[8] = {0, 2, 1, 3, 4, 6, 5, 7};
    const zl_block_q8_k *b = xq;
    q8kp_block *p = xp;
    for (int64_t i = 0; i < n / ZL_QK_K; i++) {
        for (int k = 0; k < 8; k++) memcpy(p[i].qs + 32 * k, b[i].qs + 32 * order[k], 32);
        p[i].d = b[i].d;
        for (int j = 0; j < 8; j++) p[i].sum32[j] = (int16_t)(b[i].bsums[2 * j] + b[i].bsums[2 * j + 1]);
    }
}

/* Which 16-bit scale each lane of a (sub-block a | sub-block b) product takes. */
static const uint16_t k_w_k4p[4][32] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2},
    {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6},
    {5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7},
};
#define ZL_W2(k) 2 * (k), 2 * (k) + 1
#define ZL_W8(k) ZL_W2(k), ZL_W2(k), ZL_W2(k), ZL_W2(k), ZL_W2(k), ZL_W2(k), ZL_W2(k), ZL_W2(k)
#define ZL_PAIRROW(a, b) {ZL_W8(a), ZL_W8(a), ZL_W8(b), ZL_W8(b)}
static const uint8_t k_b_k4p[4][64] = {ZL_PAIRROW(0, 2), ZL_PAIRROW(1, 3), ZL_PAIRROW(4, 6), ZL_PAIRROW(5, 7)};
#undef ZL_PAIRROW
#undef ZL_W8
#undef ZL_W2

/* One super-block of the K formats' canonical arithmetic (see
 * kernels_ktile_avx512.c).  Q4_K / Q5_K: lanes 0 and 2 of acc carry the
 * chains acc and accm; sumi (16 lanes) and pm (4 lanes) are reduced exactly
 * to S and P, then acc = fma(S, dw * dx, acc) and accm = fma(P, dmin * -dx,
 * accm); dd = [dw, dw, dmin, dmin] (k45_dd), the result lane 0 + lane 2. */
ZL_INLINE __m128 k45_step(__m128 acc, __m512i sumi, __m128i pm, float dx, __m128 dd) {
    __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(sumi), _mm512_extracti64x4_epi64(sumi, 1));
    __m128i q = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    __m128i t = _mm_add_epi32(_mm_unpacklo_epi64(q, pm), _mm_unpackhi_epi64(q, pm));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, _MM_SHUFFLE(2, 3, 0, 1))); /* S, S, P, P */
    const __m128 neg_hi = _mm_castsi128_ps(_mm_set_epi32(INT32_MIN, INT32_MIN, 0, 0));
    return _mm_fmadd_ps(_mm_cvtepi32_ps(t), _mm_mul_ps(dd, _mm_xor_ps(_mm_set1_ps(dx), neg_hi)), acc);
}
/* [dw, dw, dmin, dmin] from a Q4_K / Q5_K block's leading (d, dmin) pair */
ZL_INLINE __m128 k45_dd(const void *dpair) {
    int32_t v;
    memcpy(&v, dpair, 4);
    __m128 d = _mm_cvtph_ps(_mm_cvtsi32_si128(v));
    return _mm_unpacklo_ps(d, d);
}
ZL_INLINE float k45_result(__m128 acc) { return _mm_cvtss_f32(acc) + _mm_cvtss_f32(_mm_movehl_ps(acc, acc)); }
/* Q6_K: lane 0 of acc = fma(S, dxdw, acc). */
ZL_INLINE __m128 k6_step(__m128 acc, __m512i sumi, float dxdw) {
    __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(sumi), _mm512_extracti64x4_epi64(sumi, 1));
    __m128i q = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    q = _mm_add_epi32(q, _mm_shuffle_epi32(q, _MM_SHUFFLE(1, 0, 3, 2)));
    q = _mm_add_epi32(q, _mm_shuffle_epi32(q, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_fmadd_ss(_mm_cvtepi32_ps(q), _mm_set_ss(dxdw), acc);
}


/* Prepared Q8_0 activation (VNNI only): four blocks as 256 bytes, the
 * first and second 16 quants of each block, the block scales as floats (one
 * per 4 int32 lanes, matching the dot-product lanes), and -8 * the quant sums
 * per lane (Q4_0's nibble offset, ready to start the accumulator).  Leftover
 * blocks (n/32 not a multiple of 4) follow as plain Q8_0 blocks. */
typedef struct {
    int8_t lo[64], hi[64];
    float d[16];
    int32_t neg8sum[16];
} q8p_group;
_Static_assert(sizeof(q8p_group) == 256, "q8p_group size");

static size_t q8p_size(int64_t n) {
    int64_t nb = n / ZL_QK;
    return (size_t)(nb / 4) * sizeof(q8p_group) + (size_t)(nb % 4) * sizeof(zl_block_q8_0);
}

/* ---- Q4_1 / Q5_0 / Q5_1: shared pieces of kernels_avx512_q45.inc ---------
 * Four blocks per step, as for Q4_0: one pair of masked loads covers the 80,
 * 88 or 96 bytes of four weight blocks, and permutes pull out of it the 64
 * nibble bytes (block k in 128-bit lane k; low nibbles are elements 0..15,
 * high nibbles 16..31), the f16 scales and mins replicated to each block's
 * four int32 lanes, and the qh words, whose bits become byte masks that add
 * the fifth bit.  A last group of 1..3 blocks takes the same path with
 * shorter masks: the missing blocks read as zero bytes, so zero quants and
 * zero scales, and add exact zeros.  Q5_0's -16 comes off as 16 * sum(x);
 * the *_1 formats add m * s, s being the activation block's d * sum(x),
 * carried in the block's first lane only. */
enum { ZL_F_Q4_1, ZL_F_Q5_0, ZL_F_Q5_1 };

ZL_INLINE int q45_bsize(const int f) { return f == ZL_F_Q4_1 ? 20 : f == ZL_F_Q5_0 ? 22 : 24; }

/* loads of the first n bytes (none when n <= 0) */
ZL_INLINE __mmask64 bytes_mask(int64_t n) {
    return n >= 64 ? ~(__mmask64)0 : n <= 0 ? 0 : (((__mmask64)1 << n) - 1);
}

/* VBMI byte-permute indices from 16-bit word indices (word w -> bytes 2w, 2w+1) */
ZL_INLINE __m512i idx_w2b(__m512i w) {
    __m512i b = _mm512_slli_epi16(w, 1);
    return _mm512_or_si512(b, _mm512_slli_epi16(_mm512_add_epi16(b, _mm512_set1_epi16(1)), 8));
}

#define ZL_QS8(b) (b), (b) + 1, (b) + 2, (b) + 3, (b) + 4, (b) + 5, (b) + 6, (b) + 7
#define ZL_R4(v) (v), (v), (v), (v)
/* Word tables over four weight blocks, per format: [0] the 16 qs bytes of
 * each block; [1] words 0..15 the scale d of lane/4's block, then the mins
 * (*_1) or, for Q5_0, words 16..19 the low and 20..23 the high qh halves;
 * [2] Q5_1's qh halves. */
static const uint16_t k_w_q45[3][3][32] = {
    {{ZL_QS8(2), ZL_QS8(12), ZL_QS8(22), ZL_QS8(32)},
     {ZL_R4(0), ZL_R4(10), ZL_R4(20), ZL_R4(30), ZL_R4(1), ZL_R4(11), ZL_R4(21), ZL_R4(31)},
     {0}},
    {{ZL_QS8(3), ZL_QS8(14), ZL_QS8(25), ZL_QS8(36)},
     {ZL_R4(0), ZL_R4(11), ZL_R4(22), ZL_R4(33), 1, 12, 23, 34, 2, 13, 24, 35},
     {0}},
    {{ZL_QS8(4), ZL_QS8(16), ZL_QS8(28), ZL_QS8(40)},
     {ZL_R4(0), ZL_R4(12), ZL_R4(24), ZL_R4(36), ZL_R4(1), ZL_R4(13), ZL_R4(25), ZL_R4(37)},
     {2, 14, 26, 38, 3, 15, 27, 39}},
};
/* Four plain activation blocks, [0] Q8_0, [1] Q8_1: the first 16 quants of
 * each block ([..][0]; the second 16 come from loads 16 bytes further on,
 * where they sit as the first did), the scales (words 0..15) and Q8_1's s
 * (words 16..31). */
static const uint16_t k_w_x8[2][2][32] = {
    {{ZL_QS8(1), ZL_QS8(18), ZL_QS8(35), ZL_QS8(52)}, {ZL_R4(0), ZL_R4(17), ZL_R4(34), ZL_R4(51)}},
    {{ZL_QS8(2), ZL_QS8(20), ZL_QS8(38), ZL_QS8(56)},
     {ZL_R4(0), ZL_R4(18), ZL_R4(36), ZL_R4(54), ZL_R4(1), ZL_R4(19), ZL_R4(37), ZL_R4(55)}},
};
#undef ZL_QS8
#undef ZL_R4

/* Four unpacked weight blocks: quants 0..31 (lo: elements 0..15 of each
 * block, hi: 16..31), scales and mins per int32 lane. */
typedef struct { __m512i lo, hi; __m512 d, m; } q45w;

/* Prepared activation for Q4_1 / Q5_0 / Q5_1 (VNNI): four blocks as the
 * quants of q8p_group, the scales per lane, and `extra`: for Q5_0 (Q8_0
 * partner) int32 -16 * the lane's quant sum, for the *_1 formats (Q8_1
 * partner) the float s of each block in its first lane, zero elsewhere.  A
 * last partial group is zero-filled, so every group has the same shape. */
typedef struct {
    int8_t lo[64], hi[64];
    float d[16];
    uint32_t extra[16];
} q45p_group;
_Static_assert(sizeof(q45p_group) == 256, "q45p_group size");

static size_t q45p_size(int64_t n) { return (size_t)((n / ZL_QK + 3) / 4) * sizeof(q45p_group); }

/* one partner block's quants, scale and extra (see q45p_group) into group slot j */
static void q45p_put(q45p_group *g, int j, const int8_t *qs, float d, int q8_1, float s) {
    memcpy(g->lo + 16 * j, qs, 16);
    memcpy(g->hi + 16 * j, qs + 16, 16);
    for (int l = 0; l < 4; l++) {
        g->d[4 * j + l] = d;
        if (q8_1) {
            float v = l == 0 ? s : 0.0f;
            memcpy(&g->extra[4 * j + l], &v, 4);
        } else {
            int32_t sum = 0;
            for (int e = 0; e < 4; e++) sum += qs[4 * l + e] + qs[16 + 4 * l + e];
            int32_t v = -16 * sum;
            memcpy(&g->extra[4 * j + l], &v, 4);
        }
    }
}

static void q45p_prep_q8_0(const void *xq, void *xp, int64_t n) {
    const zl_block_q8_0 *b = xq;
    const int64_t nb = n / ZL_QK;
    q45p_group *g = xp;
    memset(g, 0, q45p_size(n));
    for (int64_t i = 0; i < nb; i++) q45p_put(g + i / 4, (int)(i % 4), b[i].qs, h2f(b[i].d), 0, 0.0f);
}

static void q45p_prep_q8_1(const void *xq, void *xp, int64_t n) {
    const zl_block_q8_1 *b = xq;
    const int64_t nb = n / ZL_QK;
    q45p_group *g = xp;
    memset(g, 0, q45p_size(n));
    for (int64_t i = 0; i < nb; i++) q45p_put(g + i / 4, (int)(i % 4), b[i].qs, h2f(b[i].d), 1, h2f(b[i].s));
}

/* The kernels themselves, once per permute width: 16-bit permutes are
 * several uops each, VBMI's byte permutes one, which is most of the
 * difference on CPUs that have them.  The VBMI copy is compiled for that
 * extension only (the file's flags stop at VNNI) and only dispatched to when
 * CPUID reports it. */
#define ZL_PERM2(a, i, b) _mm512_permutex2var_epi16(a, i, b)
#define ZL_PERM1(i, a) _mm512_permutexvar_epi16(i, a)
#define ZL_TAB(name) k_w_##name
#define ZL_SFX(name) name##_w16
#define ZL_IDXW(t) load_idx(t)
#include "kernels_avx512_q8blk.inc"
#include "kernels_avx512_q45.inc"
#undef ZL_IDXW
#undef ZL_PERM2
#undef ZL_PERM1
#undef ZL_TAB
#undef ZL_SFX

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512vbmi"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512vbmi")
#endif
#define ZL_PERM2(a, i, b) _mm512_permutex2var_epi8(a, i, b)
#define ZL_PERM1(i, a) _mm512_permutexvar_epi8(i, a)
#define ZL_TAB(name) k_b_##name
#define ZL_SFX(name) name##_b8
#define ZL_IDXW(t) idx_w2b(load_idx(t))
#include "kernels_avx512_q8blk.inc"
#include "kernels_avx512_q45.inc"
#include "kernels_avx512_q45l.inc"
#undef ZL_IDXW
#undef ZL_PERM2
#undef ZL_PERM1
#undef ZL_TAB
#undef ZL_SFX
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

/* ---- K formats ---------------------------------------------------------- */

/* The 8 six-bit scales and mins of a Q4_K/Q5_K super-block as bytes
 * (sc[0..7] in *sc, m[0..7] in *mn), unpacked four at a time. */

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
 * of two registers each: |sumi lane| < 1.7e7 before the offset.  The
 * super-block's integer is reduced exactly and scaled in a scalar fma chain,
 * as the tile kernel (kernels_ktile_avx512.c) does per lane. */
ZL_INLINE float dot_q6_k_impl(const void *w, const void *x, int64_t n, const int vnni) {
    const zl_block_q6_k *a = w;
    const zl_block_q8_k *b = x;
    const int64_t nb = n / ZL_QK_K;
    const __m512i m4 = _mm512_set1_epi8(0x0F), m3 = _mm512_set1_epi8(3);
    const __m512i idx0 = load_idx(k_idx_q6[0]), idx1 = load_idx(k_idx_q6[1]);
    const __m512i idx2 = load_idx(k_idx_q6[2]), idx3 = load_idx(k_idx_q6[3]);
    __m128 acc = _mm_setzero_ps();
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
        acc = k6_step(acc, sumi, b[i].d * h2f(a[i].d));
    }
    return _mm_cvtss_f32(acc);
}

/* Q6_K, T tokens: the 6-bit codes and scale vectors are built once. */
ZL_INLINE void dotT_q6_k(const void *w, const void *x, size_t xs, int64_t n, float *out, int unused, const int T) {
    (void)unused;
    const zl_block_q6_k *a = w;
    const int64_t nb = n / ZL_QK_K;
    const zl_block_q8_k *b[8];
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) b[t] = (const zl_block_q8_k *)((const uint8_t *)x + (size_t)t * xs);
    const __m512i m4 = _mm512_set1_epi8(0x0F), m3 = _mm512_set1_epi8(3);
    const __m512i idx0 = load_idx(k_idx_q6[0]), idx1 = load_idx(k_idx_q6[1]);
    const __m512i idx2 = load_idx(k_idx_q6[2]), idx3 = load_idx(k_idx_q6[3]);
    __m128 acc[8];
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) acc[t] = _mm_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)a[i].scales));
        const __m512i sc16 = _mm512_castsi256_si512(s16);
        __m512i q[4], sv[4];
        for (int h = 0; h < 2; h++) {
            __m512i ql = _mm512_loadu_si512((const void *)(a[i].ql + 64 * h));
            __m256i qh = _mm256_loadu_si256((const __m256i *)(a[i].qh + 32 * h));
            __m512i hA = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
            __m512i hB = _mm512_srli_epi16(hA, 4);
            q[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_slli_epi16(_mm512_and_si512(hA, m3), 4));
            q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                           _mm512_slli_epi16(_mm512_and_si512(hB, m3), 4));
        }
        sv[0] = _mm512_permutexvar_epi16(idx0, sc16);
        sv[1] = _mm512_permutexvar_epi16(idx1, sc16);
        sv[2] = _mm512_permutexvar_epi16(idx2, sc16);
        sv[3] = _mm512_permutexvar_epi16(idx3, sc16);
        const float d = h2f(a[i].d);
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const zl_block_q8_k *bt = b[t] + i;
            __m512i sumi = _mm512_setzero_si512();
            for (int k = 0; k < 4; k++)
                sumi = _mm512_dpwssd_epi32(
                    sumi, _mm512_maddubs_epi16(q[k], _mm512_loadu_si512((const void *)(bt->qs + 64 * k))), sv[k]);
            __m256i off = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)bt->bsums), s16);
            sumi = _mm512_sub_epi32(sumi, _mm512_zextsi256_si512(_mm256_slli_epi32(off, 5)));
            acc[t] = k6_step(acc[t], sumi, bt->d * d);
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) out[t] = _mm_cvtss_f32(acc[t]);
}
ZL_DOTT_SET(dott_q6_k_, dotT_q6_k, 0)
#undef ZL_DOTT_SET

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

ZL_PAIR(dot_q4_k, dot_q4_k_body)
ZL_PAIR(dot_q5_k, dot_q5_k_body)
ZL_PAIR(dot_q6_k, dot_q6_k_impl)

zl_dot_fn zl_dot_fn_avx512_variant(zl_type t, int vnni, int vbmi) {
    switch (t) {
    case ZL_TYPE_F32: return dot_f32;
    case ZL_TYPE_F16: return dot_f16;
    case ZL_TYPE_BF16: return dot_bf16;
    case ZL_TYPE_Q8_0:
        if (vbmi) return vnni ? dot_q8_0_vnni_b8 : dot_q8_0_novnni_b8;
        return vnni ? dot_q8_0_vnni_w16 : dot_q8_0_novnni_w16;
    case ZL_TYPE_Q4_0:
        if (vbmi) return vnni ? dot_q4_0_vnni_b8 : dot_q4_0_novnni_b8;
        return vnni ? dot_q4_0_vnni_w16 : dot_q4_0_novnni_w16;
#define ZL_PICK_Q45(base) \
    return vbmi ? (vnni ? base##_vnni_b8 : base##_novnni_b8) : (vnni ? base##_vnni_w16 : base##_novnni_w16)
    case ZL_TYPE_Q4_1: ZL_PICK_Q45(dot_q4_1);
    case ZL_TYPE_Q5_0: ZL_PICK_Q45(dot_q5_0);
    case ZL_TYPE_Q5_1: ZL_PICK_Q45(dot_q5_1);
#undef ZL_PICK_Q45
    case ZL_TYPE_Q4_K: return vnni ? dot_q4_k_vnni : dot_q4_k_novnni;
    case ZL_TYPE_Q5_K: return vnni ? dot_q5_k_vnni : dot_q5_k_novnni;
    case ZL_TYPE_Q6_K: return vnni ? dot_q6_k_vnni : dot_q6_k_novnni;
    default: return NULL;
    }
}

zl_dot_fn zl_dot_fn_avx512(zl_type t) {
    return zl_dot_fn_avx512_variant(t, zl_cpu_get()->avx512vnni, zl_cpu_get()->avx512vbmi);
}

zl_dot_multi_fn zl_dotT_fn_avx512(zl_type t, int T) {
#define ZL_PICK_T(base)                                                                           \
    return T == 2 ? base##2 : T == 3 ? base##3 : T == 4 ? base##4 : T == 5 ? base##5 : T == 6 ? base##6 \
         : T == 7 ? base##7 : T == 8 ? base##8 : NULL
    switch (t) {
    case ZL_TYPE_F32: ZL_PICK_T(dott_f32_);
    case ZL_TYPE_F16: ZL_PICK_T(dott_f16_);
    case ZL_TYPE_BF16: ZL_PICK_T(dott_bf16_);
    case ZL_TYPE_Q6_K:
        if (!zl_cpu_get()->avx512vnni) return NULL;
        ZL_PICK_T(dott_q6_k_);
    default: return NULL;
    }
#undef ZL_PICK_T
}

zl_dot_multi_fn zl_dot4_fn_avx512(zl_type t) { return zl_dotT_fn_avx512(t, 4); }

#define ZL_SET_T(out, base, vbmi)                                        \
    do {                                                                  \
        (out)->dot2 = (vbmi) ? base##2_b8 : base##2_w16;                  \
        (out)->dot3 = (vbmi) ? base##3_b8 : base##3_w16;                  \
        (out)->dot4 = (vbmi) ? base##4_b8 : base##4_w16;                  \
        (out)->dot5 = (vbmi) ? base##5_b8 : base##5_w16;                  \
        (out)->dot6 = (vbmi) ? base##6_b8 : base##6_w16;                  \
        (out)->dot7 = (vbmi) ? base##7_b8 : base##7_w16;                  \
        (out)->dot8 = (vbmi) ? base##8_b8 : base##8_w16;                  \
    } while (0)

int zl_prep_kernel_avx512_variant(zl_type t, int vnni, int vbmi, zl_prep_kernel *out) {
    if (!vnni) return 0;
    if (t == ZL_TYPE_Q4_K || t == ZL_TYPE_Q5_K) {
        out->size = q8kp_size;
        out->prep = q8kp_prep;
        if (t == ZL_TYPE_Q4_K) {
            out->dot = vbmi ? dot_q4_k_prep_b8 : dot_q4_k_prep_w16;
            ZL_SET_T(out, dot_q4_k_prep_t, vbmi);
        } else {
            out->dot = vbmi ? dot_q5_k_prep_b8 : dot_q5_k_prep_w16;
            ZL_SET_T(out, dot_q5_k_prep_t, vbmi);
        }
        return 1;
    }
    if (t == ZL_TYPE_Q4_1 || t == ZL_TYPE_Q5_0 || t == ZL_TYPE_Q5_1) {
#define ZL_SET_Q45(out, base, sfx)                                                                   \
    do {                                                                                             \
        (out)->dot = base##_p1##sfx;                                                                 \
        (out)->dot2 = base##_p2##sfx, (out)->dot3 = base##_p3##sfx, (out)->dot4 = base##_p4##sfx;    \
        (out)->dot5 = base##_p5##sfx, (out)->dot6 = base##_p6##sfx, (out)->dot7 = base##_p7##sfx;    \
        (out)->dot8 = base##_p8##sfx;                                                                \
    } while (0)
#define ZL_SET_Q45L(out, base)                                                                   \
    do {                                                                                         \
        (out)->dot = base##_l1;                                                                  \
        (out)->dot2 = base##_l2, (out)->dot3 = base##_l3, (out)->dot4 = base##_l4;               \
        (out)->dot5 = base##_l5, (out)->dot6 = base##_l6, (out)->dot7 = base##_l7;               \
        (out)->dot8 = base##_l8;                                                                 \
    } while (0)
        if (vbmi) { /* one block per lane (kernels_avx512_q45l.inc) */
            out->size = q45l_size;
            out->prep = t == ZL_TYPE_Q5_0 ? q45l_prep_q8_0 : q45l_prep_q8_1;
            if (t == ZL_TYPE_Q4_1) ZL_SET_Q45L(out, dot_q4_1);
            else if (t == ZL_TYPE_Q5_0) ZL_SET_Q45L(out, dot_q5_0);
            else ZL_SET_Q45L(out, dot_q5_1);
            return 1;
        }
        out->size = q45p_size;
        out->prep = t == ZL_TYPE_Q5_0 ? q45p_prep_q8_0 : q45p_prep_q8_1;
        if (t == ZL_TYPE_Q4_1) {
            if (vbmi) ZL_SET_Q45(out, dot_q4_1, _b8);
            else ZL_SET_Q45(out, dot_q4_1, _w16);
        } else if (t == ZL_TYPE_Q5_0) {
            if (vbmi) ZL_SET_Q45(out, dot_q5_0, _b8);
            else ZL_SET_Q45(out, dot_q5_0, _w16);
        } else {
            if (vbmi) ZL_SET_Q45(out, dot_q5_1, _b8);
            else ZL_SET_Q45(out, dot_q5_1, _w16);
        }
#undef ZL_SET_Q45
#undef ZL_SET_Q45L
        return 1;
    }
    if (t != ZL_TYPE_Q4_0 && t != ZL_TYPE_Q8_0) return 0;
    if (t == ZL_TYPE_Q4_0 && vbmi) {
        zl_prep_kernel_q4l_avx512(out);
        return 1;
    }
    if (t == ZL_TYPE_Q8_0 && vbmi) {
        zl_prep_kernel_q8l_avx512(out);
        return 1;
    }
    out->size = q8p_size;
    out->prep = vbmi ? q8p_prep_b8 : q8p_prep_w16;
    if (t == ZL_TYPE_Q4_0) {
        out->dot = vbmi ? dot_q4_0_prep_b8 : dot_q4_0_prep_w16;
        ZL_SET_T(out, dot_q4_0_prep_t, vbmi);
    } else {
        out->dot = vbmi ? dot_q8_0_prep_b8 : dot_q8_0_prep_w16;
        ZL_SET_T(out, dot_q8_0_prep_t, vbmi);
    }
    return 1;
}
#undef ZL_SET_T

int zl_prep_kernel_avx512(zl_type t, zl_prep_kernel *out) {
    return zl_prep_kernel_avx512_variant(t, zl_cpu_get()->avx512vnni, zl_cpu_get()->avx512vbmi, out);
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

zl_dot_fn zl_dot_fn_avx512_variant(zl_type t, int vnni, int vbmi) { (void)t; (void)vnni; (void)vbmi; return NULL; }
zl_dot_fn zl_dot_fn_avx512(zl_type t) { (void)t; return NULL; }
int zl_prep_kernel_avx512_variant(zl_type t, int vnni, int vbmi, zl_prep_kernel *out) {
    (void)t; (void)vnni; (void)vbmi; (void)out;
    return 0;
}
int zl_prep_kernel_avx512(zl_type t, zl_prep_kernel *out) { (void)t; (void)out; return 0; }
zl_dot_multi_fn zl_dot4_fn_avx512(zl_type t) { (void)t; return NULL; }
zl_dot_multi_fn zl_dotT_fn_avx512(zl_type t, int T) { (void)t; (void)T; return NULL; }
zl_quant_fn zl_quant_fn_avx512(zl_type partner) { (void)partner; return NULL; }

#endif
