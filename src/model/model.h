/* model.h — llama-family models: hyper-parameters, weight binding, forward.
 *
 * A zl_model is read-only after load and may be shared by many threads and
 * sequences: weights point into the GGUF mapping (never copied, never
 * dequantised in bulk); only small norm/bias vectors that are not F32 in the
 * file are converted into model-owned memory.  Per-sequence state lives in
 * zl_kv; per-call scratch lives in zl_fwd. */
#ifndef ZL_MODEL_H
#define ZL_MODEL_H

#include <stdint.h>

#include "../base/err.h"
#include "../base/pool.h"
#include "../gguf/gguf.h"
#include "../kv/kv.h"
#include "../tensor/kernels.h"
#include "../tensor/rope.h"

typedef enum { ZL_ROPE_NORM = 0, ZL_ROPE_NEOX = 1 } zl_rope_type;
typedef enum { ZL_ACT_SILU = 0, ZL_ACT_GELU_TANH = 1 } zl_ffn_act; /* gated FFN: act(gate(x)) * up(x) */

typedef struct zl_hparams {
    char arch[32];
    int n_vocab, dim, n_layers, n_heads, n_kv_heads, head_dim, ffn_dim, n_ctx_train;
    int rope_dim;
    float rope_base, rope_freq_scale; /* freq_scale = 1 / linear scaling factor */
    float norm_eps;
    zl_rope_type rope_type;
    int tied_output, has_qkv_bias;
    /* what differs between the families (read from metadata; llama's values
     * are the neutral ones) */
    float embd_scale;     /* token embeddings are multiplied by this (gemma3: sqrt(dim)) */
    float attn_scale;     /* q·k is multiplied by this (1/sqrt(head_dim) unless the file says) */
    zl_ffn_act ffn_act;
    int post_norms;       /* gemma3: RMSNorm of each block's output before the residual add */
    int qk_norm;          /* gemma3: per-head RMSNorm of Q and K before RoPE */
    int n_swa;            /* > 0: sliding-window layers attend to the last n_swa positions */
    float rope_base_swa;  /* RoPE base of sliding-window layers */
    float final_softcap;  /* > 0: logits = c * tanh(logits / c) */
} zl_hparams;

typedef struct zl_layer {
    const float *attn_norm, *ffn_norm;
    const float *bq, *bk, *bv; /* qwen2 QKV bias, else NULL */
    const float *q_norm, *k_norm; /* [head_dim] when hp.qk_norm */
    const float *post_attn_norm, *post_ffn_norm; /* [dim] when hp.post_norms */
    int swa; /* a sliding-window (local) layer: attends to the last hp.n_swa positions, RoPE base hp.rope_base_swa */
    zl_mat wq, wk, wv, wo, w_gate, w_down, w_up;
} zl_layer;

typedef struct zl_model {
    zl_gguf *gguf;
    zl_hparams hp;
    zl_mat tok_embd, output;
    const float *output_norm;
    zl_layer *layers;
    float **owned; /* converted vectors */
    int n_owned;
    char name[128];
    struct zl_prefetch *prefetch; /* weight read-ahead service, or NULL */
    int borrowed; /* a view of another model's weights (truncated draft): free only the struct */
    const zl_kernels *kern; /* the kernels every product of this model runs with (its ISA level) */
} zl_model;

typedef struct zl_model_opts {
    int no_mmap, populate;
    const char *isa; /* NULL or "": the best level this process may use; else a zl_isa_name, capped by it */
} zl_model_opts;

int zl_model_load(zl_model **out, const char *path, const zl_model_opts *opts, zl_err *err);
/* Bind a model from an already opened GGUF (takes ownership of g on success);
 * its kernels are those of zl_cpu_max_isa(). */
int zl_model_from_gguf(zl_model **out, zl_gguf *g, zl_err *err);
void zl_model_free(zl_model *m);
/* The model's rotary embedding parameters (of its global layers; a
 * sliding-window layer l uses zl_model_rope_layer). */
zl_rope zl_model_rope(const zl_model *m);
zl_rope zl_model_rope_layer(const zl_model *m, int layer);
/* 1 when every layer rotates alike (no per-layer RoPE base): KV slicing's
 * re-rotation of kept keys needs that. */
int zl_model_uniform_rope(const zl_model *m);

/* ---- forward ---- */
/* One token of a batch: which sequence (index into the kv array passed to
 * zl_forward), its position, and whether its logits are wanted. */
typedef struct zl_batch_tok {
    int32_t token;
    int32_t pos;
    int32_t seq;
    int32_t want_logits;
} zl_batch_tok;

typedef struct zl_fwd zl_fwd; /* scratch, reusable across calls; one per caller thread */
zl_fwd *zl_fwd_new(void);
void zl_fwd_free(zl_fwd *f);
/* Exact mode: weights dequantised row by row, f32 activations, f64 sums (slow; for verification). */
void zl_fwd_set_exact(zl_fwd *f, int exact);
int zl_fwd_exact(const zl_fwd *f);

/* Run n tokens through the model.  Token i reads/writes kv[toks[i].seq] at
 * slot toks[i].pos and attends to slots 0..pos of that cache; every token of
 * a sequence must have its earlier positions either cached already or present
 * earlier in this batch.  Logits of wanted tokens are written consecutively
 * (n_vocab floats each) in batch order.  kv->n_used grows to cover the
 * positions written.  Returns 0 or an error (bad token id, position past the
 * cache). */
int zl_forward(const zl_model *m, zl_kv **kv, const zl_batch_tok *toks, int n, float *logits, zl_fwd *f,
               zl_pool *pool, zl_err *err);

/* Part of the forward pass: layers [layer_begin, layer_end).  The residual
 * stream entering layer_begin is x_in ([n][dim]; unused when layer_begin is
 * 0: the token embeddings), the one leaving layer_end - 1 goes to x_out when
 * not NULL.  Wanted logits come from the final norm and output matrix
 * applied to that residual (for layer_end < n_layers: an early exit).  Only
 * the layers run are written in the caches; keep_used leaves kv->n_used as it
 * was (a draft pass writing scratch rows past the sequence's end).  A token's
 * per-layer arithmetic does not depend on the batch, so layers [0, a) then
 * [a, L) give bit for bit what one full pass gives. */
typedef struct zl_fwd_part {
    int layer_begin, layer_end;
    const float *x_in;
    float *x_out;
    int keep_used;
} zl_fwd_part;
int zl_forward_part(const zl_model *m, zl_kv **kv, const zl_batch_tok *toks, int n, const zl_fwd_part *part,
                    float *logits, zl_fwd *f, zl_pool *pool, zl_err *err);

#endif
