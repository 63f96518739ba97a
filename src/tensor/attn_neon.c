/* attn_neon.c — the attention tile (attn.h) with 4-lane NEON vectors, for
 * head dimensions that are multiples of 4; AArch64 only (ASIMD is part of
 * the base architecture, so every NEON level uses this file).  Same scheme
 * as attn_avx2.c: per-position accumulators over the head dimension (two per
 * position, even and odd 4-float chunks), a fixed pairwise-add reduction to
 * one vector of four positions' scores, a vector exp, 4-lane running sums.
 * A row's arithmetic depends only on its query, its length and the cache.
 * Never called on another architecture; owns no dispatch (attn_ref.c). */
#if defined(__aarch64__)
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "attn.h"

#define ZL_INLINE static inline __attribute__((always_inline))

/* exp(x) for x <= 0; exp(0) is exactly 1 */
ZL_INLINE float32x4_t exp4(float32x4_t x) {
    x = vmaxq_f32(x, vdupq_n_f32(-87.0f));
    float32x4_t n = vrndnq_f32(vmulq_n_f32(x, 1.44269504f));
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
    r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
    float32x4_t p = vdupq_n_f32(1.0f / 5040);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 720), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 120), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 24), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 6), p, r);
    p = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    /* 2^n with n in [-126, 0]: build the exponent field */
    int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    return vmulq_f32(p, vreinterpretq_f32_s32(e));
}

static void widen(zl_type t, const uint8_t *src, size_t stride, int n, int hd, float *dst) {
    for (int j = 0; j < n; j++, src += stride, dst += hd) {
        if (t == ZL_TYPE_F16) {
            for (int d = 0; d < hd; d += 4) vst1q_f32(dst + d, vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(src + 2 * d))));
        } else if (t == ZL_TYPE_F32) {
            memcpy(dst, src, (size_t)hd * sizeof(float));
        } else {
            zl_attn_widen_ref(t, src, stride, 1, hd, dst);
        }
    }
}

/* the scores of positions kf[0..4) (rows of hd floats) against q, lane j = position j */
ZL_INLINE float32x4_t score4(const float *kf, const float *q, int hd) {
    float32x4_t a[4], b[4];
    for (int j = 0; j < 4; j++) a[j] = b[j] = vdupq_n_f32(0);
    int d = 0;
    for (; d + 8 <= hd; d += 8) {
        const float32x4_t q0 = vld1q_f32(q + d), q1 = vld1q_f32(q + d + 4);
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            a[j] = vfmaq_f32(a[j], vld1q_f32(kf + (size_t)j * hd + d), q0);
            b[j] = vfmaq_f32(b[j], vld1q_f32(kf + (size_t)j * hd + d + 4), q1);
        }
    }
    if (d < hd) {
        const float32x4_t q0 = vld1q_f32(q + d);
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) a[j] = vfmaq_f32(a[j], vld1q_f32(kf + (size_t)j * hd + d), q0);
    }
    for (int j = 0; j < 4; j++) a[j] = vaddq_f32(a[j], b[j]);
    return vpaddq_f32(vpaddq_f32(a[0], a[1]), vpaddq_f32(a[2], a[3]));
}

/* o[4 * (d0 + i) ..] = alpha * o + sum_j p[j] * v[j], for W 4-float chunks */
ZL_INLINE void pv(float *o, float32x4_t alpha, const float *p, const float *vf, int valid, int hd, int d0,
                  const int W) {
    float32x4_t acc[8];
#pragma GCC unroll 8
    for (int i = 0; i < W; i++) acc[i] = vmulq_f32(vld1q_f32(o + 4 * (d0 + i)), alpha);
    for (int j = 0; j < valid; j++) {
        const float pj = p[j];
        const float *vr = vf + (size_t)j * hd + 4 * d0;
#pragma GCC unroll 8
        for (int i = 0; i < W; i++) acc[i] = vfmaq_n_f32(acc[i], vld1q_f32(vr + 4 * i), pj);
    }
#pragma GCC unroll 8
    for (int i = 0; i < W; i++) vst1q_f32(o + 4 * (d0 + i), acc[i]);
}

static void tile_neon(const zl_attn_tile *t) {
    const int hd = t->hd, rows = t->rows, nd = hd / 4;
    int max_len = 0;
    for (int r = 0; r < rows; r++)
        if (t->len[r] > max_len) max_len = t->len[r];
    float *kf = t->work, *vf = kf + (size_t)ZL_ATTN_BLOCK * hd, *p = vf + (size_t)ZL_ATTN_BLOCK * hd;
    float *lsum = p + ZL_ATTN_BLOCK, *raw = lsum + (size_t)ZL_ATTN_MAX_ROWS * 16;
    float m[ZL_ATTN_MAX_ROWS];
    for (int r = 0; r < rows; r++) {
        m[r] = -INFINITY;
        vst1q_f32(lsum + 16 * r, vdupq_n_f32(0));
        memset(t->out[r], 0, (size_t)hd * sizeof(float));
    }
    static const int32_t lanes[4] = {0, 1, 2, 3};
    const int32x4_t lane = vld1q_s32(lanes);
    for (int kb = 0; kb < max_len; kb += ZL_ATTN_BLOCK) {
        int nk = max_len - kb < ZL_ATTN_BLOCK ? max_len - kb : ZL_ATTN_BLOCK;
        int nk4 = (nk + 3) & ~3;
        widen(t->kv_type, t->k + (size_t)kb * t->kv_stride, t->kv_stride, nk, hd, kf);
        widen(t->kv_type, t->v + (size_t)kb * t->kv_stride, t->kv_stride, nk, hd, vf);
        memset(kf + (size_t)nk * hd, 0, (size_t)(nk4 - nk) * hd * sizeof(float));
        for (int r = 0; r < rows; r++) {
            if (kb >= t->len[r]) continue;
            const int valid = t->len[r] - kb < nk ? t->len[r] - kb : nk, nc = (valid + 3) / 4;
            const float *q = t->q[r];
            float32x4_t s[ZL_ATTN_BLOCK / 4];
            uint32x4_t ok[ZL_ATTN_BLOCK / 4];
            float32x4_t bm = vdupq_n_f32(-INFINITY);
            for (int c = 0; c < nc; c++) {
                ok[c] = vcltq_s32(lane, vdupq_n_s32(valid - 4 * c));
                s[c] = vbslq_f32(ok[c], vmulq_n_f32(score4(kf + (size_t)4 * c * hd, q, hd), t->scale),
                                 vdupq_n_f32(-INFINITY));
                bm = vmaxq_f32(bm, s[c]);
                if (t->probs) {
                    float *dst = raw + (size_t)r * max_len + kb + 4 * c;
                    if (4 * c + 4 <= valid) {
                        vst1q_f32(dst, s[c]);
                    } else {
                        float tmp[4];
                        vst1q_f32(tmp, s[c]);
                        for (int j = 0; j < valid - 4 * c; j++) dst[j] = tmp[j];
                    }
                }
            }
            float bmax = vmaxvq_f32(bm), mn = m[r] > bmax ? m[r] : bmax;
            const float32x4_t vmn = vdupq_n_f32(mn);
            const float32x4_t alpha = m[r] == -INFINITY ? vdupq_n_f32(0) : exp4(vdupq_n_f32(m[r] - mn));
            float32x4_t ls = vmulq_f32(vld1q_f32(lsum + 16 * r), alpha);
            for (int c = 0; c < nc; c++) {
                float32x4_t pc = vreinterpretq_f32_u32(
                    vandq_u32(ok[c], vreinterpretq_u32_f32(exp4(vsubq_f32(s[c], vmn)))));
                ls = vaddq_f32(ls, pc);
                vst1q_f32(p + 4 * c, pc);
            }
            vst1q_f32(lsum + 16 * r, ls);
            m[r] = mn;
            float *o = t->out[r];
            int d0 = 0;
            for (; d0 + 8 <= nd; d0 += 8) pv(o, alpha, p, vf, valid, hd, d0, 8);
            switch (nd - d0) {
            case 7: pv(o, alpha, p, vf, valid, hd, d0, 7); break;
            case 6: pv(o, alpha, p, vf, valid, hd, d0, 6); break;
            case 5: pv(o, alpha, p, vf, valid, hd, d0, 5); break;
            case 4: pv(o, alpha, p, vf, valid, hd, d0, 4); break;
            case 3: pv(o, alpha, p, vf, valid, hd, d0, 3); break;
            case 2: pv(o, alpha, p, vf, valid, hd, d0, 2); break;
            case 1: pv(o, alpha, p, vf, valid, hd, d0, 1); break;
            default: break;
            }
        }
    }
    for (int r = 0; r < rows; r++) {
        float l = vaddvq_f32(vld1q_f32(lsum + 16 * r)), inv = 1.0f / l;
        float *o = t->out[r];
        for (int d = 0; d < hd; d += 4) vst1q_f32(o + d, vmulq_n_f32(vld1q_f32(o + d), inv));
        if (t->probs) {
            const float *rr = raw + (size_t)r * max_len;
            const float32x4_t vm = vdupq_n_f32(m[r]);
            int j = 0;
            for (; j + 4 <= t->len[r]; j += 4)
                vst1q_f32(t->probs + j,
                          vfmaq_n_f32(vld1q_f32(t->probs + j), exp4(vsubq_f32(vld1q_f32(rr + j), vm)), inv));
            for (; j < t->len[r]; j++) t->probs[j] += expf(rr[j] - m[r]) * inv;
        }
    }
}

zl_attn_fn zl_attn_fn_neon(int hd) { return hd > 0 && hd % 4 == 0 ? tile_neon : NULL; }
#else
typedef int zl_attn_neon_empty; /* nothing to build off AArch64 */
#endif
