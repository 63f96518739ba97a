/* outsplit.h — one choice's generated text split into reasoning, answer
 * and tool calls, as it streams.
 *
 * The text goes through the <think> splitter (reasoning.h) when the model
 * thinks, then through the tool-call parser (toolcall.h) when the request
 * has tools.  Pure: never tokens, HTTP or JSON output shapes. */
#ifndef ZL_OUTSPLIT_H
#define ZL_OUTSPLIT_H

#include <stddef.h>

#include "reasoning.h"
#include "toolcall.h"

typedef struct zl_outsplit {
    zl_think *think;  /* NULL: no reasoning split */
    zl_tc_parser *tc; /* NULL: no tool calls */
} zl_outsplit;

/* think: split reasoning (inside: the prompt opened the block); tools: parse
 * calls of format f.  Returns 0 or -1 when out of memory. */
int zl_outsplit_init(zl_outsplit *o, int think, int inside, int tools, zl_tc_format f);
void zl_outsplit_free(zl_outsplit *o);
/* Route released text (final: the choice has ended; flush).  *reason and
 * *content grow (malloc'd) by the parts that are now safe to emit; new calls
 * are in o->tc.  Returns 0 or -1 when out of memory. */
int zl_outsplit_feed(zl_outsplit *o, const char *s, size_t n, int final, char **reason, size_t *rlen, char **content,
                     size_t *clen);

#endif
