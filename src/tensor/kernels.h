/* kernels.h — dequantisers, quantisers and the fused dequant·dot matmul.
 *
 * Weights are never expanded into a float copy: zl_matmul quantises the
 * activations once per call into the weight type's "dot partner" format
 * (Q8_0 for Q4_0/Q5_0/Q8_0, Q8_1 for Q4_1/Q5_1, Q8_K for the K formats, F32
 * for F32/F16/BF16) and each kernel reads weight blocks straight from the
 * (mmap'd) source.  Every kernel has a scalar reference (kernels_ref.c); the
 * AVX2, AVX-512 and AArch64 NEON versions live in their own files behind a
 * kernel table per ISA level (zl_kernels): a model handle holds the table of
 * the level chosen when it was opened, so handles at different levels share
 * one process. */
#ifndef ZL_KERNELS_H
#define ZL_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "../base/cpu.h"
#include "../base/pool.h"
#include "types.h"

/* The kernels of one ISA level, for every weight type: each table is filled
 * once per process (pthread_once) and never changes after, so it may be
 * shared by any number of handles and threads. */
typedef struct zl_kernels zl_kernels;
/* The table of level min(isa, zl_cpu_max_isa()) (never NULL). */
const zl_kernels *zl_kernels_for(zl_isa isa);
/* The level a table dispatches to. */
zl_isa zl_kernels_isa(const zl_kernels *k);

/* A weight matrix: rows x cols elements of `type`, rows contiguous. */
typedef struct zl_mat {
    zl_type type;
    int64_t rows, cols;
    const void *data;
    size_t row_bytes; /* zl_row_size(type, cols) */
} zl_mat;

/* Growable scratch owned by the caller (one per forward context). */
typedef struct zl_work { void *p; size_t cap; } zl_work;
void zl_work_free(zl_work *w);

/* --- scalar reference conversions (all supported types) --- */
/* dst[0..n) = dequantised src; n must be a multiple of the block length. */
void zl_dequant_row(zl_type t, const void *src, float *dst, int64_t n);
/* 1 if zl_quantize_row can produce type t. */
int zl_can_quantize(zl_type t);
/* Quantise n floats into type t; returns bytes written (0 if unsupported or
 * n not a multiple of the block length). Reference implementation. */
size_t zl_quantize_row(zl_type t, const float *src, void *dst, int64_t n);

/* --- fused kernels --- */
/* The activation format a weight type is dotted with. */
zl_type zl_dot_partner(zl_type weight_type);
/* One dot product of a weight row (type t) with an activation row already
 * converted to zl_dot_partner(t); n elements, at zl_cpu_max_isa().  The SIMD
 * kernels rely on activation quants in [-127, 127], which zl_quantize_row's
 * Q8_0/Q8_1/Q8_K always produce (weights may use -128). */
float zl_vec_dot(zl_type t, const void *wrow, const void *xrow, int64_t n);
/* Same, forced to a specific ISA level (tests compare levels). */
float zl_vec_dot_isa(int isa, zl_type t, const void *wrow, const void *xrow, int64_t n);

/* y[i*ldy + r] = dot(W row r, x[i*ldx ..]) for r < W->rows, i < n_tok, with
 * the kernels of table k.  Parallel over rows on `pool` (may be NULL).  work
 * is grown as needed (NULL: a temporary scratch per call).  Unsupported types
 * or a failed allocation give NaN outputs. */
void zl_matmul(const zl_kernels *k, const zl_mat *W, const float *x, int64_t ldx, int n_tok, float *y, int64_t ldy,
               zl_pool *pool, zl_work *work);

/* y[k] = W[k] x for up to 4 matrices with the same input length, n_tok rows
 * of x (stride: the input length) and of each y[k] (stride: W[k]->rows), in
 * ONE dispatch over their combined rows, quantising x once per weight type
 * (Q/K/V share the attention input, gate/up the FFN input). */
void zl_matmul_multi(const zl_kernels *k, const zl_mat *const *W, int nm, const float *x, int n_tok, float *const *y, zl_pool *pool,
                     zl_work *work);

#endif
