/* prefetch.h — weight streaming: read-ahead of the next layers' weights.
 *
 * Decoding reads every layer's weights once per token in order.  When the
 * file is not (or no longer) in the page cache, a background thread asks the
 * kernel for layers l+1..l+n while layer l computes (madvise WILLNEED), so
 * page-ins overlap compute instead of stalling it.  zl_prefetch_layer never
 * blocks: a request that arrives while the thread is busy replaces the
 * pending one. */
#ifndef ZL_PREFETCH_H
#define ZL_PREFETCH_H

#include <stddef.h>

typedef struct zl_model zl_model;
typedef struct zl_prefetch zl_prefetch;

/* n_ahead <= 0 returns NULL (no prefetching). */
zl_prefetch *zl_prefetch_new(const zl_model *m, int n_ahead);
void zl_prefetch_free(zl_prefetch *p);
/* Layer `layer` is about to be computed: fetch the ones after it (wrapping
 * to the first layers and the output matrix at the end of a token). */
void zl_prefetch_layer(zl_prefetch *p, int layer);

/* Read every page of the model's tensor data once, so later reads hit the
 * page cache.  progress(done, total, ctx) is called every ~1% (may be NULL). */
void zl_model_preheat(const zl_model *m, void (*progress)(size_t done, size_t total, void *ctx), void *ctx);
/* Fraction of the tensor data currently resident in memory (mincore). */
double zl_model_resident(const zl_model *m);

#endif
