/* llm.c — the public handles of include/zerolayer.h over the internal
 * modules: zl_llm = model + vocabulary + thread pool, zl_seq = KV cache +
 * forward scratch + sampler for one sequence.  Knows nothing of HTTP/JSON. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../base/fault.h"
#include "../base/pool.h"
#include "../decode/sampler.h"
#include "../grammar/grammar.h"
#include "../model/model.h"
#include "../model/prefetch.h"
#include "../tokenizer/vocab.h"
#include "batch.h"
#include "engine_internal.h"
#include "zerolayer.h"

int zl_llm_open(zl_llm **out, const char *path, const zl_llm_opts *opts, zl_err *err) {
    *out = NULL;
    zl_llm_opts o = {0};
    if (opts) o = *opts;
    zl_llm *llm = calloc(1, sizeof *llm);
    if (!llm) return zl_errf(err, ZL_ENOMEM, "out of memory");
    zl_model_opts mo = {o.no_mmap, o.populate, o.isa};
    int rc = zl_model_load(&llm->model, path, &mo, err);
    if (rc && rc != ZL_EIO) { /* a vocabulary-only file deserves a plainer word than its missing tensors */
        zl_gguf *g;
        if (!zl_gguf_open(&g, path, NULL, NULL)) {
            if (g->n_tensors == 0)
                rc = zl_errf(err, ZL_EUNSUP, "%s has no weights (a vocabulary-only file: zerolayer tokenize can read it)",
                             path);
            zl_gguf_close(g);
        }
    }
    if (!rc) {
        rc = zl_vocab_load(&llm->vocab, llm->model->gguf, err);
        if (rc) zl_err_prefix(err, "%s: vocabulary", path);
    }
    if (!rc && zl_vocab_n_tokens(llm->vocab) < llm->model->hp.n_vocab)
        rc = zl_errf(err, ZL_EFORMAT, "%s: vocabulary has %d tokens but token_embd has %d rows", path,
                     zl_vocab_n_tokens(llm->vocab), llm->model->hp.n_vocab);
    if (!rc && !(llm->pool = zl_pool_new(o.n_threads))) rc = zl_errf(err, ZL_ENOMEM, "cannot start threads");
    if (!rc && o.kv_layer_max < 0) rc = zl_errf(err, ZL_EINVAL, "KV layer cap must be >= 0, not %d", o.kv_layer_max);
    llm->kv_layer_max = o.kv_layer_max;
    if (rc) { zl_llm_close(llm); return rc; }
    llm->model->prefetch = zl_prefetch_new(llm->model, o.prefetch_layers == 0 ? 2 : o.prefetch_layers);
    const zl_gguf *g = llm->model->gguf;
    for (uint64_t i = 0; i < g->n_tensors; i++) llm->weight_bytes += g->tensors[i].nbytes;
    if (o.mlock && mlock(g->base, g->size) != 0)
        fprintf(stderr, "zerolayer: warning: mlock of %zu bytes failed: %s\n", g->size, strerror(errno));
    const zl_hparams *hp = &llm->model->hp;
    snprintf(llm->desc, sizeof llm->desc, "%s%s%s%s: %d layers, dim %d, ffn %d, heads %d/%d, vocab %d, %.1f MiB",
             hp->arch, *llm->model->name ? " \"" : "", llm->model->name, *llm->model->name ? "\"" : "", hp->n_layers,
             hp->dim, hp->ffn_dim, hp->n_heads, hp->n_kv_heads, hp->n_vocab, llm->weight_bytes / 1048576.0);
    *out = llm;
    return 0;
}

void zl_llm_close(zl_llm *llm) {
    if (!llm) return;
    if (llm->borrowed) {
        zl_fwd_free(llm->batch_fwd);
        zl_batch_buf_free(&llm->batch_buf);
        zl_model_free(llm->model); /* frees only the view */
        zl_gvocab_free(llm->gvocab);
        free(llm);
        return;
    }
    zl_pool_free(llm->pool);
    zl_fwd_free(llm->batch_fwd);
    zl_gvocab_free(llm->gvocab);
    zl_batch_buf_free(&llm->batch_buf);
    zl_vocab_free(llm->vocab);
    zl_model_free(llm->model);
    free(llm);
}

void zl_llm_preheat(zl_llm *llm, void (*progress)(size_t, size_t, void *), void *ctx) {
    zl_model_preheat(llm->model, progress, ctx);
}

double zl_llm_resident(const zl_llm *llm) { return zl_model_resident(llm->model); }

int zl_llm_n_vocab(const zl_llm *llm) { return llm->model->hp.n_vocab; }
int zl_llm_n_ctx_train(const zl_llm *llm) { return llm->model->hp.n_ctx_train; }
int zl_llm_n_threads(const zl_llm *llm) { return zl_pool_size(llm->pool); }
int32_t zl_llm_bos(const zl_llm *llm) { return zl_vocab_bos(llm->vocab); }
int32_t zl_llm_eos(const zl_llm *llm) { return zl_vocab_eos(llm->vocab); }
int zl_llm_is_eog(const zl_llm *llm, int32_t t) { return zl_token_is_eog(llm->vocab, t); }
const char *zl_llm_desc(const zl_llm *llm) { return llm->desc; }
uint64_t zl_llm_weight_bytes(const zl_llm *llm) { return llm->weight_bytes; }

int zl_llm_tokenize(const zl_llm *llm, const char *text, size_t len, int add_special, int parse_special,
                    int32_t **ids, size_t *n, zl_err *err) {
    return zl_tokenize(llm->vocab, text, len, add_special, parse_special, ids, n, err);
}

int zl_llm_detokenize(const zl_llm *llm, const int32_t *ids, size_t n, int render_special, char **out, size_t *len,
                      zl_err *err) {
    return zl_detokenize(llm->vocab, ids, n, render_special ? ZL_DETOK_SPECIAL : 0, out, len, err);
}

zl_sampling zl_sampling_defaults(void) {
    zl_sampler_params p = zl_sampler_defaults();
    zl_sampling s = {p.temp, p.top_k, p.top_p, p.min_p, p.repeat_penalty, p.repeat_last_n, p.presence_penalty,
                     p.frequency_penalty, p.seed, NULL, 0};
    return s;
}

_Static_assert(sizeof(zl_logit_bias) == sizeof(zl_sampler_bias) &&
                   offsetof(zl_logit_bias, token) == offsetof(zl_sampler_bias, token) &&
                   offsetof(zl_logit_bias, bias) == offsetof(zl_sampler_bias, bias),
               "zl_logit_bias and zl_sampler_bias share one layout");

zl_sampler_params zl_sampling_params(const zl_sampling *p) {
    zl_sampler_params sp = {p->temp, p->top_k, p->top_p, p->min_p, p->repeat_penalty, p->repeat_last_n,
                            p->presence_penalty, p->frequency_penalty, p->seed,
                            (const zl_sampler_bias *)p->logit_bias, p->logit_bias ? p->n_logit_bias : 0};
    return sp;
}

int zl_seq_new(zl_seq **out, zl_llm *llm, const zl_seq_opts *opts, zl_err *err) {
    *out = NULL;
    const zl_hparams *hp = &llm->model->hp;
    zl_seq_opts o = {0};
    if (opts) o = *opts;
    else o.sampling = zl_sampling_defaults();
    int n_ctx = o.n_ctx > 0 ? o.n_ctx : hp->n_ctx_train;
    zl_seq *s = calloc(1, sizeof *s);
    if (!s) return zl_errf(err, ZL_ENOMEM, "out of memory");
    s->llm = llm;
    s->pending = -1;
    int rc = zl_kv_new(&s->kv, hp->n_layers, n_ctx, hp->n_kv_heads * hp->head_dim,
                       o.kv_type == ZL_KV_F32 ? ZL_TYPE_F32 : o.kv_type == ZL_KV_Q8_0 ? ZL_TYPE_Q8_0 : ZL_TYPE_F16, err);
    zl_sampler_params sp = zl_sampling_params(&o.sampling);
    if (!rc) {
        zl_kv_set_layered(s->kv, llm->kv_layer_max); /* the forward pass honours zl_kv_slot / zl_kv_scores */
        s->fwd = zl_fwd_new();
        s->sampler = zl_sampler_new(&sp, hp->n_vocab);
        s->logits = calloc((size_t)hp->n_vocab, sizeof(float));
        s->scratch = calloc((size_t)hp->n_vocab, sizeof(float));
        if (!s->fwd || !s->sampler || !s->logits || !s->scratch || ZL_FAULT(ZL_FAULT_SEQ_NEW))
            rc = zl_errf(err, ZL_ENOMEM, "out of memory");
    }
    if (rc) { zl_seq_free(s); return rc; }
    *out = s;
    return 0;
}

void zl_seq_free(zl_seq *s) {
    if (!s) return;
    zl_seq_grammar_free(s);
    zl_drafter_free(s->drafter);
    free(s->vlogits);
    free(s->probs);
    free(s->tokens);
    free(s->chunk);
    zl_kv_free(s->kv);
    zl_fwd_free(s->fwd);
    zl_sampler_free(s->sampler);
    free(s->logits);
    free(s->scratch);
    free(s);
}

int zl_seq_n_past(const zl_seq *s) { return s->n_tokens; }
int zl_seq_n_cached(const zl_seq *s) { return zl_kv_cached(s->kv); }
int zl_seq_n_ctx(const zl_seq *s) { return zl_kv_n_ctx(s->kv); }
void zl_seq_set_exact(zl_seq *s, int exact) { zl_fwd_set_exact(s->fwd, exact); }

int zl_seq_room(const zl_seq *s) {
    if (zl_kv_bounded(s->kv)) return 1 << 30; /* a bounded policy evicts instead of filling up */
    return zl_kv_n_ctx(s->kv) - zl_kv_n_used(s->kv);
}

/* Logical truncation: drop the last (n_tokens - n) tokens.  They are always
 * the newest cache slots (the recent window is never evicted). */
void zl_seq_truncate(zl_seq *s, int n) {
    if (n < 0) n = 0;
    if (n < s->n_tokens) {
        int drop = s->n_tokens - n;
        zl_kv_truncate(s->kv, zl_kv_n_used(s->kv) - drop > 0 ? zl_kv_n_used(s->kv) - drop : 0);
        s->n_tokens = n;
        if (n == 0) zl_kv_truncate(s->kv, 0);
    }
    if (zl_sampler_n_hist(s->sampler) > n) zl_sampler_truncate(s->sampler, n);
    s->has_logits = 0;
    s->pending = -1;
}

int zl_seq_reserve_tokens(zl_seq *s, int n) {
    if (n <= s->cap_tokens) return 0;
    int cap = s->cap_tokens ? s->cap_tokens : 256;
    while (cap < n) cap *= 2;
    int32_t *t = realloc(s->tokens, (size_t)cap * sizeof *t);
    if (!t) return ZL_ENOMEM;
    s->tokens = t;
    s->cap_tokens = cap;
    return 0;
}

int zl_seq_track(zl_seq *s, const int32_t *ids, int n) {
    int have = s->n_tokens;
    if (zl_seq_reserve_tokens(s, have + n)) return ZL_ENOMEM;
    memcpy(s->tokens + have, ids, (size_t)n * sizeof *ids);
    s->n_tokens += n;
    return 0;
}

const int32_t *zl_seq_tokens(const zl_seq *s, int *n) {
    *n = s->n_tokens;
    return s->tokens;
}

zl_llm *zl_seq_llm(const zl_seq *s) { return s->llm; }

zl_kv_type zl_seq_kv_type(const zl_seq *s) {
    return zl_kv_elem_type(s->kv) == ZL_TYPE_F32 ? ZL_KV_F32 : zl_kv_elem_type(s->kv) == ZL_TYPE_Q8_0 ? ZL_KV_Q8_0 : ZL_KV_F16;
}

zl_kv_policy_kind zl_seq_kv_policy(const zl_seq *s) { return zl_kv_kind(s->kv); }

/* The KV layer owns the piece arithmetic; the engine only clamps the row count. */
static int kv_rows(const zl_seq *s, int rows) { return rows < 0 ? 0 : rows > zl_kv_n_ctx(s->kv) ? zl_kv_n_ctx(s->kv) : rows; }

int zl_seq_kv_n_pieces(const zl_seq *s, int rows, size_t piece_bytes) {
    rows = kv_rows(s, rows);
    return piece_bytes && rows ? zl_kv_pieces(s->kv, rows, piece_bytes) : 0;
}

size_t zl_seq_kv_piece(zl_seq *s, int rows, size_t piece_bytes, int p, void **at) {
    *at = NULL;
    if (p < 0 || p >= zl_seq_kv_n_pieces(s, rows, piece_bytes)) return 0;
    return zl_kv_piece(s->kv, kv_rows(s, rows), piece_bytes, p, at);
}

int zl_seq_set_kv_policy(zl_seq *s, zl_kv_policy_kind kind, int budget, zl_err *err) {
    return zl_seq_set_kv_slicing(s, kind, budget, 0, err);
}

int zl_seq_set_kv_slicing(zl_seq *s, zl_kv_policy_kind kind, int budget, int window, zl_err *err) {
    if (window < 0) return zl_errf(err, ZL_EINVAL, "KV window must be >= 0 tokens, not %d", window);
    if (window && kind != ZL_KV_POLICY_ANCHOR)
        return zl_errf(err, ZL_EINVAL, "a KV window before heavy hitters needs the anchor policy, not %s",
                       zl_kv_policy_name(kind));
    zl_kv_policy p = {kind, budget, 0, window};
    /* eviction re-rotates kept keys with one RoPE; sliding-window layers
     * rotate with their own base (and bound their span already) */
    if (p.kind != ZL_KV_POLICY_FULL && !zl_model_uniform_rope(s->llm->model))
        return zl_errf(err, ZL_EUNSUP, "KV slicing (--kv-policy %s) needs one RoPE for every layer; %s has sliding-window "
                       "layers with their own", zl_kv_policy_name(p.kind), s->llm->model->hp.arch);
    zl_rope rope = zl_model_rope(s->llm->model);
    return zl_kv_set_policy(s->kv, &p, &rope, s->llm->model->hp.head_dim, zl_pool_size(s->llm->pool), err);
}

void zl_seq_kv_stats(const zl_seq *s, zl_kv_stats *st) {
    st->cached = zl_kv_cached(s->kv);
    st->budget = zl_kv_budget(s->kv);
    st->evicted = zl_kv_evicted(s->kv);
    st->anchors = zl_kv_n_anchor(s->kv);
    st->bytes_per_token = 2 * (uint64_t)zl_kv_n_layers(s->kv) * zl_kv_row_bytes(s->kv);
    st->bytes_held = zl_kv_bytes_held(s->kv);
}

int zl_seq_eval(zl_seq *s, const int32_t *ids, int n, int batch, float *all_logits, zl_err *err) {
    return zl_seq_eval_anchored(s, ids, NULL, n, batch, all_logits, err);
}

int zl_seq_eval_anchored(zl_seq *s, const int32_t *ids, const uint8_t *anchor, int n, int batch, float *all_logits,
                         zl_err *err) {
    return zl_seq_eval_part(s, ids, anchor, n, batch, NULL, all_logits, err);
}

int zl_seq_eval_part(zl_seq *s, const int32_t *ids, const uint8_t *anchor, int n, int batch, const zl_fwd_part *part,
                     float *all_logits, zl_err *err) {
    if (n <= 0) return zl_errf(err, ZL_EINVAL, "nothing to evaluate");
    if (part && (n > batch || zl_kv_bounded(s->kv) || part->keep_used))
        return zl_errf(err, ZL_EINVAL, "a partial forward must be one chunk under the full KV policy");
    const zl_model *m = s->llm->model;
    int nv = m->hp.n_vocab, bounded = zl_kv_bounded(s->kv);
    if (!bounded && zl_kv_n_used(s->kv) + n > zl_kv_n_ctx(s->kv))
        return zl_errf(err, ZL_ERANGE, "%d tokens do not fit: %d of the %d-token context are used", n,
                       zl_kv_n_used(s->kv), zl_kv_n_ctx(s->kv));
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= nv) return zl_errf(err, ZL_EINVAL, "token id %d out of range [0, %d)", ids[i], nv);
    if (batch <= 0) batch = 64;
    if (bounded && batch > zl_kv_budget(s->kv) / 4) batch = zl_kv_budget(s->kv) / 4; /* chunks leave room to evict */
    if (batch > s->cap_chunk) {
        zl_batch_tok *c = realloc(s->chunk, (size_t)batch * sizeof *c);
        if (!c) return zl_errf(err, ZL_ENOMEM, "out of memory");
        s->chunk = c;
        s->cap_chunk = batch;
    }
    zl_batch_tok *toks = s->chunk;
    int rc = 0;
    for (int p = 0; p < n && !rc; p += batch) {
        int cnt = n - p < batch ? n - p : batch;
        if (bounded && (rc = zl_kv_make_room(s->kv, cnt, err))) break;
        int base = zl_kv_n_used(s->kv);
        for (int i = 0; i < cnt; i++)
            toks[i] = (zl_batch_tok){ids[p + i], base + i, 0, all_logits ? 1 : (p + i == n - 1)};
        float *dst = all_logits ? all_logits + (size_t)p * nv : s->logits;
        rc = zl_forward_part(m, &s->kv, toks, cnt, part, dst, s->fwd, s->llm->pool, err);
        if (rc) break;
        zl_kv_note_written(s->kv, base, cnt);
        if (anchor)
            for (int i = 0; i < cnt; i++)
                if (anchor[p + i]) zl_kv_mark_anchor(s->kv, base + i, 1);
        for (int i = 0; i < cnt; i++) zl_sampler_accept(s->sampler, ids[p + i]);
        if (zl_seq_track(s, ids + p, cnt)) rc = zl_errf(err, ZL_ENOMEM, "out of memory");
    }
    s->pending = -1;
    if (rc) {
        /* keep the sequence consistent: what was fed stays, logits are stale */
        s->has_logits = 0;
        return rc;
    }
    if (all_logits) memcpy(s->logits, all_logits + (size_t)(n - 1) * nv, (size_t)nv * sizeof(float));
    s->has_logits = 1;
    return 0;
}

const float *zl_seq_logits(const zl_seq *s) { return s->has_logits ? s->logits : NULL; }

int32_t zl_seq_sample(zl_seq *s) {
    int nv = s->llm->model->hp.n_vocab;
    memcpy(s->scratch, s->logits, (size_t)nv * sizeof(float));
    return zl_sampler_sample(s->sampler, s->scratch);
}

int zl_stream_new(zl_stream **out, const zl_llm *llm, int strip_leading_space, zl_err *err) {
    *out = NULL;
    zl_stream *st = calloc(1, sizeof *st);
    if (!st) return zl_errf(err, ZL_ENOMEM, "out of memory");
    int rc = zl_detok_new(&st->d, llm->vocab, strip_leading_space ? ZL_DETOK_STRIP_SPACE : 0, err);
    if (rc) { free(st); return rc; }
    *out = st;
    return 0;
}

void zl_stream_free(zl_stream *st) {
    if (!st) return;
    zl_detok_free(st->d);
    free(st);
}

const char *zl_stream_feed(zl_stream *st, int32_t token, size_t *len) {
    const char *o = NULL;
    *len = 0;
    if (zl_detok_feed(st->d, token, &o, len, NULL)) { *len = 0; return ""; }
    return o ? o : "";
}

const char *zl_stream_flush(zl_stream *st, size_t *len) {
    const char *o = NULL;
    *len = 0;
    if (zl_detok_flush(st->d, &o, len, NULL)) { *len = 0; return ""; }
    return o ? o : "";
}

int zl_llm_eval_batch(zl_llm *llm, const zl_batch_item *items, int n_items, zl_err *err) {
    return zl_batch_eval(llm, items, NULL, n_items, &llm->batch_buf, err);
}
