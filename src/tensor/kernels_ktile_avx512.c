/* kernels_ktile_avx512.c — Q4_K, Q5_K and Q6_K tile kernels for prefill
 * (AVX-512 VNNI): sixteen weight rows at once, one row per int32 lane.
 *
 * The row kernels (kernels_avx512*.c) give each super-block of a row sixteen
 * lanes of element positions, so every 64 weights cost a maddubs and a
 * vpdpwssd per token (the sub-block scale differs between lanes), and each
 * row re-reads every token's activations.  Here zl_matmul packs sixteen rows
 * once per call (pack) into registers whose lane r holds four codes of row r
 * (the same four columns in every lane): one vpdpbusd against the token's
 * four activation quants, broadcast from memory, is 64 multiply-adds, and a
 * whole 32-element (Q6_K: 16-element) sub-block stays in one lane, so its
 * scale is one vpmulld per sub-block and token for all sixteen rows.  The
 * activations are read once per sixteen rows.
 *
 * Packed super-block of a 16-row group:
 *   codes[64][64]  group g (columns 4g..4g+3), lane r: row r's four codes
 *                  (Q4_K 0..15, Q5_K 0..31, Q6_K 0..63 before its -32)
 *   Q4_K / Q5_K: sc[8][16] int32 sub-block scales, mn[4][16] int32 pairs
 *                (min 2i | min 2i+1 << 16) for vpdpwssd against the
 *                activation's paired 32-quant sums, d[16], dmin[16] floats;
 *   Q6_K: sc[16][16] int32, scp[8][16] int32 scale pairs (scale 2i | 2i+1
 *         << 16) for the -32 offset through the 16-quant bsums, d[16].
 *
 * Arithmetic (the determinism contract): per super-block the exact integers
 * sumq = sum_j sc_j * sum(q x) (Q6_K: minus 32 * sum_j sc_j * bsum_j) and,
 * for Q4_K/Q5_K, summ = sum_j m_j * sum32_j; then, in super-block order,
 * acc = fma((float)sumq, dx * dw, acc) and accm = fma((float)summ,
 * -dx * dmin, accm), result acc + accm.  kernels_avx512_q8blk.inc (Q4_K,
 * Q5_K) and kernels_avx512.c (Q6_K) compute the same integers and the same
 * chain with VNNI, so a token's bits never depend on which kernel ran it.
 * Bounds: |sum(q x)| over a sub-block <= 32*31*127 (Q6_K 16*63*127), scaled
 * and summed over a super-block < 2^31. */
#include "kernels_isa.h"
#include "kernels_ktile.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>
#include <string.h>

#include "../base/cpu.h"

#define ZL_INLINE static inline __attribute__((always_inline))
#define TR 16

enum {
    K45_SC = 64 * 64,            /* offset of sc in a packed Q4_K/Q5_K super-block */
    K45_MN = K45_SC + 8 * 64,    /* mn */
    K45_D = K45_MN + 4 * 64,     /* d, then dmin */
    K45_SB = K45_D + 2 * 64,     /* bytes per packed super-block */
    K6_SC = 64 * 64,
    K6_SCP = K6_SC + 16 * 64,
    K6_D = K6_SCP + 8 * 64,
    K6_SB = K6_D + 64,
};

ZL_INLINE __m512i bcast32(const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

static size_t k45_size(int64_t n) { return (size_t)(n / ZL_QK_K) * K45_SB; }
static size_t k6_size(int64_t n) { return (size_t)(n / ZL_QK_K) * K6_SB; }

/* v[r] (row r, sixteen dwords) -> v[i] (lane r: dword i of row r): the
 * classic 16x16 dword transpose in four rounds of in-lane and cross-lane
 * shuffles. */
ZL_INLINE void transpose16(__m512i v[16]) {
    __m512i a[16], b[16];
    for (int i = 0; i < 8; i++) {
        a[2 * i] = _mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
        a[2 * i + 1] = _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
    }
    /* b[4i + k], 128-bit lane L: rows 4i..4i+3 of dword 4L + k */
    for (int i = 0; i < 4; i++) {
        b[4 * i] = _mm512_unpacklo_epi64(a[4 * i], a[4 * i + 2]);
        b[4 * i + 1] = _mm512_unpackhi_epi64(a[4 * i], a[4 * i + 2]);
        b[4 * i + 2] = _mm512_unpacklo_epi64(a[4 * i + 1], a[4 * i + 3]);
        b[4 * i + 3] = _mm512_unpackhi_epi64(a[4 * i + 1], a[4 * i + 3]);
    }
    for (int k = 0; k < 4; k++) {
        __m512i c0 = _mm512_shuffle_i32x4(b[k], b[4 + k], 0x44), c1 = _mm512_shuffle_i32x4(b[k], b[4 + k], 0xEE);
        __m512i d0 = _mm512_shuffle_i32x4(b[8 + k], b[12 + k], 0x44), d1 = _mm512_shuffle_i32x4(b[8 + k], b[12 + k], 0xEE);
        v[k] = _mm512_shuffle_i32x4(c0, d0, 0x88);
        v[4 + k] = _mm512_shuffle_i32x4(c0, d0, 0xDD);
        v[8 + k] = _mm512_shuffle_i32x4(c1, d1, 0x88);
        v[12 + k] = _mm512_shuffle_i32x4(c1, d1, 0xDD);
    }
}

/* Codes 64c..64c+63 of one Q4_K / Q5_K super-block in natural order: chunk
 * c of qs holds elements 64c..64c+31 in its low and 64c+32..64c+63 in its
 * high nibbles; Q5_K's bit 4 of element 32 s + l is bit s of qh[l]. */
ZL_INLINE __m512i k45_codes(const uint8_t *qs, const uint8_t *qh, int c) {
    __m256i raw = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
    __m512i q = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(raw), _mm256_srli_epi16(raw, 4), 1),
                                 _mm512_set1_epi8(0x0F));
    if (qh) {
        const __m512i qhz = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)qh));
        const __m512i sel = _mm512_mask_blend_epi8(0xFFFFFFFF00000000ull, _mm512_set1_epi8((char)(1 << (2 * c))),
                                                   _mm512_set1_epi8((char)(1 << (2 * c + 1))));
        q = _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(qhz, sel), q, _mm512_set1_epi8(16));
    }
    return q;
}

/* Codes 64c..64c+63 of one Q6_K super-block: element 128h + 32g + l takes a
 * nibble of ql[64h + 32(g & 1) + l] (low for g < 2) and bits 2g, 2g+1 of
 * qh[32h + l]; c = 2h + (g >= 2). */
ZL_INLINE __m512i k6_codes(const zl_block_q6_k *a, int c) {
    const int h = c >> 1, hi = c & 1;
    __m512i ql = _mm512_loadu_si512((const void *)(a->ql + 64 * h));
    __m512i nib = _mm512_and_si512(hi ? _mm512_srli_epi16(ql, 4) : ql, _mm512_set1_epi8(0x0F));
    __m256i qh = _mm256_loadu_si256((const __m256i *)(a->qh + 32 * h));
    __m256i t0 = hi ? _mm256_srli_epi16(qh, 4) : qh, t1 = _mm256_srli_epi16(t0, 2);
    __m512i top = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(t0), t1, 1), _mm512_set1_epi8(3));
    return _mm512_or_si512(nib, _mm512_slli_epi16(top, 4));
}

ZL_INLINE void k45_pack(const void *w, size_t rb, int nrows, int64_t n, void *dst, const int hb) {
    const int64_t nb = n / ZL_QK_K;
    uint8_t *out = dst;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *sb = out + (size_t)b * K45_SB;
        const uint8_t *qs[TR], *qh[TR];
        int32_t *sc = (int32_t *)(sb + K45_SC), *mn = (int32_t *)(sb + K45_MN);
        float *d = (float *)(sb + K45_D);
        for (int r = 0; r < TR; r++) {
            if (r >= nrows) {
                for (int j = 0; j < 8; j++) sc[TR * j + r] = 0;
                for (int i = 0; i < 4; i++) mn[TR * i + r] = 0;
                d[r] = d[TR + r] = 0.0f;
                continue;
            }
            zl_ktile_k45 h;
            zl_ktile_k45_row(w, rb, r, b, hb, &h);
            qs[r] = h.qs, qh[r] = h.qh;
            for (int j = 0; j < 8; j++) sc[TR * j + r] = h.s[j];
            for (int i = 0; i < 4; i++) mn[TR * i + r] = h.m[2 * i] | h.m[2 * i + 1] << 16;
            d[r] = h.d;
            d[TR + r] = h.dmin;
        }
        for (int c = 0; c < 4; c++) {
            __m512i v[TR];
            for (int r = 0; r < TR; r++)
                v[r] = r < nrows ? k45_codes(qs[r], hb ? qh[r] : NULL, c) : _mm512_setzero_si512();
            transpose16(v);
            for (int i = 0; i < TR; i++) _mm512_storeu_si512((void *)(sb + 64 * (16 * c + i)), v[i]);
        }
    }
}

static void q4k_pack(const void *w, size_t rb, int nrows, int64_t n, void *dst) { k45_pack(w, rb, nrows, n, dst, 0); }
static void q5k_pack(const void *w, size_t rb, int nrows, int64_t n, void *dst) { k45_pack(w, rb, nrows, n, dst, 1); }

static void q6k_pack(const void *w, size_t rb, int nrows, int64_t n, void *dst) {
    const int64_t nb = n / ZL_QK_K;
    uint8_t *out = dst;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *sb = out + (size_t)b * K6_SB;
        const zl_block_q6_k *a[TR];
        int32_t *sc = (int32_t *)(sb + K6_SC), *scp = (int32_t *)(sb + K6_SCP);
        float *d = (float *)(sb + K6_D);
        for (int r = 0; r < TR; r++) a[r] = zl_ktile_q6_row(w, rb, nrows, r, b, sc, scp, TR, 0, &d[r]);
        for (int c = 0; c < 4; c++) {
            __m512i v[TR];
            for (int r = 0; r < TR; r++) v[r] = a[r] ? k6_codes(a[r], c) : _mm512_setzero_si512();
            transpose16(v);
            for (int i = 0; i < TR; i++) _mm512_storeu_si512((void *)(sb + 64 * (16 * c + i)), v[i]);
        }
    }
}

/* Q4_K / Q5_K against prepared activations (q8kp_block), T tokens. */
ZL_INLINE void k45_run_t(const uint8_t *pk, const void *xp, size_t xs, int64_t n, float *out, const int T) {
    const int64_t nb = n / ZL_QK_K;
    const q8kp_block *x[8];
    __m512 acc[8], accm[8];
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) {
        x[t] = (const q8kp_block *)((const uint8_t *)xp + (size_t)t * xs);
        acc[t] = _mm512_setzero_ps();
        accm[t] = _mm512_setzero_ps();
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *sb = pk + (size_t)b * K45_SB;
        __m512i sumq[8], summ[8];
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) sumq[t] = summ[t] = _mm512_setzero_si512();
        for (int j = 0; j < 8; j++) {
            __m512i wq[8];
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++) wq[k] = _mm512_loadu_si512((const void *)(sb + 64 * (8 * j + k)));
            const __m512i sc = _mm512_loadu_si512((const void *)(sb + K45_SC + 64 * j));
            const int off = 32 * zl_q8kp_order(j);
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                const int8_t *q = x[t][b].qs + off;
                __m512i s0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wq[0], bcast32(q));
                __m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wq[1], bcast32(q + 4));
#pragma GCC unroll 3
                for (int k = 2; k < 8; k += 2) {
                    s0 = _mm512_dpbusd_epi32(s0, wq[k], bcast32(q + 4 * k));
                    s1 = _mm512_dpbusd_epi32(s1, wq[k + 1], bcast32(q + 4 * k + 4));
                }
                sumq[t] = _mm512_add_epi32(sumq[t], _mm512_mullo_epi32(_mm512_add_epi32(s0, s1), sc));
            }
        }
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) {
            const __m512i mn = _mm512_loadu_si512((const void *)(sb + K45_MN + 64 * i));
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) summ[t] = _mm512_dpwssd_epi32(summ[t], mn, bcast32(x[t][b].sum32 + 2 * i));
        }
        const __m512 dw = _mm512_loadu_ps((const float *)(sb + K45_D));
        const __m512 dm = _mm512_loadu_ps((const float *)(sb + K45_D + 64));
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const float dx = x[t][b].d;
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumq[t]), _mm512_mul_ps(dw, _mm512_set1_ps(dx)), acc[t]);
            accm[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(summ[t]), _mm512_mul_ps(dm, _mm512_set1_ps(-dx)), accm[t]);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) _mm512_storeu_ps(out + TR * t, _mm512_add_ps(acc[t], accm[t]));
}

/* Q6_K against plain Q8_K activations, T tokens. */
ZL_INLINE void k6_run_t(const uint8_t *pk, const void *xv, size_t xs, int64_t n, float *out, const int T) {
    const int64_t nb = n / ZL_QK_K;
    const zl_block_q8_k *x[8];
    __m512 acc[8];
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) {
        x[t] = (const zl_block_q8_k *)((const uint8_t *)xv + (size_t)t * xs);
        acc[t] = _mm512_setzero_ps();
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *sb = pk + (size_t)b * K6_SB;
        __m512i sumq[8], off[8];
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) sumq[t] = off[t] = _mm512_setzero_si512();
        for (int g = 0; g < 16; g += 2) {
            __m512i wq[8];
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++) wq[k] = _mm512_loadu_si512((const void *)(sb + 64 * (4 * g + k)));
            const __m512i sc0 = _mm512_loadu_si512((const void *)(sb + K6_SC + 64 * g));
            const __m512i sc1 = _mm512_loadu_si512((const void *)(sb + K6_SC + 64 * (g + 1)));
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                const int8_t *q = x[t][b].qs + 16 * g;
                __m512i s0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wq[0], bcast32(q));
                __m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wq[4], bcast32(q + 16));
                s0 = _mm512_dpbusd_epi32(s0, wq[1], bcast32(q + 4));
                s1 = _mm512_dpbusd_epi32(s1, wq[5], bcast32(q + 20));
                s0 = _mm512_dpbusd_epi32(s0, wq[2], bcast32(q + 8));
                s1 = _mm512_dpbusd_epi32(s1, wq[6], bcast32(q + 24));
                s0 = _mm512_dpbusd_epi32(s0, wq[3], bcast32(q + 12));
                s1 = _mm512_dpbusd_epi32(s1, wq[7], bcast32(q + 28));
                sumq[t] = _mm512_add_epi32(sumq[t], _mm512_add_epi32(_mm512_mullo_epi32(s0, sc0), _mm512_mullo_epi32(s1, sc1)));
            }
        }
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) {
            const __m512i scp = _mm512_loadu_si512((const void *)(sb + K6_SCP + 64 * i));
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) off[t] = _mm512_dpwssd_epi32(off[t], scp, bcast32(x[t][b].bsums + 2 * i));
        }
        const __m512 dw = _mm512_loadu_ps((const float *)(sb + K6_D));
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            __m512i s = _mm512_sub_epi32(sumq[t], _mm512_slli_epi32(off[t], 5));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, _mm512_set1_ps(x[t][b].d)), acc[t]);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) _mm512_storeu_ps(out + TR * t, acc[t]);
}

#define ZL_TILE_RUN(name, body)                                                                         \
    static void name(const void *pk, const void *x, size_t xs, int T, int64_t n, float *out) {          \
        switch (T) {                                                                                    \
        case 1: body(pk, x, xs, n, out, 1); break;                                                      \
        case 2: body(pk, x, xs, n, out, 2); break;                                                      \
        case 3: body(pk, x, xs, n, out, 3); break;                                                      \
        case 4: body(pk, x, xs, n, out, 4); break;                                                      \
        case 5: body(pk, x, xs, n, out, 5); break;                                                      \
        case 6: body(pk, x, xs, n, out, 6); break;                                                      \
        case 7: body(pk, x, xs, n, out, 7); break;                                                      \
        default: body(pk, x, xs, n, out, 8); break;                                                     \
        }                                                                                               \
    }
ZL_TILE_RUN(k45_run, k45_run_t)
ZL_TILE_RUN(k6_run, k6_run_t)
#undef ZL_TILE_RUN

int zl_tile_kernel_avx512(zl_type t, zl_tile_kernel *out) {
    if (!zl_cpu_get()->avx512vnni) return 0;
    switch (t) {
    /* min_tok: where the packing is paid for against the 8-token row kernels (measured, 1536 x 1536) */
    case ZL_TYPE_Q4_K: *out = (zl_tile_kernel){TR, 16, k45_size, q4k_pack, k45_run}; return 1;
    case ZL_TYPE_Q5_K: *out = (zl_tile_kernel){TR, 16, k45_size, q5k_pack, k45_run}; return 1;
    case ZL_TYPE_Q6_K: *out = (zl_tile_kernel){TR, 16, k6_size, q6k_pack, k6_run}; return 1;
    default: return 0;
    }
}

#else /* not x86 */

int zl_tile_kernel_avx512(zl_type t, zl_tile_kernel *out) { (void)t; (void)out; return 0; }

#endif
