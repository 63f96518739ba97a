/* seq_state.c — a sequence's cached state as plain rows, for the state codec
 * and snapshots (src/codec, src/state): read and overwrite K/V rows (keys
 * optionally rotated back to pre-RoPE form), adopt a token list whose rows the
 * caller fills, and the bytes that identify a model (its fingerprint's input).
 * Works under the full KV policy only; never runs a forward pass, never
 * hashes or encrypts (the callers do, in the libraries that link OpenSSL). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/f16.h"
#include "../kv/kv.h"
#include "../tensor/kernels.h"
#include "engine_internal.h"
#include "zerolayer.h"

zl_kv_shape zl_llm_kv_shape(const zl_llm *llm) {
    const zl_hparams *hp = &llm->model->hp;
    zl_kv_shape sh = {hp->n_layers, hp->n_kv_heads, hp->head_dim};
    return sh;
}

zl_kv_shape zl_seq_kv_shape(const zl_seq *s) { return zl_llm_kv_shape(s->llm); }

static int check_rows(const zl_seq *s, int layer, zl_state_part part, int pos, int n, zl_err *err) {
    const zl_kv *kv = s->kv;
    if (zl_kv_bounded(kv))
        return zl_errf(err, ZL_EUNSUP, "cached state can be read or written only under the full KV policy");
    if (layer < 0 || layer >= zl_kv_n_layers(kv)) return zl_errf(err, ZL_ERANGE, "layer %d outside [0, %d)", layer, zl_kv_n_layers(kv));
    if (part != ZL_STATE_K && part != ZL_STATE_K_PRE_ROPE && part != ZL_STATE_V)
        return zl_errf(err, ZL_EINVAL, "unknown state part %d", (int)part);
    if (pos < 0 || n < 0 || pos + n > zl_kv_n_used(kv))
        return zl_errf(err, ZL_ERANGE, "positions [%d, %d) are not all cached (%d are)", pos, pos + n, zl_kv_n_used(kv));
    return 0;
}

/* Rotate every head of row (position pos) by +pos (dir 1) or -pos (dir -1). */
static void rotate_row(const zl_seq *s, int layer, int pos, int dir, float *row, float *cs, float *sn) {
    const zl_model *m = s->llm->model;
    zl_rope r = zl_model_rope_layer(m, layer);
    zl_rope_table(&r, dir * pos, cs, sn);
    for (int h = 0; h < m->hp.n_kv_heads; h++) zl_rope_apply(&r, row + (size_t)h * m->hp.head_dim, cs, sn);
}

int zl_seq_kv_read(const zl_seq *s, int layer, zl_state_part part, int pos, int n, float *out, zl_err *err) {
    int rc = check_rows(s, layer, part, pos, n, err);
    if (rc) return rc;
    const zl_kv *kv = s->kv;
    int d = zl_kv_dim(kv), half = s->llm->model->hp.rope_dim / 2;
    float *cs = malloc((size_t)(2 * half + 2) * sizeof *cs);
    if (!cs) return zl_errf(err, ZL_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        const void *src = part == ZL_STATE_V ? zl_kv_v(kv, layer, pos + i) : zl_kv_k(kv, layer, pos + i);
        float *row = out + (size_t)i * d;
        zl_dequant_row(zl_kv_elem_type(kv), src, row, d);
        if (part == ZL_STATE_K_PRE_ROPE) rotate_row(s, layer, pos + i, -1, row, cs, cs + half + 1);
    }
    free(cs);
    return 0;
}

int zl_seq_kv_write(zl_seq *s, int layer, zl_state_part part, int pos, int n, const float *in, zl_err *err) {
    int rc = check_rows(s, layer, part, pos, n, err);
    if (rc) return rc;
    zl_kv *kv = s->kv;
    int d = zl_kv_dim(kv), half = s->llm->model->hp.rope_dim / 2;
    float *tmp = malloc((size_t)(d + 2 * half + 2) * sizeof *tmp);
    if (!tmp) return zl_errf(err, ZL_ENOMEM, "out of memory");
    float *cs = tmp + d, *sn = cs + half + 1;
    for (int i = 0; i < n; i++) {
        memcpy(tmp, in + (size_t)i * d, (size_t)d * sizeof *tmp);
        if (part == ZL_STATE_K_PRE_ROPE) rotate_row(s, layer, pos + i, 1, tmp, cs, sn);
        void *dst = part == ZL_STATE_V ? zl_kv_v(kv, layer, pos + i) : zl_kv_k(kv, layer, pos + i);
        if (zl_kv_elem_type(kv) == ZL_TYPE_F32) {
            memcpy(dst, tmp, (size_t)d * sizeof *tmp);
        } else if (zl_kv_elem_type(kv) == ZL_TYPE_F16) {
            zl_f16 *h = dst;
            for (int j = 0; j < d; j++) h[j] = zl_f32_to_f16(tmp[j]);
        } else {
            zl_quantize_row(zl_kv_elem_type(kv), tmp, dst, d);
        }
    }
    free(tmp);
    s->has_logits = 0;
    return 0;
}

size_t zl_seq_kv_row_bytes(const zl_seq *s) { return zl_kv_row_bytes(s->kv); }

int zl_seq_kv_read_raw(const zl_seq *s, int layer, int is_v, int pos, int n, void *out, zl_err *err) {
    int rc = check_rows(s, layer, is_v ? ZL_STATE_V : ZL_STATE_K, pos, n, err);
    if (rc || !n) return rc;
    const zl_kv *kv = s->kv;
    memcpy(out, is_v ? zl_kv_v(kv, layer, pos) : zl_kv_k(kv, layer, pos), (size_t)n * zl_kv_row_bytes(kv));
    return 0;
}

int zl_seq_kv_write_raw(zl_seq *s, int layer, int is_v, int pos, int n, const void *in, zl_err *err) {
    int rc = check_rows(s, layer, is_v ? ZL_STATE_V : ZL_STATE_K, pos, n, err);
    if (rc || !n) return rc;
    zl_kv *kv = s->kv;
    memcpy(is_v ? zl_kv_v(kv, layer, pos) : zl_kv_k(kv, layer, pos), in, (size_t)n * zl_kv_row_bytes(kv));
    s->has_logits = 0;
    return 0;
}

int zl_seq_adopt(zl_seq *s, const int32_t *ids, int n, zl_err *err) {
    zl_kv *kv = s->kv;
    if (zl_kv_bounded(kv))
        return zl_errf(err, ZL_EUNSUP, "state can be adopted only under the full KV policy");
    if (n < 0 || n > zl_kv_n_ctx(kv)) return zl_errf(err, ZL_ERANGE, "%d tokens do not fit a %d-token context", n, zl_kv_n_ctx(kv));
    int nv = s->llm->model->hp.n_vocab;
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= nv) return zl_errf(err, ZL_EINVAL, "token id %d out of range [0, %d)", ids[i], nv);
    zl_seq_truncate(s, 0);
    if (n > 0 && zl_seq_track(s, ids, n)) return zl_errf(err, ZL_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) zl_sampler_accept(s->sampler, ids[i]);
    if (n > 0) zl_kv_cover(kv, n - 1, 0); /* as zl_seq_copy_prefix: rows are zero (K3) until the caller writes them */
    zl_kv_note_written(kv, 0, n);
    s->has_logits = 0;
    s->pending = -1;
    return 0;
}

int zl_seq_kv_shorten(zl_seq *s, int n, zl_err *err) {
    zl_kv *kv = s->kv;
    if (zl_kv_bounded(kv)) return zl_errf(err, ZL_EUNSUP, "a cache can be shortened only under the full KV policy");
    if (n < 0 || n > zl_kv_n_used(kv))
        return zl_errf(err, ZL_ERANGE, "cannot keep %d rows of %d cached", n, zl_kv_n_used(kv));
    zl_kv_truncate(kv, n); /* tokens stay: only the rows go (zeroed, K3) */
    s->has_logits = 0;
    s->pending = -1;
    return 0;
}

void zl_llm_identity(const zl_llm *llm, void (*fn)(void *ctx, const void *p, size_t n), void *ctx) {
    const zl_model *m = llm->model;
    const zl_hparams *hp = &m->hp;
    char buf[1024];
    int k = snprintf(buf, sizeof buf,
                     "zerolayer-model-identity 1\narch=%s vocab=%d dim=%d layers=%d heads=%d kv_heads=%d head_dim=%d "
                     "ffn=%d rope_dim=%d rope_base=%a freq_scale=%a eps=%a rope_type=%d tied=%d qkv_bias=%d "
                     "embd_scale=%a attn_scale=%a act=%d post_norms=%d qk_norm=%d swa=%d rope_base_swa=%a softcap=%a\n",
                     hp->arch, hp->n_vocab, hp->dim, hp->n_layers, hp->n_heads, hp->n_kv_heads, hp->head_dim,
                     hp->ffn_dim, hp->rope_dim, (double)hp->rope_base, (double)hp->rope_freq_scale,
                     (double)hp->norm_eps, (int)hp->rope_type, hp->tied_output, hp->has_qkv_bias,
                     (double)hp->embd_scale, (double)hp->attn_scale, (int)hp->ffn_act, hp->post_norms, hp->qk_norm,
                     hp->n_swa, (double)hp->rope_base_swa, (double)hp->final_softcap);
    fn(ctx, buf, (size_t)k);
    for (int l = 0; l < hp->n_layers; l++) fn(ctx, m->layers[l].swa ? "s" : "g", 1);
    const zl_gguf *g = m->gguf;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const zl_gguf_tensor *t = &g->tensors[i];
        k = snprintf(buf, sizeof buf, "\n%.*s %u %lld %lld %lld %lld", (int)t->name.len, t->name.ptr, t->type,
                     (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3]);
        fn(ctx, buf, (size_t)(k < (int)sizeof buf ? k : (int)sizeof buf - 1));
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) fn(ctx, g->tensors[i].data, g->tensors[i].nbytes);
}
