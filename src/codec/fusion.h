/* fusion.h — how decoded state is fused back into the model (state_fusion_mode).
 *
 *   cross_attention (default)  the decoded per-token K/V rows are the cache,
 *                              attended as usual: one row per token.
 *   additive                   a sequence-length reduction: past a window of
 *                              the newest `window` chunks, every `merge`
 *                              adjacent rows (pre-RoPE keys and values) are
 *                              replaced by their weighted mean, the newest
 *                              weighing 1 and each older one `decay` times
 *                              the next (the seed's voice setting: window 3,
 *                              decay 0.7; its document setting: decay 0.92).
 *                              The merged rows are coded again when a codec
 *                              is given, so what is stored is a code per
 *                              merged row; the cache holds about
 *                              1/merge of the rows.  Positions become
 *                              cache-relative (zl_seq_kv_shorten): a merged
 *                              row is one position, as under the slicing
 *                              policies, and a merged key is attended once,
 *                              not `merge` times (no log-count bias: the
 *                              attention kernels are left as they are).
 *
 * The attention sinks (the first n_sink rows) are never merged.  Works on
 * a sequence only through zerolayer.h's state access. */
#ifndef ZL_FUSION_H
#define ZL_FUSION_H

#include "codec.h"

typedef enum { ZL_FUSION_CROSS_ATTENTION = 0, ZL_FUSION_ADDITIVE = 1 } zl_fusion_mode;

typedef struct zl_fusion {
    zl_fusion_mode mode;
    int merge;   /* rows merged into one (>= 2) */
    int window;  /* newest chunks of `merge` rows kept unmerged */
    float decay; /* (0, 1]: weight of a row relative to the next newer one in its chunk */
    int n_sink;  /* leading rows never merged */
    int merged;  /* state: rows [n_sink, n_sink + merged) are merged chunks */
} zl_fusion;

/* The defaults of a mode (additive: merge 4, window 3, decay 0.7, 4 sinks). */
zl_fusion zl_fusion_defaults(zl_fusion_mode mode);
/* "cross_attention" / "additive"; from_name: 0, or -1 for an unknown name. */
const char *zl_fusion_name(zl_fusion_mode mode);
int zl_fusion_from_name(const char *name, zl_fusion_mode *mode);
/* Check merge, window, decay and n_sink (a ZL_EINVAL naming the field). */
int zl_fusion_check(const zl_fusion *f, zl_err *err);

/* Additive: merge every whole chunk of unmerged rows older than the window
 * (a no-op for cross_attention or while they fit).  With c, the merged rows
 * are encoded and decoded in place (the code is what would be stored).
 * *merged_rows (may be NULL) gets the number of rows it created. */
int zl_fusion_apply(zl_fusion *f, zl_seq *s, const zl_codec *c, int *merged_rows, zl_err *err);

#endif
