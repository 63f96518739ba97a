/* seq_copy.c — moving cached state between sequences: copy a prefix of one
 * sequence's KV rows (and the tokens that produced them) into another, and
 * re-arm a sequence's sampler for a new request.  Sessions and the prefix
 * cache (session.c, prefix_cache.c) are built on these two operations.
 *
 * Only full-policy caches are copied: under a slicing policy slot i no
 * longer holds position i, so a prefix of the tokens is not a prefix of the
 * cache.  Never touches HTTP, JSON or tenants. */
#include <stdlib.h>
#include <string.h>

#include "../kv/kv.h"
#include "engine_internal.h"
#include "zerolayer.h"

int zl_seq_copy_prefix(zl_seq *dst, const zl_seq *src, int n, zl_err *err) {
    if (!dst || !src || dst == src) return zl_errf(err, ZL_EINVAL, "copy needs two distinct sequences");
    if (dst->llm->model != src->llm->model) return zl_errf(err, ZL_EINVAL, "sequences belong to different models");
    const zl_kv *sk = src->kv;
    zl_kv *dk = dst->kv;
    if (zl_kv_bounded(sk) || zl_kv_bounded(dk) || zl_kv_n_used(sk) != src->n_tokens)
        return zl_errf(err, ZL_EUNSUP, "only sequences under the full KV policy can be copied");
    if (zl_kv_elem_type(sk) != zl_kv_elem_type(dk) || zl_kv_row_bytes(sk) != zl_kv_row_bytes(dk) ||
        zl_kv_n_layers(sk) != zl_kv_n_layers(dk))
        return zl_errf(err, ZL_EINVAL, "KV caches differ in type or shape");
    if (n < 0 || n > src->n_tokens) return zl_errf(err, ZL_ERANGE, "prefix of %d tokens: the source holds %d", n,
                                                    src->n_tokens);
    if (n > zl_kv_n_ctx(dk)) return zl_errf(err, ZL_ERANGE, "prefix of %d tokens does not fit a %d-token context", n,
                                            zl_kv_n_ctx(dk));
    zl_seq_truncate(dst, 0);
    if (!n) return 0;
    for (int l = 0; l < zl_kv_n_layers(sk); l++) {
        memcpy(zl_kv_k(dk, l, 0), zl_kv_k(sk, l, 0), (size_t)n * zl_kv_row_bytes(sk));
        memcpy(zl_kv_v(dk, l, 0), zl_kv_v(sk, l, 0), (size_t)n * zl_kv_row_bytes(sk));
    }
    zl_kv_cover(dk, n - 1, 0); /* the copied rows are positions 0..n-1 */
    if (zl_seq_track(dst, src->tokens, n)) {
        zl_kv_truncate(dk, 0);
        return zl_errf(err, ZL_ENOMEM, "out of memory");
    }
    for (int i = 0; i < n; i++) zl_sampler_accept(dst->sampler, src->tokens[i]);
    return 0;
}

int zl_seq_set_sampling(zl_seq *s, const zl_sampling *p, zl_err *err) {
    zl_sampler_params sp = zl_sampling_params(p);
    zl_sampler *ns = zl_sampler_new(&sp, s->llm->model->hp.n_vocab);
    if (!ns) return zl_errf(err, ZL_ENOMEM, "out of memory");
    /* replay the history: penalties see the same tokens as a fresh sequence fed the same prompt */
    for (int i = 0; i < s->n_tokens; i++) zl_sampler_accept(ns, s->tokens[i]);
    zl_sampler_free(s->sampler);
    s->sampler = ns;
    zl_seq_grammar_rebind(s);
    return 0;
}

size_t zl_seq_kv_bytes_used(const zl_seq *s) {
    size_t entries = 0;
    for (int l = 0; l < zl_kv_n_layers(s->kv); l++) entries += (size_t)zl_kv_layer_used(s->kv, l);
    return 2 * zl_kv_row_bytes(s->kv) * entries;
}
