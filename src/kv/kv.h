/* kv.h — the KV cache of one sequence.
 *
 * The single owner of cached attention state: per layer, K and V rows of
 * kv_dim = n_kv_heads * head_dim elements, one row per cache slot, stored as
 * F16 (default) or F32.  Without slicing, slot i of every layer holds the
 * token at position i; truncation (ring rollback, session edits) just lowers
 * n_used.  Memory is zeroed on clear so a reused cache never exposes an
 * earlier sequence's state.
 *
 * Per-layer slices (the anchor policy, when the engine sets `layered`): each
 * layer keeps its own set of tokens under its own budget.  Layer l holds the
 * token at position p in slot p - layer_off[l] (zl_kv_slot); its newest token
 * is always at position n_used - 1, so every layer's slots are right-aligned
 * on the same positions and a layer holds n_used - layer_off[l] entries. */
#ifndef ZL_KV_H
#define ZL_KV_H

#include <stddef.h>
#include <stdint.h>

#include "../base/assert.h"
#include "../base/err.h"
#include "../tensor/rope.h"
#include "../tensor/types.h"
#include "zerolayer_kv_policy.h"

/* KV slicing policies (kv_policy.c); the enum and the names' functions are
 * zerolayer_kv_policy.h's, the table behind them is kv_policy.c's. */
typedef struct zl_kv_policy {
    zl_kv_policy_kind kind;
    int budget; /* entries kept per layer, on average over the layers; 0 = the whole context */
    int n_sink; /* attention sinks kept at the start (default 4) */
    int window; /* anchor: recent "drift" entries kept per layer before heavy hitters; 0 (default): the
                   whole budget is recent, no heavy hitters (see kv_policy.c) */
} zl_kv_policy;

typedef struct zl_kv {
    int n_layers, n_ctx, kv_dim;
    zl_type type;     /* ZL_TYPE_F16 or ZL_TYPE_F32 */
    size_t row_bytes; /* bytes of one K (or V) row */
    uint8_t *k, *v;   /* [n_layers][n_ctx][row] */
    size_t mapped;    /* bytes of each of k and v when they are mappings (kv.c), else 0 */
    int huge;         /* the mappings are advised for huge pages (from half the context in use, kv.c) */
    int n_used;       /* positions 0..n_used-1 are in use; the next token goes to position n_used */
    int n_dirty;      /* positions up to here may hold rows past n_used: a draft pass's scratch
                         (zl_fwd_part.keep_used, full policy only); truncation zeroes them too */
    /* slicing state (all NULL/0 under the full policy) */
    zl_kv_policy policy;
    zl_rope rope;
    int head_dim;
    int layered;       /* set by the engine: its forward pass honours zl_kv_slot and zl_kv_scores */
    int layer_max;     /* set by the engine: most entries one layer may hold, the model's training
                          context (0: n_ctx; zl_llm_opts.kv_layer_max, `--kv-layer-max`); bounds
                          the anchor policy's per-layer budgets */
    int slices;        /* 1: all layers hold the same tokens; n_layers: one slot set per layer */
    int *layer_off;    /* [n_layers] when slices > 1: layer l holds position p in slot p - layer_off[l] */
    int *layer_budget; /* [n_layers] when slices > 1: entries kept in each layer */
    float *score_part; /* [score_nth][slices][n_ctx] attention received per slot, per forward thread */
    int score_nth;
    uint8_t *anchor;   /* [slices][n_ctx] 1 = never evicted */
    int64_t *birth;    /* [slices][n_ctx] value of `queries` when the slot was written */
    int *shift;        /* [slices][n_ctx] the key is rotated for position slot + layer offset + shift */
    int64_t queries;   /* tokens processed so far (each one attends to the cache once) */
    uint64_t evicted;  /* tokens evicted so far (entries evicted / n_layers) */
    uint64_t evicted_entries;
} zl_kv;

int zl_kv_new(zl_kv **out, int n_layers, int n_ctx, int kv_dim, zl_type type, zl_err *err);
void zl_kv_free(zl_kv *kv);
/* KV caches allocated by this process so far (every zl_kv_new that succeeded). */
unsigned long long zl_kv_allocs(void);
/* Drop positions >= n from every layer; their memory is zeroed, and so are
 * draft scratch rows past n_used (n_dirty). */
void zl_kv_truncate(zl_kv *kv, int n);
static inline void *zl_kv_k(const zl_kv *kv, int layer, int slot) {
    ZL_ASSERT(layer >= 0 && layer < kv->n_layers && slot >= 0 && slot < kv->n_ctx);
    return kv->k + ((size_t)layer * kv->n_ctx + slot) * kv->row_bytes;
}
static inline void *zl_kv_v(const zl_kv *kv, int layer, int slot) {
    ZL_ASSERT(layer >= 0 && layer < kv->n_layers && slot >= 0 && slot < kv->n_ctx);
    return kv->v + ((size_t)layer * kv->n_ctx + slot) * kv->row_bytes;
}
/* The slot of `layer` that holds (or receives) the token at position pos.
 * The forward pass writes a token's K/V there (its keys rotated for pos) and
 * a query at position pos attends over slots [0, zl_kv_slot(kv, layer, pos)]
 * of that layer. */
static inline int zl_kv_slot(const zl_kv *kv, int layer, int pos) {
    return kv->layer_off ? pos - kv->layer_off[layer] : pos;
}
/* The bookkeeping invariants (K1/K2/K4 of docs/DESIGN.md) that hold between
 * calls: n_used and n_dirty within the context, every layer's entries within
 * its slots.  Checked by ZL_ASSERT after each KV-layer change; a no-op in
 * Release. */
static inline void zl_kv_assert_ok(const zl_kv *kv) {
#if ZL_ASSERTS
    ZL_ASSERT(kv->n_used >= 0 && kv->n_used <= kv->n_ctx);
    ZL_ASSERT(kv->n_dirty >= 0 && kv->n_dirty <= kv->n_ctx);
    for (int l = 0; kv->layer_off && l < kv->n_layers; l++) {
        int held = kv->n_used - kv->layer_off[l];
        ZL_ASSERT(kv->layer_off[l] >= 0 && held >= 0 && held <= kv->n_ctx);
    }
#else
    (void)kv;
#endif
}
/* What the layers above read of a cache: its shape and bookkeeping, through
 * these accessors only (the fields are this layer's to write). */
static inline int zl_kv_n_used(const zl_kv *kv) { return kv->n_used; }
static inline int zl_kv_n_dirty(const zl_kv *kv) { return kv->n_dirty; }
static inline int zl_kv_n_ctx(const zl_kv *kv) { return kv->n_ctx; }
static inline int zl_kv_n_layers(const zl_kv *kv) { return kv->n_layers; }
static inline int zl_kv_dim(const zl_kv *kv) { return kv->kv_dim; }
static inline zl_type zl_kv_elem_type(const zl_kv *kv) { return kv->type; }
static inline size_t zl_kv_row_bytes(const zl_kv *kv) { return kv->row_bytes; }
static inline zl_kv_policy_kind zl_kv_kind(const zl_kv *kv) { return kv->policy.kind; }
/* A bounded policy (window, anchor): evicts instead of filling up. */
static inline int zl_kv_bounded(const zl_kv *kv) { return kv->policy.kind != ZL_KV_POLICY_FULL; }
/* Per-layer slices are in place (layer l holds position p in slot p - layer_off[l]). */
static inline int zl_kv_sliced(const zl_kv *kv) { return kv->layer_off != NULL; }
static inline uint64_t zl_kv_evicted(const zl_kv *kv) { return kv->evicted; }
/* Set once by the engine when its forward pass honours zl_kv_slot and
 * zl_kv_scores; layer_max bounds one layer's entries (0: n_ctx). */
static inline void zl_kv_set_layered(zl_kv *kv, int layer_max) {
    kv->layered = 1;
    kv->layer_max = layer_max;
}
/* Entries layer `layer` holds. */
static inline int zl_kv_layer_used(const zl_kv *kv, int layer) { return zl_kv_slot(kv, layer, kv->n_used); }
/* Where forward thread ith adds the softmax probabilities of `layer`'s
 * attention (summed over heads and queries, one float per slot of that
 * layer), or NULL when no policy reads them. */
static inline float *zl_kv_scores(const zl_kv *kv, int ith, int layer) {
    if (!kv->score_part || ith >= kv->score_nth) return NULL;
    return kv->score_part + ((size_t)ith * kv->slices + (kv->slices > 1 ? layer : 0)) * kv->n_ctx;
}
/* The forward pass wrote position pos: n_used grows to cover it, or with
 * scratch (a draft pass past the sequence's end, zl_fwd_part.keep_used) only
 * n_dirty does.  pos must lie inside the context. */
void zl_kv_cover(zl_kv *kv, int pos, int scratch);
size_t zl_kv_bytes(const zl_kv *kv);
/* Bytes one cached token takes over every layer's K and V (unsliced). */
size_t zl_kv_token_bytes(const zl_kv *kv);
/* The memory of slots [0, rows) of every layer's K and V, cut into pieces of
 * at most `piece` bytes (layer-major, K before V): how many pieces, and
 * piece p's address and length.  For faulting a fresh cache's pages in
 * ahead of its first use; rows must be within the context. */
int zl_kv_pieces(const zl_kv *kv, int rows, size_t piece);
size_t zl_kv_piece(const zl_kv *kv, int rows, size_t piece, int p, void **at);
/* Entries cached per layer, on average (rounded up): n_used without slices. */
int zl_kv_cached(const zl_kv *kv);
/* Memory the cache holds now (K and V): a heap cache its whole allocation
 * (calloc'd, then written), a mapped one the 4 KiB pages its rows touch;
 * counted whole once the mapping is advised for huge pages (half the
 * context in use), which may fault 2 MiB at a time. */
size_t zl_kv_bytes_held(const zl_kv *kv);

/* Install a slicing policy.  budget 0 or > n_ctx is clamped to n_ctx;
 * a budget too small to hold the sinks plus a minimal window is an error.
 * nth: the most forward threads that will accumulate attention scores. */
int zl_kv_set_policy(zl_kv *kv, const zl_kv_policy *p, const zl_rope *rope, int head_dim, int nth, zl_err *err);
/* Effective budget in tokens (n_ctx under the full policy): entries per
 * layer, on average over the layers. */
int zl_kv_budget(const zl_kv *kv);
/* Make room for n_new tokens by evicting under the policy (no-op when they
 * fit).  Kept entries are compacted to the front of their layer and their
 * keys re-rotated to their cache-relative position (slot + layer offset,
 * never more than the budget back; see kv_policy.c). */
int zl_kv_make_room(zl_kv *kv, int n_new, zl_err *err);
/* Record that positions [pos, pos+n) were just written by the n newest tokens. */
void zl_kv_note_written(zl_kv *kv, int pos, int n);
/* Mark positions [pos, pos+n) as anchors (kept under the anchor policy). */
void zl_kv_mark_anchor(zl_kv *kv, int pos, int n);
int zl_kv_n_anchor(const zl_kv *kv);

#endif
