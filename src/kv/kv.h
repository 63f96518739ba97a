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
#include "../tensor/rope.h"
#include "../tensor/types.h"

/* KV slicing policies (kv_policy.c). */
typedef enum { ZL_KVP_FULL = 0, ZL_KVP_WINDOW = 1, ZL_KVP_ANCHOR = 2 } zl_kvp_kind;
typedef struct zl_kv_policy {
    zl_kvp_kind kind;
    int budget; /* most tokens kept in the cache; 0 = the whole context */
    int n_sink; /* attention sinks kept at the start (default 4) */
    int window; /* anchor: recent "drift" tokens always kept (default budget / 4) */
} zl_kv_policy;

typedef struct zl_kv {
    int n_layers, n_ctx, kv_dim;
    zl_type type;     /* ZL_TYPE_F16 or ZL_TYPE_F32 */
    size_t row_bytes; /* bytes of one K (or V) row */
    uint8_t *k, *v;   /* [n_layers][n_ctx][row] */
    int n_used;       /* slots 0..n_used-1 hold valid positions */
    /* slicing state (all NULL/0 under the full policy) */
    zl_kv_policy policy;
    zl_rope rope;
    int head_dim;
    float *score_part; /* [score_nth][n_ctx] attention received, per forward thread */
    int score_nth;
    uint8_t *anchor;   /* [n_ctx] 1 = never evicted */
    int64_t *birth;    /* [n_ctx] value of `queries` when the slot was written */
    int64_t queries;   /* tokens processed so far (each one attends to the cache once) */
    uint64_t evicted;  /* tokens evicted so far */
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

/* Install a slicing policy.  budget 0 or > n_ctx is clamped to n_ctx;
 * a budget too small to hold the sinks plus a minimal window is an error.
 * nth: the most forward threads that will accumulate attention scores. */
int zl_kv_set_policy(zl_kv *kv, const zl_kv_policy *p, const zl_rope *rope, int head_dim, int nth, zl_err *err);
/* Effective budget in tokens (n_ctx under the full policy). */
int zl_kv_budget(const zl_kv *kv);
/* Make room for n_new tokens by evicting under the policy (no-op when they
 * fit).  Kept entries are compacted to the front and their keys re-rotated
 * to their new slots, so slot index == RoPE position always holds. */
int zl_kv_make_room(zl_kv *kv, int n_new, zl_err *err);
/* Record that slots [slot, slot+n) were just written by the n newest tokens. */
void zl_kv_note_written(zl_kv *kv, int slot, int n);
/* Mark slots [slot, slot+n) as anchors (kept under the anchor policy). */
void zl_kv_mark_anchor(zl_kv *kv, int slot, int n);
int zl_kv_n_anchor(const zl_kv *kv);
const char *zl_kvp_name(zl_kvp_kind k);
int zl_kvp_from_name(const char *name, zl_kvp_kind *out);

#endif
