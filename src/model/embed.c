/* embed.c — write a large-shaped llama model whose function is a small
 * model's (`zerolayer synth --embed-from`).
 *
 * Owns: what every weight of the embedding is.  Storage types, threads and
 * streaming are quantize.c's (zl_write_generated): each big tensor is a row
 * function that starts from synth's seeded random row and overwrites what the
 * construction fixes.  The small model is read through the model loader
 * (mmap'd, rows dequantised on demand), so memory stays two rows per thread.
 *
 * Notation.  Small: width d, ffn f, Ls layers, Hs query heads, Ks kv heads,
 * head dim hd, group gs = Hs/Ks.  Big: D, F, L, H, K, head dim HD = D/H,
 * group G = H/K, and r = HD/hd.
 *
 * 1. Residual.  Invariant: after the embedding and after every layer the big
 *    residual is (x, 0): the small residual in dims [0,d), exact zeros above.
 *    token_embd rows are (small row, 0); every matrix that adds into the
 *    residual (attn_output, ffn_down) has all-zero rows >= d.
 *
 * 2. RMSNorm.  With residual (x, 0) the big norm computes
 *    x / sqrt(|x|^2/D + eps_b) * w_b.  Taking eps_b = eps * d/D,
 *    sqrt(|x|^2/D + eps*d/D) = sqrt(d/D) * sqrt(|x|^2/d + eps), i.e. the big
 *    divisor is the small one times sqrt(d/D) (smaller: the mean runs over D
 *    mostly-zero dims), so the normalised value comes out sqrt(D/d) too large
 *    and w_b = w * sqrt(d/D) takes it back — for attn_norm, ffn_norm and
 *    output_norm.  Scaling eps as well makes this exact for any |x|, not only
 *    when |x|^2/d >> eps.  Norm dims >= d multiply zeros (any value; they get
 *    sqrt(d/D) times the mean of the small weights).
 *
 * 3. Projections out of a norm (q, k, v, gate, up, output) see (n, 0): their
 *    columns >= d multiply zeros and are random; a row that carries a small
 *    row has that row in columns [0,d).
 *
 * 4. Heads and RoPE.  Our llama path (rope.h with neox = 0, forward.c)
 *    rotates adjacent pairs (2i, 2i+1) of each head by the angle
 *    pos * base^(-2i/rope_dim), rope_dim = head dim.  Big pair J = j*r turns
 *    by base^(-2jr/HD) = base^(-2j/hd), small pair j's angle, so small head
 *    dim 2j+p maps to big head dim 2jr+p: a pair lands on one pair, and the
 *    rotation commutes with the map (base copied from the small model).  Big
 *    pairs that are not multiples of r rotate only among themselves.  Head
 *    map: small query head h = g*gs + i (kv head g, i-th of its group) ->
 *    big query head g*G + i; small kv head g -> big kv head g.  Under GQA the
 *    big query head reads kv head (g*G + i)/G = g, so this needs i < G
 *    (G >= gs) and g < K (K >= Ks); and HD a multiple of hd.
 *    Scores: a used big head's q.k sums the mapped dims (the small q.k) and
 *    the unmapped dims; the latter vanish because in used kv heads the wk
 *    rows of unmapped dims are zero in columns [0,d) (k is zero there, before
 *    and after rotation), so the wq rows of those dims can stay random.  The
 *    big softmax scales by 1/sqrt(HD), the small one by 1/sqrt(hd): mapped wq
 *    rows are multiplied by sqrt(HD/hd).  Then a used big head's softmax
 *    weights equal the small head's, and its output at mapped dims equals the
 *    small head's output.
 *    attn_output: row < d, column of a mapped (head, dim) = the small entry;
 *    every other column is zero (unused heads, and unmapped dims whose v rows
 *    are random); rows >= d zero.  Unused heads (query heads with i >= gs or
 *    g >= Ks, kv heads >= Ks) have random wq/wk/wv rows.
 *
 * 5. FFN.  gate/up rows < f are the small rows (columns [0,d)); rows >= f
 *    random, so silu(gate)*up there is noise and ffn_down columns >= f are
 *    zero; ffn_down rows < d hold the small rows in columns [0,f); rows >= d
 *    zero.
 *
 * 6. Extra layers (L > Ls) come after the small ones: attn_output and
 *    ffn_down all zero, so each adds nothing to the residual; norms are the
 *    last small layer's (scaled as in 2), the other matrices random.
 *    output rows = the small output row (the small token_embd when the small
 *    model ties them) in columns [0,d), random above.  Vocabulary and every
 *    tokenizer.* key (special tokens, chat template) are copied.
 *
 * 7. --perturb P > 0: the extra layers' attn_output and ffn_down rows < d
 *    become random with standard deviation P * rms(the small model's matrix
 *    of that kind, all layers) * sqrt(n_small / n_big), n the row length
 *    (attention width or ffn): a row's sum over n_big random products then
 *    has about P times the spread of a small row's sum over inputs of equal
 *    magnitude.  Rows >= d stay zero, so 1-2 still hold and the big model is
 *    the small model followed by L - Ls residual updates before the output
 *    norm: a different model (a draft model acceptance < 100%) whose first
 *    Ls layers are still exactly the small model (so the small model and
 *    --draft-layers Ls draft the same tokens).
 *
 * Zero by construction: token_embd columns >= d; attn_output rows >= d and
 * unmapped columns; ffn_down rows >= d and columns >= f; wk rows of unmapped
 * dims of used kv heads in columns < d.  Everything else that the output does
 * not depend on is synth's seeded N(0, 0.02^2), so a file is reproducible
 * from --seed and independent of the thread count.  In exact arithmetic the
 * logits are the small model's; in floating point they differ by rounding
 * (the sqrt factors, longer sums), and a quantised target rounds the small
 * weights like any quantisation would. */
#include "embed.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../base/clock.h"
#include "model.h"

typedef struct emb {
    const zl_model *sm;
    int d, f, Ls, Hs, Ks, hd, gs, qd_s; /* small */
    int D, F, L, H, K, HD, G, r;        /* big */
    float s_norm, s_q;                  /* sqrt(d/D), sqrt(HD/hd) */
    float pert_o, pert_down;            /* multipliers of a 0.02-sd random row; 0 = off */
} emb;

typedef enum { E_TOK, E_OUT_NORM, E_OUT, E_ATTN_NORM, E_Q, E_K, E_V, E_O, E_FFN_NORM, E_GATE, E_DOWN, E_UP } ekind;

typedef struct etensor {
    const emb *e;
    ekind kind;
    int layer;
    uint64_t seed;
} etensor;

#define UNUSED_HEAD (-1)
#define UNMAPPED_DIM (-2)

/* Big row of a q (kv = 0) or k/v (kv = 1) projection -> the small row it
 * carries, or UNUSED_HEAD / UNMAPPED_DIM. */
static int64_t small_row(const emb *e, int64_t R, int kv) {
    int hb = (int)(R / e->HD), c = (int)(R % e->HD), hs;
    if (kv) {
        if (hb >= e->Ks) return UNUSED_HEAD;
        hs = hb;
    } else {
        int g = hb / e->G, i = hb % e->G;
        if (g >= e->Ks || i >= e->gs) return UNUSED_HEAD;
        hs = g * e->gs + i;
    }
    int J = c / 2, p = c % 2;
    if (J % e->r) return UNMAPPED_DIM;
    return (int64_t)hs * e->hd + 2 * (J / e->r) + p;
}

/* Small attention-output column (head, dim) -> big column. */
static int64_t big_col(const emb *e, int64_t cs) {
    int h = (int)(cs / e->hd), c = (int)(cs % e->hd);
    int hb = (h / e->gs) * e->G + h % e->gs;
    return (int64_t)hb * e->HD + 2 * (c / 2) * e->r + c % 2;
}

static void mat_row(const zl_mat *m, int64_t row, float *dst) {
    zl_dequant_row(m->type, (const uint8_t *)m->data + (size_t)row * m->row_bytes, dst, m->cols);
}

static void norm_row(const emb *e, const float *w, float *dst, int64_t n) {
    double mean = 0;
    for (int i = 0; i < e->d; i++) mean += w[i];
    mean /= e->d;
    for (int64_t i = 0; i < n; i++) dst[i] = e->s_norm * (i < e->d ? w[i] : (float)mean);
}

static void fill(const void *ctx, int64_t row, float *dst, int64_t n, float *tmp) {
    const etensor *t = ctx;
    const emb *e = t->e;
    const zl_model *m = e->sm;
    int small = t->layer < e->Ls;
    const zl_layer *SL = &m->layers[small ? t->layer : e->Ls - 1];
    int64_t sr;
    switch (t->kind) {
    case E_TOK:
        memset(dst, 0, (size_t)n * sizeof *dst);
        mat_row(&m->tok_embd, row, dst);
        return;
    case E_OUT_NORM: norm_row(e, m->output_norm, dst, n); return;
    case E_ATTN_NORM: norm_row(e, SL->attn_norm, dst, n); return;
    case E_FFN_NORM: norm_row(e, SL->ffn_norm, dst, n); return;
    case E_O:
    case E_DOWN: {
        float pert = t->kind == E_O ? e->pert_o : e->pert_down;
        if (row < e->d && !small && pert > 0) {
            zl_gen_random_row(t->seed, row, dst, n);
            for (int64_t i = 0; i < n; i++) dst[i] *= pert;
            return;
        }
        memset(dst, 0, (size_t)n * sizeof *dst);
        if (row >= e->d || !small) return;
        if (t->kind == E_DOWN) {
            mat_row(&SL->w_down, row, dst); /* columns [0,f) */
        } else {
            mat_row(&SL->wo, row, tmp);
            for (int64_t c = 0; c < e->qd_s; c++) dst[big_col(e, c)] = tmp[c];
        }
        return;
    }
    default: break;
    }
    /* the rest start random; columns >= d always stay so */
    zl_gen_random_row(t->seed, row, dst, n);
    switch (t->kind) {
    case E_OUT: mat_row(&m->output, row, dst); return;
    case E_Q:
        if (!small || (sr = small_row(e, row, 0)) < 0) return;
        mat_row(&SL->wq, sr, dst);
        for (int i = 0; i < e->d; i++) dst[i] *= e->s_q;
        return;
    case E_K:
    case E_V:
        if (!small || (sr = small_row(e, row, 1)) == UNUSED_HEAD) return;
        if (sr >= 0) mat_row(t->kind == E_K ? &SL->wk : &SL->wv, sr, dst);
        else if (t->kind == E_K) memset(dst, 0, (size_t)e->d * sizeof *dst); /* q.k over unmapped dims = 0 */
        return;
    case E_GATE:
    case E_UP:
        if (small && row < e->f) mat_row(t->kind == E_GATE ? &SL->w_gate : &SL->w_up, row, dst);
        return;
    default: return;
    }
}

/* Root mean square of one kind of matrix over all small layers. */
static double small_rms(const emb *e, int down, float *buf) {
    double ss = 0, cnt = 0;
    for (int l = 0; l < e->Ls; l++) {
        const zl_mat *M = down ? &e->sm->layers[l].w_down : &e->sm->layers[l].wo;
        for (int64_t r = 0; r < M->rows; r++) {
            mat_row(M, r, buf);
            for (int64_t c = 0; c < M->cols; c++) ss += (double)buf[c] * buf[c];
        }
        cnt += (double)M->rows * (double)M->cols;
    }
    return cnt > 0 ? sqrt(ss / cnt) : 0;
}

static int check(const zl_embed_params *p, const zl_model *sm, zl_err *err) {
    const zl_hparams *s = &sm->hp;
    zl_synth_params sp = {0};
    sp.dim = p->dim, sp.ffn = p->ffn, sp.n_layers = p->n_layers, sp.n_heads = p->n_heads, sp.n_kv_heads = p->n_kv_heads;
    int rc = zl_synth_check_shape(&sp, err);
    if (rc) return rc;
    if (strcmp(s->arch, "llama") && strcmp(s->arch, "mistral"))
        return zl_errf(err, ZL_EUNSUP,
                       "the small model's architecture is '%s'; --embed-from needs a llama model (adjacent-pair RoPE, "
                       "no attention biases)",
                       s->arch);
    for (int l = 0; l < s->n_layers; l++)
        if (sm->layers[l].bq || sm->layers[l].bk || sm->layers[l].bv)
            return zl_errf(err, ZL_EUNSUP, "the small model has attention biases (layer %d), which --embed-from cannot map",
                           l);
    if (s->rope_dim != s->head_dim)
        return zl_errf(err, ZL_EUNSUP,
                       "the small model rotates %d of its %d head dimensions; --embed-from needs rope dimension = head "
                       "dimension",
                       s->rope_dim, s->head_dim);
    int HD = p->dim / p->n_heads;
    if (p->dim < s->dim)
        return zl_errf(err, ZL_EINVAL, "--dim %d is smaller than the small model's width %d", p->dim, s->dim);
    if (p->ffn < s->ffn_dim)
        return zl_errf(err, ZL_EINVAL, "--ffn %d is smaller than the small model's ffn %d", p->ffn, s->ffn_dim);
    if (p->n_layers < s->n_layers)
        return zl_errf(err, ZL_EINVAL, "--layers %d is fewer than the small model's %d layers", p->n_layers,
                       s->n_layers);
    if (HD % s->head_dim)
        return zl_errf(err, ZL_EINVAL,
                       "head dimension %d (--dim %d / --heads %d) is not a multiple of the small model's head "
                       "dimension %d",
                       HD, p->dim, p->n_heads, s->head_dim);
    if (p->n_kv_heads < s->n_kv_heads)
        return zl_errf(err, ZL_EINVAL, "--kv-heads %d is fewer than the small model's %d kv heads", p->n_kv_heads,
                       s->n_kv_heads);
    if (p->n_heads / p->n_kv_heads < s->n_heads / s->n_kv_heads)
        return zl_errf(err, ZL_EINVAL,
                       "query heads per kv head %d (--heads %d / --kv-heads %d) is below the small model's %d "
                       "(%d / %d)",
                       p->n_heads / p->n_kv_heads, p->n_heads, p->n_kv_heads, s->n_heads / s->n_kv_heads, s->n_heads,
                       s->n_kv_heads);
    if (!(p->perturb >= 0) || !isfinite(p->perturb))
        return zl_errf(err, ZL_EINVAL, "--perturb must be a finite number >= 0");
    if (p->perturb > 0 && p->n_layers == s->n_layers)
        return zl_errf(err, ZL_EINVAL, "--perturb acts through the extra layers: --layers must exceed the small model's %d",
                       s->n_layers);
    return 0;
}

static int metadata(zl_gguf_writer *s, const zl_embed_params *p, const zl_model *sm) {
    const zl_hparams *h = &sm->hp;
    zl_synth_params sp = {0};
    sp.dim = p->dim, sp.ffn = p->ffn, sp.n_layers = p->n_layers, sp.n_heads = p->n_heads, sp.n_kv_heads = p->n_kv_heads;
    sp.n_ctx = p->n_ctx > 0 ? p->n_ctx : h->n_ctx_train;
    sp.rope_base = h->rope_base;
    sp.target = p->target;
    int rc = zl_llama_metadata(s, &sp, sm->gguf);
    char name[200];
    snprintf(name, sizeof name, "zerolayer-embed of %s", sm->name[0] ? sm->name : "?");
    rc |= zl_gguf_set_str(s, "general.name", name);
    rc |= zl_gguf_set_f32(s, "llama.attention.layer_norm_rms_epsilon", h->norm_eps * (float)h->dim / (float)p->dim);
    if (h->rope_freq_scale != 1.0f) {
        rc |= zl_gguf_set_str(s, "llama.rope.scaling.type", "linear");
        rc |= zl_gguf_set_f32(s, "llama.rope.scaling.factor", 1.0f / h->rope_freq_scale);
    }
    rc |= zl_gguf_set_u32(s, "zerolayer.embed.source_layers", (uint32_t)h->n_layers);
    rc |= zl_gguf_set_u32(s, "zerolayer.embed.source_dim", (uint32_t)h->dim);
    rc |= zl_gguf_set_f32(s, "zerolayer.embed.perturb", p->perturb);
    return rc;
}

static ekind kind_of(const char *name) {
    static const struct { const char *suffix; ekind k; } map[] = {
        {"token_embd.weight", E_TOK},  {"output_norm.weight", E_OUT_NORM}, {"output.weight", E_OUT},
        {"attn_norm.weight", E_ATTN_NORM}, {"attn_q.weight", E_Q},        {"attn_k.weight", E_K},
        {"attn_v.weight", E_V},        {"attn_output.weight", E_O},       {"ffn_norm.weight", E_FFN_NORM},
        {"ffn_gate.weight", E_GATE},   {"ffn_down.weight", E_DOWN},       {"ffn_up.weight", E_UP}};
    const char *s = strchr(name, '.');
    s = !strncmp(name, "blk.", 4) && s ? strchr(s + 1, '.') + 1 : name;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(s, map[i].suffix)) return map[i].k;
    return E_TOK; /* not reached: zl_llama_tensors names only these */
}

int zl_embed_file(const zl_embed_params *p, zl_qstats *st, zl_err *err) {
    zl_qstats local;
    if (!st) st = &local;
    memset(st, 0, sizeof *st);
    double t0 = zl_now_s();
    zl_model *sm;
    int rc = zl_model_load(&sm, p->small_path, NULL, err);
    if (rc) return rc;
    rc = check(p, sm, err);
    if (rc) {
        zl_model_free(sm);
        return rc;
    }
    const zl_hparams *h = &sm->hp;
    emb e = {sm, h->dim, h->ffn_dim, h->n_layers, h->n_heads, h->n_kv_heads, h->head_dim,
             h->n_heads / h->n_kv_heads, h->n_heads * h->head_dim,
             p->dim, p->ffn, p->n_layers, p->n_heads, p->n_kv_heads, p->dim / p->n_heads,
             p->n_heads / p->n_kv_heads, (p->dim / p->n_heads) / h->head_dim,
             sqrtf((float)h->dim / (float)p->dim), sqrtf((float)(p->dim / p->n_heads) / (float)h->head_dim), 0, 0};
    zl_synth_params sp = {0};
    sp.dim = p->dim, sp.ffn = p->ffn, sp.n_layers = p->n_layers, sp.n_heads = p->n_heads, sp.n_kv_heads = p->n_kv_heads;
    sp.seed = p->seed;
    int n = 0;
    zl_gen_tensor *ts = zl_llama_tensors(&sp, h->n_vocab, &n);
    etensor *et = calloc((size_t)n + 1, sizeof *et);
    zl_gguf_writer *s = zl_gguf_writer_new();
    int64_t wide = e.qd_s > e.f ? e.qd_s : e.f;
    float *buf = malloc((size_t)wide * sizeof *buf);
    if (!ts || !et || !s || !buf) rc = zl_errf(err, ZL_ENOMEM, "out of memory");
    if (!rc && p->perturb > 0) {
        /* a row of n_big products of sd sigma has sd sigma*sqrt(n_big); see 7 */
        e.pert_o = (float)(p->perturb * small_rms(&e, 0, buf) * sqrt((double)e.qd_s / p->dim) / 0.02);
        e.pert_down = (float)(p->perturb * small_rms(&e, 1, buf) * sqrt((double)e.f / p->ffn) / 0.02);
    }
    for (int i = 0; !rc && i < n; i++) {
        int layer = -1;
        if (sscanf(ts[i].name, "blk.%d.", &layer) != 1) layer = -1;
        et[i] = (etensor){&e, kind_of(ts[i].name), layer, ts[i].seed};
        ts[i].kind = ZL_GEN_FUNC;
        ts[i].fill = fill;
        ts[i].ctx = &et[i];
    }
    if (!rc && metadata(s, p, sm)) rc = zl_errf(err, ZL_ENOMEM, "out of memory");
    if (!rc) rc = zl_write_generated(s, p->out_path, ts, n, &p->target, p->n_layers, &p->opts, st, err);
    zl_gguf_writer_free(s);
    free(buf);
    free(et);
    free(ts);
    zl_model_free(sm);
    if (rc) return rc;
    st->seconds = zl_now_s() - t0;
    return 0;
}
