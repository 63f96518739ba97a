/* forward.c — the llama-family forward pass over a batch of tokens.
 *
 * Reads like the math: for each layer, RMSNorm -> Q/K/V projections -> RoPE
 * -> write K/V into each token's sequence cache -> causal attention over that
 * cache -> output projection + residual -> RMSNorm -> gated FFN + residual.
 * The families differ only in fields of zl_hparams/zl_layer (embedding
 * scale, Q/K norms, post-norms, GELU or SiLU gate, sliding-window layers with
 * their own RoPE base, logit soft-cap), each applied at its one place here.
 * All matrix products go through zl_matmul (fused dequant·dot, threaded);
 * attention is threaded over (token, head) pairs.  Must never allocate per
 * layer or touch anything but its arguments and its zl_fwd scratch. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../tensor/attn.h"
#include "../tensor/rope.h"
#include "model.h"
#include "prefetch.h"

/* Tokens per attention tile: more share each widened block of the cache,
 * fewer give the threads more tiles to balance. */
#define ATTN_TOKENS 8

/* Below this many multiply-adds an operation is not worth a thread dispatch:
 * the pool's workers spin between the products of one token, so a dispatch
 * is a cache-line hand-off; small models (SmolLM2's 576x1536 FFN, 0.9M
 * multiply-adds) must still split their products over the threads. */
#define ZL_PARALLEL_MIN_MACS (1 << 16)

struct zl_fwd {
    float *buf;
    size_t cap;   /* floats in buf */
    zl_work work; /* activation quantisation scratch */
    int exact;    /* reference arithmetic: f32 activations, f64 sums */
    float *row;   /* exact mode: one dequantised weight row */
    int64_t row_cap;
    void *tasks;  /* attention tiles of the current batch */
    size_t tasks_cap;
};

void zl_fwd_set_exact(zl_fwd *f, int exact) { f->exact = exact; }
int zl_fwd_exact(const zl_fwd *f) { return f->exact; }

/* Reference matmul for exact mode: dequantise one weight row at a time (the
 * same dequantisers the fast path's blocks are defined by) and accumulate in
 * double.  Single-threaded and slow; it exists to pin the numerics. */
static int matmul_exact(zl_fwd *f, const zl_mat *W, const float *x, int64_t ldx, int n, float *y, int64_t ldy) {
    if (W->cols > f->row_cap) {
        float *r = realloc(f->row, (size_t)W->cols * sizeof *r);
        if (!r) return ZL_ENOMEM;
        f->row = r;
        f->row_cap = W->cols;
    }
    for (int64_t r = 0; r < W->rows; r++) {
        zl_dequant_row(W->type, (const uint8_t *)W->data + r * W->row_bytes, f->row, W->cols);
        for (int i = 0; i < n; i++) {
            double s = 0;
            for (int64_t c = 0; c < W->cols; c++) s += (double)f->row[c] * x[i * ldx + c];
            y[i * ldy + r] = (float)s;
        }
    }
    return 0;
}

static void matmul(const zl_model *m, zl_fwd *f, const zl_mat *W, const float *x, int64_t ldx, int n, float *y, int64_t ldy,
                   zl_pool *pool) {
    if (f->exact && matmul_exact(f, W, x, ldx, n, y, ldy) == 0) return;
    /* a dispatch costs microseconds (and far more when the machine is
     * oversubscribed): small products run on the calling thread */
    if ((double)W->rows * (double)W->cols * n < ZL_PARALLEL_MIN_MACS) pool = NULL;
    zl_matmul(m->kern, W, x, ldx, n, y, ldy, pool, &f->work);
}

/* h1 = act(h1) * h3 over n values, split over the pool when there is
 * enough of it (a batch: n tokens x ffn); each value's arithmetic is the
 * same on any thread, so results do not depend on the split.  act is SiLU
 * or GELU's tanh approximation. */
typedef struct { float *h1; const float *h3; size_t n; zl_ffn_act act; } swiglu_job;

static inline float gelu_tanh(float x) {
    const float c = 0.7978845608028654f; /* sqrt(2 / pi) */
    return 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x)));
}

static void swiglu_rows(void *ctx, int ith, int nth) {
    const swiglu_job *j = ctx;
    long b, e;
    zl_split((long)(j->n / 16), ith, nth, &b, &e); /* 16-value chunks: threads never share a cache line */
    size_t lo = (size_t)b * 16, hi = ith == nth - 1 ? j->n : (size_t)e * 16;
    float *h1 = j->h1;
    const float *h3 = j->h3;
    if (j->act == ZL_ACT_GELU_TANH)
        for (size_t i = lo; i < hi; i++) h1[i] = gelu_tanh(h1[i]) * h3[i];
    else
        for (size_t i = lo; i < hi; i++) h1[i] = h1[i] / (1.0f + expf(-h1[i])) * h3[i];
}

#define ZL_SWIGLU_PARALLEL_MIN 16384 /* values; below, a dispatch costs more than it saves */

static void swiglu(float *h1, const float *h3, size_t n, zl_ffn_act act, zl_pool *pool) {
    swiglu_job j = {h1, h3, n, act};
    zl_pool_run(n < ZL_SWIGLU_PARALLEL_MIN ? NULL : pool, swiglu_rows, &j);
}

zl_fwd *zl_fwd_new(void) { return calloc(1, sizeof(zl_fwd)); }

void zl_fwd_free(zl_fwd *f) {
    if (!f) return;
    free(f->buf);
    free(f->row);
    free(f->tasks);
    zl_work_free(&f->work);
    free(f);
}

static void rmsnorm(float *out, const float *x, const float *w, int n, float eps) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float scale = 1.0f / sqrtf((float)(ss / n) + eps);
    for (int i = 0; i < n; i++) out[i] = x[i] * scale * w[i];
}

static void store_row(zl_type t, void *dst, const float *src, int n) {
    if (t == ZL_TYPE_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
    } else if (t == ZL_TYPE_F16) {
        zl_f16 *d = dst;
        for (int i = 0; i < n; i++) d[i] = zl_f32_to_f16(src[i]);
    } else {
        zl_quantize_row(t, src, dst, n);
    }
}

/* Attention work comes in tiles (see tensor/attn.h): the query heads of one
 * KV head, for a run of up to ATTN_TOKENS consecutive batch tokens of the
 * same sequence.  The tiling is a function of the batch alone, and a row's
 * result does not depend on its tile, so outputs are the same whatever the
 * thread count.  Threads take tiles from a shared counter: causal tiles grow
 * with position, so a static split would leave threads idle. */
typedef struct {
    int tok0, ntok, kvh;
} attn_task;

typedef struct {
    const zl_model *m;
    zl_kv **kv;
    const zl_batch_tok *toks;
    int layer;
    int window; /* > 0: a sliding-window layer, rows see the last `window` positions */
    const float *q; /* [n][qd] */
    float *out;     /* [n][qd] */
    const attn_task *tasks;
    int n_tasks;
    atomic_int next;
    float *work;    /* [nth][work_floats] */
    size_t work_floats;
    zl_attn_fn fn;
} attn_job;

static void attn_worker(void *ctx, int ith, int nth) {
    (void)nth;
    attn_job *j = ctx;
    const zl_hparams *hp = &j->m->hp;
    const int hd = hp->head_dim, qd = hp->n_heads * hd, group = hp->n_heads / hp->n_kv_heads;
    float *work = j->work + (size_t)ith * j->work_floats;
    for (;;) {
        int k = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (k >= j->n_tasks) break;
        const attn_task *tk = &j->tasks[k];
        zl_kv *kv = j->kv[j->toks[tk->tok0].seq];
        /* a sliding window that has begun to slide: the tile is this one
         * token (attn_plan), and it sees the cache from slot `first` on */
        int first = 0, pos0 = j->toks[tk->tok0].pos;
        if (j->window > 0 && pos0 >= j->window) {
            first = zl_kv_slot(kv, j->layer, pos0 - j->window + 1);
            if (first < 0) first = 0;
        }
        const float *qr[ZL_ATTN_MAX_ROWS];
        float *orow[ZL_ATTN_MAX_ROWS];
        int len[ZL_ATTN_MAX_ROWS], rows = 0;
        for (int i = tk->tok0; i < tk->tok0 + tk->ntok; i++)
            for (int g = 0; g < group; g++, rows++) {
                int h = tk->kvh * group + g;
                qr[rows] = j->q + (size_t)i * qd + (size_t)h * hd;
                orow[rows] = j->out + (size_t)i * qd + (size_t)h * hd;
                len[rows] = zl_kv_slot(kv, j->layer, j->toks[i].pos) + 1 - first;
            }
        size_t head_off = (size_t)tk->kvh * zl_row_size(kv->type, hd);
        float *probs = zl_kv_scores(kv, ith, j->layer);
        zl_attn_tile t = {rows, hd, hp->attn_scale, qr, orow, len, kv->type,
                          (const uint8_t *)zl_kv_k(kv, j->layer, first) + head_off,
                          (const uint8_t *)zl_kv_v(kv, j->layer, first) + head_off, kv->row_bytes,
                          /* anchor policy: attention received per slot, one partition per thread */
                          probs ? probs + first : NULL,
                          work};
        j->fn(&t);
    }
}

/* Split the batch into attention tiles; returns the number of tasks.  A
 * token at a position >= solo_from gets a tile of its own (a sliding window
 * that has begun to slide starts at a different slot for every token). */
static int attn_plan(const zl_hparams *hp, const zl_batch_tok *toks, int n, int solo_from, attn_task *tasks) {
    const int group = hp->n_heads / hp->n_kv_heads;
    int per = ZL_ATTN_MAX_ROWS / group, nt = 0;
    if (per > ATTN_TOKENS) per = ATTN_TOKENS;
    if (per < 1) per = 1;
    for (int i = 0; i < n;) {
        int e = i + 1; /* a run: consecutive tokens of one sequence */
        if (toks[i].pos < solo_from)
            while (e < n && e - i < per && toks[e].seq == toks[i].seq && toks[e].pos < solo_from) e++;
        for (int h = 0; h < hp->n_kv_heads; h++) tasks[nt++] = (attn_task){i, e - i, h};
        i = e;
    }
    return nt;
}

static float *scratch(zl_fwd *f, size_t floats) {
    if (floats > f->cap) {
        float *nb = realloc(f->buf, floats * sizeof(float));
        if (!nb) return NULL;
        f->buf = nb;
        f->cap = floats;
    }
    return f->buf;
}

int zl_forward(const zl_model *m, zl_kv **kvs, const zl_batch_tok *toks, int n, float *logits, zl_fwd *f,
               zl_pool *pool, zl_err *err) {
    return zl_forward_part(m, kvs, toks, n, NULL, logits, f, pool, err);
}

int zl_forward_part(const zl_model *m, zl_kv **kvs, const zl_batch_tok *toks, int n, const zl_fwd_part *part,
                    float *logits, zl_fwd *f, zl_pool *pool, zl_err *err) {
    const zl_hparams *hp = &m->hp;
    if (n <= 0) return zl_errf(err, ZL_EINVAL, "empty batch");
    int l_begin = part ? part->layer_begin : 0, l_end = part ? part->layer_end : hp->n_layers;
    if (l_begin < 0 || l_end > hp->n_layers || l_begin >= l_end || (l_begin > 0 && !part->x_in))
        return zl_errf(err, ZL_EINVAL, "layers [%d, %d) of a %d-layer model%s", l_begin, l_end, hp->n_layers,
                       l_begin > 0 && part && !part->x_in ? " need the residual entering the first" : "");
    int dim = hp->dim, hd = hp->head_dim, qd = hp->n_heads * hd, kvd = hp->n_kv_heads * hd, ffn = hp->ffn_dim;
    int max_ctx = 0, n_out = 0, with_probs = 0;
    for (int i = 0; i < n; i++) {
        const zl_kv *kv = kvs[toks[i].seq];
        if (toks[i].token < 0 || toks[i].token >= hp->n_vocab)
            return zl_errf(err, ZL_EINVAL, "token id %d out of range (vocabulary has %d)", toks[i].token, hp->n_vocab);
        if (toks[i].pos < 0 || toks[i].pos >= kv->n_ctx)
            return zl_errf(err, ZL_ERANGE, "position %d is outside the context of %d tokens", toks[i].pos, kv->n_ctx);
        if (kv->kv_dim != kvd || kv->n_layers != hp->n_layers)
            return zl_errf(err, ZL_EINVAL, "KV cache shape does not match the model");
        if (toks[i].pos + 1 > max_ctx) max_ctx = toks[i].pos + 1;
        with_probs |= kv->score_part != NULL;
        n_out += toks[i].want_logits != 0;
    }
    int nth = zl_pool_size(pool), half = hp->rope_dim / 2;
    zl_rope rope = zl_model_rope(m), rope_swa = rope;
    int n_tab = 1; /* RoPE tables per token: the global layers' and, with sliding windows, the local layers' */
    if (hp->n_swa > 0) {
        rope_swa.base = hp->rope_base_swa;
        rope_swa.freq_scale = 1.0f;
        n_tab = 2;
    }
    size_t attn_work = zl_attn_work_floats(hd, ZL_ATTN_MAX_ROWS, max_ctx, with_probs);
    size_t need = (size_t)n * (2 * dim + 2 * qd + 2 * kvd + 2 * ffn + 2 * half * n_tab) + (size_t)nth * attn_work +
                  (size_t)(n_out ? n_out : 1) * dim;
    float *base = scratch(f, need);
    if (!base) return zl_errf(err, ZL_ENOMEM, "out of memory for a batch of %d tokens", n);
    float *x = base, *xb = x + (size_t)n * dim, *q = xb + (size_t)n * dim, *att = q + (size_t)n * qd;
    float *k = att + (size_t)n * qd, *v = k + (size_t)n * kvd, *h1 = v + (size_t)n * kvd, *h3 = h1 + (size_t)n * ffn;
    float *cs = h3 + (size_t)n * ffn, *sn = cs + (size_t)n * half * n_tab, *scores = sn + (size_t)n * half * n_tab;
    float *xo = scores + (size_t)nth * attn_work;
    size_t n_tasks_max = (size_t)n * hp->n_kv_heads * n_tab;
    if (n_tasks_max > f->tasks_cap) {
        void *nt = realloc(f->tasks, n_tasks_max * sizeof(attn_task));
        if (!nt) return zl_errf(err, ZL_ENOMEM, "out of memory for a batch of %d tokens", n);
        f->tasks = nt;
        f->tasks_cap = n_tasks_max;
    }
    attn_task *tasks = f->tasks, *tasks_swa = tasks + (size_t)n * hp->n_kv_heads;
    int n_tasks = attn_plan(hp, toks, n, 1 << 30, tasks);
    int n_tasks_swa = n_tab > 1 ? attn_plan(hp, toks, n, hp->n_swa, tasks_swa) : 0;
    zl_attn_fn attn_fn = zl_attn_fn_for(zl_kernels_isa(m->kern), hd);

    for (int i = 0; i < n; i++) {
        if (l_begin == 0) {
            float *xi = x + (size_t)i * dim;
            zl_dequant_row(m->tok_embd.type,
                           (const uint8_t *)m->tok_embd.data + (size_t)toks[i].token * m->tok_embd.row_bytes, xi, dim);
            if (hp->embd_scale != 1.0f)
                for (int j = 0; j < dim; j++) xi[j] *= hp->embd_scale;
        }
        zl_rope_table(&rope, toks[i].pos, cs + (size_t)i * half, sn + (size_t)i * half);
        if (n_tab > 1)
            zl_rope_table(&rope_swa, toks[i].pos, cs + (size_t)(n + i) * half, sn + (size_t)(n + i) * half);
    }
    if (l_begin > 0) memcpy(x, part->x_in, (size_t)n * dim * sizeof *x);

    for (int l = l_begin; l < l_end; l++) {
        const zl_layer *L = &m->layers[l];
        zl_prefetch_layer(m->prefetch, l);
        /* attention block */
        for (int i = 0; i < n; i++) rmsnorm(xb + (size_t)i * dim, x + (size_t)i * dim, L->attn_norm, dim, hp->norm_eps);
        if (!f->exact && (double)L->wq.rows * L->wq.cols * n >= ZL_PARALLEL_MIN_MACS) {
            const zl_mat *W3[3] = {&L->wq, &L->wk, &L->wv};
            float *Y3[3] = {q, k, v};
            zl_matmul_multi(m->kern, W3, 3, xb, n, Y3, pool, &f->work);
        } else {
            matmul(m, f, &L->wq, xb, dim, n, q, qd, pool);
            matmul(m, f, &L->wk, xb, dim, n, k, kvd, pool);
            matmul(m, f, &L->wv, xb, dim, n, v, kvd, pool);
        }
        const int tab = L->swa ? n : 0; /* this layer's RoPE tables */
        for (int i = 0; i < n; i++) {
            float *qi = q + (size_t)i * qd, *ki = k + (size_t)i * kvd, *vi = v + (size_t)i * kvd;
            if (L->bq) for (int j = 0; j < qd; j++) qi[j] += L->bq[j];
            if (L->bk) for (int j = 0; j < kvd; j++) ki[j] += L->bk[j];
            if (L->bv) for (int j = 0; j < kvd; j++) vi[j] += L->bv[j];
            if (L->q_norm) {
                for (int h = 0; h < hp->n_heads; h++) rmsnorm(qi + (size_t)h * hd, qi + (size_t)h * hd, L->q_norm, hd, hp->norm_eps);
                for (int h = 0; h < hp->n_kv_heads; h++) rmsnorm(ki + (size_t)h * hd, ki + (size_t)h * hd, L->k_norm, hd, hp->norm_eps);
            }
            const float *c = cs + (size_t)(tab + i) * half, *s = sn + (size_t)(tab + i) * half;
            /* the table carries the base: both ropes rotate alike given it */
            for (int h = 0; h < hp->n_heads; h++) zl_rope_apply(&rope, qi + (size_t)h * hd, c, s);
            for (int h = 0; h < hp->n_kv_heads; h++) zl_rope_apply(&rope, ki + (size_t)h * hd, c, s);
            zl_kv *kv = kvs[toks[i].seq];
            int slot = zl_kv_slot(kv, l, toks[i].pos);
            store_row(kv->type, zl_kv_k(kv, l, slot), ki, kvd);
            store_row(kv->type, zl_kv_v(kv, l, slot), vi, kvd);
        }
        attn_job aj = {m, kvs, toks, l, L->swa ? hp->n_swa : 0, q, att, L->swa ? tasks_swa : tasks,
                       L->swa ? n_tasks_swa : n_tasks, 0, scores, attn_work, attn_fn};
        double attn_macs = 2.0 * n * hp->n_heads * (double)max_ctx * hd;
        zl_pool_run(attn_macs < ZL_PARALLEL_MIN_MACS ? NULL : pool, attn_worker, &aj);
        matmul(m, f, &L->wo, att, qd, n, xb, dim, pool);
        if (L->post_attn_norm)
            for (int i = 0; i < n; i++) rmsnorm(xb + (size_t)i * dim, xb + (size_t)i * dim, L->post_attn_norm, dim, hp->norm_eps);
        for (size_t i = 0; i < (size_t)n * dim; i++) x[i] += xb[i];

        /* feed-forward block: down(silu(gate(x)) * up(x)) */
        for (int i = 0; i < n; i++) rmsnorm(xb + (size_t)i * dim, x + (size_t)i * dim, L->ffn_norm, dim, hp->norm_eps);
        if (!f->exact && (double)L->w_gate.rows * L->w_gate.cols * n >= ZL_PARALLEL_MIN_MACS) {
            const zl_mat *W2[2] = {&L->w_gate, &L->w_up};
            float *Y2[2] = {h1, h3};
            zl_matmul_multi(m->kern, W2, 2, xb, n, Y2, pool, &f->work);
        } else {
            matmul(m, f, &L->w_gate, xb, dim, n, h1, ffn, pool);
            matmul(m, f, &L->w_up, xb, dim, n, h3, ffn, pool);
        }
        swiglu(h1, h3, (size_t)n * ffn, hp->ffn_act, pool);
        matmul(m, f, &L->w_down, h1, ffn, n, xb, dim, pool);
        if (L->post_ffn_norm)
            for (int i = 0; i < n; i++) rmsnorm(xb + (size_t)i * dim, xb + (size_t)i * dim, L->post_ffn_norm, dim, hp->norm_eps);
        for (size_t i = 0; i < (size_t)n * dim; i++) x[i] += xb[i];
    }
    if (part && part->x_out) memcpy(part->x_out, x, (size_t)n * dim * sizeof *x);
    for (int i = 0; i < n; i++) zl_kv_cover(kvs[toks[i].seq], toks[i].pos, part && part->keep_used);
    if (!n_out) return 0;
    if (l_end == hp->n_layers) zl_prefetch_layer(m->prefetch, hp->n_layers - 1); /* output matrix, then the first layers again */
    int o = 0;
    for (int i = 0; i < n; i++)
        if (toks[i].want_logits) rmsnorm(xo + (size_t)(o++) * dim, x + (size_t)i * dim, m->output_norm, dim, hp->norm_eps);
    matmul(m, f, &m->output, xo, dim, n_out, logits, hp->n_vocab, pool);
    if (hp->final_softcap > 0) {
        const float c = hp->final_softcap;
        for (size_t i = 0; i < (size_t)n_out * hp->n_vocab; i++) logits[i] = c * tanhf(logits[i] / c);
    }
    return 0;
}
