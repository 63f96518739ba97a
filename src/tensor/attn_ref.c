/* attn_ref.c — scalar reference attention loops and the ISA dispatch; see attn.h. */
#include "attn.h"

#include "../base/cpu.h"

static float kdot_f32(const void *k, const float *q, int n) {
    const float *r = k;
    float s = 0;
    for (int i = 0; i < n; i++) s += r[i] * q[i];
    return s;
}

static float kdot_f16(const void *k, const float *q, int n) {
    const zl_f16 *r = k;
    float s = 0;
    for (int i = 0; i < n; i++) s += zl_f16_to_f32(r[i]) * q[i];
    return s;
}

static void vaxpy_f32(float a, const void *v, float *out, int n) {
    const float *r = v;
    for (int i = 0; i < n; i++) out[i] += a * r[i];
}

static void vaxpy_f16(float a, const void *v, float *out, int n) {
    const zl_f16 *r = v;
    for (int i = 0; i < n; i++) out[i] += a * zl_f16_to_f32(r[i]);
}

/* Q8_0 rows: blocks of 32 int8 with an f16 scale; n is a multiple of 32. */
static float kdot_q8_0(const void *k, const float *q, int n) {
    const zl_block_q8_0 *b = k;
    float s = 0;
    for (int i = 0; i < n / ZL_QK; i++) {
        float bs = 0;
        for (int j = 0; j < ZL_QK; j++) bs += (float)b[i].qs[j] * q[i * ZL_QK + j];
        s += bs * zl_f16_to_f32(b[i].d);
    }
    return s;
}

static void vaxpy_q8_0(float a, const void *v, float *out, int n) {
    const zl_block_q8_0 *b = v;
    for (int i = 0; i < n / ZL_QK; i++) {
        float ad = a * zl_f16_to_f32(b[i].d);
        for (int j = 0; j < ZL_QK; j++) out[i * ZL_QK + j] += ad * (float)b[i].qs[j];
    }
}

zl_attn_kernels zl_attn_kernels_ref(zl_type t) {
    zl_attn_kernels k = {kdot_f32, vaxpy_f32};
    if (t == ZL_TYPE_F16) k = (zl_attn_kernels){kdot_f16, vaxpy_f16};
    if (t == ZL_TYPE_Q8_0) k = (zl_attn_kernels){kdot_q8_0, vaxpy_q8_0};
    return k;
}

zl_attn_kernels zl_attn_kernels_for(zl_type t, int isa) {
    zl_attn_kernels r = zl_attn_kernels_ref(t), s = {0, 0};
    if (isa >= ZL_ISA_AVX512) s = zl_attn_kernels_avx512(t);
    if (!s.kdot && isa >= ZL_ISA_AVX2) s = zl_attn_kernels_avx2(t);
    if (s.kdot) r.kdot = s.kdot;
    if (s.vaxpy) r.vaxpy = s.vaxpy;
    return r;
}
