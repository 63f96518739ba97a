/* kernels_q8l_avx512.c — Q8_0 weights against prepared Q8_0 activations,
 * one 32-weight block per int32 lane (AVX-512 VNNI + VBMI).
 *
 * The plain Q8_0 kernels (kernels_avx512_q8blk.inc) give each block four
 * int32 lanes: every block pays a quarter of a convert, a scale multiply and
 * a float multiply-add per token, and each token also pays the sign fix-up
 * of the signed x signed product.  Here sixteen blocks of a row (a "chunk",
 * 544 bytes) are unpacked into eight registers in which lane p always
 * belongs to the same block, so eight vpdpbusd finish sixteen exact block
 * sums and one convert / multiply / multiply-add scales them.  The unpacking
 * (four vpermt2b for the quants and the scales of four blocks, a 4x4 dword
 * transpose inside each 128-bit lane, the sign flip that makes the weights
 * unsigned) is paid once per weight row and shared by every token of a
 * multi-token call.
 *
 * Lane p = 4j + g of a chunk holds block 4g + j (as kernels_q4l_avx512.c).
 * The weights enter vpdpbusd as w + 128 (unsigned); the 128 * sum(x) this
 * adds comes off through the prepared activation's per-block -128 * sum(x),
 * the accumulator's starting value.  The last chunk of a row may be partial:
 * its weights are read with masked loads (nothing past the row is touched)
 * and the prepared activation holds zeros there, so the missing blocks add
 * fma(0, 0, acc) = acc, exactly nothing.  The arithmetic, for every row and
 * token: per block the exact integer sum, lane p's float accumulator takes
 * fma(sum, d_w * d_x, acc) over the chunks in order, and the sixteen lanes
 * are added in one fixed tree (lanes_sum).  Every T-token kernel is the same
 * code as the one-token kernel with T = 1, so a token's result never depends
 * on the batch size. */
#include "kernels_isa.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>
#include <string.h>

#include "../base/f16.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512vbmi"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512vbmi")
#endif

#define ZL_INLINE static inline __attribute__((always_inline))

#define Q8L_CHUNK 16 /* blocks per chunk */

typedef struct {
    int8_t op[8][64];      /* operand m, lane p: quants 4m..4m+3 of block lane_block(p) */
    float d[16];           /* block scales per lane */
    int32_t neg128sum[16]; /* -128 * sum of the block's quants per lane */
} q8l_chunk;
_Static_assert(sizeof(q8l_chunk) == 640, "q8l_chunk size");

static int lane_block(int p) { return 4 * (p % 4) + p / 4; }

static int64_t n_chunks(int64_t n) { return (n / ZL_QK + Q8L_CHUNK - 1) / Q8L_CHUNK; }

static size_t q8l_size(int64_t n) { return (size_t)n_chunks(n) * sizeof(q8l_chunk); }

/* partner row -> chunks; the lanes of blocks past the row's end stay zero */
static void q8l_prep(const void *xq, void *xp, int64_t n) {
    const zl_block_q8_0 *b = xq;
    const int64_t nb = n / ZL_QK, nc = n_chunks(n);
    q8l_chunk *c = xp;
    memset(c, 0, (size_t)nc * sizeof *c);
    for (int64_t k = 0; k < nc; k++)
        for (int p = 0; p < 16; p++) {
            const int64_t bi = Q8L_CHUNK * k + lane_block(p);
            if (bi >= nb) continue;
            const zl_block_q8_0 *x = b + bi;
            int s = 0;
            for (int i = 0; i < ZL_QK; i++) s += x->qs[i];
            for (int m = 0; m < 8; m++) memcpy(&c[k].op[m][4 * p], x->qs + 4 * m, 4);
            c[k].d[p] = zl_f16_to_f32(x->d);
            c[k].neg128sum[p] = -128 * s;
        }
}

/* Within a group of four blocks (136 bytes, loads A at 0 and B at 64 form
 * bytes 0..127; C at 8 and D at 72 form bytes 8..135): quants 0..15 of
 * block j into 128-bit lane j (from A|B), quants 16..31 (from C|D). */
#define ZL_QS(j, o) (uint8_t)(34 * (j) + 2 + (o))
#define ZL_L(j) ZL_QS(j, 0), ZL_QS(j, 1), ZL_QS(j, 2), ZL_QS(j, 3), ZL_QS(j, 4), ZL_QS(j, 5), ZL_QS(j, 6), \
    ZL_QS(j, 7), ZL_QS(j, 8), ZL_QS(j, 9), ZL_QS(j, 10), ZL_QS(j, 11), ZL_QS(j, 12), ZL_QS(j, 13),      \
    ZL_QS(j, 14), ZL_QS(j, 15)
static const uint8_t k_lo[64] = {ZL_L(0), ZL_L(1), ZL_L(2), ZL_L(3)};
#undef ZL_QS
#define ZL_QS(j, o) (uint8_t)(34 * (j) + 18 + (o) - 8)
static const uint8_t k_hi[64] = {ZL_L(0), ZL_L(1), ZL_L(2), ZL_L(3)};
#undef ZL_QS
#undef ZL_L
/* the f16 scale of block j (bytes 34j, 34j + 1 of A|B) to half 4j + g, for
 * every g: each group's permute keeps its own halves (mask k_dmask[g]) */
#define ZL_D(j) (uint8_t)(34 * (j)), (uint8_t)(34 * (j) + 1)
#define ZL_D4(j) ZL_D(j), ZL_D(j), ZL_D(j), ZL_D(j)
static const uint8_t k_d[64] = {ZL_D4(0), ZL_D4(1), ZL_D4(2), ZL_D4(3)};
#undef ZL_D4
#undef ZL_D
static const __mmask64 k_dmask[4] = {0x03030303ull, 0x0C0C0C0Cull, 0x30303030ull, 0xC0C0C0C0ull};

/* bytes [0, len) of p, zeros after (len <= 64 bytes are read, none past) */
ZL_INLINE __m512i load_upto(const uint8_t *p, int64_t len) {
    if (len >= 64) return _mm512_loadu_si512((const void *)p);
    if (len <= 0) return _mm512_setzero_si512();
    return _mm512_maskz_loadu_epi8(((__mmask64)1 << len) - 1, (const void *)p);
}

/* the sixteen lanes in one fixed tree: halves, quarters, pairs, then the two */
ZL_INLINE float lanes_sum(__m512 v) {
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
}

/* One chunk of weights at p (rem bytes left in the row from p): op[m] laid
 * out as the prepared activation's operand m, 128 added to every quant; the
 * block scales per lane in dw. */
ZL_INLINE void unpack_chunk(const uint8_t *p, int64_t rem, __m512i op[8], __m512 *dw) {
    const __m512i ilo = _mm512_loadu_si512(k_lo), ihi = _mm512_loadu_si512(k_hi), id = _mm512_loadu_si512(k_d);
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    __m512i qlo[4], qhi[4], d = _mm512_setzero_si512();
    const int full = rem >= Q8L_CHUNK * (int64_t)sizeof(zl_block_q8_0);
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) {
        const uint8_t *q = p + 136 * g;
        const int64_t r = rem - 136 * g;
        __m512i A, B, C, D;
        if (full) {
            A = _mm512_loadu_si512((const void *)q);
            B = _mm512_loadu_si512((const void *)(q + 64));
            C = _mm512_loadu_si512((const void *)(q + 8));
            D = _mm512_loadu_si512((const void *)(q + 72));
        } else {
            A = load_upto(q, r);
            B = load_upto(q + 64, r - 64);
            C = load_upto(q + 8, r - 8);
            D = load_upto(q + 72, r - 72);
        }
        qlo[g] = _mm512_permutex2var_epi8(A, ilo, B);
        qhi[g] = _mm512_permutex2var_epi8(C, ihi, D);
        d = _mm512_or_si512(d, _mm512_maskz_permutex2var_epi8(k_dmask[g], A, id, B));
    }
    /* 4x4 dword transpose inside each 128-bit lane: lane 4j + g = dword m of block 4g + j */
#define ZL_TR(q, o)                                                                                          \
    do {                                                                                                     \
        __m512i t0 = _mm512_unpacklo_epi32(q[0], q[1]), t1 = _mm512_unpackhi_epi32(q[0], q[1]);             \
        __m512i t2 = _mm512_unpacklo_epi32(q[2], q[3]), t3 = _mm512_unpackhi_epi32(q[2], q[3]);             \
        op[(o) + 0] = _mm512_xor_si512(_mm512_unpacklo_epi64(t0, t2), bias);                                 \
        op[(o) + 1] = _mm512_xor_si512(_mm512_unpackhi_epi64(t0, t2), bias);                                 \
        op[(o) + 2] = _mm512_xor_si512(_mm512_unpacklo_epi64(t1, t3), bias);                                 \
        op[(o) + 3] = _mm512_xor_si512(_mm512_unpackhi_epi64(t1, t3), bias);                                 \
    } while (0)
    ZL_TR(qlo, 0);
    ZL_TR(qhi, 4);
#undef ZL_TR
    *dw = _mm512_cvtph_ps(_mm512_castsi512_si256(d));
}

ZL_INLINE void dotT(const void *w, const void *xp, size_t xstride, int64_t n, float *out, const int T) {
    const uint8_t *a = w;
    const int64_t nc = n_chunks(n), row_bytes = n / ZL_QK * (int64_t)sizeof(zl_block_q8_0);
    const int64_t chunk_bytes = Q8L_CHUNK * (int64_t)sizeof(zl_block_q8_0);
    const q8l_chunk *x[8];
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) x[t] = (const q8l_chunk *)((const uint8_t *)xp + (size_t)t * xstride);
    __m512 acc[8];
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t k = 0; k < nc; k++) {
        __m512i op[8];
        __m512 dw;
        unpack_chunk(a + k * chunk_bytes, row_bytes - k * chunk_bytes, op, &dw);
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const q8l_chunk *c = x[t] + k;
            __m512i s0 = _mm512_loadu_si512((const void *)c->neg128sum), s1 = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int m = 0; m < 4; m++) {
                s0 = _mm512_dpbusd_epi32(s0, op[m], _mm512_loadu_si512((const void *)c->op[m]));
                s1 = _mm512_dpbusd_epi32(s1, op[4 + m], _mm512_loadu_si512((const void *)c->op[4 + m]));
            }
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)),
                                     _mm512_mul_ps(dw, _mm512_loadu_ps(c->d)), acc[t]);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) out[t] = lanes_sum(acc[t]);
}

ZL_PREP_KERNEL_SET(zl_prep_kernel_q8l_avx512, q8l_size, q8l_prep, dotT)

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#else /* not x86 */

void zl_prep_kernel_q8l_avx512(zl_prep_kernel *out) { (void)out; }

#endif
