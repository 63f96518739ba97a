/* attn.h — the two inner loops of attention over a KV cache row:
 *   score = dot(k_row, q)         (k_row F16 or F32)
 *   out  += a * v_row             (v_row F16 or F32)
 * Scalar reference in attn_ref.c, AVX2 and AVX-512 versions in their own
 * files; zl_attn_kernels() picks by zl_cpu_isa() at call time. */
#ifndef ZL_ATTN_H
#define ZL_ATTN_H

#include <stdint.h>

#include "types.h"

typedef float (*zl_kdot_fn)(const void *k, const float *q, int n);
typedef void (*zl_vaxpy_fn)(float a, const void *v, float *out, int n);

typedef struct zl_attn_kernels {
    zl_kdot_fn kdot;
    zl_vaxpy_fn vaxpy;
} zl_attn_kernels;

/* Kernels for a KV element type (ZL_TYPE_F16 / ZL_TYPE_F32) at ISA level isa
 * (a zl_isa; pass zl_cpu_isa() normally). */
zl_attn_kernels zl_attn_kernels_for(zl_type kv_type, int isa);

/* per-ISA providers: NULL members when the level has nothing for the type */
zl_attn_kernels zl_attn_kernels_ref(zl_type kv_type);
zl_attn_kernels zl_attn_kernels_avx2(zl_type kv_type);
zl_attn_kernels zl_attn_kernels_avx512(zl_type kv_type);

#endif
