/* spec.c — the verification ring: lossless speculative decoding.
 *
 * Each step chooses the next token t0 from the current logits (or takes the
 * token a previous rejection already chose), asks the drafter for up to k
 * more, and feeds t0 + drafts through ONE batched forward, which reads the
 * weights once for all of them.  Drafts are accepted left to right while the
 * target agrees: greedy -> the target's argmax equals the draft; sampling ->
 * accept with probability p(d) (the drafters are deterministic, q(d) = 1) and
 * on rejection draw from p with d removed (Leviathan et al. / Chen et al.),
 * so the output distribution is exactly the target's.  Rejected positions
 * are rolled back in the KV cache and the penalty history.
 *
 * The step is split into draft / batched verify (batch.h) / accept (spec.h)
 * so the scheduler can verify many sequences' drafts inside its one batched
 * forward; zl_seq_step chains the three for a single sequence. */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <time.h>

#include "../base/clock.h"
#include "engine_internal.h"
#include "spec.h"

/* ---- draft-model drafter ---- */
typedef struct { zl_seq *seq; } draft_model;

static int argmax(const float *l, int n) {
    int b = 0;
    for (int i = 1; i < n; i++) if (l[i] > l[b]) b = i;
    return b;
}

/* Draft with a model of its own: catch its cache up with hist (the longest
 * common prefix is kept), then decode greedily. */
static int draft_with_seq(zl_seq *s, const int32_t *hist, int n_hist, int32_t *out, int max) {
    int have, c = 0;
    const int32_t *mine = zl_seq_tokens(s, &have);
    while (c < have && c < n_hist && mine[c] == hist[c]) c++;
    if (c == n_hist) c--; /* need the logits after the last token: re-feed it */
    if (n_hist - c + max > zl_seq_n_ctx(s) - c) return 0;
    zl_seq_truncate(s, c);
    if (zl_seq_eval(s, hist + c, n_hist - c, 0, NULL, NULL)) return 0;
    int nv = zl_llm_n_vocab(s->llm);
    for (int i = 0; i < max; i++) {
        out[i] = argmax(zl_seq_logits(s), nv);
        if (i + 1 < max && zl_seq_eval(s, &out[i], 1, 1, NULL, NULL)) return i + 1;
    }
    return max;
}

static int dm_draft(zl_drafter *d, const int32_t *hist, int n_hist, int32_t *out, int max) {
    draft_model *dm = d->self;
    return draft_with_seq(dm->seq, hist, n_hist, out, max);
}

static void dm_free(zl_drafter *d) {
    draft_model *dm = d->self;
    zl_seq_free(dm->seq);
    free(dm);
    free(d);
}

static int draft_seq_new(zl_seq **out, zl_llm *draft, int n_ctx, zl_err *err) {
    zl_seq_opts so = {n_ctx, ZL_KV_F16, zl_sampling_defaults()};
    so.sampling.temp = 0;
    return zl_seq_new(out, draft, &so, err);
}

/* ---- self-speculation: the target's own first layers, in the target's cache ----
 * The draft runs layers [0, D) of the target over the token about to be
 * verified and each token it proposes, writing those layers' K/V into the
 * target's own cache as scratch rows past its end (the verify pass would
 * write the same values there: a token's arithmetic does not depend on its
 * batch) and keeping the residual leaving layer D - 1.  The verify pass then
 * resumes at layer D, so those layers are never run twice and the draft
 * never has a cache of its own to catch up.  Under a KV slicing policy (the
 * cache evicts and compacts) it drafts in a private cache instead. */
typedef struct {
    zl_seq *target;
    zl_llm *view;   /* the truncated view: its layer count is D */
    zl_fwd *fwd;
    float *resid;   /* [ZL_RING_MAX + 1][dim]: residual entering layer D */
    float *logits;  /* n_vocab */
    int32_t ids[ZL_RING_MAX + 1];
    int n, pos;     /* rows held: tokens ids[0..n) at positions pos.. */
    zl_seq *own;    /* private cache for the sliced case, made on first use */
} self_draft;

static int sd_draft(zl_drafter *d, const int32_t *hist, int n_hist, int32_t *out, int max) {
    self_draft *sd = d->self;
    zl_seq *s = sd->target;
    zl_kv *kv = s->kv;
    sd->n = 0;
    if (zl_kv_bounded(kv) || zl_kv_sliced(kv) || zl_kv_n_used(kv) != n_hist - 1) {
        if (!sd->own && draft_seq_new(&sd->own, sd->view, zl_seq_n_ctx(s), NULL)) return 0;
        return draft_with_seq(sd->own, hist, n_hist, out, max);
    }
    if (max > ZL_RING_MAX) max = ZL_RING_MAX;
    if (zl_kv_n_used(kv) + max + 1 > zl_kv_n_ctx(kv)) max = zl_kv_n_ctx(kv) - zl_kv_n_used(kv) - 1;
    if (max <= 0) return 0;
    const zl_model *m = s->llm->model;
    int dim = m->hp.dim, pos = zl_kv_n_used(kv), nv = m->hp.n_vocab;
    zl_fwd_set_exact(sd->fwd, zl_fwd_exact(s->fwd));
    int32_t tok = hist[n_hist - 1];
    for (int i = 0; i <= max; i++) {
        /* the last token is proposed, not drafted from: no logits, only its layers */
        zl_batch_tok t = {tok, pos + i, 0, i < max};
        zl_fwd_part part = {0, sd->view->model->hp.n_layers, NULL, sd->resid + (size_t)i * dim, 1};
        if (zl_forward_part(m, &s->kv, &t, 1, &part, sd->logits, sd->fwd, s->llm->pool, NULL)) {
            sd->n = 0;
            return i;
        }
        sd->ids[i] = tok;
        if (i < max) tok = out[i] = argmax(sd->logits, nv);
    }
    sd->n = max + 1;
    sd->pos = pos;
    return max;
}

static const float *sd_resume(zl_drafter *d, const int32_t *ids, int n, int pos, int *layer) {
    self_draft *sd = d->self;
    int held = sd->n;
    sd->n = 0; /* good for one verify */
    if (n > held || pos != sd->pos || zl_kv_n_dirty(sd->target->kv) < pos + n || zl_kv_n_used(sd->target->kv) != pos ||
        memcmp(ids, sd->ids, (size_t)n * sizeof *ids))
        return NULL;
    *layer = sd->view->model->hp.n_layers;
    return sd->resid;
}

static void sd_free(zl_drafter *d) {
    self_draft *sd = d->self;
    zl_fwd_free(sd->fwd);
    free(sd->resid);
    free(sd->logits);
    zl_seq_free(sd->own);
    free(sd);
    free(d);
}

/* Whether draft is a truncated view of target's weights (zl_llm_open_truncated). */
static int is_view_of(const zl_llm *draft, const zl_llm *target) {
    return draft->borrowed && draft->model->layers == target->model->layers &&
           draft->model->hp.n_layers < target->model->hp.n_layers;
}

static zl_drafter *self_draft_new(zl_seq *s, zl_llm *view) {
    zl_drafter *d = calloc(1, sizeof *d);
    self_draft *sd = calloc(1, sizeof *sd);
    if (d && sd) {
        sd->target = s;
        sd->view = view;
        sd->fwd = zl_fwd_new();
        sd->resid = malloc((size_t)(ZL_RING_MAX + 1) * s->llm->model->hp.dim * sizeof(float));
        sd->logits = malloc((size_t)zl_llm_n_vocab(s->llm) * sizeof(float));
    }
    if (!d || !sd || !sd->fwd || !sd->resid || !sd->logits) {
        if (sd) { zl_fwd_free(sd->fwd); free(sd->resid); free(sd->logits); }
        free(sd);
        free(d);
        return NULL;
    }
    *d = (zl_drafter){"self", sd_draft, sd_free, sd_resume, sd};
    return d;
}

static int vocab_compatible(const zl_llm *a, const zl_llm *b, zl_err *err) {
    int n = zl_vocab_n_tokens(a->vocab);
    if (n != zl_vocab_n_tokens(b->vocab) || zl_llm_n_vocab(a) != zl_llm_n_vocab(b))
        return zl_errf(err, ZL_EINVAL, "draft model vocabulary has %d tokens, the target's has %d",
                       zl_vocab_n_tokens(b->vocab), n);
    for (int i = 0; i < n; i++) {
        size_t la, lb;
        const char *ta = zl_token_text(a->vocab, i, &la), *tb = zl_token_text(b->vocab, i, &lb);
        if (la != lb || memcmp(ta, tb, la))
            return zl_errf(err, ZL_EINVAL, "draft model vocabulary differs from the target's at token %d", i);
    }
    return 0;
}

int zl_seq_set_spec(zl_seq *s, const zl_spec_opts *o, zl_err *err) {
    zl_drafter_free(s->drafter);
    s->drafter = NULL;
    s->spec_on = 0;
    if (!o || o->mode == ZL_SPEC_OFF) return 0;
    int ring = o->ring > 0 ? o->ring : ZL_RING_DEFAULT, max = o->ring_max > 0 ? o->ring_max : ZL_RING_MAX;
    if (ring > ZL_RING_MAX || max > ZL_RING_MAX)
        return zl_errf(err, ZL_EINVAL, "ring size must be 1..%d", ZL_RING_MAX);
    if (max < ring) max = ring;
    int nv = zl_llm_n_vocab(s->llm);
    if (!s->vlogits) s->vlogits = malloc((size_t)(ZL_RING_MAX + 1) * nv * sizeof(float));
    if (!s->probs) s->probs = malloc((size_t)nv * sizeof(float));
    if (!s->vlogits || !s->probs) return zl_errf(err, ZL_ENOMEM, "out of memory");
    if (o->mode == ZL_SPEC_LOOKUP) {
        s->drafter = zl_drafter_lookup_new(2, 4); /* a lone matching token predicts too little to pay */
    } else if (o->mode == ZL_SPEC_DRAFT) {
        if (!o->draft) return zl_errf(err, ZL_EINVAL, "draft speculation needs a draft model");
        int rc = vocab_compatible(s->llm, o->draft, err);
        if (rc) return rc;
        if (is_view_of(o->draft, s->llm)) {
            s->drafter = self_draft_new(s, o->draft);
        } else {
            zl_seq *ds;
            if ((rc = draft_seq_new(&ds, o->draft, zl_seq_n_ctx(s), err))) return rc;
            zl_drafter *d = calloc(1, sizeof *d);
            draft_model *dm = calloc(1, sizeof *dm);
            if (!d || !dm) { free(d); free(dm); zl_seq_free(ds); return zl_errf(err, ZL_ENOMEM, "out of memory"); }
            dm->seq = ds;
            *d = (zl_drafter){"draft", dm_draft, dm_free, NULL, dm};
            s->drafter = d;
        }
    } else {
        return zl_errf(err, ZL_EINVAL, "unknown speculation mode %d", (int)o->mode);
    }
    if (!s->drafter) return zl_errf(err, ZL_ENOMEM, "out of memory");
    zl_ring_init(&s->ring, ring, max);
    s->resumed = 0;
    const char *tr = getenv("ZL_RING_TRACE");
    s->trace = tr && *tr == '1';
    s->spec_on = 1;
    return 0;
}

void zl_seq_spec_stats(const zl_seq *s, zl_spec_stats *st) {
    memset(st, 0, sizeof *st);
    if (!s->spec_on) return;
    st->steps = s->ring.steps;
    st->verify_steps = s->ring.verify_steps;
    st->drafted = s->ring.drafted;
    st->accepted = s->ring.accepted;
    st->ring = zl_ring_budget(&s->ring);
    st->resumed = s->resumed;
}

int zl_seq_spec_on(const zl_seq *s) { return s->spec_on; }

int zl_seq_spec_budget(const zl_seq *s) { return s->spec_on ? zl_ring_budget(&s->ring) : 0; }

int zl_spec_draft(zl_seq *s, int32_t t0, int max_draft, zl_verify *v) {
    v->ids[0] = t0;
    v->n = 1;
    v->hist0 = zl_sampler_n_hist(s->sampler);
    v->tok0 = s->n_tokens;
    if (!s->spec_on) return 0;
    int k = zl_ring_budget(&s->ring), room = zl_seq_room(s);
    if (k > max_draft) k = max_draft;
    if (k > room - 1) k = room - 1;
    if (k > ZL_RING_MAX) k = ZL_RING_MAX;
    if (k <= 0) return 0;
    /* history = every token so far + t0 (appended past n_tokens, not yet counted) */
    int n = s->n_tokens;
    if (zl_seq_reserve_tokens(s, n + 1)) return 0;
    s->tokens[n] = t0;
    int nd = s->drafter->draft(s->drafter, s->tokens, n + 1, v->ids + 1, k);
    if (nd < 0) nd = 0;
    if (nd > k) nd = k;
    v->n = 1 + nd;
    return nd;
}

const zl_fwd_part *zl_spec_verify_part(zl_seq *s, const int32_t *ids, int n, zl_fwd_part *part) {
    int layer = 0;
    const float *x = s->drafter && s->drafter->resume ? s->drafter->resume(s->drafter, ids, n, zl_kv_n_used(s->kv), &layer)
                                                      : NULL;
    if (!x) return NULL;
    *part = (zl_fwd_part){layer, s->llm->model->hp.n_layers, x, NULL, 0};
    s->resumed++;
    return part;
}

/* The step trace (ZL_RING_TRACE=1; bench/lookup_bound.py reads it): the
 * sequence so far on the first step, then per step its position, drafted
 * and accepted counts, wall seconds and the tokens it emitted (t0, then the
 * accepted drafts; a rejection's replacement comes as the next step's t0). */
static void trace_step(const zl_seq *s, const zl_verify *v, int nd, int acc, double seconds) {
    if (!s->trace) return;
    if (!s->ring.steps || s->ring.steps == 1) {
        fprintf(stderr, "ring-trace hist %d", v->tok0);
        for (int i = 0; i < v->tok0; i++) fprintf(stderr, " %d", s->tokens[i]);
        fputc('\n', stderr);
    }
    fprintf(stderr, "ring-trace step pos %d drafted %d accepted %d seconds %.6f emit", v->tok0, nd, acc, seconds);
    for (int i = 0; i <= acc; i++) fprintf(stderr, " %d", v->ids[i]);
    fputc('\n', stderr);
}

int zl_spec_accept(zl_seq *s, const zl_verify *v, double seconds, int32_t *out, int32_t *next) {
    *next = -1;
    int nd = v->n - 1;
    if (nd <= 0) {
        if (s->spec_on) {
            zl_ring_update(&s->ring, 0, 0, seconds, 1);
            trace_step(s, v, 0, 0, seconds);
        }
        return 0;
    }
    int nv = zl_llm_n_vocab(s->llm), acc = 0;
    int32_t tok = -1;
    for (int i = 1; i <= nd; i++) {
        const float *row = s->vlogits + (size_t)(i - 1) * nv;
        zl_sampler_truncate(s->sampler, v->hist0 + i); /* history through ids[i-1] */
        memcpy(s->scratch, row, (size_t)nv * sizeof(float));
        zl_sampler_probs(s->sampler, s->scratch, s->probs);
        float p = s->probs[v->ids[i]];
        if (p >= 1.0f || (p > 0.0f && zl_sampler_uniform(s->sampler) < p)) { acc++; continue; }
        /* rejected: draw from the target with the draft token removed */
        s->probs[v->ids[i]] = 0.0f;
        double z = 0;
        for (int j = 0; j < nv; j++) z += s->probs[j];
        double u = zl_sampler_uniform(s->sampler) * z, c = 0;
        tok = -1;
        for (int j = 0; j < nv; j++) {
            if (s->probs[j] <= 0) continue;
            c += s->probs[j];
            tok = j;
            if (u < c) break;
        }
        break;
    }
    int keep = 1 + acc;
    /* roll back the rejected tail: the newest nd - acc slots and tokens */
    zl_kv_truncate(s->kv, zl_kv_n_used(s->kv) - (nd - acc));
    s->n_tokens = v->tok0 + keep;
    zl_sampler_truncate(s->sampler, v->hist0 + keep);
    memcpy(s->logits, s->vlogits + (size_t)acc * nv, (size_t)nv * sizeof(float));
    s->has_logits = 1;
    s->pending = -1;
    zl_ring_update(&s->ring, nd, acc, seconds, keep);
    trace_step(s, v, nd, acc, seconds);
    memcpy(out, v->ids + 1, (size_t)acc * sizeof *out);
    if (acc < nd) *next = tok;
    return acc;
}

void zl_seq_set_ring_cost(zl_seq *s, const float *cost, int n) {
    if (s->spec_on) zl_ring_set_cost(&s->ring, cost, n);
}

int zl_llm_verify_cost(zl_llm *llm, int depth, int n, int reps, float *cost, zl_err *err) {
    if (n < 1 || n > ZL_RING_MAX + 1 || depth < 1 || reps < 1)
        return zl_errf(err, ZL_EINVAL, "verify cost: n must be 1..%d, depth and reps >= 1", ZL_RING_MAX + 1);
    int nv = zl_llm_n_vocab(llm);
    zl_seq_opts so = {depth + n + 1, ZL_KV_F16, zl_sampling_defaults()};
    zl_seq *s;
    int rc = zl_seq_new(&s, llm, &so, err);
    if (rc) return rc;
    int32_t *ids = malloc((size_t)(depth + n) * sizeof *ids);
    float *rows = malloc((size_t)n * nv * sizeof *rows);
    double *best = malloc((size_t)n * sizeof *best);
    if (!ids || !rows || !best) rc = zl_errf(err, ZL_ENOMEM, "out of memory");
    /* any tokens do: the cost depends on the count and the depth, not on the ids */
    for (int i = 0; !rc && i < depth + n; i++) ids[i] = i == 0 ? zl_llm_bos(llm) : 1 + (int32_t)((i * 7919u) % (unsigned)(nv - 1));
    if (!rc) rc = zl_seq_eval(s, ids, depth, 0, NULL, err);
    for (int k = 0; !rc && k < n; k++) best[k] = 1e30;
    for (int r = 0; !rc && r < reps; r++)
        for (int k = 1; !rc && k <= n; k++) {
            double t0 = zl_now_s();
            rc = zl_seq_eval(s, ids + depth, k, k, rows, err);
            double t = zl_now_s() - t0;
            if (t < best[k - 1]) best[k - 1] = t;
            zl_seq_truncate(s, depth);
        }
    for (int k = 0; !rc && k < n; k++) cost[k] = (float)(best[k] / best[0]);
    free(ids);
    free(rows);
    free(best);
    zl_seq_free(s);
    return rc;
}

int zl_seq_step(zl_seq *s, int32_t *out, int max_out, zl_err *err) {
    if (max_out < 1) { zl_errf(err, ZL_EINVAL, "no room for output tokens"); return -1; }
    if (!s->has_logits && s->pending < 0) { zl_errf(err, ZL_EINVAL, "nothing evaluated yet: feed a prompt first"); return -1; }
    if (zl_seq_room(s) < 1) { zl_errf(err, ZL_ERANGE, "context of %d tokens is full", zl_kv_n_ctx(s->kv)); return -1; }
    double t_start = zl_now_s();
    int32_t t0 = s->pending >= 0 ? s->pending : zl_seq_sample(s);
    if (zl_seq_grammar_error(s, err)) return -1; /* t0 is the sampler's fallback, not an answer */
    s->pending = -1;
    zl_verify v;
    int nd = zl_spec_draft(s, t0, max_out - 1, &v);
    zl_fwd_part part;
    const zl_fwd_part *pp = nd ? zl_spec_verify_part(s, v.ids, v.n, &part) : NULL;
    if (zl_seq_eval_part(s, v.ids, NULL, v.n, v.n, pp, nd ? s->vlogits : NULL, err)) return -1;
    int32_t next;
    int acc = zl_spec_accept(s, &v, zl_now_s() - t_start, out + 1, &next);
    out[0] = t0;
    s->pending = next;
    return 1 + acc;
}

int zl_llm_open_truncated(zl_llm **out, zl_llm *llm, int n_layers, zl_err *err) {
    *out = NULL;
    if (n_layers < 1 || n_layers > llm->model->hp.n_layers)
        return zl_errf(err, ZL_EINVAL, "draft layers must be 1..%d", llm->model->hp.n_layers);
    zl_llm *d = calloc(1, sizeof *d);
    zl_model *m = malloc(sizeof *m);
    if (!d || !m) { free(d); free(m); return zl_errf(err, ZL_ENOMEM, "out of memory"); }
    *m = *llm->model;
    m->hp.n_layers = n_layers;
    m->owned = NULL;
    m->n_owned = 0;
    m->prefetch = NULL;
    m->borrowed = 1;
    *d = *llm;
    d->model = m;
    d->batch_fwd = NULL;
    d->batch_buf = (zl_batch_buf){0};
    d->borrowed = 1;
    snprintf(d->desc, sizeof d->desc, "first %d layers of %s", n_layers, llm->desc);
    *out = d;
    return 0;
}
