/* grammar.h — context-free grammars over bytes, JSON Schema to grammar, and
 * the token-level constraint that keeps sampling inside a grammar.
 *
 * Grammar text (GBNF-style; gbnf.c):
 *   rule      name ::= alternatives          (name: [A-Za-z0-9_-]+; a rule may span lines)
 *   alts      seq | seq | ...                (an empty seq matches the empty string)
 *   items     "literal"   'literal'          escapes \n \r \t \\ \" \' \xHH \uHHHH \UHHHHHHHH
 *             [a-z0-9_]   [^"\\]             character classes over code points (ranges, ^ negates)
 *             .                              any code point
 *             name        ( alts )           a rule reference, a group
 *   postfix   * + ? {m} {m,} {m,n}           repetition (m, n <= 10000), one per item: (x{2})*
 *   comments  # to the end of the line
 * The root is the rule named "root" unless the caller names another.  Text is
 * matched as UTF-8 bytes: classes are compiled to byte sequences, so a
 * character spread over several tokens is matched byte by byte.  Rejected at
 * parse time, with the line and column: syntax errors, undefined rules,
 * rules defined twice, left recursion (also through rules that can match
 * nothing), rules that can never finish, and (ZL_ERANGE) a grammar whose
 * start alone exceeds the matcher's work bound: matching one byte may take
 * at most 262144 expansion steps (GM_MAX_WORK; a rule is expanded once per
 * frame below it, so what costs is the number of distinct stacks: three
 * nested optional repetitions of 100 make a million).  A grammar that passes the parse may still exceed the
 * bound on a later byte: the matcher then fails with ZL_ERANGE and the
 * constraint reports it (zl_gconstraint_error).
 *
 * Owns parsing, matching and masks; never knows models, HTTP or JSON values
 * other than the schema text it compiles. */
#ifndef ZL_GRAMMAR_H
#define ZL_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "../base/err.h"

typedef struct zl_grammar zl_grammar;

/* Parse grammar text; root NULL means "root".  The grammar is read-only
 * afterwards and may be shared by threads. */
int zl_grammar_parse(zl_grammar **out, const char *src, size_t n, const char *root, zl_err *err);
void zl_grammar_free(zl_grammar *g);

/* JSON Schema (JSON text) to grammar text (malloc'd, NUL-terminated).  The
 * subset (json_schema.c): type (a name or a list of names), properties,
 * required, additionalProperties (false, true or a schema: an object with
 * properties emits only those; one without emits any keys whose values
 * follow the schema), items, minItems, maxItems, minLength, maxLength, enum,
 * const, anyOf, oneOf, allOf with one member, $ref to "#", "#/$defs/NAME" or
 * "#/definitions/NAME" (recursion allowed).  Annotations are ignored
 * (title, description, default, examples, $schema, $id, $comment, format,
 * deprecated, readOnly, writeOnly, strict).  Any other keyword is ZL_EUNSUP
 * with a message naming it and its place ("schema: unsupported keyword
 * 'pattern' at /properties/name").  The grammar emits compact JSON (no
 * whitespace), properties in the schema's order. */
int zl_json_schema_to_grammar(const char *schema, size_t n, char **out, zl_err *err);
/* The same as rules to combine several schemas in one grammar: every rule
 * name starts with prefix ([A-Za-z0-9_-]); *top (top_cap bytes) gets the
 * rule to reference.  The shared json-* and sp rules are not included:
 * append zl_json_schema_prelude() once. */
int zl_json_schema_rules(const char *schema, size_t n, const char *prefix, char **rules, char *top, size_t top_cap,
                        zl_err *err);
const char *zl_json_schema_prelude(void);
/* Bytes s[0..n) as a grammar literal ("..." with escapes; malloc'd, NULL
 * when out of memory). */
char *zl_gbnf_quote(const char *s, size_t n);
/* The grammar of any JSON object (response_format json_object). */
const char *zl_json_object_grammar(void);

/* ---- matching bytes ---- */

/* A parse state: the set of positions the grammar may be in after the bytes
 * fed so far.  Owned by one thread. */
typedef struct zl_gmatch zl_gmatch;
int zl_gmatch_new(zl_gmatch **out, const zl_grammar *g, zl_err *err);
void zl_gmatch_free(zl_gmatch *m);
void zl_gmatch_reset(zl_gmatch *m);
/* Feed bytes: returns 0, or ZL_EINVAL (state unchanged) when they cannot
 * continue any sentence of the grammar. */
int zl_gmatch_feed(zl_gmatch *m, const char *s, size_t n);
/* Make dst the state src is in: 0, ZL_EINVAL (another grammar's matcher)
 * or ZL_ENOMEM, dst unchanged on failure. */
int zl_gmatch_copy(zl_gmatch *dst, const zl_gmatch *src);
/* Whether the bytes fed so far form a whole sentence. */
int zl_gmatch_accepting(const zl_gmatch *m);
/* Whether nothing more may follow (accepting and no byte can continue). */
int zl_gmatch_done(const zl_gmatch *m);

/* ---- tokens ---- */

/* The vocabulary as the constraint sees it: each token's decoded bytes, in a
 * byte trie built once and shared read-only.  Tokens with no bytes (control,
 * unused) are never allowed inside a grammar; the end tokens (eog) are
 * allowed exactly when the grammar is in an accepting state. */
typedef struct zl_gvocab zl_gvocab;
typedef const char *(*zl_gvocab_piece_fn)(void *ud, int32_t id, size_t *len);
int zl_gvocab_new(zl_gvocab **out, int32_t n_tokens, zl_gvocab_piece_fn piece, void *ud, const int32_t *eog,
                  int n_eog, zl_err *err);
void zl_gvocab_free(zl_gvocab *v);
int32_t zl_gvocab_n_tokens(const zl_gvocab *v);

/* A grammar applied to one generation.  lazy_trigger (NULL: none) makes it
 * lazy: nothing is masked until the generated text contains the trigger
 * bytes; from then on the text after the trigger must follow the grammar. */
typedef struct zl_gconstraint zl_gconstraint;
int zl_gconstraint_new(zl_gconstraint **out, const zl_grammar *g, const zl_gvocab *v, const char *lazy_trigger,
                       zl_err *err);
void zl_gconstraint_free(zl_gconstraint *c);
/* Allowed tokens for the current state as a bitset of n_tokens bits (valid
 * until the next call on c); NULL when every token is allowed (a lazy
 * constraint not yet triggered: *n_allowed = n_tokens) or after an error
 * (zl_gconstraint_error: *n_allowed = 0).  *n_allowed gets how many are set. */
const uint64_t *zl_gconstraint_mask(zl_gconstraint *c, int32_t *n_allowed);
/* Logits of disallowed tokens to -INFINITY; returns the number allowed. */
int32_t zl_gconstraint_apply(zl_gconstraint *c, float *logits);
/* Whether token may come next (without advancing): one lookup per byte
 * once the state's transitions are known.  For a lazy constraint not yet
 * triggered: always, unless the token completes the trigger and the bytes
 * after it do not follow the grammar (accept decides by the same rule). */
int zl_gconstraint_check(zl_gconstraint *c, int32_t token);
/* Advance on a chosen token: 0, or ZL_EINVAL when the token is not allowed
 * (the state is unchanged). */
int zl_gconstraint_accept(zl_gconstraint *c, int32_t token);
/* Why the constraint stopped working, or 0: ZL_ERANGE when matching one
 * byte exceeded the matcher's work bound (grammar.h, zl_grammar_parse) or
 * one mask's walk over the vocabulary exceeded 32 times that bound,
 * ZL_ENOMEM when its tables could not grow; *msg (may be NULL) gets a
 * static one-line message.  From then on the constraint allows nothing (the
 * mask is NULL with *n_allowed 0, apply returns 0, check refuses, accept
 * returns the code): whoever drives it must end the generation with that
 * error rather than take the fallback token for an answer. */
int zl_gconstraint_error(const zl_gconstraint *c, const char **msg);
/* Whether the grammar has been triggered (always for a non-lazy one) and
 * whether its text is complete (accepting). */
int zl_gconstraint_active(const zl_gconstraint *c);
int zl_gconstraint_accepting(const zl_gconstraint *c);
/* Statistics: masks computed by a trie walk / served from the cache. */
void zl_gconstraint_stats(const zl_gconstraint *c, long *walks, long *hits);

#endif
