/* kernels_q4l_avx512.c — Q4_0 weights against prepared Q8_0 activations,
 * one 32-weight block per int32 lane (AVX-512 VNNI + VBMI).
 *
 * The plain kernels (kernels_avx512_q8blk.inc) give each block four int32
 * lanes, so every block pays a quarter of a convert, a scale multiply and a
 * float multiply-add per token.  Here sixteen blocks of a row are unpacked
 * into eight registers in which lane p always belongs to the same block:
 * eight vpdpbusd finish sixteen block sums, and one convert / multiply /
 * multiply-add scales them, four times fewer float operations per block.
 * The unpacking (two permutes per four blocks, a 4x4 dword transpose, the
 * nibble split) is paid once per weight row and shared by every token of a
 * multi-token call, which is where prefill spends its time.
 *
 * Lane p = 4j + g of a 16-block chunk holds block 4g + j: the transpose is
 * then four in-lane unpacks.  The prepared activation (q4l_chunk) stores its
 * quants in the same order, with the block scales and -8 * quant sums (the
 * nibble offset) per lane.  Every T-token kernel is the same code as the
 * one-token kernel with T = 1, so a token's result never depends on the
 * batch size. */
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

typedef struct {
    int8_t op[8][64];   /* operand m, lane p: quants 4m..4m+3 of block lane_block(p) */
    float d[16];        /* block scales per lane */
    int32_t neg8sum[16]; /* -8 * sum of the block's quants per lane */
} q4l_chunk;
_Static_assert(sizeof(q4l_chunk) == 640, "q4l_chunk size");

static int lane_block(int p) { return 4 * (p % 4) + p / 4; }

static size_t q4l_size(int64_t n) {
    int64_t nb = n / ZL_QK;
    return (size_t)(nb / 16) * sizeof(q4l_chunk) + (size_t)(nb % 16) * sizeof(zl_block_q8_0);
}

static void q4l_prep(const void *xq, void *xp, int64_t n) {
    const zl_block_q8_0 *b = xq;
    const int64_t nb = n / ZL_QK, nc = nb / 16;
    q4l_chunk *c = xp;
    for (int64_t k = 0; k < nc; k++)
        for (int p = 0; p < 16; p++) {
            const zl_block_q8_0 *x = b + 16 * k + lane_block(p);
            int s = 0;
            for (int i = 0; i < ZL_QK; i++) s += x->qs[i];
            for (int m = 0; m < 8; m++) memcpy(&c[k].op[m][4 * p], x->qs + 4 * m, 4);
            c[k].d[p] = zl_f16_to_f32(x->d);
            c[k].neg8sum[p] = -8 * s;
        }
    memcpy(c + nc, b + 16 * nc, (size_t)(nb - 16 * nc) * sizeof(zl_block_q8_0));
}

/* nibble bytes of four blocks, one block per 128-bit lane (bytes 2..17 of each 18) */
static const uint8_t k_qs[64] = {
    2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 20, 21, 22, 23, 24, 25,
    26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49,
    50, 51, 52, 53, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71};
/* the f16 scale of block j of group g at half 4j + g: groups 0/1 (tables
 * z0_0 | z0_1) and groups 2/3 (z0_2 | z0_3); byte 18j (+64 for the odd group) */
#define ZL_D(j, g) (uint8_t)(18 * (j) + ((g) & 1) * 64), (uint8_t)(18 * (j) + ((g) & 1) * 64 + 1)
static const uint8_t k_d01[64] = {ZL_D(0, 0), ZL_D(0, 1), 0, 0, 0, 0, ZL_D(1, 0), ZL_D(1, 1), 0, 0, 0, 0,
                                  ZL_D(2, 0), ZL_D(2, 1), 0, 0, 0, 0, ZL_D(3, 0), ZL_D(3, 1)};
static const uint8_t k_d23[64] = {0, 0, 0, 0, ZL_D(0, 2), ZL_D(0, 3), 0, 0, 0, 0, ZL_D(1, 2), ZL_D(1, 3),
                                  0, 0, 0, 0, ZL_D(2, 2), ZL_D(2, 3), 0, 0, 0, 0, ZL_D(3, 2), ZL_D(3, 3)};
#undef ZL_D
/* bytes of halves with g >= 2 */
#define ZL_D23_MASK 0xF0F0F0F0ull

static float block_tail(const zl_block_q4_0 *a, const zl_block_q8_0 *b) {
    int s = 0;
    for (int j = 0; j < ZL_QK / 2; j++)
        s += ((a->qs[j] & 0xF) - 8) * b->qs[j] + ((a->qs[j] >> 4) - 8) * b->qs[j + ZL_QK / 2];
    return zl_f16_to_f32(a->d) * zl_f16_to_f32(b->d) * (float)s;
}

ZL_INLINE void dotT(const void *w, const void *xp, size_t xstride, int64_t n, float *out, const int T) {
    const zl_block_q4_0 *a = w;
    const int64_t nb = n / ZL_QK, nc = nb / 16;
    const q4l_chunk *x[8];
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) x[t] = (const q4l_chunk *)((const uint8_t *)xp + (size_t)t * xstride);
    const __m512i m4 = _mm512_set1_epi8(0x0F), iqs = _mm512_loadu_si512(k_qs);
    const __m512i id01 = _mm512_loadu_si512(k_d01), id23 = _mm512_loadu_si512(k_d23);
    __m512 acc[8];
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t k = 0; k < nc; k++) {
        const uint8_t *p = (const uint8_t *)(a + 16 * k);
        __m512i z[4], q[4];
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            z[g] = _mm512_loadu_si512((const void *)(p + 72 * g));
            __m512i tail = _mm512_castsi128_si512(_mm_loadl_epi64((const __m128i *)(p + 72 * g + 64)));
            q[g] = _mm512_permutex2var_epi8(z[g], iqs, tail);
        }
        /* 4x4 dword transpose inside each 128-bit lane: x_m lane 4j+g = dword m of block 4g+j */
        __m512i t0 = _mm512_unpacklo_epi32(q[0], q[1]), t1 = _mm512_unpackhi_epi32(q[0], q[1]);
        __m512i t2 = _mm512_unpacklo_epi32(q[2], q[3]), t3 = _mm512_unpackhi_epi32(q[2], q[3]);
        __m512i xm[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2), _mm512_unpacklo_epi64(t1, t3),
                         _mm512_unpackhi_epi64(t1, t3)};
        __m512i lo[4], hi[4];
#pragma GCC unroll 4
        for (int m = 0; m < 4; m++) {
            lo[m] = _mm512_and_si512(xm[m], m4);
            hi[m] = _mm512_and_si512(_mm512_srli_epi16(xm[m], 4), m4);
        }
        __m512i d = _mm512_mask_blend_epi8(ZL_D23_MASK, _mm512_permutex2var_epi8(z[0], id01, z[1]),
                                           _mm512_permutex2var_epi8(z[2], id23, z[3]));
        const __m512 dw = _mm512_cvtph_ps(_mm512_castsi512_si256(d));
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const q4l_chunk *c = x[t] + k;
            __m512i s0 = _mm512_loadu_si512((const void *)c->neg8sum), s1 = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int m = 0; m < 4; m++) {
                s0 = _mm512_dpbusd_epi32(s0, lo[m], _mm512_loadu_si512((const void *)c->op[m]));
                s1 = _mm512_dpbusd_epi32(s1, hi[m], _mm512_loadu_si512((const void *)c->op[4 + m]));
            }
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)),
                                     _mm512_mul_ps(dw, _mm512_loadu_ps(c->d)), acc[t]);
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) {
        out[t] = _mm512_reduce_add_ps(acc[t]);
        const zl_block_q8_0 *tb = (const zl_block_q8_0 *)(x[t] + nc);
        for (int64_t i = 16 * nc; i < nb; i++) out[t] += block_tail(a + i, tb + (i - 16 * nc));
    }
}

ZL_PREP_KERNEL_SET(zl_prep_kernel_q4l_avx512, q4l_size, q4l_prep, dotT)

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#else /* not x86 */

void zl_prep_kernel_q4l_avx512(zl_prep_kernel *out) { (void)out; }

#endif
