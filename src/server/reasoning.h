/* reasoning.h — a model's thinking, split from its answer while streaming.
 *
 * Models whose templates think write <think> … </think> before the answer
 * (or start inside the block when the generation prompt already opened it).
 * The splitter routes text to reasoning or content as it arrives, holding
 * back only a possible partial tag.  Budgets: reasoning_effort low / medium
 * / high are 512 / 2048 / 8192 tokens (zl_think_effort_budget); Anthropic's
 * thinking.budget_tokens is taken as is.  Pure functions; never tokens,
 * HTTP or JSON. */
#ifndef ZL_REASONING_H
#define ZL_REASONING_H

#include <stddef.h>

typedef struct zl_think zl_think;

/* starts_inside: the prompt ended inside an open <think> block. */
zl_think *zl_think_new(int starts_inside);
void zl_think_free(zl_think *t);
/* Route text; the outputs grow with malloc'd text (NULL at first is fine). */
int zl_think_feed(zl_think *t, const char *s, size_t n, char **reason, size_t *rlen, char **content, size_t *clen);
/* Flush what is held. */
int zl_think_finish(zl_think *t, char **reason, size_t *rlen, char **content, size_t *clen);
/* Whether the text so far ends inside the thinking block. */
int zl_think_inside(const zl_think *t);
/* Whether a rendered prompt leaves the model inside an open <think>. */
int zl_think_prompt_opens(const char *prompt, size_t n);
/* "low" / "medium" / "high" -> tokens; -1 for another word. */
int zl_think_effort_budget(const char *effort);
/* The text that closes a block cut short by its budget. */
const char *zl_think_close_text(void);

#endif
