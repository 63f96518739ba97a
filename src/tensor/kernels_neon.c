/* kernels_neon.c — AArch64 NEON kernels at the base level (ASIMD, which every
 * AArch64 CPU has) and the NEON side of the dispatch.
 *
 * Owns: the float-weight kernels (F32, F16, BF16; every level uses these),
 * the plain-ASIMD build of the quantised kernels (kernels_neon.inc), the
 * activation quantisers (Q8_0, Q8_1, Q8_K, bit-identical to kernels_ref.c),
 * and zl_dot_fn_neon / zl_dotT_fn_neon / zl_dot2r_fn_neon, which pick a
 * level's kernel (plain, dotprod: kernels_neon_dotprod.c, i8mm:
 * kernels_neon_i8mm.c) for a level the caller has already checked the CPU has.
 * Never detects the CPU (base/cpu.c) nor decides the level (matmul.c).
 *
 * Float kernels: four 4-lane accumulators over 16 weights, then 4 at a time
 * into the first, then a scalar tail; each token of a T-token kernel
 * (T <= 4: 16 accumulators of the 32 registers) runs exactly that. */
#if defined(__aarch64__)
#define ZL_NEON_LEVEL 1
#include "kernels_neon.inc"

#include <math.h>

#include "../base/cpu.h"

/* ---- float weights ---------------------------------------------------- */

ZL_INLINE float32x4_t wload(const zl_type t, const uint8_t *w, int64_t i) {
    switch (t) {
    case ZL_TYPE_F16: return vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(w + 2 * i)));
    case ZL_TYPE_BF16: return vreinterpretq_f32_u32(vshll_n_u16(vreinterpret_u16_u8(vld1_u8(w + 2 * i)), 16));
    default: return vreinterpretq_f32_u8(vld1q_u8(w + 4 * i));
    }
}

ZL_INLINE float wscalar(const zl_type t, const uint8_t *w, int64_t i) {
    uint16_t h;
    float f;
    switch (t) {
    case ZL_TYPE_F16: return h2f(w + 2 * i);
    case ZL_TYPE_BF16:
        memcpy(&h, w + 2 * i, 2);
        return zl_bf16_to_f32(h);
    default: memcpy(&f, w + 4 * i, 4); return f;
    }
}

ZL_INLINE void dot_float(const zl_type t, const uint8_t *w, const uint8_t *x, size_t xs, int64_t n, float *out,
                         const int T) {
    float32x4_t acc[4][4];
    float tail[4];
    for (int k = 0; k < T; k++) {
        for (int j = 0; j < 4; j++) acc[k][j] = vdupq_n_f32(0);
        tail[k] = 0;
    }
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const float32x4_t w0 = wload(t, w, i), w1 = wload(t, w, i + 4), w2 = wload(t, w, i + 8),
                          w3 = wload(t, w, i + 12);
#pragma GCC unroll 4
        for (int k = 0; k < T; k++) {
            const float *xk = (const float *)(x + (size_t)k * xs) + i;
            acc[k][0] = vfmaq_f32(acc[k][0], w0, vld1q_f32(xk));
            acc[k][1] = vfmaq_f32(acc[k][1], w1, vld1q_f32(xk + 4));
            acc[k][2] = vfmaq_f32(acc[k][2], w2, vld1q_f32(xk + 8));
            acc[k][3] = vfmaq_f32(acc[k][3], w3, vld1q_f32(xk + 12));
        }
    }
    for (; i + 4 <= n; i += 4) {
        const float32x4_t w0 = wload(t, w, i);
#pragma GCC unroll 4
        for (int k = 0; k < T; k++) acc[k][0] = vfmaq_f32(acc[k][0], w0, vld1q_f32((const float *)(x + (size_t)k * xs) + i));
    }
    for (; i < n; i++) {
        const float wv = wscalar(t, w, i);
#pragma GCC unroll 4
        for (int k = 0; k < T; k++) tail[k] = fmaf(wv, ((const float *)(x + (size_t)k * xs))[i], tail[k]);
    }
#pragma GCC unroll 4
    for (int k = 0; k < T; k++)
        out[k] = vaddvq_f32(vaddq_f32(vaddq_f32(acc[k][0], acc[k][1]), vaddq_f32(acc[k][2], acc[k][3]))) + tail[k];
}

#define ZL_NEON_FLOAT(name, type)                                                                  \
    static float name##_1(const void *w, const void *x, int64_t n) {                               \
        float o;                                                                                   \
        dot_float(type, w, x, 0, n, &o, 1);                                                        \
        return o;                                                                                  \
    }                                                                                              \
    ZL_NEON_FLOAT_MANY(name, type, 2) ZL_NEON_FLOAT_MANY(name, type, 3) ZL_NEON_FLOAT_MANY(name, type, 4) \
    static const zl_dot_multi_fn name##_many[9] = {NULL, NULL, name##_2, name##_3, name##_4, NULL, NULL, NULL, NULL};
#define ZL_NEON_FLOAT_MANY(name, type, T)                                                    \
    static void name##_##T(const void *w, const void *x, size_t xs, int64_t n, float *out) { \
        dot_float(type, w, x, xs, n, out, T);                                                \
    }

ZL_NEON_FLOAT(f32, ZL_TYPE_F32)
ZL_NEON_FLOAT(f16, ZL_TYPE_F16)
ZL_NEON_FLOAT(bf16, ZL_TYPE_BF16)

/* ---- activation quantisers: kernels_ref.c's max-abs scaling ----------- */

/* q[0..n) = clamp(round-to-even(x * id)), n a multiple of 16; returns max |x| */
static float absmax(const float *x, int n) {
    float32x4_t m = vdupq_n_f32(0);
    for (int i = 0; i < n; i += 4) m = vmaxnmq_f32(m, vabsq_f32(vld1q_f32(x + i))); /* fmaxf's NaN rule */
    return vmaxnmvq_f32(m);
}

static void round_i8(const float *x, int n, float id, int8_t *q) {
    for (int i = 0; i < n; i += 16) {
        int32x4_t r[4];
        for (int j = 0; j < 4; j++) r[j] = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + i + 4 * j), id));
        int16x8_t a = vcombine_s16(vqmovn_s32(r[0]), vqmovn_s32(r[1]));
        int16x8_t b = vcombine_s16(vqmovn_s32(r[2]), vqmovn_s32(r[3]));
        int8x16_t v = vcombine_s8(vqmovn_s16(a), vqmovn_s16(b));
        vst1q_s8(q + i, vmaxq_s8(v, vdupq_n_s8(-127)));
    }
}

/* one block: d = amax / 127, quants against 127 / amax (kernels_ref.c quant_absmax_i8) */
static float quant_block(const float *x, int n, int8_t *q) {
    float amax = absmax(x, n), id = amax > 0 ? 127.0f / amax : 0;
    round_i8(x, n, id, q);
    return amax / 127.0f;
}

static void quant_q8_0(const float *x, void *dst, int64_t n) {
    zl_block_q8_0 *b = dst;
    for (int64_t i = 0; i < n / ZL_QK; i++) b[i].d = zl_f32_to_f16(quant_block(x + i * ZL_QK, ZL_QK, b[i].qs));
}

static void quant_q8_1(const float *x, void *dst, int64_t n) {
    zl_block_q8_1 *b = dst;
    for (int64_t i = 0; i < n / ZL_QK; i++) {
        float d = quant_block(x + i * ZL_QK, ZL_QK, b[i].qs);
        int16x8_t s = vpaddlq_s8(vld1q_s8(b[i].qs));
        s = vpadalq_s8(s, vld1q_s8(b[i].qs + 16));
        b[i].d = zl_f32_to_f16(d);
        b[i].s = zl_f32_to_f16(d * (float)vaddlvq_s16(s));
    }
}

static void quant_q8_k(const float *x, void *dst, int64_t n) {
    zl_block_q8_k *b = dst;
    for (int64_t i = 0; i < n / ZL_QK_K; i++) {
        b[i].d = quant_block(x + i * ZL_QK_K, ZL_QK_K, b[i].qs);
        for (int g = 0; g < ZL_QK_K / 16; g++) b[i].bsums[g] = (int16_t)vaddlvq_s8(vld1q_s8(b[i].qs + 16 * g));
    }
}

zl_quant_fn zl_quant_fn_neon(zl_type partner) {
    switch (partner) {
    case ZL_TYPE_Q8_0: return quant_q8_0;
    case ZL_TYPE_Q8_1: return quant_q8_1;
    case ZL_TYPE_Q8_K: return quant_q8_k;
    default: return NULL;
    }
}

/* ---- dispatch --------------------------------------------------------- */

/* The one-token kernel and the T-token ones of the best level <= level for t;
 * *two_rows stays NULL below i8mm. */
static int neon_kernels(int level, zl_type t, zl_dot_fn *one, const zl_dot_multi_fn **many, const zl_dot2r_fn **two_rows) {
    *two_rows = NULL;
    switch (t) {
    case ZL_TYPE_F32: *one = f32_1; *many = f32_many; return 1;
    case ZL_TYPE_F16: *one = f16_1; *many = f16_many; return 1;
    case ZL_TYPE_BF16: *one = bf16_1; *many = bf16_many; return 1;
    default: break;
    }
    if (level >= ZL_ISA_NEON_I8MM && zl_neon_i8mm_kernels(t, one, many, two_rows)) return 1;
    if (level >= ZL_ISA_NEON_DOTPROD && zl_neon_dotprod_kernels(t, one, many)) return 1;
    return level >= ZL_ISA_NEON && level_kernels(t, one, many);
}

zl_dot_fn zl_dot_fn_neon(int level, zl_type t) {
    zl_dot_fn one;
    const zl_dot_multi_fn *many;
    const zl_dot2r_fn *two;
    return neon_kernels(level, t, &one, &many, &two) ? one : NULL;
}

zl_dot_multi_fn zl_dotT_fn_neon(int level, zl_type t, int T) {
    zl_dot_fn one;
    const zl_dot_multi_fn *many;
    const zl_dot2r_fn *two;
    if (T < 2 || T > 8 || !neon_kernels(level, t, &one, &many, &two)) return NULL;
    return many[T];
}

zl_dot2r_fn zl_dot2r_fn_neon(int level, zl_type t, int T) {
    zl_dot_fn one;
    const zl_dot_multi_fn *many;
    const zl_dot2r_fn *two;
    if (T < 2 || T > 8 || !neon_kernels(level, t, &one, &many, &two) || !two) return NULL;
    return two[T];
}

#else
typedef int zl_kernels_neon_empty; /* nothing to build off AArch64 */
#endif
