/* attn_ref.c — scalar reference of the attention tile (see attn.h) and the
 * ISA dispatch.  Plain loops in a fixed order: the definition the SIMD
 * versions are tested against. */
#include <math.h>
#include <string.h>

#include "../base/cpu.h"
#include "attn.h"

size_t zl_attn_work_floats(int hd, int rows, int max_len, int with_probs) {
    /* widened keys, values and transposed keys, one block of probabilities,
     * per-row sums (16 lanes each), and with probs every raw score of the tile */
    size_t n = 3 * (size_t)ZL_ATTN_BLOCK * hd + ZL_ATTN_BLOCK + (size_t)ZL_ATTN_MAX_ROWS * 16;
    if (with_probs) n += (size_t)rows * max_len;
    return n + 16; /* alignment slack */
}

void zl_attn_widen_ref(zl_type t, const uint8_t *src, size_t stride, int n, int hd, float *dst) {
    for (int j = 0; j < n; j++, src += stride, dst += hd) {
        if (t == ZL_TYPE_F32) {
            memcpy(dst, src, (size_t)hd * sizeof(float));
        } else if (t == ZL_TYPE_F16) {
            const zl_f16 *h = (const zl_f16 *)src;
            for (int d = 0; d < hd; d++) dst[d] = zl_f16_to_f32(h[d]);
        } else { /* Q8_0: hd is a multiple of 32 */
            const zl_block_q8_0 *b = (const zl_block_q8_0 *)src;
            for (int i = 0; i < hd / ZL_QK; i++) {
                float s = zl_f16_to_f32(b[i].d);
                for (int d = 0; d < ZL_QK; d++) dst[i * ZL_QK + d] = s * (float)b[i].qs[d];
            }
        }
    }
}

static int tile_max_len(const zl_attn_tile *t) {
    int m = 0;
    for (int r = 0; r < t->rows; r++)
        if (t->len[r] > m) m = t->len[r];
    return m;
}

static void tile_ref(const zl_attn_tile *t) {
    const int hd = t->hd, rows = t->rows, max_len = tile_max_len(t);
    float *kf = t->work, *vf = kf + (size_t)ZL_ATTN_BLOCK * hd, *p = vf + (size_t)ZL_ATTN_BLOCK * hd;
    float *raw = p + ZL_ATTN_BLOCK + (size_t)ZL_ATTN_MAX_ROWS * 16;
    float m[ZL_ATTN_MAX_ROWS], l[ZL_ATTN_MAX_ROWS];
    for (int r = 0; r < rows; r++) {
        m[r] = -INFINITY;
        l[r] = 0;
        memset(t->out[r], 0, (size_t)hd * sizeof(float));
    }
    for (int kb = 0; kb < max_len; kb += ZL_ATTN_BLOCK) {
        int nk = max_len - kb < ZL_ATTN_BLOCK ? max_len - kb : ZL_ATTN_BLOCK;
        zl_attn_widen_ref(t->kv_type, t->k + (size_t)kb * t->kv_stride, t->kv_stride, nk, hd, kf);
        zl_attn_widen_ref(t->kv_type, t->v + (size_t)kb * t->kv_stride, t->kv_stride, nk, hd, vf);
        for (int r = 0; r < rows; r++) {
            if (kb >= t->len[r]) continue;
            int valid = t->len[r] - kb < nk ? t->len[r] - kb : nk;
            const float *q = t->q[r];
            float bm = -INFINITY;
            for (int j = 0; j < valid; j++) {
                float s = 0;
                for (int d = 0; d < hd; d++) s += kf[(size_t)j * hd + d] * q[d];
                p[j] = s * t->scale;
                if (p[j] > bm) bm = p[j];
            }
            if (t->probs) memcpy(raw + (size_t)r * max_len + kb, p, (size_t)valid * sizeof(float));
            float mn = m[r] > bm ? m[r] : bm;
            float alpha = m[r] == -INFINITY ? 0.0f : expf(m[r] - mn);
            float sum = 0;
            for (int j = 0; j < valid; j++) {
                p[j] = expf(p[j] - mn);
                sum += p[j];
            }
            l[r] = l[r] * alpha + sum;
            m[r] = mn;
            float *o = t->out[r];
            for (int d = 0; d < hd; d++) o[d] *= alpha;
            for (int j = 0; j < valid; j++)
                for (int d = 0; d < hd; d++) o[d] += p[j] * vf[(size_t)j * hd + d];
        }
    }
    for (int r = 0; r < rows; r++) {
        float inv = 1.0f / l[r], *o = t->out[r];
        for (int d = 0; d < hd; d++) o[d] *= inv;
        if (t->probs)
            for (int j = 0; j < t->len[r]; j++) t->probs[j] += expf(raw[(size_t)r * max_len + j] - m[r]) * inv;
    }
}

zl_attn_fn zl_attn_fn_ref(int hd) { return hd > 0 ? tile_ref : NULL; }

zl_attn_fn zl_attn_fn_for(int isa, int hd) {
    zl_attn_fn f = NULL;
#if defined(__aarch64__)
    if (isa >= ZL_ISA_NEON) f = zl_attn_fn_neon(hd);
#else
    if (isa >= ZL_ISA_AVX512) f = zl_attn_fn_avx512(hd);
    if (!f && isa >= ZL_ISA_AVX2) f = zl_attn_fn_avx2(hd);
#endif
    return f ? f : zl_attn_fn_ref(hd);
}
