/* batch.h — the one batched evaluator: several sequences, one forward.
 *
 * Owns: validating a batch, laying its tokens out for zl_forward_part, and
 * committing the result into each sequence (KV bookkeeping, logits, penalty
 * history, fed tokens).  zl_llm_eval_batch (zerolayer.h) and the scheduler's
 * forward stage (sched.c) both call zl_batch_eval; ring items (a zl_verify
 * with drafts) get the logits of every position for zl_spec_accept.
 * Never samples, never chooses tokens, never takes a lock. */
#ifndef ZL_BATCH_H
#define ZL_BATCH_H

#include "../model/model.h"
#include "spec.h"

/* A batch's working memory, grown only when a batch needs more than any
 * before (zl_batch_buf_reserve); the zero value is empty. */
typedef struct zl_batch_buf {
    zl_batch_tok *toks; /* cap_toks */
    zl_kv **kvs;        /* cap_items */
    float *logits;      /* cap_rows x n_vocab: one row per token that asks for logits */
    int cap_toks, cap_items, cap_rows, n_vocab;
} zl_batch_buf;

/* Make b hold at least n_toks tokens, n_items sequences and n_rows logit rows
 * of n_vocab.  Returns 0, or ZL_ENOMEM (b unchanged, still usable). */
int zl_batch_buf_reserve(zl_batch_buf *b, int n_vocab, int n_toks, int n_items, int n_rows);
void zl_batch_buf_free(zl_batch_buf *b);

/* One forward over every item (each a distinct sequence of llm, n >= 1 valid
 * token ids that fit its context).  ver may be NULL; an item i with ver[i] &&
 * ver[i]->n > 1 must carry ver[i]->ids and gets all of its positions' logits.
 * On success every item's tokens are fed and its logits are those after its
 * last token.  On error nothing is fed: each sequence holds what it held
 * before (a bounded policy may have evicted to make room), and err says which
 * item was wrong or what failed. */
int zl_batch_eval(zl_llm *llm, const zl_batch_item *items, zl_verify *const *ver, int n_items, zl_batch_buf *buf,
                  zl_err *err);

#endif
