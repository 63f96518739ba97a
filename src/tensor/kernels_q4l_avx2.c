/* kernels_q4l_avx2.c — Q4_0 weights against prepared Q8_0 activations,
 * one 32-weight block per int32 lane (AVX2 + FMA + F16C).
 *
 * The AVX2 row kernel of kernels_avx2.c gives each block a whole register:
 * every block pays a madd, a convert, a scale broadcast and a multiply-add
 * per token.  Here eight blocks of a row (a "chunk", 144 bytes) are unpacked
 * into eight registers in which lane p always belongs to block p: operand m
 * (m < 4) holds the low nibbles of the block's bytes 4m..4m+3 (quants
 * 4m..4m+3), operand 4 + m their high nibbles (quants 16 + 4m..).  Eight
 * vpmaddubsw against the prepared activation's operands give pair sums of at
 * most 2 * 15 * 127 each, so all eight add up in 16 bits (<= 30480) and one
 * vpmaddwd, one convert, one multiply and one multiply-add finish eight
 * blocks.  The unpacking (two 16-byte loads per register pair, a 4x4 dword
 * transpose inside each 128-bit lane, the nibble split, the eight f16
 * scales) is paid once per weight row and shared by every token of a
 * multi-token call: prefill, batches and verification.
 *
 * Nibbles enter as 0..15; the -8 comes off through the prepared activation's
 * -8 * sum(x) per block.  The last chunk of a row may be partial: its bytes
 * are copied into a zeroed chunk, and the prepared activation holds zeros
 * there, so the missing blocks add fma(0, 0, acc) = acc, exactly nothing.
 * The arithmetic, for every row and token: per block the exact integer sum,
 * lane p's accumulator takes fma(sum, d_w * d_x, acc) over the chunks in
 * order, the eight lanes are added in one fixed tree.  Every T-token kernel
 * is the one-token code with T = 1, so a token's result never depends on
 * the batch size. */
#include "kernels_isa.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>
#include <string.h>

#include "../base/f16.h"

#define ZL_INLINE static inline __attribute__((always_inline))

#define Q4L2_CHUNK 8 /* blocks per chunk */

typedef struct {
    int8_t op[8][32];     /* operand m, lane p: the quants of block p that meet weight operand m */
    float d[8];           /* block scales per lane */
    int32_t neg8sum[8];   /* -8 * sum of the block's quants per lane */
} q4l2_chunk;
_Static_assert(sizeof(q4l2_chunk) == 320, "q4l2_chunk size");

static int64_t n_chunks(int64_t n) { return (n / ZL_QK + Q4L2_CHUNK - 1) / Q4L2_CHUNK; }

static size_t q4l2_size(int64_t n) { return (size_t)n_chunks(n) * sizeof(q4l2_chunk); }

/* partner row -> chunks; the lanes of blocks past the row's end stay zero */
static void q4l2_prep(const void *xq, void *xp, int64_t n) {
    const zl_block_q8_0 *b = xq;
    const int64_t nb = n / ZL_QK, nc = n_chunks(n);
    q4l2_chunk *c = xp;
    memset(c, 0, (size_t)nc * sizeof *c);
    for (int64_t i = 0; i < nb; i++) {
        const zl_block_q8_0 *x = b + i;
        q4l2_chunk *ck = c + i / Q4L2_CHUNK;
        const int p = (int)(i % Q4L2_CHUNK);
        int s = 0;
        for (int k = 0; k < ZL_QK; k++) s += x->qs[k];
        for (int m = 0; m < 4; m++) {
            memcpy(&ck->op[m][4 * p], x->qs + 4 * m, 4);
            memcpy(&ck->op[4 + m][4 * p], x->qs + 16 + 4 * m, 4);
        }
        ck->d[p] = zl_f16_to_f32(x->d);
        ck->neg8sum[p] = -8 * s;
    }
}

/* the eight lanes in one fixed tree: halves, pairs, then the two */
ZL_INLINE float lanes_sum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

/* One whole chunk of weights at a: op[] as the prepared operands, dw the
 * block scales per lane. */
ZL_INLINE void unpack_chunk(const zl_block_q4_0 *a, __m256i op[8], __m256 *dw) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256i q[4];
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) /* block g in the low 128-bit lane, block g + 4 in the high one */
        q[g] = _mm256_loadu2_m128i((const __m128i *)a[g + 4].qs, (const __m128i *)a[g].qs);
    /* 4x4 dword transpose inside each lane: x_m lane 4h + g = dword m of block g + 4h */
    __m256i t0 = _mm256_unpacklo_epi32(q[0], q[1]), t1 = _mm256_unpackhi_epi32(q[0], q[1]);
    __m256i t2 = _mm256_unpacklo_epi32(q[2], q[3]), t3 = _mm256_unpackhi_epi32(q[2], q[3]);
    __m256i x[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2), _mm256_unpacklo_epi64(t1, t3),
                    _mm256_unpackhi_epi64(t1, t3)};
#pragma GCC unroll 4
    for (int m = 0; m < 4; m++) {
        op[m] = _mm256_and_si256(x[m], m4);
        op[4 + m] = _mm256_and_si256(_mm256_srli_epi16(x[m], 4), m4);
    }
    uint64_t lo = 0, hi = 0;
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        lo |= (uint64_t)a[j].d << (16 * j);
        hi |= (uint64_t)a[j + 4].d << (16 * j);
    }
    *dw = _mm256_cvtph_ps(_mm_set_epi64x((long long)hi, (long long)lo));
}

ZL_INLINE void dotT(const void *w, const void *xp, size_t xstride, int64_t n, float *out, const int T) {
    const zl_block_q4_0 *a = w;
    const int64_t nb = n / ZL_QK, nc = n_chunks(n);
    const q4l2_chunk *x[8];
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) x[t] = (const q4l2_chunk *)((const uint8_t *)xp + (size_t)t * xstride);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[8];
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t k = 0; k < nc; k++) {
        __m256i op[8];
        __m256 dw;
        if (Q4L2_CHUNK * (k + 1) <= nb) {
            unpack_chunk(a + Q4L2_CHUNK * k, op, &dw);
        } else { /* the partial last chunk, zero-padded */
            zl_block_q4_0 part[Q4L2_CHUNK];
            memset(part, 0, sizeof part);
            memcpy(part, a + Q4L2_CHUNK * k, (size_t)(nb - Q4L2_CHUNK * k) * sizeof *part);
            unpack_chunk(part, op, &dw);
        }
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const q4l2_chunk *c = x[t] + k;
            __m256i p = _mm256_maddubs_epi16(op[0], _mm256_loadu_si256((const __m256i *)c->op[0]));
#pragma GCC unroll 8
            for (int m = 1; m < 8; m++)
                p = _mm256_add_epi16(p, _mm256_maddubs_epi16(op[m], _mm256_loadu_si256((const __m256i *)c->op[m])));
            __m256i s = _mm256_add_epi32(_mm256_madd_epi16(p, ones), _mm256_loadu_si256((const __m256i *)c->neg8sum));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, _mm256_loadu_ps(c->d)), acc[t]);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) out[t] = lanes_sum(acc[t]);
}

ZL_PREP_KERNEL_SET(zl_prep_kernel_q4l_avx2, q4l2_size, q4l2_prep, dotT)

#else /* not x86 */

void zl_prep_kernel_q4l_avx2(zl_prep_kernel *out) { (void)out; }

#endif
