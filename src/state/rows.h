/* rows.h — cached rows of a sequence as bytes (rows.c). */
#ifndef ZL_STATE_ROWS_H
#define ZL_STATE_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "zerolayer.h"

/* Bytes of positions [0, n) of every layer's K and V in the cache's own type. */
size_t zl_rows_bytes(const zl_seq *s, int n);
/* Positions [0, n) of every layer, K then V, copied out as the cache holds them. */
int zl_rows_put(const zl_seq *s, int n, uint8_t *out, zl_err *err);
/* The reverse: write positions [0, n) of s (already cached, e.g. adopted) from in. */
int zl_rows_get(zl_seq *s, int n, const uint8_t *in, zl_err *err);

#endif
