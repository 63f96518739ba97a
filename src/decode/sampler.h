/* sampler.h — token selection from logits.
 *
 * Order of operations (the common convention of llama.cpp and OpenAI-style
 * servers): logit bias (added to the raw logits) -> repetition/presence/
 * frequency penalties over the recent history
 * -> top-k -> top-p -> min-p -> temperature -> draw.  temp <= 0 is greedy
 * (argmax after penalties; ties go to the lowest id).  The generator is
 * xoshiro256** seeded through splitmix64, so a seed reproduces a run exactly. */
#ifndef ZL_SAMPLER_H
#define ZL_SAMPLER_H

#include <stdint.h>

/* One additive logit bias (token id, value). */
typedef struct zl_sampler_bias { int32_t token; float bias; } zl_sampler_bias;

typedef struct zl_sampler_params {
    float temp;             /* <= 0: greedy */
    int top_k;              /* <= 0: off */
    float top_p;            /* >= 1: off */
    float min_p;            /* <= 0: off */
    float repeat_penalty;   /* 1: off */
    int repeat_last_n;      /* history window for all penalties; 0: off, -1: whole history */
    float presence_penalty; /* 0: off */
    float frequency_penalty;/* 0: off */
    uint64_t seed;
    const zl_sampler_bias *bias; /* copied by zl_sampler_new; ids outside [0, n_vocab) are ignored */
    int n_bias;
} zl_sampler_params;

/* Defaults: temp 0.8, top_k 40, top_p 0.95, min_p 0.05, penalties off, no bias, seed 0. */
zl_sampler_params zl_sampler_defaults(void);

typedef struct zl_sampler zl_sampler;
zl_sampler *zl_sampler_new(const zl_sampler_params *p, int n_vocab);
void zl_sampler_free(zl_sampler *s);
void zl_sampler_reset(zl_sampler *s);
/* Choose a token; logits (n_vocab) are modified in place. */
int zl_sampler_sample(zl_sampler *s, float *logits);
/* Record a token into the penalty history (prompt and generated tokens). */
void zl_sampler_accept(zl_sampler *s, int token);
/* Penalty history length, and rollback to a shorter history (speculative
 * decoding rejects drafted tokens that were already recorded). */
int zl_sampler_n_hist(const zl_sampler *s);
void zl_sampler_truncate(zl_sampler *s, int n_hist);
/* Probability distribution after all transforms (for tests / logprobs):
 * fills probs[n_vocab] (zeros for filtered tokens); logits modified in place. */
void zl_sampler_probs(zl_sampler *s, float *logits, float *probs);
/* A constraint on which tokens may be chosen (a grammar).  zl_sampler_sample
 * first draws as if unconstrained and keeps the token when check allows it
 * (the common case, one lookup); otherwise it restores the logits, calls
 * mask (disallowed logits become -INFINITY; returns how many remain) and
 * draws again.  Without truncation (top-k/top-p/min-p off) the result has
 * exactly the distribution of masking first; with truncation it differs
 * only in which tokens the truncation keeps.  accept is called with the
 * chosen token.  When mask leaves nothing allowed the sampler returns
 * fallback (an end token) without drawing.  check NULL: always mask first.
 * zl_sampler_probs ignores the constraint (it reports the model's
 * distribution).  error (NULL: it never fails) says whether the constraint
 * has broken down (a grammar over its matcher's work bound): non-zero, a
 * zl_err code with *msg a one-line message; the fallback token the sampler
 * then returns is no answer, and the caller ends the generation with that
 * error.  The sampler borrows ud; NULL clears the constraint. */
typedef struct zl_sampler_constraint {
    void *ud;
    int (*mask)(void *ud, float *logits);
    int (*check)(void *ud, int token);
    int (*accept)(void *ud, int token);
    int fallback;
    int (*error)(void *ud, const char **msg);
} zl_sampler_constraint;
void zl_sampler_set_constraint(zl_sampler *s, const zl_sampler_constraint *c);
/* The unfiltered draw (temp > 0, no top-k/top-p/min-p) finds its token, and
 * top-p without top-k its cut, with a vector exp of proven error
 * (tensor/vexp.h) when the decision is certain under that bound and libm's,
 * else by the exact expf path: tokens and probabilities are the exact
 * path's either way (the scalar level has no fast path: its exp costs what
 * expf does).  For tests: the vector exp's ISA level (a zl_isa, capped by the
 * CPU, the scalar reference included; -1: the exact path only), and how many
 * of those decisions each path made. */
void zl_sampler_set_isa(zl_sampler *s, int isa);
void zl_sampler_draw_counts(const zl_sampler *s, uint64_t *fast, uint64_t *exact);
/* Uniform double in [0,1) from the sampler's generator. */
double zl_sampler_uniform(zl_sampler *s);

#endif
