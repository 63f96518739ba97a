/* spec.h — the verification ring split into its three phases, so that a
 * caller holding several sequences (the scheduler, sched.c) can verify all
 * of their drafts inside ONE batched forward together with plain decode
 * tokens and prompt chunks:
 *
 *   zl_spec_draft       t0 (the token about to be fed) + up to k drafts
 *   zl_batch_eval       one forward over every item (batch.h); ring items
 *                       get the logits of every position, the others of the last
 *   zl_spec_accept      accept the agreeing prefix (greedy: argmax;
 *                       sampling: rejection sampling), roll back the rest
 *
 * zl_seq_step (zerolayer.h) is these three for one sequence.  Not part of
 * the public API: only the scheduler uses it (the verify-cost pieces the CLI
 * needs are in zerolayer.h). */
#ifndef ZL_SPEC_H
#define ZL_SPEC_H

#include <stdint.h>

#include "../decode/ring.h"
#include "../model/model.h"
#include "zerolayer.h"

typedef struct zl_verify {
    int32_t ids[ZL_RING_MAX + 1]; /* t0, then the drafts */
    int n;                        /* 1 + drafts (1: a plain step) */
    int hist0, tok0;              /* penalty history / tokens fed before the forward */
} zl_verify;

/* Whether the ring is configured on s (zl_seq_set_spec with a mode). */
int zl_seq_spec_on(const zl_seq *s);
/* Tokens the ring wants to draft next step (0 = plain: off or cooling down). */
int zl_seq_spec_budget(const zl_seq *s);
/* Prepare a step that feeds t0: draft up to max_draft tokens after it (also
 * bounded by the ring's budget and the context room).  Fills v; returns the
 * number of drafts (0: plain step). */
int zl_spec_draft(zl_seq *s, int32_t t0, int max_draft, zl_verify *v);
/* The part of the forward a verification of ids (at the end of s) needs:
 * when s's drafter already ran the first layers over exactly these tokens,
 * the layers after them (counted in zl_spec_stats.resumed), else NULL: all
 * of them.  part is the storage for the answer. */
const zl_fwd_part *zl_spec_verify_part(zl_seq *s, const int32_t *ids, int n, zl_fwd_part *part);
/* After the forward of v: accept drafts left to right while the target
 * agrees, roll back the KV / tokens / penalty history of the rejected ones.
 * Writes the accepted drafts to out and returns their count; *next gets the
 * token a rejection drew from the residual distribution, or -1 when every
 * draft was accepted (then the next token is zl_seq_sample's, from the
 * logits after the last accepted position, which zl_seq_logits now holds).
 * seconds: wall time of the step for the ring's pay-off measurement (<= 0:
 * not timed, e.g. the batch also carried prompt chunks). */
int zl_spec_accept(zl_seq *s, const zl_verify *v, double seconds, int32_t *out, int32_t *next);

#endif
