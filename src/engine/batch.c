/* batch.c — the batched evaluator (see batch.h). */
#include "batch.h"

#include <stdlib.h>
#include <string.h>

#include "../base/assert.h"
#include "../base/fault.h"
#include "engine_internal.h"

int zl_batch_buf_reserve(zl_batch_buf *b, int n_vocab, int n_toks, int n_items, int n_rows) {
    if (ZL_FAULT(ZL_FAULT_BATCH_BUF)) return ZL_ENOMEM;
    if (n_toks > b->cap_toks) {
        zl_batch_tok *t = realloc(b->toks, (size_t)n_toks * sizeof *t);
        if (!t) return ZL_ENOMEM;
        b->toks = t;
        b->cap_toks = n_toks;
    }
    if (n_items > b->cap_items) {
        zl_kv **k = realloc(b->kvs, (size_t)n_items * sizeof *k);
        if (!k) return ZL_ENOMEM;
        b->kvs = k;
        b->cap_items = n_items;
    }
    if (n_vocab != b->n_vocab) { /* rows are counted in this vocabulary */
        free(b->logits);
        b->logits = NULL;
        b->cap_rows = 0;
        b->n_vocab = n_vocab;
    }
    if (n_rows > b->cap_rows) {
        float *l = realloc(b->logits, (size_t)n_rows * n_vocab * sizeof *l);
        if (!l) return ZL_ENOMEM;
        b->logits = l;
        b->cap_rows = n_rows;
    }
    return 0;
}

void zl_batch_buf_free(zl_batch_buf *b) {
    free(b->toks);
    free(b->kvs);
    free(b->logits);
    memset(b, 0, sizeof *b);
}

/* Whether item i gets the logits of all of its positions (a ring item). */
static int all_rows(zl_verify *const *ver, int i) { return ver && ver[i] && ver[i]->n > 1; }

int zl_batch_eval(zl_llm *llm, const zl_batch_item *items, zl_verify *const *ver, int n_items, zl_batch_buf *buf,
                  zl_err *err) {
    if (n_items <= 0) return zl_errf(err, ZL_EINVAL, "empty batch");
    const zl_model *m = llm->model;
    int nv = m->hp.n_vocab, total = 0, rows = 0;
    for (int i = 0; i < n_items; i++) {
        const zl_seq *s = items[i].seq;
        int all = all_rows(ver, i);
        if (!s || s->llm != llm || items[i].n <= 0 ||
            (all && (items[i].ids != ver[i]->ids || items[i].n != ver[i]->n || !s->vlogits)))
            return zl_errf(err, ZL_EINVAL, "batch item %d is invalid", i);
        for (int j = 0; j < i; j++)
            if (items[j].seq == s) return zl_errf(err, ZL_EINVAL, "sequence appears twice in one batch");
        if (!zl_kv_bounded(s->kv) && zl_kv_n_used(s->kv) + items[i].n > zl_kv_n_ctx(s->kv))
            return zl_errf(err, ZL_ERANGE, "batch item %d: %d tokens do not fit: %d of the %d-token context are used",
                           i, items[i].n, zl_kv_n_used(s->kv), zl_kv_n_ctx(s->kv));
        for (int j = 0; j < items[i].n; j++)
            if (items[i].ids[j] < 0 || items[i].ids[j] >= nv)
                return zl_errf(err, ZL_EINVAL, "token id %d out of range [0, %d)", items[i].ids[j], nv);
        total += items[i].n;
        rows += all ? items[i].n : 1;
    }
    /* every allocation before the forward, so that committing cannot fail */
    if ((!llm->batch_fwd && !(llm->batch_fwd = zl_fwd_new())) || zl_batch_buf_reserve(buf, nv, total, n_items, rows))
        return zl_errf(err, ZL_ENOMEM, "out of memory");
    for (int i = 0; i < n_items; i++)
        if (zl_seq_reserve_tokens(items[i].seq, items[i].seq->n_tokens + items[i].n) || ZL_FAULT(ZL_FAULT_BATCH_BUF))
            return zl_errf(err, ZL_ENOMEM, "out of memory");
    int rc = 0;
    for (int i = 0; !rc && i < n_items; i++) rc = zl_kv_make_room(items[i].seq->kv, items[i].n, err);
    if (rc) return rc;
    zl_batch_tok *toks = buf->toks;
    zl_kv **kvs = buf->kvs;
    for (int i = 0, t = 0; i < n_items; i++) {
        int all = all_rows(ver, i);
        kvs[i] = items[i].seq->kv;
        for (int j = 0; j < items[i].n; j++, t++)
            toks[t] = (zl_batch_tok){items[i].ids[j], zl_kv_n_used(kvs[i]) + j, i, all || j == items[i].n - 1};
    }
    /* a lone ring sequence may resume after its self-draft's layers; in a
     * mixed batch every token runs every layer (the same result) */
    zl_fwd_part part;
    const zl_fwd_part *pp =
        n_items == 1 && all_rows(ver, 0) ? zl_spec_verify_part(items[0].seq, items[0].ids, items[0].n, &part) : NULL;
    if ((rc = zl_forward_part(m, kvs, toks, total, pp, buf->logits, llm->batch_fwd, llm->pool, err))) return rc;
    const float *row = buf->logits;
    for (int i = 0, t = 0; i < n_items; t += items[i].n, i++) {
        zl_seq *s = items[i].seq;
        zl_kv_note_written(kvs[i], toks[t].pos, items[i].n);
        if (all_rows(ver, i)) {
            memcpy(s->vlogits, row, (size_t)items[i].n * nv * sizeof(float));
            row += (size_t)(items[i].n - 1) * nv;
        }
        memcpy(s->logits, row, (size_t)nv * sizeof(float));
        row += nv;
        for (int j = 0; j < items[i].n; j++) zl_sampler_accept(s->sampler, items[i].ids[j]);
        s->has_logits = 1;
        s->pending = -1;
        rc = zl_seq_track(s, items[i].ids, items[i].n);
        ZL_ASSERT(rc == 0); /* reserved above */
    }
    return 0;
}
