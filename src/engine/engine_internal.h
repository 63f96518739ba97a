/* engine_internal.h — the structs behind the public handles, shared by the
 * engine's files (llm.c: handles and evaluation; batch.c: the batched
 * evaluator; spec.c: the verification ring).  Nothing outside src/engine includes this. */
#ifndef ZL_ENGINE_INTERNAL_H
#define ZL_ENGINE_INTERNAL_H

#include "../base/pool.h"
#include "../decode/drafter.h"
#include "../decode/ring.h"
#include "../decode/sampler.h"
#include "../model/model.h"
#include "batch.h"
#include "../tokenizer/vocab.h"
#include "zerolayer.h"

struct zl_llm {
    zl_model *model;
    zl_vocab *vocab;
    zl_pool *pool;
    char desc[256];
    uint64_t weight_bytes;
    zl_fwd *batch_fwd;      /* forward scratch of zl_batch_eval */
    zl_batch_buf batch_buf; /* zl_llm_eval_batch's batch buffers (the scheduler has its own) */
    int borrowed;      /* truncated view: model/vocab/pool belong to another zl_llm */
    int kv_layer_max;  /* zl_llm_opts.kv_layer_max, given to every sequence's KV cache */
    struct zl_gvocab *gvocab; /* grammar vocabulary, built on first use (constraint.c) */
};

struct zl_seq {
    zl_llm *llm;
    zl_kv *kv;
    zl_fwd *fwd;
    zl_sampler *sampler;
    float *logits;  /* n_vocab: logits after the last fed token */
    float *scratch; /* n_vocab: sampler works on a copy */
    int has_logits;
    int32_t *tokens; /* every token fed, in order (n_tokens); the cache may hold fewer */
    int n_tokens, cap_tokens;
    zl_batch_tok *chunk; /* cap_chunk: one chunk of zl_seq_eval_part, grown as needed */
    int cap_chunk;
    /* verification ring */
    int spec_on;
    int32_t pending; /* token already chosen (by a rejection) but not yet emitted; -1 = none */
    zl_drafter *drafter;
    zl_ring ring;
    uint64_t resumed; /* verify steps that resumed after the drafter's layers */
    int trace;        /* ZL_RING_TRACE=1 at spec setup: one line per step on stderr (see spec.c) */
    float *vlogits;  /* (ring max + 1) * n_vocab verification logits */
    float *probs;    /* n_vocab */
    struct jcon *grammar; /* zl_seq_set_grammar's constraint (constraint.c) or NULL */
};
/* constraint.c: why the sequence's grammar broke down (its matcher's work
 * bound, memory), filling err, or 0. */
int zl_seq_grammar_error(const zl_seq *s, zl_err *err);
/* constraint.c: free a sequence's grammar; re-attach it to a new sampler. */
void zl_seq_grammar_free(zl_seq *s);
void zl_seq_grammar_rebind(zl_seq *s);

/* zl_seq_eval_anchored, but with only part of the layers run (see
 * zl_forward_part): n must fit in one chunk (n <= batch), full KV policy. */
int zl_seq_eval_part(zl_seq *s, const int32_t *ids, const uint8_t *anchor, int n, int batch, const zl_fwd_part *part,
                     float *all_logits, zl_err *err);
/* zl_seq_set_kv_policy with the anchor policy's recent window: window > 0
 * keeps that many recent tokens per layer and fills the rest of the budget
 * with heavy hitters (kv_policy.c); 0 keeps the whole budget recent. */
int zl_seq_set_kv_slicing(zl_seq *s, zl_kv_policy_kind kind, int budget, int window, zl_err *err);
/* Grow s->tokens to hold at least n tokens. Returns 0 or ZL_ENOMEM. */
int zl_seq_reserve_tokens(zl_seq *s, int n);
/* Record fed tokens in s->tokens (grows the array). Returns 0 or ZL_ENOMEM. */
int zl_seq_track(zl_seq *s, const int32_t *ids, int n);
/* The decode layer's parameters for a public zl_sampling (the bias array is
 * borrowed, as in zl_sampling). */
zl_sampler_params zl_sampling_params(const zl_sampling *p);

struct zl_stream {
    zl_detok *d;
};


#endif
