/* attn.h — causal attention of a tile of query rows against one KV head.
 *
 * A tile is every query row that reads the same KV head of the same
 * sequence: the query heads of one GQA group, for one or more tokens.  The
 * kernel walks the cache in blocks of ZL_ATTN_BLOCK positions, widens each
 * block of keys and values to f32 once for all rows of the tile, and keeps an
 * online softmax per row (running max, running sum, rescaled output), so
 * work per row is one pass over the positions it may see and nothing is
 * re-read per head.
 *
 * Determinism contract: a row's arithmetic depends only on its query, its
 * length and the cache — never on which other rows share the tile, how many
 * there are, or where the tile ends.  Decoding a token alone, inside a
 * batch, or as part of a prefill chunk gives bit-identical outputs.
 *
 * Scalar reference in attn_ref.c; AVX2, AVX-512 and NEON versions in their
 * own files, each self-consistent (results differ between levels by
 * rounding; every NEON level shares attn_neon.c). */
#ifndef ZL_ATTN_H
#define ZL_ATTN_H

#include <stddef.h>
#include <stdint.h>

#include "types.h"

#define ZL_ATTN_BLOCK 64    /* cache positions per block */
#define ZL_ATTN_MAX_ROWS 64 /* rows per tile */

typedef struct zl_attn_tile {
    int rows;               /* 1..ZL_ATTN_MAX_ROWS */
    int hd;                 /* head dimension */
    float scale;            /* applied to q·k */
    const float *const *q;  /* q[r]: row r's query (hd floats) */
    float *const *out;      /* out[r]: row r's output (hd floats) */
    const int *len;         /* row r attends to positions [0, len[r]), len[r] >= 1 */
    zl_type kv_type;        /* F32, F16 or Q8_0 */
    const uint8_t *k, *v;   /* position p of this head at k + p * kv_stride */
    size_t kv_stride;       /* bytes */
    float *probs;           /* NULL, or += softmax probability of each position, summed over rows */
    float *work;            /* zl_attn_work_floats(hd, rows, max len) floats, 64-byte aligned */
} zl_attn_tile;

/* Scratch floats a tile needs (max_len matters only when probs is set). */
size_t zl_attn_work_floats(int hd, int rows, int max_len, int with_probs);

typedef void (*zl_attn_fn)(const zl_attn_tile *t);

/* The kernel for ISA level isa (a zl_isa: the level of the caller's kernel table) and
 * head dimension hd: the best level <= isa that handles hd. */
zl_attn_fn zl_attn_fn_for(int isa, int hd);

/* per-ISA providers: NULL when the level cannot take hd */
zl_attn_fn zl_attn_fn_ref(int hd);
zl_attn_fn zl_attn_fn_avx2(int hd);
zl_attn_fn zl_attn_fn_avx512(int hd);
zl_attn_fn zl_attn_fn_neon(int hd); /* AArch64 only */

/* Widen n cache rows (hd elements each, stride bytes apart) to f32 rows
 * [n][hd]; shared by the kernels. */
void zl_attn_widen_ref(zl_type t, const uint8_t *src, size_t stride, int n, int hd, float *dst);

#endif
