/* forward.c — the llama-family forward pass over a batch of tokens.
 *
 * Reads like the math: for each layer, RMSNorm -> Q/K/V projections -> RoPE
 * -> write K/V into each token's sequence cache -> causal attention over that
 * cache -> output projection + residual -> RMSNorm -> SwiGLU FFN + residual.
 * All matrix products go through zl_matmul (fused dequant·dot, threaded);
 * attention is threaded over (token, head) pairs.  Must never allocate per
 * layer or touch anything but its arguments and its zl_fwd scratch. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/cpu.h"
#include "../tensor/attn.h"
#include "../tensor/rope.h"
#include "model.h"
#include "prefetch.h"

/* Below this many multiply-adds an operation is not worth a thread dispatch. */
#define ZL_PARALLEL_MIN_MACS (1 << 20)

struct zl_fwd {
    float *buf;
    size_t cap;   /* floats in buf */
    zl_work work; /* activation quantisation scratch */
    int exact;    /* reference arithmetic: f32 activations, f64 sums */
    float *row;   /* exact mode: one dequantised weight row */
    int64_t row_cap;
};

void zl_fwd_set_exact(zl_fwd *f, int exact) { f->exact = exact; }

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

static void matmul(zl_fwd *f, const zl_mat *W, const float *x, int64_t ldx, int n, float *y, int64_t ldy,
                   zl_pool *pool) {
    if (f->exact && matmul_exact(f, W, x, ldx, n, y, ldy) == 0) return;
    /* a dispatch costs microseconds (and far more when the machine is
     * oversubscribed): small products run on the calling thread */
    if ((double)W->rows * (double)W->cols * n < ZL_PARALLEL_MIN_MACS) pool = NULL;
    zl_matmul(W, x, ldx, n, y, ldy, pool, &f->work);
}

zl_fwd *zl_fwd_new(void) { return calloc(1, sizeof(zl_fwd)); }

void zl_fwd_free(zl_fwd *f) {
    if (!f) return;
    free(f->buf);
    free(f->row);
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

typedef struct {
    const zl_model *m;
    zl_kv **kv;
    const zl_batch_tok *toks;
    int n, layer;
    const float *q;  /* [n][qd] */
    float *out;      /* [n][qd] */
    float *scores;   /* [nth][max_ctx] */
    int max_ctx;
    zl_attn_kernels kf16, kf32, kq8;
} attn_job;

static void attn_worker(void *ctx, int ith, int nth) {
    attn_job *j = ctx;
    const zl_hparams *hp = &j->m->hp;
    int hd = hp->head_dim, qd = hp->n_heads * hd, group = hp->n_heads / hp->n_kv_heads;
    float scale = 1.0f / sqrtf((float)hd);
    float *sc = j->scores + (size_t)ith * j->max_ctx;
    long b, e;
    zl_split((long)j->n * hp->n_heads, ith, nth, &b, &e);
    for (long task = b; task < e; task++) {
        int i = (int)(task / hp->n_heads), h = (int)(task % hp->n_heads);
        const zl_kv *kv = j->kv[j->toks[i].seq];
        const zl_attn_kernels *K = kv->type == ZL_TYPE_F16 ? &j->kf16 : kv->type == ZL_TYPE_F32 ? &j->kf32 : &j->kq8;
        size_t head_off = (size_t)(h / group) * zl_row_size(kv->type, hd);
        int len = j->toks[i].pos + 1;
        const float *q = j->q + (size_t)i * qd + (size_t)h * hd;
        float mx = -INFINITY;
        for (int p = 0; p < len; p++) {
            const uint8_t *kr = zl_kv_k(kv, j->layer, p);
            sc[p] = K->kdot(kr + head_off, q, hd) * scale;
            if (sc[p] > mx) mx = sc[p];
        }
        double sum = 0;
        for (int p = 0; p < len; p++) {
            sc[p] = expf(sc[p] - mx);
            sum += sc[p];
        }
        float inv = (float)(1.0 / sum);
        if (kv->score_part && ith < kv->score_nth) { /* anchor policy: attention received, O(1) per slot */
            float *acc = kv->score_part + (size_t)ith * kv->n_ctx;
            for (int p = 0; p < len; p++) acc[p] += sc[p] * inv;
        }
        float *o = j->out + (size_t)i * qd + (size_t)h * hd;
        memset(o, 0, (size_t)hd * sizeof(float));
        for (int p = 0; p < len; p++) {
            const uint8_t *vr = zl_kv_v(kv, j->layer, p);
            K->vaxpy(sc[p] * inv, vr + head_off, o, hd);
        }
    }
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
    const zl_hparams *hp = &m->hp;
    if (n <= 0) return zl_errf(err, ZL_EINVAL, "empty batch");
    int dim = hp->dim, hd = hp->head_dim, qd = hp->n_heads * hd, kvd = hp->n_kv_heads * hd, ffn = hp->ffn_dim;
    int max_ctx = 0, n_out = 0;
    for (int i = 0; i < n; i++) {
        const zl_kv *kv = kvs[toks[i].seq];
        if (toks[i].token < 0 || toks[i].token >= hp->n_vocab)
            return zl_errf(err, ZL_EINVAL, "token id %d out of range (vocabulary has %d)", toks[i].token, hp->n_vocab);
        if (toks[i].pos < 0 || toks[i].pos >= kv->n_ctx)
            return zl_errf(err, ZL_ERANGE, "position %d is outside the context of %d tokens", toks[i].pos, kv->n_ctx);
        if (kv->kv_dim != kvd || kv->n_layers != hp->n_layers)
            return zl_errf(err, ZL_EINVAL, "KV cache shape does not match the model");
        if (toks[i].pos + 1 > max_ctx) max_ctx = toks[i].pos + 1;
        n_out += toks[i].want_logits != 0;
    }
    int nth = zl_pool_size(pool), half = hp->rope_dim / 2;
    zl_rope rope = zl_model_rope(m);
    size_t need = (size_t)n * (2 * dim + 2 * qd + 2 * kvd + 2 * ffn + 2 * half) + (size_t)nth * max_ctx +
                  (size_t)(n_out ? n_out : 1) * dim;
    float *base = scratch(f, need);
    if (!base) return zl_errf(err, ZL_ENOMEM, "out of memory for a batch of %d tokens", n);
    float *x = base, *xb = x + (size_t)n * dim, *q = xb + (size_t)n * dim, *att = q + (size_t)n * qd;
    float *k = att + (size_t)n * qd, *v = k + (size_t)n * kvd, *h1 = v + (size_t)n * kvd, *h3 = h1 + (size_t)n * ffn;
    float *cs = h3 + (size_t)n * ffn, *sn = cs + (size_t)n * half, *scores = sn + (size_t)n * half;
    float *xo = scores + (size_t)nth * max_ctx;

    for (int i = 0; i < n; i++) {
        zl_dequant_row(m->tok_embd.type, (const uint8_t *)m->tok_embd.data + (size_t)toks[i].token * m->tok_embd.row_bytes,
                       x + (size_t)i * dim, dim);
        zl_rope_table(&rope, toks[i].pos, cs + (size_t)i * half, sn + (size_t)i * half);
    }

    for (int l = 0; l < hp->n_layers; l++) {
        const zl_layer *L = &m->layers[l];
        zl_prefetch_layer(m->prefetch, l);
        /* attention block */
        for (int i = 0; i < n; i++) rmsnorm(xb + (size_t)i * dim, x + (size_t)i * dim, L->attn_norm, dim, hp->norm_eps);
        if (n == 1 && !f->exact && (double)L->wq.rows * L->wq.cols >= ZL_PARALLEL_MIN_MACS) {
            const zl_mat *W3[3] = {&L->wq, &L->wk, &L->wv};
            float *Y3[3] = {q, k, v};
            zl_matmul_multi(W3, 3, xb, Y3, pool, &f->work);
        } else {
            matmul(f, &L->wq, xb, dim, n, q, qd, pool);
            matmul(f, &L->wk, xb, dim, n, k, kvd, pool);
            matmul(f, &L->wv, xb, dim, n, v, kvd, pool);
        }
        for (int i = 0; i < n; i++) {
            float *qi = q + (size_t)i * qd, *ki = k + (size_t)i * kvd, *vi = v + (size_t)i * kvd;
            if (L->bq) for (int j = 0; j < qd; j++) qi[j] += L->bq[j];
            if (L->bk) for (int j = 0; j < kvd; j++) ki[j] += L->bk[j];
            if (L->bv) for (int j = 0; j < kvd; j++) vi[j] += L->bv[j];
            const float *c = cs + (size_t)i * half, *s = sn + (size_t)i * half;
            for (int h = 0; h < hp->n_heads; h++) zl_rope_apply(&rope, qi + (size_t)h * hd, c, s);
            for (int h = 0; h < hp->n_kv_heads; h++) zl_rope_apply(&rope, ki + (size_t)h * hd, c, s);
            zl_kv *kv = kvs[toks[i].seq];
            store_row(kv->type, zl_kv_k(kv, l, toks[i].pos), ki, kvd);
            store_row(kv->type, zl_kv_v(kv, l, toks[i].pos), vi, kvd);
        }
        attn_job aj = {m, kvs, toks, n, l, q, att, scores, max_ctx, zl_attn_kernels_for(ZL_TYPE_F16, zl_cpu_isa()),
                       zl_attn_kernels_for(ZL_TYPE_F32, zl_cpu_isa()),
                       zl_attn_kernels_for(ZL_TYPE_Q8_0, zl_cpu_isa())};
        double attn_macs = 2.0 * n * hp->n_heads * (double)max_ctx * hd;
        zl_pool_run(attn_macs < ZL_PARALLEL_MIN_MACS ? NULL : pool, attn_worker, &aj);
        matmul(f, &L->wo, att, qd, n, xb, dim, pool);
        for (size_t i = 0; i < (size_t)n * dim; i++) x[i] += xb[i];

        /* feed-forward block: down(silu(gate(x)) * up(x)) */
        for (int i = 0; i < n; i++) rmsnorm(xb + (size_t)i * dim, x + (size_t)i * dim, L->ffn_norm, dim, hp->norm_eps);
        if (n == 1 && !f->exact && (double)L->w_gate.rows * L->w_gate.cols >= ZL_PARALLEL_MIN_MACS) {
            const zl_mat *W2[2] = {&L->w_gate, &L->w_up};
            float *Y2[2] = {h1, h3};
            zl_matmul_multi(W2, 2, xb, Y2, pool, &f->work);
        } else {
            matmul(f, &L->w_gate, xb, dim, n, h1, ffn, pool);
            matmul(f, &L->w_up, xb, dim, n, h3, ffn, pool);
        }
        for (size_t i = 0; i < (size_t)n * ffn; i++) h1[i] = h1[i] / (1.0f + expf(-h1[i])) * h3[i];
        matmul(f, &L->w_down, h1, ffn, n, xb, dim, pool);
        for (size_t i = 0; i < (size_t)n * dim; i++) x[i] += xb[i];
    }
    for (int i = 0; i < n; i++) {
        zl_kv *kv = kvs[toks[i].seq];
        if (toks[i].pos + 1 > kv->n_used) kv->n_used = toks[i].pos + 1;
    }
    if (!n_out) return 0;
    zl_prefetch_layer(m->prefetch, hp->n_layers - 1); /* output matrix, then the first layers again */
    int o = 0;
    for (int i = 0; i < n; i++)
        if (toks[i].want_logits) rmsnorm(xo + (size_t)(o++) * dim, x + (size_t)i * dim, m->output_norm, dim, hp->norm_eps);
    matmul(f, &m->output, xo, dim, n_out, logits, hp->n_vocab, pool);
    return 0;
}
