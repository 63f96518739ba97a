/* embedding.c — hidden states and pooled embeddings (see zerolayer.h,
 * "embeddings").  Runs the whole forward but the output matrix
 * (zl_forward_part with x_out and no wanted logits), applies the model's
 * output norm to each token's residual and pools per input.  Owns the KV
 * caches of the inputs it embeds; never samples, never touches HTTP. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../gguf/gguf.h"
#include "../kv/kv.h"
#include "engine_internal.h"
#include "zerolayer.h"

int zl_llm_n_embd(const zl_llm *llm) { return llm->model->hp.dim; }
const char *zl_llm_arch(const zl_llm *llm) { return llm->model->hp.arch; }

const char *zl_pooling_name(zl_pooling p) {
    return p == ZL_POOL_CLS ? "cls" : p == ZL_POOL_LAST ? "last" : "mean";
}

int zl_llm_pooling(const zl_llm *llm) {
    /* llama.cpp's numbering of <arch>.pooling_type: 0 none, 1 mean, 2 cls, 3 last, 4 rank */
    char key[64];
    snprintf(key, sizeof key, "%s.pooling_type", llm->model->hp.arch);
    uint32_t v;
    int64_t w;
    const zl_gguf *g = llm->model->gguf;
    if (zl_gguf_get_u32(g, key, &v) != 0) {
        if (zl_gguf_get_i64(g, key, &w) != 0 || w < 0 || w > 4) return -1;
        v = (uint32_t)w;
    }
    return v == 1 ? ZL_POOL_MEAN : v == 2 ? ZL_POOL_CLS : v == 3 ? ZL_POOL_LAST : -1;
}

/* The output norm of the forward pass (the same formula and order as its
 * final RMSNorm before the output matrix). */
static void output_norm(const zl_model *m, float *out, const float *x) {
    int n = m->hp.dim;
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float scale = 1.0f / sqrtf((float)(ss / n) + m->hp.norm_eps);
    for (int i = 0; i < n; i++) out[i] = x[i] * scale * m->output_norm[i];
}

int zl_seq_eval_hidden(zl_seq *s, const int32_t *ids, int n, int batch, float *hidden, zl_err *err) {
    if (n <= 0) return zl_errf(err, ZL_EINVAL, "nothing to evaluate");
    const zl_model *m = s->llm->model;
    int dim = m->hp.dim, nv = m->hp.n_vocab;
    if (zl_kv_bounded(s->kv))
        return zl_errf(err, ZL_EUNSUP, "hidden states need the full KV policy");
    if (zl_kv_n_used(s->kv) + n > zl_kv_n_ctx(s->kv))
        return zl_errf(err, ZL_ERANGE, "%d tokens do not fit: %d of the %d-token context are used", n, zl_kv_n_used(s->kv),
                       zl_kv_n_ctx(s->kv));
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= nv) return zl_errf(err, ZL_EINVAL, "token id %d out of range [0, %d)", ids[i], nv);
    if (batch <= 0) batch = 64;
    zl_batch_tok *toks = malloc((size_t)batch * sizeof *toks);
    float *x = malloc((size_t)batch * dim * sizeof *x);
    int rc = toks && x ? 0 : zl_errf(err, ZL_ENOMEM, "out of memory");
    s->has_logits = 0;
    s->pending = -1;
    for (int p = 0; p < n && !rc; p += batch) {
        int cnt = n - p < batch ? n - p : batch, base = zl_kv_n_used(s->kv);
        for (int i = 0; i < cnt; i++) toks[i] = (zl_batch_tok){ids[p + i], base + i, 0, 0};
        zl_fwd_part part = {0, m->hp.n_layers, NULL, x, 0};
        if ((rc = zl_forward_part(m, &s->kv, toks, cnt, &part, NULL, s->fwd, s->llm->pool, err))) break;
        zl_kv_note_written(s->kv, base, cnt);
        for (int i = 0; i < cnt; i++) output_norm(m, hidden + (size_t)(p + i) * dim, x + (size_t)i * dim);
        for (int i = 0; i < cnt; i++) zl_sampler_accept(s->sampler, ids[p + i]);
        if (zl_seq_track(s, ids + p, cnt)) rc = zl_errf(err, ZL_ENOMEM, "out of memory");
    }
    free(toks);
    free(x);
    return rc;
}

/* ---- the stepwise embedder ---- */

typedef struct emb_input {
    const int32_t *ids; /* borrowed from the caller */
    int n, fed;
    zl_seq *seq;   /* while in progress */
    double *acc;   /* mean: running sum of the normed states (dim), in token order */
    float *vec;    /* the result, once done */
} emb_input;

struct zl_embedder {
    zl_llm *llm;
    zl_pooling pooling;
    emb_input *in;
    int n_in, next; /* inputs before next are done */
    zl_fwd *fwd;
    float *x, *row; /* step scratch: residuals, one normed row */
    zl_batch_tok *toks;
    zl_kv **kvs;
    int cap;
};

int zl_embedder_new(zl_embedder **out, zl_llm *llm, const int32_t *const *inputs, const int *n, int n_inputs,
                    zl_pooling pooling, zl_err *err) {
    *out = NULL;
    if (n_inputs <= 0) return zl_errf(err, ZL_EINVAL, "no inputs to embed");
    if (pooling != ZL_POOL_MEAN && pooling != ZL_POOL_CLS && pooling != ZL_POOL_LAST)
        return zl_errf(err, ZL_EINVAL, "unknown pooling %d", (int)pooling);
    int nv = llm->model->hp.n_vocab;
    for (int i = 0; i < n_inputs; i++) {
        if (n[i] <= 0) return zl_errf(err, ZL_EINVAL, "input %d is empty", i);
        for (int k = 0; k < n[i]; k++)
            if (inputs[i][k] < 0 || inputs[i][k] >= nv)
                return zl_errf(err, ZL_EINVAL, "input %d: token id %d out of range [0, %d)", i, inputs[i][k], nv);
    }
    zl_embedder *e = calloc(1, sizeof *e);
    if (!e || !(e->in = calloc((size_t)n_inputs, sizeof *e->in)) || !(e->fwd = zl_fwd_new())) {
        zl_embedder_free(e);
        return zl_errf(err, ZL_ENOMEM, "out of memory");
    }
    e->llm = llm;
    e->pooling = pooling;
    e->n_in = n_inputs;
    for (int i = 0; i < n_inputs; i++) e->in[i] = (emb_input){inputs[i], n[i], 0, NULL, NULL, NULL};
    *out = e;
    return 0;
}

static int grow(zl_embedder *e, int n) {
    if (n <= e->cap) return 0;
    int dim = e->llm->model->hp.dim;
    float *x = realloc(e->x, (size_t)n * dim * sizeof *x);
    if (x) e->x = x;
    zl_batch_tok *t = realloc(e->toks, (size_t)n * sizeof *t);
    if (t) e->toks = t;
    zl_kv **k = realloc(e->kvs, (size_t)n * sizeof *k);
    if (k) e->kvs = k;
    if (!e->row) e->row = malloc((size_t)dim * sizeof *e->row);
    if (!x || !t || !k || !e->row) return ZL_ENOMEM;
    e->cap = n;
    return 0;
}

static void input_finish(zl_embedder *e, emb_input *in) {
    int dim = e->llm->model->hp.dim;
    double ss = 0;
    for (int i = 0; i < dim; i++) ss += in->acc[i] * in->acc[i];
    double inv = ss > 0 ? 1.0 / sqrt(ss) : 0.0; /* the mean's 1/n cancels in the normalisation */
    for (int i = 0; i < dim; i++) in->vec[i] = (float)(in->acc[i] * inv);
    free(in->acc);
    in->acc = NULL;
    zl_seq_free(in->seq);
    in->seq = NULL;
}

int zl_embedder_step(zl_embedder *e, int max_tokens, int *done, zl_err *err) {
    *done = e->next >= e->n_in;
    if (*done) return 0;
    if (max_tokens <= 0) max_tokens = 256;
    const zl_model *m = e->llm->model;
    int dim = m->hp.dim;
    if (grow(e, max_tokens)) return zl_errf(err, ZL_ENOMEM, "out of memory");
    /* the inputs of this step: from next on, as many tokens as fit */
    int n_tok = 0, n_seq = 0, first = e->next, last = first;
    for (int i = first; i < e->n_in && n_tok < max_tokens; i++, last = i) {
        emb_input *in = &e->in[i];
        if (!in->seq) {
            zl_seq_opts so = {in->n, ZL_KV_F16, zl_sampling_defaults()};
            int rc = zl_seq_new(&in->seq, e->llm, &so, err);
            if (rc) return rc;
            in->acc = calloc((size_t)dim, sizeof *in->acc);
            in->vec = malloc((size_t)dim * sizeof *in->vec);
            if (!in->acc || !in->vec) return zl_errf(err, ZL_ENOMEM, "out of memory");
        }
        int take = in->n - in->fed < max_tokens - n_tok ? in->n - in->fed : max_tokens - n_tok;
        e->kvs[n_seq] = in->seq->kv;
        for (int k = 0; k < take; k++)
            e->toks[n_tok++] = (zl_batch_tok){in->ids[in->fed + k], in->fed + k, n_seq, 0};
        n_seq++;
    }
    zl_fwd_part part = {0, m->hp.n_layers, NULL, e->x, 0};
    int rc = zl_forward_part(m, e->kvs, e->toks, n_tok, &part, NULL, e->fwd, e->llm->pool, err);
    if (rc) return rc;
    /* pool in token order; an input is done when its last token went through */
    int t = 0;
    for (int i = first; i < last; i++) {
        emb_input *in = &e->in[i];
        int take = 0;
        while (t + take < n_tok && e->toks[t + take].seq == i - first) take++;
        zl_kv_note_written(in->seq->kv, in->fed, take);
        for (int k = 0; k < take; k++) {
            int pos = in->fed + k;
            int want = e->pooling == ZL_POOL_MEAN || (e->pooling == ZL_POOL_CLS && pos == 0) ||
                       (e->pooling == ZL_POOL_LAST && pos == in->n - 1);
            if (!want) continue;
            output_norm(m, e->row, e->x + (size_t)(t + k) * dim);
            for (int d = 0; d < dim; d++) in->acc[d] += e->row[d];
        }
        in->fed += take;
        t += take;
        if (in->fed == in->n) {
            input_finish(e, in);
            e->next = i + 1;
        }
    }
    *done = e->next >= e->n_in;
    return 0;
}

const float *zl_embedder_vector(const zl_embedder *e, int i) {
    return i >= 0 && i < e->next ? e->in[i].vec : NULL;
}

void zl_embedder_free(zl_embedder *e) {
    if (!e) return;
    for (int i = 0; e->in && i < e->n_in; i++) {
        zl_seq_free(e->in[i].seq);
        free(e->in[i].acc);
        free(e->in[i].vec);
    }
    free(e->in);
    zl_fwd_free(e->fwd);
    free(e->x);
    free(e->row);
    free(e->toks);
    free(e->kvs);
    free(e);
}

int zl_llm_embed(zl_llm *llm, const int32_t *ids, int n, zl_pooling pooling, float *out, zl_err *err) {
    zl_embedder *e;
    int rc = zl_embedder_new(&e, llm, &ids, &n, 1, pooling, err), done = 0;
    while (!rc && !done) rc = zl_embedder_step(e, 0, &done, err);
    if (!rc) memcpy(out, zl_embedder_vector(e, 0), (size_t)llm->model->hp.dim * sizeof *out);
    zl_embedder_free(e);
    return rc;
}
