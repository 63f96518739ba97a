/* embed.h — a large-shaped llama model that computes what a small one does
 * (`zerolayer synth --embed-from`): the small model's weights placed inside a
 * bigger shell whose every other weight is random or zero, so that the big
 * file's logits equal the small model's while a decode step reads the big
 * file's bytes.  The construction and its requirements are derived in
 * embed.c. */
#ifndef ZL_EMBED_H
#define ZL_EMBED_H

#include <stdint.h>

#include "../base/err.h"
#include "quantize.h"

typedef struct zl_embed_params {
    const char *small_path; /* the llama model to embed (any supported tensor types) */
    const char *out_path;
    int dim, ffn, n_layers, n_heads, n_kv_heads; /* the big shape */
    int n_ctx;              /* llama.context_length; <= 0: the small model's */
    uint64_t seed;          /* the random parts */
    float perturb;          /* >= 0; > 0 makes the extra layers write into the residual (a different model) */
    zl_qtarget target;
    zl_quantize_opts opts;
} zl_embed_params;

/* Write the embedding of p->small_path in p's shape to p->out_path.  Errors
 * (ZL_EINVAL / ZL_EUNSUP / the loader's) name the violated constraint; no
 * output file is left on failure. */
int zl_embed_file(const zl_embed_params *p, zl_qstats *st, zl_err *err);

#endif
