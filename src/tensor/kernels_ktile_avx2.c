/* kernels_ktile_avx2.c — Q4_K, Q5_K and Q6_K tile kernels for prefill
 * (AVX2): eight weight rows at once, one row per int32 lane.
 *
 * The AVX2 version of kernels_ktile_avx512.c (the design notes are there),
 * without VNNI: vpmaddubsw multiplies a lane's four codes with the token's
 * four activation quants (broadcast) into two 16-bit pair sums, and the pair
 * sums of several column groups are added in 16 bits before one vpmaddwd
 * applies the sub-block scale: 8 groups (a whole 32-element sub-block) for
 * Q4_K, whose pairs are <= 2*15*127 = 3810, 4 for Q5_K (<= 7874) and 2 for
 * Q6_K (<= 16002), so no 16-bit sum exceeds 32767.  The mins (Q4_K/Q5_K)
 * and Q6_K's -32 offset come from the Q8_K bsums through vpmaddwd too.
 *
 * Packed super-block of an 8-row group:
 *   codes[64][32]  group g (columns 4g..4g+3), lane r: row r's four codes
 *   Q4_K / Q5_K: sc[8][8] int32 (scale | scale << 16), mn[8][8] int32
 *                (min | min << 16), d[8], dmin[8] floats;
 *   Q6_K: sc[16][8] int32 (scale | scale << 16), scp[8][8] int32 (scale 2i
 *         | scale 2i+1 << 16), d[8], padding to 64 bytes.
 * The arithmetic is the canonical one of the K formats (exact super-block
 * integers, then one fma chain per sum): kernels_avx2.c's one-token kernels
 * compute the same, bit for bit. */
#include "kernels_isa.h"
#include "kernels_ktile.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>
#include <string.h>

#define ZL_INLINE static inline __attribute__((always_inline))
#define TR 8

enum {
    A45_SC = 64 * 32,
    A45_MN = A45_SC + 8 * 32,
    A45_D = A45_MN + 8 * 32,
    A45_SB = A45_D + 2 * 32,     /* 2624 = 41 * 64 */
    A6_SC = 64 * 32,
    A6_SCP = A6_SC + 16 * 32,
    A6_D = A6_SCP + 8 * 32,
    A6_SB = A6_D + 64,           /* 2880 = 45 * 64 */
};

ZL_INLINE __m256i bcast32(const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

#define pair16 zl_ktile_pair16

static size_t a45_size(int64_t n) { return (size_t)(n / ZL_QK_K) * A45_SB; }
static size_t a6_size(int64_t n) { return (size_t)(n / ZL_QK_K) * A6_SB; }

/* v[r] (row r, eight dwords) -> v[i] (lane r: dword i of row r) */
ZL_INLINE void transpose8(__m256i v[8]) {
    __m256i a[8], b[8];
    for (int i = 0; i < 4; i++) {
        a[2 * i] = _mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
        a[2 * i + 1] = _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
    }
    /* b[4i + k], 128-bit lane L: rows 4i..4i+3 of dword 4L + k */
    for (int i = 0; i < 2; i++) {
        b[4 * i] = _mm256_unpacklo_epi64(a[4 * i], a[4 * i + 2]);
        b[4 * i + 1] = _mm256_unpackhi_epi64(a[4 * i], a[4 * i + 2]);
        b[4 * i + 2] = _mm256_unpacklo_epi64(a[4 * i + 1], a[4 * i + 3]);
        b[4 * i + 3] = _mm256_unpackhi_epi64(a[4 * i + 1], a[4 * i + 3]);
    }
    for (int k = 0; k < 4; k++) {
        v[k] = _mm256_permute2x128_si256(b[k], b[4 + k], 0x20);
        v[4 + k] = _mm256_permute2x128_si256(b[k], b[4 + k], 0x31);
    }
}

/* Codes of elements 32k..32k+31 of a Q4_K / Q5_K super-block (k = 2c + hi:
 * the low or high nibbles of qs chunk c; Q5_K's bit 4 is bit k of qh[l]). */
ZL_INLINE __m256i a45_codes(const uint8_t *qs, const uint8_t *qh, int k) {
    __m256i raw = _mm256_loadu_si256((const __m256i *)(qs + 32 * (k >> 1)));
    __m256i q = _mm256_and_si256((k & 1) ? _mm256_srli_epi16(raw, 4) : raw, _mm256_set1_epi8(0x0F));
    if (qh) {
        const __m256i bit = _mm256_set1_epi8((char)(1 << k));
        __m256i h = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_loadu_si256((const __m256i *)qh), bit), bit);
        q = _mm256_or_si256(q, _mm256_and_si256(h, _mm256_set1_epi8(16)));
    }
    return q;
}

/* Codes of elements 32k..32k+31 of a Q6_K super-block (k = 4h + g, see
 * kernels_ref.c's q6_value). */
ZL_INLINE __m256i a6_codes(const zl_block_q6_k *a, int k) {
    const int h = k >> 2, g = k & 3;
    __m256i ql = _mm256_loadu_si256((const __m256i *)(a->ql + 64 * h + 32 * (g & 1)));
    __m256i nib = _mm256_and_si256(g >= 2 ? _mm256_srli_epi16(ql, 4) : ql, _mm256_set1_epi8(0x0F));
    __m256i qh = _mm256_loadu_si256((const __m256i *)(a->qh + 32 * h));
    __m256i top = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * g), _mm256_set1_epi8(3));
    return _mm256_or_si256(nib, _mm256_slli_epi16(top, 4));
}

ZL_INLINE void a45_pack(const void *w, size_t rb, int nrows, int64_t n, void *dst, const int hb) {
    const int64_t nb = n / ZL_QK_K;
    uint8_t *out = dst;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *sb = out + (size_t)b * A45_SB;
        const uint8_t *qs[TR], *qh[TR];
        int32_t *sc = (int32_t *)(sb + A45_SC), *mn = (int32_t *)(sb + A45_MN);
        float *d = (float *)(sb + A45_D);
        for (int r = 0; r < TR; r++) {
            if (r >= nrows) {
                for (int j = 0; j < 8; j++) sc[TR * j + r] = mn[TR * j + r] = 0;
                d[r] = d[TR + r] = 0.0f;
                continue;
            }
            zl_ktile_k45 h;
            zl_ktile_k45_row(w, rb, r, b, hb, &h);
            qs[r] = h.qs, qh[r] = h.qh;
            for (int j = 0; j < 8; j++) {
                sc[TR * j + r] = pair16(h.s[j], h.s[j]);
                mn[TR * j + r] = pair16(h.m[j], h.m[j]);
            }
            d[r] = h.d;
            d[TR + r] = h.dmin;
        }
        for (int k = 0; k < 8; k++) {
            __m256i v[TR];
            for (int r = 0; r < TR; r++) v[r] = r < nrows ? a45_codes(qs[r], hb ? qh[r] : NULL, k) : _mm256_setzero_si256();
            transpose8(v);
            for (int i = 0; i < TR; i++) _mm256_storeu_si256((__m256i *)(sb + 32 * (8 * k + i)), v[i]);
        }
    }
}

static void a4k_pack(const void *w, size_t rb, int nrows, int64_t n, void *dst) { a45_pack(w, rb, nrows, n, dst, 0); }
static void a5k_pack(const void *w, size_t rb, int nrows, int64_t n, void *dst) { a45_pack(w, rb, nrows, n, dst, 1); }

static void a6_pack(const void *w, size_t rb, int nrows, int64_t n, void *dst) {
    const int64_t nb = n / ZL_QK_K;
    uint8_t *out = dst;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *sb = out + (size_t)b * A6_SB;
        const zl_block_q6_k *a[TR];
        int32_t *sc = (int32_t *)(sb + A6_SC), *scp = (int32_t *)(sb + A6_SCP);
        float *d = (float *)(sb + A6_D);
        for (int r = 0; r < TR; r++) a[r] = zl_ktile_q6_row(w, rb, nrows, r, b, sc, scp, TR, 1, &d[r]);
        memset(d + TR, 0, 32);
        for (int k = 0; k < 8; k++) {
            __m256i v[TR];
            for (int r = 0; r < TR; r++) v[r] = a[r] ? a6_codes(a[r], k) : _mm256_setzero_si256();
            transpose8(v);
            for (int i = 0; i < TR; i++) _mm256_storeu_si256((__m256i *)(sb + 32 * (8 * k + i)), v[i]);
        }
    }
}

/* Sum over column groups g0..g0+cnt-1 of the pair sums of codes x quants, in 16 bits. */
ZL_INLINE __m256i pairs16(const uint8_t *sb, int g0, const int8_t *q, const int cnt) {
    __m256i s = _mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)(sb + 32 * g0)), bcast32(q));
#pragma GCC unroll 8
    for (int k = 1; k < cnt; k++)
        s = _mm256_add_epi16(s, _mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)(sb + 32 * (g0 + k))),
                                                     bcast32(q + 4 * k)));
    return s;
}

/* Q4_K (hb = 0) / Q5_K (hb = 1) against plain Q8_K rows, T tokens. */
ZL_INLINE void a45_run_t(const uint8_t *pk, const void *xv, size_t xs, int64_t n, float *out, const int hb, const int T) {
    const int64_t nb = n / ZL_QK_K;
    const zl_block_q8_k *x[8];
    __m256 acc[8], accm[8];
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) {
        x[t] = (const zl_block_q8_k *)((const uint8_t *)xv + (size_t)t * xs);
        acc[t] = accm[t] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *sb = pk + (size_t)b * A45_SB;
        const __m256 dw = _mm256_loadu_ps((const float *)(sb + A45_D));
        const __m256 dm = _mm256_loadu_ps((const float *)(sb + A45_D + 32));
#pragma GCC unroll 1
        for (int t = 0; t < T; t++) {
            const zl_block_q8_k *xb = x[t] + b;
            __m256i sumq = _mm256_setzero_si256(), summ = _mm256_setzero_si256();
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) {
                const __m256i sc = _mm256_loadu_si256((const __m256i *)(sb + A45_SC + 32 * j));
                __m256i p;
                if (hb) {
                    p = _mm256_madd_epi16(pairs16(sb, 8 * j, xb->qs + 32 * j, 4), sc);
                    p = _mm256_add_epi32(p, _mm256_madd_epi16(pairs16(sb, 8 * j + 4, xb->qs + 32 * j + 16, 4), sc));
                } else {
                    p = _mm256_madd_epi16(pairs16(sb, 8 * j, xb->qs + 32 * j, 8), sc);
                }
                sumq = _mm256_add_epi32(sumq, p);
                summ = _mm256_add_epi32(summ, _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(sb + A45_MN + 32 * j)),
                                                                bcast32(xb->bsums + 2 * j)));
            }
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumq), _mm256_mul_ps(dw, _mm256_set1_ps(xb->d)), acc[t]);
            accm[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(summ), _mm256_mul_ps(dm, _mm256_set1_ps(-xb->d)), accm[t]);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) _mm256_storeu_ps(out + TR * t, _mm256_add_ps(acc[t], accm[t]));
}

/* Q6_K against plain Q8_K rows, T tokens. */
ZL_INLINE void a6_run_t(const uint8_t *pk, const void *xv, size_t xs, int64_t n, float *out, const int unused,
                        const int T) {
    (void)unused;
    const int64_t nb = n / ZL_QK_K;
    const zl_block_q8_k *x[8];
    __m256 acc[8];
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) {
        x[t] = (const zl_block_q8_k *)((const uint8_t *)xv + (size_t)t * xs);
        acc[t] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *sb = pk + (size_t)b * A6_SB;
        const __m256 dw = _mm256_loadu_ps((const float *)(sb + A6_D));
#pragma GCC unroll 1
        for (int t = 0; t < T; t++) {
            const zl_block_q8_k *xb = x[t] + b;
            __m256i sumq = _mm256_setzero_si256(), off = _mm256_setzero_si256();
#pragma GCC unroll 16
            for (int g = 0; g < 16; g++) {
                const __m256i sc = _mm256_loadu_si256((const __m256i *)(sb + A6_SC + 32 * g));
                __m256i p = _mm256_madd_epi16(pairs16(sb, 4 * g, xb->qs + 16 * g, 2), sc);
                p = _mm256_add_epi32(p, _mm256_madd_epi16(pairs16(sb, 4 * g + 2, xb->qs + 16 * g + 8, 2), sc));
                sumq = _mm256_add_epi32(sumq, p);
            }
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++)
                off = _mm256_add_epi32(off, _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(sb + A6_SCP + 32 * i)),
                                                              bcast32(xb->bsums + 2 * i)));
            __m256i s = _mm256_sub_epi32(sumq, _mm256_slli_epi32(off, 5));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, _mm256_set1_ps(xb->d)), acc[t]);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) _mm256_storeu_ps(out + TR * t, acc[t]);
}

#define ZL_TILE_RUN(name, body, arg)                                                                    \
    static void name(const void *pk, const void *x, size_t xs, int T, int64_t n, float *out) {          \
        switch (T) {                                                                                    \
        case 1: body(pk, x, xs, n, out, arg, 1); break;                                                 \
        case 2: body(pk, x, xs, n, out, arg, 2); break;                                                 \
        case 3: body(pk, x, xs, n, out, arg, 3); break;                                                 \
        case 4: body(pk, x, xs, n, out, arg, 4); break;                                                 \
        case 5: body(pk, x, xs, n, out, arg, 5); break;                                                 \
        case 6: body(pk, x, xs, n, out, arg, 6); break;                                                 \
        case 7: body(pk, x, xs, n, out, arg, 7); break;                                                 \
        default: body(pk, x, xs, n, out, arg, 8); break;                                                \
        }                                                                                               \
    }
ZL_TILE_RUN(a4k_run, a45_run_t, 0)
ZL_TILE_RUN(a5k_run, a45_run_t, 1)
ZL_TILE_RUN(a6_run, a6_run_t, 0)
#undef ZL_TILE_RUN

int zl_tile_kernel_avx2(zl_type t, zl_tile_kernel *out) {
    switch (t) {
    /* min_tok: where the packing is paid for against one-token kernels (measured, 1536 x 1536) */
    case ZL_TYPE_Q4_K: *out = (zl_tile_kernel){TR, 8, a45_size, a4k_pack, a4k_run}; return 1;
    case ZL_TYPE_Q5_K: *out = (zl_tile_kernel){TR, 4, a45_size, a5k_pack, a5k_run}; return 1;
    case ZL_TYPE_Q6_K: *out = (zl_tile_kernel){TR, 8, a6_size, a6_pack, a6_run}; return 1;
    default: return 0;
    }
}

#else /* not x86 */

int zl_tile_kernel_avx2(zl_type t, zl_tile_kernel *out) { (void)t; (void)out; return 0; }

#endif
