/* rows.h — cached rows of a sequence as bytes (rows.c). */
#ifndef ZL_STATE_ROWS_H
#define ZL_STATE_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "zerolayer.h"

/* 1 when every cached value of positions [0, n) is an f16 value (0 with *rc
 * set on a read error).  row: scratch of one row. */
int zl_rows_all_f16(const zl_seq *s, zl_kv_shape sh, int n, float *row, zl_err *err, int *rc);
/* Positions [0, n) of every layer, K then V, into out as f16 (elt 2) or f32 (elt 4). */
int zl_rows_put(const zl_seq *s, zl_kv_shape sh, int n, int elt, uint8_t *out, float *row, zl_err *err);
/* The reverse: write positions [0, n) of s (already cached, e.g. adopted) from in. */
int zl_rows_get(zl_seq *s, zl_kv_shape sh, int n, int elt, const uint8_t *in, float *row, zl_err *err);

#endif
