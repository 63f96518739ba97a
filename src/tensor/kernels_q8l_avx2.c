/* kernels_q8l_avx2.c — Q8_0 weights against prepared Q8_0 activations,
 * one 32-weight block per int32 lane (AVX2 + FMA + F16C).
 *
 * As kernels_q4l_avx2.c for Q4_0: eight blocks of a row (a "chunk", 272
 * bytes) are unpacked once, in two halves of sixteen quants per block, into
 * operands whose lane p always belongs to block p (operand m holds quants
 * 4m..4m+3), shared by every token of a multi-token call; each token's
 * eight integer steps finish eight exact block sums, and one convert, one
 * multiply and one multiply-add scale them.  Signed x signed products go
 * through vpmaddubsw as |w| x sign(x, w) (|w| <= 128, |x| <= 127: a pair sum
 * is at most 32512, so each is widened by vpmaddwd before it is added).
 *
 * The last chunk of a row may be partial: its bytes are copied into a
 * zeroed chunk and the prepared activation holds zeros there, so a missing
 * block adds fma(0, 0, acc) = acc, exactly nothing.  The arithmetic, for
 * every row and token: per block the exact integer sum, lane p's accumulator
 * takes fma(sum, d_w * d_x, acc) over the chunks in order, the eight lanes
 * are added in one fixed tree.  Every T-token kernel is the one-token code
 * with T = 1, so a token's result never depends on the batch size. */
#include "kernels_isa.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>
#include <string.h>

#include "../base/f16.h"

#define ZL_INLINE static inline __attribute__((always_inline))

#define Q8L2_CHUNK 8 /* blocks per chunk */

typedef struct {
    int8_t op[8][32]; /* operand m, lane p: quants 4m..4m+3 of block p */
    float d[8];       /* block scales per lane */
    uint8_t pad[32];
} q8l2_chunk;
_Static_assert(sizeof(q8l2_chunk) == 320, "q8l2_chunk size");

static int64_t n_chunks(int64_t n) { return (n / ZL_QK + Q8L2_CHUNK - 1) / Q8L2_CHUNK; }

static size_t q8l2_size(int64_t n) { return (size_t)n_chunks(n) * sizeof(q8l2_chunk); }

/* partner row -> chunks; the lanes of blocks past the row's end stay zero */
static void q8l2_prep(const void *xq, void *xp, int64_t n) {
    const zl_block_q8_0 *b = xq;
    const int64_t nb = n / ZL_QK, nc = n_chunks(n);
    q8l2_chunk *c = xp;
    memset(c, 0, (size_t)nc * sizeof *c);
    for (int64_t i = 0; i < nb; i++) {
        q8l2_chunk *ck = c + i / Q8L2_CHUNK;
        const int p = (int)(i % Q8L2_CHUNK);
        for (int m = 0; m < 8; m++) memcpy(&ck->op[m][4 * p], b[i].qs + 4 * m, 4);
        ck->d[p] = zl_f16_to_f32(b[i].d);
    }
}

/* the eight lanes in one fixed tree: halves, pairs, then the two */
ZL_INLINE float lanes_sum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

/* Half h of a whole chunk at a: w[m'] = operand 4h + m' (lane p: quants
 * 16h + 4m'..+3 of block p). */
ZL_INLINE void unpack_half(const zl_block_q8_0 *a, int h, __m256i w[4]) {
    __m256i q[4];
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) /* block g in the low 128-bit lane, block g + 4 in the high one */
        q[g] = _mm256_loadu2_m128i((const __m128i *)(a[g + 4].qs + 16 * h), (const __m128i *)(a[g].qs + 16 * h));
    /* 4x4 dword transpose inside each lane: lane 4l + g = dword m' of block g + 4l */
    __m256i t0 = _mm256_unpacklo_epi32(q[0], q[1]), t1 = _mm256_unpackhi_epi32(q[0], q[1]);
    __m256i t2 = _mm256_unpacklo_epi32(q[2], q[3]), t3 = _mm256_unpackhi_epi32(q[2], q[3]);
    w[0] = _mm256_unpacklo_epi64(t0, t2);
    w[1] = _mm256_unpackhi_epi64(t0, t2);
    w[2] = _mm256_unpacklo_epi64(t1, t3);
    w[3] = _mm256_unpackhi_epi64(t1, t3);
}

ZL_INLINE __m256 chunk_scales(const zl_block_q8_0 *a) {
    uint64_t lo = 0, hi = 0;
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        lo |= (uint64_t)a[j].d << (16 * j);
        hi |= (uint64_t)a[j + 4].d << (16 * j);
    }
    return _mm256_cvtph_ps(_mm_set_epi64x((long long)hi, (long long)lo));
}

ZL_INLINE void dotT(const void *w, const void *xp, size_t xstride, int64_t n, float *out, const int T) {
    const zl_block_q8_0 *a = w;
    const int64_t nb = n / ZL_QK, nc = n_chunks(n);
    const q8l2_chunk *x[8];
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) x[t] = (const q8l2_chunk *)((const uint8_t *)xp + (size_t)t * xstride);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[8];
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t k = 0; k < nc; k++) {
        const zl_block_q8_0 *src = a + Q8L2_CHUNK * k;
        zl_block_q8_0 part[Q8L2_CHUNK];
        if (Q8L2_CHUNK * (k + 1) > nb) { /* the partial last chunk, zero-padded */
            memset(part, 0, sizeof part);
            memcpy(part, src, (size_t)(nb - Q8L2_CHUNK * k) * sizeof *part);
            src = part;
        }
        __m256i s[8];
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) s[t] = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m256i wq[4];
            unpack_half(src, h, wq);
#pragma GCC unroll 4
            for (int m = 0; m < 4; m++) {
                const __m256i aw = _mm256_abs_epi8(wq[m]);
#pragma GCC unroll 8
                for (int t = 0; t < T; t++) {
                    __m256i xv = _mm256_loadu_si256((const __m256i *)x[t][k].op[4 * h + m]);
                    __m256i p = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(xv, wq[m]));
                    s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(p, ones));
                }
            }
        }
        const __m256 dw = chunk_scales(src);
#pragma GCC unroll 8
        for (int t = 0; t < T; t++)
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t]), _mm256_mul_ps(dw, _mm256_loadu_ps(x[t][k].d)), acc[t]);
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) out[t] = lanes_sum(acc[t]);
}

ZL_PREP_KERNEL_SET(zl_prep_kernel_q8l_avx2, q8l2_size, q8l2_prep, dotT)

#else /* not x86 */

void zl_prep_kernel_q8l_avx2(zl_prep_kernel *out) { (void)out; }

#endif
