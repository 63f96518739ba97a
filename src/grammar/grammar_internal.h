/* grammar_internal.h — the compiled grammar shared by the parser (gbnf.c),
 * the byte matcher (gmatch.c) and the token constraint (gtokens.c).
 *
 * A grammar is a flat array of elements: every alternative of every rule is
 * its items followed by GE_END.  An item is a byte set (one byte from a
 * 256-bit set) or a reference to a rule.  Character classes and literals are
 * already lowered to byte sets; repetition to helper rules. */
#ifndef ZL_GRAMMAR_INTERNAL_H
#define ZL_GRAMMAR_INTERNAL_H

#include <stdint.h>

#include "grammar.h"

enum { GE_END = 0, GE_BYTES = 1, GE_REF = 2 };

typedef struct gelem {
    int32_t kind; /* GE_* */
    int32_t arg;  /* GE_BYTES: byte-set index; GE_REF: rule id */
} gelem;

typedef struct gset {
    uint64_t w[4];
} gset;

static inline int gset_has(const gset *s, unsigned char c) { return (int)((s->w[c >> 6] >> (c & 63)) & 1u); }

struct zl_grammar {
    gelem *el;
    int32_t n_el;
    int32_t *alt_start; /* per alternative: index of its first element */
    int32_t n_alt;
    int32_t *rule_alt0; /* per rule: first alternative */
    int32_t *rule_nalt; /* per rule: number of alternatives */
    char **rule_name;
    int32_t n_rules;
    gset *sets;
    int32_t n_sets;
    int32_t root;
};

/* A stack frame of the pushdown matcher: an element position and the frame
 * below it (-1: the bottom).  A frame on top of a stack always sits on a
 * GE_BYTES element; frames below sit on the element that follows a rule
 * reference (never on GE_END: a reference in tail position reuses the frame
 * below). */
typedef struct gframe {
    int32_t pos;
    int32_t parent;
} gframe;

/* Frame arena plus stack-set helpers (gmatch.c).  A stack is the index of
 * its top frame; GSTACK_ACCEPT is the empty stack (the sentence is whole). */
#define GSTACK_ACCEPT (-1)
/* Expansion steps (frames visited plus set entries compared) one advance
 * over a byte, or the start, may take: past it the arena fails as if out
 * of memory.  A rule is expanded at most once on a given frame below per
 * advance (the arena's visited table), so optional parts in a row cost
 * their count, not two to its power; what is left unbounded (a set of
 * stacks as large as the grammar is ambiguous) the bound keeps from holding
 * a thread for minutes (about 10 ms). */
#define GM_MAX_WORK (1L << 18)
/* What a grammar over the bound is told (grammar.h: a parse-time ZL_ERANGE,
 * or a constraint's error). */
#define GM_WORK_MSG "matching one byte needs more than 262144 expansion steps (the grammar is too ambiguous: " \
                    "nested or repeated optional parts)"

typedef struct garena {
    gframe *f;
    int32_t n, cap;
    int oom;        /* sticky: out of memory, or over GM_MAX_WORK */
    int over;       /* sticky: the reason was GM_MAX_WORK */
    long work;      /* expansion steps of the current advance */
    int32_t *ht;    /* interning table (frame indices, -1 empty): one frame per (pos, parent), so equal
                     * stacks have equal indices */
    int32_t ht_cap;
    uint32_t *seen; /* per frame: the epoch of the set being built that holds it (O(1) deduplication) */
    int32_t seen_cap;
    uint32_t epoch, accept_seen;
    int32_t *todo; /* gm_expand's pending (position, frame below) pairs */
    int32_t todo_n, todo_cap;
    uint64_t *vkey; /* visited table: (rule, frame below) expanded in the set of epoch vep[k] */
    uint32_t *vep;
    int32_t v_cap, v_n; /* v_n: entries of the current epoch */
    uint32_t v_epoch;
} garena;

typedef struct gstackset {
    int32_t *s;
    int32_t n, cap;
} gstackset;

/* Push frame (pos, parent) expanded until its tops are byte sets, adding
 * the resulting stacks to out (deduplicated). */
void gm_expand(const zl_grammar *g, garena *a, int32_t pos, int32_t parent, gstackset *out);
/* out = the stacks of in advanced over byte c (out is cleared first). */
void gm_advance(const zl_grammar *g, garena *a, const gstackset *in, unsigned char c, gstackset *out);
int gm_set_add(garena *a, gstackset *out, int32_t stack);
void gm_arena_free(garena *a);
/* Copy the frames the stacks of set use from src into dst (compacting; dst
 * is cleared first) and rewrite set to the new indices. */
int gm_compact(const garena *src, garena *dst, gstackset *set);
/* The initial stacks of the grammar's root. */
void gm_start(const zl_grammar *g, garena *a, gstackset *out);
int gm_set_accepting(const gstackset *s);

#endif
