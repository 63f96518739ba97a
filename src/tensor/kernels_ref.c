/* kernels_ref.c — scalar reference dequantisers, quantisers and dot products.
 *
 * This file is the definition of every block format as far as the rest of
 * the engine is concerned: the SIMD kernels are tested against these
 * functions, so they favour obviousness over speed.  The dot products do the
 * same integer arithmetic the SIMD ones do (integer sums within a block, one
 * float multiply-add per block or sub-block) so the two agree to rounding.
 *
 * The weight quantisers are our own: each block (or sub-block) searches a
 * small set of candidate scales and keeps the one with the least squared
 * error after a least-squares refit.  They are meant for tests and for
 * converting small models, not for speed.  Activation quantisers (Q8_0,
 * Q8_1, Q8_K) are plain max-abs scaling: they run on every matmul call. */
#include <math.h>
#include <string.h>

#include "kernels.h"
#include "kernels_isa.h"

static inline int iround(float v) { return (int)lrintf(v); }
static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }
static inline float f16f(zl_f16 h) { return zl_f16_to_f32(h); }
static inline uint32_t load_u32le(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void store_u32le(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

/* ------------------------------------------------------------------ */
/* dequantisation                                                      */
/* ------------------------------------------------------------------ */

static void deq_q4_0(const zl_block_q4_0 *b, float *y) {
    float d = f16f(b->d);
    for (int j = 0; j < ZL_QK / 2; j++) {
        y[j] = d * (float)((b->qs[j] & 0xF) - 8);
        y[j + ZL_QK / 2] = d * (float)((b->qs[j] >> 4) - 8);
    }
}

static void deq_q4_1(const zl_block_q4_1 *b, float *y) {
    float d = f16f(b->d), m = f16f(b->m);
    for (int j = 0; j < ZL_QK / 2; j++) {
        y[j] = d * (float)(b->qs[j] & 0xF) + m;
        y[j + ZL_QK / 2] = d * (float)(b->qs[j] >> 4) + m;
    }
}

/* 5-bit value j of a Q5_0/Q5_1 block: low nibble from qs, bit 4 from qh bit j. */
static inline int q5_value(const uint8_t *qs, uint32_t qh, int j) {
    int lo = j < ZL_QK / 2 ? (qs[j] & 0xF) : (qs[j - ZL_QK / 2] >> 4);
    return lo | (int)((qh >> j) & 1) << 4;
}

static void deq_q5_0(const zl_block_q5_0 *b, float *y) {
    float d = f16f(b->d);
    uint32_t qh = load_u32le(b->qh);
    for (int j = 0; j < ZL_QK; j++) y[j] = d * (float)(q5_value(b->qs, qh, j) - 16);
}

static void deq_q5_1(const zl_block_q5_1 *b, float *y) {
    float d = f16f(b->d), m = f16f(b->m);
    uint32_t qh = load_u32le(b->qh);
    for (int j = 0; j < ZL_QK; j++) y[j] = d * (float)q5_value(b->qs, qh, j) + m;
}

static void deq_q8_0(const zl_block_q8_0 *b, float *y) {
    float d = f16f(b->d);
    for (int j = 0; j < ZL_QK; j++) y[j] = d * (float)b->qs[j];
}

static void deq_q8_1(const zl_block_q8_1 *b, float *y) {
    float d = f16f(b->d);
    for (int j = 0; j < ZL_QK; j++) y[j] = d * (float)b->qs[j];
}

/* 4-bit value j (0..255) of a Q4_K / Q5_K super-block: each 64-element chunk
 * uses 32 bytes, low nibbles for its first 32 elements, high for the rest. */
static inline int qk4_value(const uint8_t *qs, int j) {
    int chunk = j / 64, r = j % 64;
    uint8_t byte = qs[chunk * 32 + r % 32];
    return r < 32 ? (byte & 0xF) : (byte >> 4);
}

static void deq_q4_k(const zl_block_q4_k *b, float *y) {
    float d = f16f(b->d), dmin = f16f(b->dmin);
    for (int s = 0; s < 8; s++) {
        int sc, m;
        zl_kscale(s, b->scales, &sc, &m);
        float ds = d * (float)sc, dm = dmin * (float)m;
        for (int l = 0; l < 32; l++) y[s * 32 + l] = ds * (float)qk4_value(b->qs, s * 32 + l) - dm;
    }
}

/* Q5_K adds bit (j / 32) of qh[j % 32] as bit 4. */
static inline int qk5_value(const zl_block_q5_k *b, int j) {
    return qk4_value(b->qs, j) | ((b->qh[j % 32] >> (j / 32)) & 1) << 4;
}

static void deq_q5_k(const zl_block_q5_k *b, float *y) {
    float d = f16f(b->d), dmin = f16f(b->dmin);
    for (int s = 0; s < 8; s++) {
        int sc, m;
        zl_kscale(s, b->scales, &sc, &m);
        float ds = d * (float)sc, dm = dmin * (float)m;
        for (int l = 0; l < 32; l++) y[s * 32 + l] = ds * (float)qk5_value(b, s * 32 + l) - dm;
    }
}

/* 6-bit value j (0..255) of a Q6_K super-block, without the -32 offset.
 * Each 128-element half uses 64 ql bytes and 32 qh bytes: element h*128 + g*32 + l
 * (g = 0..3) takes a nibble of ql[(g & 1) * 32 + l] (low for g < 2) and bits
 * 2g..2g+1 of qh[l]. */
static inline int q6_value(const zl_block_q6_k *b, int j) {
    int h = j / 128, g = (j % 128) / 32, l = j % 32;
    uint8_t lo = b->ql[h * 64 + (g & 1) * 32 + l];
    int nib = g < 2 ? (lo & 0xF) : (lo >> 4);
    return nib | ((b->qh[h * 32 + l] >> (2 * g)) & 3) << 4;
}

static void deq_q6_k(const zl_block_q6_k *b, float *y) {
    float d = f16f(b->d);
    for (int j = 0; j < ZL_QK_K; j++) y[j] = d * (float)b->scales[j / 16] * (float)(q6_value(b, j) - 32);
}

static void deq_q8_k(const zl_block_q8_k *b, float *y) {
    for (int j = 0; j < ZL_QK_K; j++) y[j] = b->d * (float)b->qs[j];
}

void zl_dequant_row(zl_type t, const void *src, float *dst, int64_t n) {
    const zl_type_traits *tr = zl_type_traits_of(t);
    if (!tr->name || n % tr->blck) return;
    int64_t nb = n / tr->blck;
    const uint8_t *p = src;
    switch (t) {
    case ZL_TYPE_F32: memcpy(dst, src, (size_t)n * sizeof(float)); return;
    case ZL_TYPE_F16:
        for (int64_t i = 0; i < n; i++) {
            zl_f16 h;
            memcpy(&h, p + 2 * i, 2);
            dst[i] = zl_f16_to_f32(h);
        }
        return;
    case ZL_TYPE_BF16:
        for (int64_t i = 0; i < n; i++) {
            zl_bf16 h;
            memcpy(&h, p + 2 * i, 2);
            dst[i] = zl_bf16_to_f32(h);
        }
        return;
    default: break;
    }
    for (int64_t i = 0; i < nb; i++) {
        const void *b = p + i * tr->size;
        float *y = dst + i * tr->blck;
        switch (t) {
        case ZL_TYPE_Q4_0: deq_q4_0(b, y); break;
        case ZL_TYPE_Q4_1: deq_q4_1(b, y); break;
        case ZL_TYPE_Q5_0: deq_q5_0(b, y); break;
        case ZL_TYPE_Q5_1: deq_q5_1(b, y); break;
        case ZL_TYPE_Q8_0: deq_q8_0(b, y); break;
        case ZL_TYPE_Q8_1: deq_q8_1(b, y); break;
        case ZL_TYPE_Q4_K: deq_q4_k(b, y); break;
        case ZL_TYPE_Q5_K: deq_q5_k(b, y); break;
        case ZL_TYPE_Q6_K: deq_q6_k(b, y); break;
        case ZL_TYPE_Q8_K: deq_q8_k(b, y); break;
        default: memset(y, 0, (size_t)tr->blck * sizeof(float)); break;
        }
    }
}

/* ------------------------------------------------------------------ */
/* scale search                                                        */
/* ------------------------------------------------------------------ */

/* Symmetric levels L in [-nmax, nmax-1], x ~ d*L.  The element of largest
 * magnitude anchors the sign so it can use the extra negative level.  Tries
 * a fan of scales around the max-abs one; for each, refits d by least
 * squares and keeps the lowest error.  Writes L and returns d. */
static float search_sym(const float *x, int n, int nmax, int8_t *L) {
    float amax = 0, vmax = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) { amax = fabsf(x[i]); vmax = x[i]; }
    if (amax < 1e-30f) {
        memset(L, 0, (size_t)n);
        return 0;
    }
    float best_d = 0, best_err = INFINITY;
    for (int k = -10; k <= 10; k++) {
        float iscale = -((float)nmax + 0.1f * (float)k) / vmax;
        double sxl = 0, sll = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(iround(iscale * x[i]), -nmax, nmax - 1);
            sxl += (double)x[i] * l;
            sll += (double)l * l;
        }
        if (sll <= 0) continue;
        float d = (float)(sxl / sll);
        double err = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(iround(iscale * x[i]), -nmax, nmax - 1);
            double e = x[i] - (double)d * l;
            err += e * e;
        }
        if (err < best_err) { best_err = (float)err; best_d = d; }
    }
    float id = best_d != 0 ? 1.0f / best_d : 0;
    for (int i = 0; i < n; i++) L[i] = (int8_t)clampi(iround(id * x[i]), -nmax, nmax - 1);
    return best_d;
}

/* Affine levels L in [0, nmax], x ~ d*L + m.  With nonpos_min the offset is
 * forced to m <= 0 (the K formats store -m as an unsigned 6-bit multiple of
 * dmin).  Tries a fan of scales from the min/max fit, refits (d, m) by least
 * squares each time, keeps the best.  Writes L, *d, *m. */
static void search_affine(const float *x, int n, int nmax, int nonpos_min, uint8_t *L, float *d_out,
                          float *m_out) {
    float lo = x[0], hi = x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
    }
    if (nonpos_min && lo > 0) lo = 0;
    if (hi - lo < 1e-30f) {
        memset(L, 0, (size_t)n);
        *d_out = 0;
        *m_out = lo;
        return;
    }
    float best_d = (hi - lo) / (float)nmax, best_m = lo;
    double best_err = INFINITY;
    for (int k = -8; k <= 12; k++) {
        float iscale = ((float)nmax + 0.1f * (float)k) / (hi - lo);
        double s1 = 0, sl = 0, sll = 0, sx = 0, sxl = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(iround(iscale * (x[i] - lo)), 0, nmax);
            s1 += 1; sl += l; sll += (double)l * l; sx += x[i]; sxl += (double)x[i] * l;
        }
        double det = s1 * sll - sl * sl;
        if (det <= 0) continue;
        double d = (s1 * sxl - sl * sx) / det, m = (sll * sx - sl * sxl) / det;
        if (nonpos_min && m > 0) { /* refit d with m pinned to 0 */
            m = 0;
            d = sxl / sll;
        }
        if (d <= 0) continue;
        double err = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(iround(iscale * (x[i] - lo)), 0, nmax);
            double e = x[i] - (d * l + m);
            err += e * e;
        }
        if (err < best_err) { best_err = err; best_d = (float)d; best_m = (float)m; }
    }
    for (int i = 0; i < n; i++) L[i] = (uint8_t)clampi(iround((x[i] - best_m) / best_d), 0, nmax);
    *d_out = best_d;
    *m_out = best_m;
}

/* ------------------------------------------------------------------ */
/* quantisation: *_0 / *_1 formats                                     */
/* ------------------------------------------------------------------ */

static void quant_q4_0(const float *x, zl_block_q4_0 *b) {
    int8_t L[ZL_QK];
    float d = search_sym(x, ZL_QK, 8, L);
    b->d = zl_f32_to_f16(d);
    /* requantise against the stored (rounded) scale */
    float dr = f16f(b->d), id = dr != 0 ? 1.0f / dr : 0;
    for (int j = 0; j < ZL_QK; j++) L[j] = (int8_t)clampi(iround(id * x[j]), -8, 7);
    for (int j = 0; j < ZL_QK / 2; j++)
        b->qs[j] = (uint8_t)((L[j] + 8) | (L[j + ZL_QK / 2] + 8) << 4);
}

static void quant_q5_0(const float *x, zl_block_q5_0 *b) {
    int8_t L[ZL_QK];
    float d = search_sym(x, ZL_QK, 16, L);
    b->d = zl_f32_to_f16(d);
    float dr = f16f(b->d), id = dr != 0 ? 1.0f / dr : 0;
    uint32_t qh = 0;
    uint8_t u[ZL_QK];
    for (int j = 0; j < ZL_QK; j++) {
        u[j] = (uint8_t)(clampi(iround(id * x[j]), -16, 15) + 16);
        qh |= (uint32_t)(u[j] >> 4) << j;
    }
    for (int j = 0; j < ZL_QK / 2; j++) b->qs[j] = (uint8_t)((u[j] & 0xF) | (u[j + ZL_QK / 2] & 0xF) << 4);
    store_u32le(b->qh, qh);
}

/* Affine quantisation of one 32-block into 0..nmax levels with stored d, m. */
static void quant_affine_block(const float *x, int nmax, zl_f16 *dh, zl_f16 *mh, uint8_t *u) {
    float d, m;
    search_affine(x, ZL_QK, nmax, 0, u, &d, &m);
    *dh = zl_f32_to_f16(d);
    *mh = zl_f32_to_f16(m);
    float dr = f16f(*dh), mr = f16f(*mh), id = dr != 0 ? 1.0f / dr : 0;
    for (int j = 0; j < ZL_QK; j++) u[j] = (uint8_t)clampi(iround((x[j] - mr) * id), 0, nmax);
}

static void quant_q4_1(const float *x, zl_block_q4_1 *b) {
    uint8_t u[ZL_QK];
    quant_affine_block(x, 15, &b->d, &b->m, u);
    for (int j = 0; j < ZL_QK / 2; j++) b->qs[j] = (uint8_t)(u[j] | u[j + ZL_QK / 2] << 4);
}

static void quant_q5_1(const float *x, zl_block_q5_1 *b) {
    uint8_t u[ZL_QK];
    quant_affine_block(x, 31, &b->d, &b->m, u);
    uint32_t qh = 0;
    for (int j = 0; j < ZL_QK; j++) qh |= (uint32_t)(u[j] >> 4) << j;
    for (int j = 0; j < ZL_QK / 2; j++) b->qs[j] = (uint8_t)((u[j] & 0xF) | (u[j + ZL_QK / 2] & 0xF) << 4);
    store_u32le(b->qh, qh);
}

/* Max-abs scaling to [-127, 127] (never -128: the SIMD kernels rely on
 * |q| <= 127 to keep 16-bit pair sums from saturating). Returns d. */
static float quant_absmax_i8(const float *x, int n, int8_t *q) {
    float amax = 0;
    for (int i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
    float d = amax / 127.0f, id = amax > 0 ? 127.0f / amax : 0;
    for (int i = 0; i < n; i++) q[i] = (int8_t)clampi(iround(x[i] * id), -127, 127);
    return d;
}

static void quant_q8_0(const float *x, zl_block_q8_0 *b) {
    b->d = zl_f32_to_f16(quant_absmax_i8(x, ZL_QK, b->qs));
}

static void quant_q8_1(const float *x, zl_block_q8_1 *b) {
    float d = quant_absmax_i8(x, ZL_QK, b->qs);
    int sum = 0;
    for (int j = 0; j < ZL_QK; j++) sum += b->qs[j];
    b->d = zl_f32_to_f16(d);
    b->s = zl_f32_to_f16(d * (float)sum);
}

static void quant_q8_k(const float *x, zl_block_q8_k *b) {
    b->d = quant_absmax_i8(x, ZL_QK_K, b->qs);
    for (int g = 0; g < ZL_QK_K / 16; g++) {
        int s = 0;
        for (int l = 0; l < 16; l++) s += b->qs[g * 16 + l];
        b->bsums[g] = (int16_t)s;
    }
}

/* ------------------------------------------------------------------ */
/* quantisation: K formats                                             */
/* ------------------------------------------------------------------ */

/* Pack 8 six-bit (scale, min) pairs into the 12-byte K layout (inverse of zl_kscale). */
static void pack_kscales(const uint8_t sc[8], const uint8_t mn[8], uint8_t out[ZL_K_SCALE_SIZE]) {
    for (int j = 0; j < 4; j++) {
        out[j] = (uint8_t)((sc[j] & 63) | (sc[j + 4] >> 4) << 6);
        out[j + 4] = (uint8_t)((mn[j] & 63) | (mn[j + 4] >> 4) << 6);
        out[j + 8] = (uint8_t)((sc[j + 4] & 0xF) | (mn[j + 4] & 0xF) << 4);
    }
}

/* Shared by Q4_K (nmax 15) and Q5_K (nmax 31): per sub-block affine fit, then
 * the 8 scales and 8 mins are themselves quantised to 6 bits against the
 * super-block's d and dmin, and the elements are requantised with the final
 * effective scale and min.  Writes levels into u[256]. */
static void quant_k_affine(const float *x, int nmax, zl_f16 *dh, zl_f16 *dminh,
                           uint8_t scales[ZL_K_SCALE_SIZE], uint8_t u[ZL_QK_K]) {
    float sub_d[8], sub_m[8], max_d = 0, max_m = 0;
    for (int s = 0; s < 8; s++) {
        float d, m;
        search_affine(x + 32 * s, 32, nmax, 1, u + 32 * s, &d, &m);
        sub_d[s] = d;
        sub_m[s] = -m; /* >= 0 */
        if (sub_d[s] > max_d) max_d = sub_d[s];
        if (sub_m[s] > max_m) max_m = sub_m[s];
    }
    *dh = zl_f32_to_f16(max_d / 63.0f);
    *dminh = zl_f32_to_f16(max_m / 63.0f);
    float d = f16f(*dh), dmin = f16f(*dminh);
    uint8_t sc6[8], m6[8];
    for (int s = 0; s < 8; s++) {
        sc6[s] = (uint8_t)(d > 0 ? clampi(iround(sub_d[s] / d), 0, 63) : 0);
        m6[s] = (uint8_t)(dmin > 0 ? clampi(iround(sub_m[s] / dmin), 0, 63) : 0);
    }
    pack_kscales(sc6, m6, scales);
    for (int s = 0; s < 8; s++) {
        float ds = d * (float)sc6[s], dm = dmin * (float)m6[s];
        for (int l = 0; l < 32; l++) {
            int j = 32 * s + l;
            u[j] = (uint8_t)(ds > 0 ? clampi(iround((x[j] + dm) / ds), 0, nmax) : 0);
        }
    }
}

static void quant_q4_k(const float *x, zl_block_q4_k *b) {
    uint8_t u[ZL_QK_K];
    quant_k_affine(x, 15, &b->d, &b->dmin, b->scales, u);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) b->qs[32 * c + l] = (uint8_t)(u[64 * c + l] | u[64 * c + 32 + l] << 4);
}

static void quant_q5_k(const float *x, zl_block_q5_k *b) {
    uint8_t u[ZL_QK_K];
    quant_k_affine(x, 31, &b->d, &b->dmin, b->scales, u);
    memset(b->qh, 0, sizeof b->qh);
    for (int j = 0; j < ZL_QK_K; j++) b->qh[j % 32] |= (uint8_t)((u[j] >> 4) << (j / 32));
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++)
            b->qs[32 * c + l] = (uint8_t)((u[64 * c + l] & 0xF) | (u[64 * c + 32 + l] & 0xF) << 4);
}

static void quant_q6_k(const float *x, zl_block_q6_k *b) {
    int8_t L[16];
    float sub_d[16], amax = 0, vmax = 0;
    for (int s = 0; s < 16; s++) {
        sub_d[s] = search_sym(x + 16 * s, 16, 32, L);
        if (fabsf(sub_d[s]) > amax) { amax = fabsf(sub_d[s]); vmax = sub_d[s]; }
    }
    /* the largest sub-block scale maps to -128 so it gets the full int8 range */
    b->d = zl_f32_to_f16(vmax / -128.0f);
    float d = f16f(b->d);
    uint8_t u[ZL_QK_K];
    for (int s = 0; s < 16; s++) {
        int sc = d != 0 ? clampi(iround(sub_d[s] / d), -128, 127) : 0;
        b->scales[s] = (int8_t)sc;
        float ds = d * (float)sc;
        for (int l = 0; l < 16; l++) {
            int j = 16 * s + l;
            u[j] = (uint8_t)(ds != 0 ? clampi(iround(x[j] / ds), -32, 31) + 32 : 32);
        }
    }
    for (int h = 0; h < 2; h++) {
        const uint8_t *v = u + 128 * h;
        for (int l = 0; l < 32; l++) {
            b->ql[64 * h + l] = (uint8_t)((v[l] & 0xF) | (v[l + 64] & 0xF) << 4);
            b->ql[64 * h + 32 + l] = (uint8_t)((v[l + 32] & 0xF) | (v[l + 96] & 0xF) << 4);
            b->qh[32 * h + l] =
                (uint8_t)((v[l] >> 4) | (v[l + 32] >> 4) << 2 | (v[l + 64] >> 4) << 4 | (v[l + 96] >> 4) << 6);
        }
    }
}

int zl_can_quantize(zl_type t) {
    switch (t) {
    case ZL_TYPE_F32: case ZL_TYPE_F16: case ZL_TYPE_BF16:
    case ZL_TYPE_Q8_0: case ZL_TYPE_Q8_1: case ZL_TYPE_Q4_0: case ZL_TYPE_Q4_1:
    case ZL_TYPE_Q5_0: case ZL_TYPE_Q5_1: case ZL_TYPE_Q4_K: case ZL_TYPE_Q5_K:
    case ZL_TYPE_Q6_K: case ZL_TYPE_Q8_K:
        return 1;
    default: return 0;
    }
}

size_t zl_quantize_row(zl_type t, const float *src, void *dst, int64_t n) {
    if (!zl_can_quantize(t)) return 0;
    const zl_type_traits *tr = zl_type_traits_of(t);
    if (n < 0 || n % tr->blck) return 0;
    uint8_t *p = dst;
    int64_t nb = n / tr->blck;
    switch (t) {
    case ZL_TYPE_F32: memcpy(dst, src, (size_t)n * sizeof(float)); break;
    case ZL_TYPE_F16:
        for (int64_t i = 0; i < n; i++) {
            zl_f16 h = zl_f32_to_f16(src[i]);
            memcpy(p + 2 * i, &h, 2);
        }
        break;
    case ZL_TYPE_BF16:
        for (int64_t i = 0; i < n; i++) {
            zl_bf16 h = zl_f32_to_bf16(src[i]);
            memcpy(p + 2 * i, &h, 2);
        }
        break;
    default:
        for (int64_t i = 0; i < nb; i++) {
            void *b = p + i * tr->size;
            const float *x = src + i * tr->blck;
            switch (t) {
            case ZL_TYPE_Q4_0: quant_q4_0(x, b); break;
            case ZL_TYPE_Q4_1: quant_q4_1(x, b); break;
            case ZL_TYPE_Q5_0: quant_q5_0(x, b); break;
            case ZL_TYPE_Q5_1: quant_q5_1(x, b); break;
            case ZL_TYPE_Q8_0: quant_q8_0(x, b); break;
            case ZL_TYPE_Q8_1: quant_q8_1(x, b); break;
            case ZL_TYPE_Q4_K: quant_q4_k(x, b); break;
            case ZL_TYPE_Q5_K: quant_q5_k(x, b); break;
            case ZL_TYPE_Q6_K: quant_q6_k(x, b); break;
            case ZL_TYPE_Q8_K: quant_q8_k(x, b); break;
            default: break;
            }
        }
        break;
    }
    return (size_t)nb * (size_t)tr->size;
}

/* ------------------------------------------------------------------ */
/* dot products                                                        */
/* ------------------------------------------------------------------ */

zl_type zl_dot_partner(zl_type t) {
    switch (t) {
    case ZL_TYPE_Q4_0: case ZL_TYPE_Q5_0: case ZL_TYPE_Q8_0: return ZL_TYPE_Q8_0;
    case ZL_TYPE_Q4_1: case ZL_TYPE_Q5_1: return ZL_TYPE_Q8_1;
    case ZL_TYPE_Q4_K: case ZL_TYPE_Q5_K: case ZL_TYPE_Q6_K: return ZL_TYPE_Q8_K;
    default: return ZL_TYPE_F32;
    }
}

static float dot_f32(const void *w, const void *x, int64_t n) {
    const float *a = w, *b = x;
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

static float dot_f16(const void *w, const void *x, int64_t n) {
    const uint8_t *a = w;
    const float *b = x;
    float s = 0;
    for (int64_t i = 0; i < n; i++) {
        zl_f16 h;
        memcpy(&h, a + 2 * i, 2);
        s += zl_f16_to_f32(h) * b[i];
    }
    return s;
}

static float dot_bf16(const void *w, const void *x, int64_t n) {
    const uint8_t *a = w;
    const float *b = x;
    float s = 0;
    for (int64_t i = 0; i < n; i++) {
        zl_bf16 h;
        memcpy(&h, a + 2 * i, 2);
        s += zl_bf16_to_f32(h) * b[i];
    }
    return s;
}

static float dot_q4_0(const void *w, const void *x, int64_t n) {
    const zl_block_q4_0 *a = w;
    const zl_block_q8_0 *b = x;
    float s = 0;
    for (int64_t i = 0; i < n / ZL_QK; i++) {
        int sum = 0;
        for (int j = 0; j < ZL_QK / 2; j++)
            sum += ((a[i].qs[j] & 0xF) - 8) * b[i].qs[j] + ((a[i].qs[j] >> 4) - 8) * b[i].qs[j + ZL_QK / 2];
        s += f16f(a[i].d) * f16f(b[i].d) * (float)sum;
    }
    return s;
}

static float dot_q4_1(const void *w, const void *x, int64_t n) {
    const zl_block_q4_1 *a = w;
    const zl_block_q8_1 *b = x;
    float s = 0;
    for (int64_t i = 0; i < n / ZL_QK; i++) {
        int sum = 0;
        for (int j = 0; j < ZL_QK / 2; j++)
            sum += (a[i].qs[j] & 0xF) * b[i].qs[j] + (a[i].qs[j] >> 4) * b[i].qs[j + ZL_QK / 2];
        s += f16f(a[i].d) * f16f(b[i].d) * (float)sum + f16f(a[i].m) * f16f(b[i].s);
    }
    return s;
}

static float dot_q5_0(const void *w, const void *x, int64_t n) {
    const zl_block_q5_0 *a = w;
    const zl_block_q8_0 *b = x;
    float s = 0;
    for (int64_t i = 0; i < n / ZL_QK; i++) {
        uint32_t qh = load_u32le(a[i].qh);
        int sum = 0;
        for (int j = 0; j < ZL_QK; j++) sum += (q5_value(a[i].qs, qh, j) - 16) * b[i].qs[j];
        s += f16f(a[i].d) * f16f(b[i].d) * (float)sum;
    }
    return s;
}

static float dot_q5_1(const void *w, const void *x, int64_t n) {
    const zl_block_q5_1 *a = w;
    const zl_block_q8_1 *b = x;
    float s = 0;
    for (int64_t i = 0; i < n / ZL_QK; i++) {
        uint32_t qh = load_u32le(a[i].qh);
        int sum = 0;
        for (int j = 0; j < ZL_QK; j++) sum += q5_value(a[i].qs, qh, j) * b[i].qs[j];
        s += f16f(a[i].d) * f16f(b[i].d) * (float)sum + f16f(a[i].m) * f16f(b[i].s);
    }
    return s;
}

static float dot_q8_0(const void *w, const void *x, int64_t n) {
    const zl_block_q8_0 *a = w, *b = x;
    float s = 0;
    for (int64_t i = 0; i < n / ZL_QK; i++) {
        int sum = 0;
        for (int j = 0; j < ZL_QK; j++) sum += a[i].qs[j] * b[i].qs[j];
        s += f16f(a[i].d) * f16f(b[i].d) * (float)sum;
    }
    return s;
}

/* K formats: integer sum of sc*q*y over the super-block, the min term from
 * the activation's 16-element bsums, then one float scale each. */
static float dot_q4_k(const void *w, const void *x, int64_t n) {
    const zl_block_q4_k *a = w;
    const zl_block_q8_k *b = x;
    float s = 0;
    for (int64_t i = 0; i < n / ZL_QK_K; i++) {
        int sumq = 0, summ = 0;
        for (int sb = 0; sb < 8; sb++) {
            int sc, m, sub = 0;
            zl_kscale(sb, a[i].scales, &sc, &m);
            for (int l = 0; l < 32; l++) sub += qk4_value(a[i].qs, 32 * sb + l) * b[i].qs[32 * sb + l];
            sumq += sc * sub;
            summ += m * (b[i].bsums[2 * sb] + b[i].bsums[2 * sb + 1]);
        }
        s += b[i].d * (f16f(a[i].d) * (float)sumq - f16f(a[i].dmin) * (float)summ);
    }
    return s;
}

static float dot_q5_k(const void *w, const void *x, int64_t n) {
    const zl_block_q5_k *a = w;
    const zl_block_q8_k *b = x;
    float s = 0;
    for (int64_t i = 0; i < n / ZL_QK_K; i++) {
        int sumq = 0, summ = 0;
        for (int sb = 0; sb < 8; sb++) {
            int sc, m, sub = 0;
            zl_kscale(sb, a[i].scales, &sc, &m);
            for (int l = 0; l < 32; l++) sub += qk5_value(&a[i], 32 * sb + l) * b[i].qs[32 * sb + l];
            sumq += sc * sub;
            summ += m * (b[i].bsums[2 * sb] + b[i].bsums[2 * sb + 1]);
        }
        s += b[i].d * (f16f(a[i].d) * (float)sumq - f16f(a[i].dmin) * (float)summ);
    }
    return s;
}

static float dot_q6_k(const void *w, const void *x, int64_t n) {
    const zl_block_q6_k *a = w;
    const zl_block_q8_k *b = x;
    float s = 0;
    for (int64_t i = 0; i < n / ZL_QK_K; i++) {
        int sum = 0;
        for (int g = 0; g < 16; g++) {
            int sub = 0;
            for (int l = 0; l < 16; l++) sub += (q6_value(&a[i], 16 * g + l) - 32) * b[i].qs[16 * g + l];
            sum += a[i].scales[g] * sub;
        }
        s += f16f(a[i].d) * b[i].d * (float)sum;
    }
    return s;
}

zl_dot_fn zl_dot_fn_ref(zl_type t) {
    switch (t) {
    case ZL_TYPE_F32: return dot_f32;
    case ZL_TYPE_F16: return dot_f16;
    case ZL_TYPE_BF16: return dot_bf16;
    case ZL_TYPE_Q4_0: return dot_q4_0;
    case ZL_TYPE_Q4_1: return dot_q4_1;
    case ZL_TYPE_Q5_0: return dot_q5_0;
    case ZL_TYPE_Q5_1: return dot_q5_1;
    case ZL_TYPE_Q8_0: return dot_q8_0;
    case ZL_TYPE_Q4_K: return dot_q4_k;
    case ZL_TYPE_Q5_K: return dot_q5_k;
    case ZL_TYPE_Q6_K: return dot_q6_k;
    default: return NULL;
    }
}
