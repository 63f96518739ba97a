/* constraint.h — grammars applied to a job's sampling.
 *
 * Binds the grammar layer to a model: the vocabulary trie (built once per
 * model, on first use, from the tokenizer's decoded pieces with every
 * end-of-generation token as an end token) and the sampler hook that masks
 * by the grammar and advances it on every chosen token.  Knows tokens and
 * grammars; never JSON schemas, HTTP or tool formats. */
#ifndef ZL_CONSTRAINT_H
#define ZL_CONSTRAINT_H

#include "../grammar/grammar.h"
#include "sched.h"

/* The model's grammar vocabulary (built on first call; thread-safe; freed
 * with the model). */
int zl_llm_gvocab(zl_llm *llm, const zl_gvocab **out, zl_err *err);

/* Constrain job j by grammar g (the job takes ownership of g).  lazy_trigger:
 * see zl_gconstraint_new.  On error g is freed too. */
int zl_job_constrain(zl_job *j, zl_llm *llm, zl_grammar *g, const char *lazy_trigger, zl_err *err);

/* Bound a thinking block: once `budget` tokens were generated inside
 * <think> … </think> (inside: the prompt already opened it), the tokens of
 * "\n</think>\n\n" are forced one by one; the answer follows freely. */
int zl_job_think_budget(zl_job *j, zl_llm *llm, int budget, int inside, zl_err *err);

#endif
