/* kernels_neon_i8mm.c — the quantised kernels of kernels_neon.inc built for
 * ARMv8.2-A + dotprod + i8mm, and the two-row kernels only SMMLA makes worth
 * having: compiled with -march=armv8.2-a+dotprod+i8mm and only reached
 * through the NEON dispatch (kernels_neon.c) after run-time detection.
 *
 * vmmlaq_s32 multiplies a 2x8 int8 matrix by the transpose of another into a
 * 2x2 int32 tile: with two weight rows as one operand and two tokens as the
 * other, one instruction gives the four (row, token) partial sums
 * [r0.t0, r0.t1, r1.t0, r1.t1] that SDOT would need four for.  The tile's
 * lanes are exact integer sums, and each lane's float step is the scalar
 * reference's (lane-wise multiplies and adds in its order), so every (row,
 * token) result is the one-token kernel's bits.  Owns no dispatch; never runs
 * on a CPU without FEAT_I8MM. */
#if defined(__aarch64__)
#define ZL_NEON_LEVEL 3
#include "kernels_neon.inc"

/* acc += the 2x2 tile of 16-value dot products: rows a0, a1 with tokens b0, b1 */
ZL_INLINE int32x4_t mm16(int32x4_t acc, int8x16_t a0, int8x16_t a1, int8x16_t b0, int8x16_t b1) {
    const int64x2_t A0 = vreinterpretq_s64_s8(a0), A1 = vreinterpretq_s64_s8(a1);
    const int64x2_t B0 = vreinterpretq_s64_s8(b0), B1 = vreinterpretq_s64_s8(b1);
    acc = vmmlaq_s32(acc, vreinterpretq_s8_s64(vzip1q_s64(A0, A1)), vreinterpretq_s8_s64(vzip1q_s64(B0, B1)));
    return vmmlaq_s32(acc, vreinterpretq_s8_s64(vzip2q_s64(A0, A1)), vreinterpretq_s8_s64(vzip2q_s64(B0, B1)));
}

/* [r0, r0, r1, r1] and [t0, t1, t0, t1]: the lanes of a tile */
ZL_INLINE float32x4_t per_row(float r0, float r1) { return vcombine_f32(vdup_n_f32(r0), vdup_n_f32(r1)); }
ZL_INLINE float32x4_t per_tok(float t0, float t1) {
    const float32x2_t v = vset_lane_f32(t1, vdup_n_f32(t0), 1);
    return vcombine_f32(v, v);
}

/* out[r * T + k] from the tiles S[p] of token pairs p = k / 2 */
ZL_INLINE void store_tiles(const float32x4_t *S, float *out, const int T) {
    for (int p = 0; p < T / 2; p++) {
        out[2 * p] = vgetq_lane_f32(S[p], 0);
        out[2 * p + 1] = vgetq_lane_f32(S[p], 1);
        out[T + 2 * p] = vgetq_lane_f32(S[p], 2);
        out[T + 2 * p + 1] = vgetq_lane_f32(S[p], 3);
    }
}

/* ---- 32-element blocks ------------------------------------------------- */

ZL_INLINE void dot2_b32(const zl_type t, const uint8_t *w, size_t ws, const uint8_t *x, size_t xs, int64_t n,
                        float *out, const int T) {
    const size_t wsz = wblock_size(t), xsz = is_q1(t) ? sizeof(zl_block_q8_1) : sizeof(zl_block_q8_0);
    const size_t xoff = is_q1(t) ? 4 : 2;
    float32x4_t S[ZL_MAXT / 2];
    for (int p = 0; p < T / 2; p++) S[p] = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / ZL_QK; i++) {
        int8x16_t a0, a1, b0, b1;
        float d0, d1, m0 = 0, m1 = 0;
        wblock(t, w + (size_t)i * wsz, &a0, &a1, &d0, &m0);
        wblock(t, w + ws + (size_t)i * wsz, &b0, &b1, &d1, &m1);
        const float32x4_t dw = per_row(d0, d1), mw = per_row(m0, m1);
#pragma GCC unroll 4
        for (int p = 0; p < T / 2; p++) {
            const uint8_t *x0 = x + (size_t)(2 * p) * xs + (size_t)i * xsz, *x1 = x0 + xs;
            const int8_t *q0 = (const int8_t *)x0 + xoff, *q1 = (const int8_t *)x1 + xoff;
            int32x4_t acc = mm16(vdupq_n_s32(0), a0, b0, vld1q_s8(q0), vld1q_s8(q1));
            acc = mm16(acc, a1, b1, vld1q_s8(q0 + 16), vld1q_s8(q1 + 16));
            /* the reference's d * dx * sum (+ m * s), lane by lane */
            float32x4_t v = vmulq_f32(vmulq_f32(dw, per_tok(h2f(x0), h2f(x1))), vcvtq_f32_s32(acc));
            if (is_q1(t)) v = vaddq_f32(v, vmulq_f32(mw, per_tok(h2f(x0 + 2), h2f(x1 + 2))));
            S[p] = vaddq_f32(S[p], v);
        }
    }
    store_tiles(S, out, T);
}

/* ---- K formats ---------------------------------------------------------- */

ZL_INLINE int32x4_t per_row_i(int r0, int r1) { return vcombine_s32(vdup_n_s32(r0), vdup_n_s32(r1)); }

ZL_INLINE void dot2_q45k(const int bit5, const uint8_t *w, size_t ws, const uint8_t *x, size_t xs, int64_t n,
                         float *out, const int T) {
    const size_t wsz = bit5 ? sizeof(zl_block_q5_k) : sizeof(zl_block_q4_k);
    float32x4_t S[ZL_MAXT / 2];
    for (int p = 0; p < T / 2; p++) S[p] = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / ZL_QK_K; i++) {
        const uint8_t *wr[2] = {w + (size_t)i * wsz, w + ws + (size_t)i * wsz};
        int sc[2][8];
        int16x8_t mv[2];
        uint8x16_t qh[2][2];
        for (int r = 0; r < 2; r++) {
            mv[r] = kscales(wr[r] + 4, sc[r]);
            qh[r][0] = qh[r][1] = vdupq_n_u8(0);
            if (bit5) {
                qh[r][0] = vld1q_u8(wr[r] + 16);
                qh[r][1] = vld1q_u8(wr[r] + 32);
            }
        }
        int32x4_t acc[ZL_MAXT / 2];
        for (int p = 0; p < T / 2; p++) acc[p] = vdupq_n_s32(0);
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            int8x16_t u[2][4]; /* row r: sub-block 2c in u[r][0..1], 2c + 1 in u[r][2..3] */
            for (int r = 0; r < 2; r++)
                q45k_chunk(bit5, wr[r] + 16 + (bit5 ? 32 : 0), c, &qh[r][0], &qh[r][1], &u[r][0], &u[r][1], &u[r][2],
                           &u[r][3]);
            const int32x4_t s0 = per_row_i(sc[0][2 * c], sc[1][2 * c]), s1 = per_row_i(sc[0][2 * c + 1], sc[1][2 * c + 1]);
#pragma GCC unroll 4
            for (int p = 0; p < T / 2; p++) {
                const int8_t *q0 = (const int8_t *)(x + (size_t)(2 * p) * xs + (size_t)i * sizeof(zl_block_q8_k) + 4) +
                                   64 * c,
                             *q1 = q0 + xs;
                int32x4_t e = mm16(vdupq_n_s32(0), u[0][0], u[1][0], vld1q_s8(q0), vld1q_s8(q1));
                e = mm16(e, u[0][1], u[1][1], vld1q_s8(q0 + 16), vld1q_s8(q1 + 16));
                int32x4_t o = mm16(vdupq_n_s32(0), u[0][2], u[1][2], vld1q_s8(q0 + 32), vld1q_s8(q1 + 32));
                o = mm16(o, u[0][3], u[1][3], vld1q_s8(q0 + 48), vld1q_s8(q1 + 48));
                acc[p] = vmlaq_s32(vmlaq_s32(acc[p], e, s0), o, s1);
            }
        }
        const float32x4_t d = per_row(h2f(wr[0]), h2f(wr[1])), dmin = per_row(h2f(wr[0] + 2), h2f(wr[1] + 2));
#pragma GCC unroll 4
        for (int p = 0; p < T / 2; p++) {
            const uint8_t *x0 = x + (size_t)(2 * p) * xs + (size_t)i * sizeof(zl_block_q8_k), *x1 = x0 + xs;
            float xd0, xd1;
            memcpy(&xd0, x0, 4);
            memcpy(&xd1, x1, 4);
            const int16_t *bs0 = (const int16_t *)(x0 + 4 + ZL_QK_K), *bs1 = (const int16_t *)(x1 + 4 + ZL_QK_K);
            const int32_t mins[4] = {kmins(bs0, mv[0]), kmins(bs1, mv[0]), kmins(bs0, mv[1]), kmins(bs1, mv[1])};
            /* the reference's xd * (d * sumq - dmin * summ), lane by lane */
            const float32x4_t v = vmulq_f32(per_tok(xd0, xd1), vsubq_f32(vmulq_f32(d, vcvtq_f32_s32(acc[p])),
                                                                          vmulq_f32(dmin, vcvtq_f32_s32(vld1q_s32(mins)))));
            S[p] = vaddq_f32(S[p], v);
        }
    }
    store_tiles(S, out, T);
}

ZL_INLINE void dot2_q6k(const uint8_t *w, size_t ws, const uint8_t *x, size_t xs, int64_t n, float *out, const int T) {
    float32x4_t S[ZL_MAXT / 2];
    for (int p = 0; p < T / 2; p++) S[p] = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / ZL_QK_K; i++) {
        const zl_block_q6_k *b[2] = {(const zl_block_q6_k *)w + i, (const zl_block_q6_k *)(w + ws) + i};
        int32x4_t acc[ZL_MAXT / 2];
        for (int p = 0; p < T / 2; p++) acc[p] = vdupq_n_s32(0);
        for (int h = 0; h < 2; h++) {
            uint8x16_t l[2][4], hb[2][2];
            for (int r = 0; r < 2; r++) {
                for (int j = 0; j < 4; j++) l[r][j] = vld1q_u8(b[r]->ql + 64 * h + 16 * j);
                hb[r][0] = vld1q_u8(b[r]->qh + 32 * h);
                hb[r][1] = vld1q_u8(b[r]->qh + 32 * h + 16);
            }
#pragma GCC unroll 4
            for (int g = 0; g < 4; g++) {
                int8x16_t v[2][2];
                for (int r = 0; r < 2; r++)
                    q6k_group(l[r][0], l[r][1], l[r][2], l[r][3], hb[r][0], hb[r][1], g, &v[r][0], &v[r][1]);
                const int j = 8 * h + 2 * g;
                const int32x4_t s0 = per_row_i(b[0]->scales[j], b[1]->scales[j]);
                const int32x4_t s1 = per_row_i(b[0]->scales[j + 1], b[1]->scales[j + 1]);
#pragma GCC unroll 4
                for (int p = 0; p < T / 2; p++) {
                    const int8_t *q0 = (const int8_t *)(x + (size_t)(2 * p) * xs + (size_t)i * sizeof(zl_block_q8_k) +
                                                        4) + 128 * h + 32 * g,
                                 *q1 = q0 + xs;
                    /* one 16-value sub-block per mm16 */
                    acc[p] = vmlaq_s32(acc[p], mm16(vdupq_n_s32(0), v[0][0], v[1][0], vld1q_s8(q0), vld1q_s8(q1)), s0);
                    acc[p] = vmlaq_s32(acc[p], mm16(vdupq_n_s32(0), v[0][1], v[1][1], vld1q_s8(q0 + 16), vld1q_s8(q1 + 16)),
                                       s1);
                }
            }
        }
        const float32x4_t d = per_row(h2f((const uint8_t *)&b[0]->d), h2f((const uint8_t *)&b[1]->d));
#pragma GCC unroll 4
        for (int p = 0; p < T / 2; p++) {
            float xd0, xd1;
            memcpy(&xd0, x + (size_t)(2 * p) * xs + (size_t)i * sizeof(zl_block_q8_k), 4);
            memcpy(&xd1, x + (size_t)(2 * p + 1) * xs + (size_t)i * sizeof(zl_block_q8_k), 4);
            /* the reference's d * xd * sum, lane by lane */
            S[p] = vaddq_f32(S[p], vmulq_f32(vmulq_f32(d, per_tok(xd0, xd1)), vcvtq_f32_s32(acc[p])));
        }
    }
    store_tiles(S, out, T);
}

ZL_INLINE void dot2_any(const zl_type t, const void *w, size_t ws, const void *x, size_t xs, int64_t n, float *out,
                        const int T) {
    switch (t) {
    case ZL_TYPE_Q4_K: dot2_q45k(0, w, ws, x, xs, n, out, T); break;
    case ZL_TYPE_Q5_K: dot2_q45k(1, w, ws, x, xs, n, out, T); break;
    case ZL_TYPE_Q6_K: dot2_q6k(w, ws, x, xs, n, out, T); break;
    default: dot2_b32(t, w, ws, x, xs, n, out, T); break;
    }
}

#define ZL_I8MM_2R(name, type, T)                                                                          \
    static void name##_2r##T(const void *w, size_t ws, const void *x, size_t xs, int64_t n, float *out) { \
        dot2_any(type, w, ws, x, xs, n, out, T);                                                           \
    }
#define ZL_I8MM_TYPE(name, type)                                                                     \
    ZL_I8MM_2R(name, type, 2) ZL_I8MM_2R(name, type, 4) ZL_I8MM_2R(name, type, 6) ZL_I8MM_2R(name, type, 8) \
    static const zl_dot2r_fn name##_2r[9] = {NULL, NULL, name##_2r2, NULL, name##_2r4, NULL, name##_2r6, NULL, name##_2r8};

ZL_I8MM_TYPE(q4_0, ZL_TYPE_Q4_0)
ZL_I8MM_TYPE(q4_1, ZL_TYPE_Q4_1)
ZL_I8MM_TYPE(q5_0, ZL_TYPE_Q5_0)
ZL_I8MM_TYPE(q5_1, ZL_TYPE_Q5_1)
ZL_I8MM_TYPE(q8_0, ZL_TYPE_Q8_0)
ZL_I8MM_TYPE(q4_k, ZL_TYPE_Q4_K)
ZL_I8MM_TYPE(q5_k, ZL_TYPE_Q5_K)
ZL_I8MM_TYPE(q6_k, ZL_TYPE_Q6_K)

int zl_neon_i8mm_kernels(zl_type t, zl_dot_fn *one, const zl_dot_multi_fn **many, const zl_dot2r_fn **two_rows) {
#define ZL_CASE(name, type) \
    case type: *two_rows = name##_2r; break;
    switch (t) {
    ZL_CASE(q4_0, ZL_TYPE_Q4_0)
    ZL_CASE(q4_1, ZL_TYPE_Q4_1)
    ZL_CASE(q5_0, ZL_TYPE_Q5_0)
    ZL_CASE(q5_1, ZL_TYPE_Q5_1)
    ZL_CASE(q8_0, ZL_TYPE_Q8_0)
    ZL_CASE(q4_k, ZL_TYPE_Q4_K)
    ZL_CASE(q5_k, ZL_TYPE_Q5_K)
    ZL_CASE(q6_k, ZL_TYPE_Q6_K)
    default: return 0;
    }
#undef ZL_CASE
    return level_kernels(t, one, many);
}
#else
typedef int zl_kernels_neon_i8mm_empty; /* nothing to build off AArch64 */
#endif
