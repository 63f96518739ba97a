/* kv.h — the KV cache of one sequence.
 *
 * The single owner of cached attention state: per layer, K and V rows of
 * kv_dim = n_kv_heads * head_dim elements, one row per cache slot, stored as
 * F16 (default) or F32.  Slot i holds the token at position i; truncation
 * (ring rollback, session edits) just lowers n_used.  Memory is zeroed on
 * clear so a reused cache never exposes an earlier sequence's state. */
#ifndef ZL_KV_H
#define ZL_KV_H

#include <stddef.h>
#include <stdint.h>

#include "../base/err.h"
#include "../tensor/types.h"

typedef struct zl_kv {
    int n_layers, n_ctx, kv_dim;
    zl_type type;     /* ZL_TYPE_F16 or ZL_TYPE_F32 */
    size_t row_bytes; /* bytes of one K (or V) row */
    uint8_t *k, *v;   /* [n_layers][n_ctx][row] */
    int n_used;       /* slots 0..n_used-1 hold valid positions */
} zl_kv;

int zl_kv_new(zl_kv **out, int n_layers, int n_ctx, int kv_dim, zl_type type, zl_err *err);
void zl_kv_free(zl_kv *kv);
/* Drop slots >= n (n <= n_used); their memory is zeroed. */
void zl_kv_truncate(zl_kv *kv, int n);
static inline void *zl_kv_k(const zl_kv *kv, int layer, int slot) {
    return kv->k + ((size_t)layer * kv->n_ctx + slot) * kv->row_bytes;
}
static inline void *zl_kv_v(const zl_kv *kv, int layer, int slot) {
    return kv->v + ((size_t)layer * kv->n_ctx + slot) * kv->row_bytes;
}
size_t zl_kv_bytes(const zl_kv *kv);

#endif
