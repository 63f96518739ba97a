/* kernels_isa.h — private interface between matmul.c and the per-ISA kernel files.
 *
 * Each ISA file hands out one dot-product function per weight type, or NULL
 * where it has nothing faster than the scalar reference; matmul.c fills its
 * dispatch table from these, falling back to the reference.  Only matmul.c
 * and the kernel files include this header. */
#ifndef ZL_KERNELS_ISA_H
#define ZL_KERNELS_ISA_H

#include <stddef.h>
#include <stdint.h>

#include "types.h"

/* dot(weight row of type t, activation row in zl_dot_partner(t)), n elements. */
typedef float (*zl_dot_fn)(const void *w, const void *x, int64_t n);

/* out[t] = dot(w, row t of x) for t < T, the activation rows xstride bytes
 * apart, where T (2..8) is fixed by the kernel handed out: prefill and
 * batched decode meet each weight row with several tokens at once. */
typedef void (*zl_dot_multi_fn)(const void *w, const void *x, size_t xstride, int64_t n, float *out);

/* Scalar reference (never NULL for a supported weight type). */
zl_dot_fn zl_dot_fn_ref(zl_type t);
/* SIMD versions; NULL when the level has none for t or the CPU lacks it. */
zl_dot_fn zl_dot_fn_avx2(zl_type t);
zl_dot_fn zl_dot_fn_avx512(zl_type t);
/* One AVX-512 instantiation by extension (VNNI, VBMI), whatever the CPU
 * reports: for tests, which must only call what the CPU can run. */
zl_dot_fn zl_dot_fn_avx512_variant(zl_type t, int vnni, int vbmi);
/* Four-token kernels over plain partner rows (NULL where none). */
zl_dot_multi_fn zl_dot4_fn_avx512(zl_type t);
zl_dot_multi_fn zl_dot4_fn_avx2(zl_type t);
/* T tokens at once over plain partner rows, T = 2..8 (NULL where none); each
 * token's result is bit-identical to the same level's one-token kernel. */
zl_dot_multi_fn zl_dotT_fn_avx512(zl_type t, int T);

/* A kernel over a "prepared" activation row: the dot partner rearranged
 * once per matmul call into the layout that kernel reads fastest, so the
 * per-row work touches only weights.  Private to matmul.c and the tests. */
typedef struct zl_prep_kernel {
    size_t (*size)(int64_t n);                         /* bytes of a prepared row */
    void (*prep)(const void *xq, void *xp, int64_t n); /* partner row -> prepared */
    zl_dot_fn dot;                                     /* dot(weight row, prepared row, n) */
    zl_dot_multi_fn dot4;                              /* four prepared rows at once, or NULL */
    zl_dot_multi_fn dot2, dot3, dot5, dot6, dot7, dot8; /* 2, 3, 5..8 rows at once, or NULL */
} zl_prep_kernel;
/* Every multi-row kernel gives each row exactly the result dot() gives it:
 * a token's numbers never depend on how many tokens share the call. */
/* 1 and *out filled when the level has a prepared kernel for t, else 0. */
int zl_prep_kernel_avx512(zl_type t, zl_prep_kernel *out);
int zl_prep_kernel_avx512_variant(zl_type t, int vnni, int vbmi, zl_prep_kernel *out);
int zl_prep_kernel_avx2(zl_type t, zl_prep_kernel *out);
/* In a block-per-lane kernel file: the one-token and 2..8-token kernels over
 * the file's always-inline body(w, xp, xstride, n, out, T), and `setter`,
 * which hands them out with the prepared layout's size_fn / prep_fn. */
#define ZL_PREP_KERNEL_SET(setter, size_fn, prep_fn, body)                                                  \
    static float body##_1(const void *w, const void *xp, int64_t n) {                                     \
        float o[1];                                                                                       \
        body(w, xp, 0, n, o, 1);                                                                          \
        return o[0];                                                                                      \
    }                                                                                                     \
    static void body##_2(const void *w, const void *xp, size_t xs, int64_t n, float *o) { body(w, xp, xs, n, o, 2); } \
    static void body##_3(const void *w, const void *xp, size_t xs, int64_t n, float *o) { body(w, xp, xs, n, o, 3); } \
    static void body##_4(const void *w, const void *xp, size_t xs, int64_t n, float *o) { body(w, xp, xs, n, o, 4); } \
    static void body##_5(const void *w, const void *xp, size_t xs, int64_t n, float *o) { body(w, xp, xs, n, o, 5); } \
    static void body##_6(const void *w, const void *xp, size_t xs, int64_t n, float *o) { body(w, xp, xs, n, o, 6); } \
    static void body##_7(const void *w, const void *xp, size_t xs, int64_t n, float *o) { body(w, xp, xs, n, o, 7); } \
    static void body##_8(const void *w, const void *xp, size_t xs, int64_t n, float *o) { body(w, xp, xs, n, o, 8); } \
    void setter(zl_prep_kernel *out) {                                                                    \
        out->size = size_fn, out->prep = prep_fn, out->dot = body##_1;                                    \
        out->dot2 = body##_2, out->dot3 = body##_3, out->dot4 = body##_4, out->dot5 = body##_5;           \
        out->dot6 = body##_6, out->dot7 = body##_7, out->dot8 = body##_8;                                 \
    }
/* Q4_0 with one block per int32 lane (kernels_q4l_avx512.c); needs VNNI and VBMI. */
void zl_prep_kernel_q4l_avx512(zl_prep_kernel *out);
/* Q8_0 with one block per int32 lane (kernels_q8l_avx512.c); needs VNNI and VBMI. */
void zl_prep_kernel_q8l_avx512(zl_prep_kernel *out);
/* Q4_0 with one block per int32 lane on AVX2 (kernels_q4l_avx2.c). */
void zl_prep_kernel_q4l_avx2(zl_prep_kernel *out);
/* Q8_0 with one block per int32 lane on AVX2 (kernels_q8l_avx2.c). */
void zl_prep_kernel_q8l_avx2(zl_prep_kernel *out);

/* Prepared Q8_K activation of the AVX-512 Q4_K / Q5_K kernels (layout notes
 * in kernels_avx512.c): sub-block k of qs holds Q8_K sub-block
 * zl_q8kp_order(k), sum32 the eight 32-quant sums in natural order. */
typedef struct {
    int8_t qs[ZL_QK_K];
    float d;
    int16_t sum32[8];
    uint8_t pad[44];
} q8kp_block;
_Static_assert(sizeof(q8kp_block) == 320, "q8kp_block size");
/* position in q8kp_block.qs of natural sub-block j (the order is its own inverse) */
static inline int zl_q8kp_order(int j) { return (j & 4) | ((j & 1) << 1) | ((j >> 1) & 1); }

/* Row-interleaved tile kernels (prefill): groups of `rows` weight rows (16
 * for AVX-512, 8 for AVX2) are repacked once per matmul call so that each
 * int32 lane of a register holds one row's four codes of the same four
 * columns, and are then run against up to 8 activation rows per call (the
 * level's own activation format: the prepared one where the level has it).
 * Each (row, token) result is bit-identical to the level's one-token kernel. */
#define ZL_TILE_ROWS_MAX 16
typedef struct zl_tile_kernel {
    int rows;     /* rows per packed group */
    int min_tok;  /* tokens per call from which the tile beats the level's row kernels */
    size_t (*size)(int64_t n); /* bytes of one packed group of n-element rows (64-multiple) */
    /* rows [0, nrows) of w (row_bytes apart) into dst; lanes >= nrows give zeros */
    void (*pack)(const void *w, size_t row_bytes, int nrows, int64_t n, void *dst);
    /* out[t * rows + r] = dot(row r, activation row t), t < T (1..8), rows xstride bytes apart */
    void (*run)(const void *packed, const void *x, size_t xstride, int T, int64_t n, float *out);
} zl_tile_kernel;
/* 1 and *out filled where the level has a tile kernel for t (Q4_K, Q5_K,
 * Q6_K; AVX-512 needs VNNI). */
int zl_tile_kernel_avx512(zl_type t, zl_tile_kernel *out);
int zl_tile_kernel_avx2(zl_type t, zl_tile_kernel *out);

/* Fast activation quantiser for the dot partners (Q8_0, Q8_1, Q8_K) or NULL. */
typedef void (*zl_quant_fn)(const float *x, void *dst, int64_t n);
zl_quant_fn zl_quant_fn_avx2(zl_type partner);
zl_quant_fn zl_quant_fn_avx512(zl_type partner);

/* Two weight rows wstride bytes apart with T tokens:
 * out[r * T + t] = dot(row r, activation row t) for r < 2, t < T, each the
 * same level's one-token result bit for bit (i8mm's 2x2 integer tiles). */
typedef void (*zl_dot2r_fn)(const void *w, size_t wstride, const void *x, size_t xstride, int64_t n, float *out);

/* AArch64 NEON (kernels_neon*.c; built only there).  level is a zl_isa
 * (ZL_ISA_NEON .. ZL_ISA_NEON_I8MM) the caller knows the CPU has; each gives
 * the kernel of the best level <= level, NULL where none.  The quantised
 * kernels return the scalar reference's bits at every level. */
zl_dot_fn zl_dot_fn_neon(int level, zl_type t);
zl_dot_multi_fn zl_dotT_fn_neon(int level, zl_type t, int T); /* T = 2..8 tokens */
zl_dot2r_fn zl_dot2r_fn_neon(int level, zl_type t, int T); /* T = 2, 4, 6, 8; i8mm only */
zl_quant_fn zl_quant_fn_neon(zl_type partner);           /* bit-identical to zl_quantize_row */
/* kernels_neon_dotprod.c's quantised kernels (one token, many[T] for T = 2..8),
 * and kernels_neon_i8mm.c's (also two_rows[T] for even T). */
int zl_neon_dotprod_kernels(zl_type t, zl_dot_fn *one, const zl_dot_multi_fn **many);
int zl_neon_i8mm_kernels(zl_type t, zl_dot_fn *one, const zl_dot_multi_fn **many, const zl_dot2r_fn **two_rows);

/* The 6-bit (scale, min) pair of sub-block j of a Q4_K / Q5_K super-block. */
static inline void zl_kscale(int j, const uint8_t *q, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

#endif
