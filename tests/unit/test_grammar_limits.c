/* test_grammar_limits.c — the grammar layer at its bounds (src/grammar),
 * each refusal with its precise error:
 *  - nesting: GBNF groups past 64, JSON past 128 levels, schemas past 64;
 *  - size: repetition counts past 10000, more than 4194304 items once
 *    repetition is expanded; a wide alternation and a long repetition that
 *    are inside the bounds still match, and so does a run of 3000 optional
 *    parts;
 *  - the matcher's work bound: a grammar whose start is over it is refused
 *    by the parse (ZL_ERANGE); one that trips it on a later byte fails the
 *    byte matcher with ZL_ERANGE and leaves the token constraint in its error
 *    state (nothing allowed, check and accept agreeing), which ends a
 *    scheduled job with that error and makes zl_seq_step fail; so does one
 *    mask whose walk over the vocabulary is over the walk's bound;
 *  - JSON Schemas whose strings are not UTF-8 (const, enum, pattern, a key)
 *    are refused by the JSON reader, never reach the grammar builder; the
 *    grammar parser refuses ill-formed UTF-8 (overlong, surrogates) too;
 *  - a lazy constraint refuses, in check and accept alike, a token that
 *    completes its trigger with bytes the grammar does not allow. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/constraint.h"
#include "engine/sched.h"
#include "grammar/grammar.h"
#include "zerolayer.h"

#define STORIES ZL_ROOT "/tests/fixtures/models/stories260K.gguf"
#define WORK_MSG "matching one byte needs more than 262144 expansion steps"
/* three nested optional repetitions: about a million distinct stacks, each expanded once */
#define OVER "((((\"\" | \"a\"){0,100}){0,100}){0,100})"
/* start within the bound, the first byte over it */
#define MID_MATCH "root ::= \"a\" " OVER " \"b\""

static void parse_err(const char *src, int code, const char *want) {
    zl_grammar *g = NULL;
    zl_err e = {0};
    int rc = zl_grammar_parse(&g, src, strlen(src), NULL, &e);
    cr_assert_eq(rc, code, "rc %d (%s), want %d", rc, e.msg, code);
    cr_assert_str_eq(e.msg, want);
    cr_assert_null(g);
}

static zl_grammar *parse_ok(const char *src) {
    zl_grammar *g = NULL;
    zl_err e = {0};
    cr_assert_eq(zl_grammar_parse(&g, src, strlen(src), NULL, &e), 0, "%s", e.msg);
    return g;
}

static void schema_err(const char *schema, size_t n, int code, const char *want) {
    char *out = NULL;
    zl_err e = {0};
    int rc = zl_json_schema_to_grammar(schema, n, &out, &e);
    cr_assert_eq(rc, code, "rc %d (%s), want %d", rc, e.msg, code);
    cr_assert_str_eq(e.msg, want);
    cr_assert_null(out);
}

static char *repeat(const char *head, const char *unit, int n, const char *mid, const char *close, const char *tail) {
    size_t cap = strlen(head) + (strlen(unit) + strlen(close)) * (size_t)n + strlen(mid) + strlen(tail) + 1;
    char *s = malloc(cap);
    cr_assert_not_null(s);
    strcpy(s, head);
    for (int i = 0; i < n; i++) strcat(s, unit);
    strcat(s, mid);
    for (int i = 0; i < n; i++) strcat(s, close);
    strcat(s, tail);
    return s;
}

Test(grammar_limits, gbnf_groups_nested_past_64) {
    char *ok = repeat("root ::= ", "(", 64, "\"a\"", ")", "");
    zl_grammar *g = parse_ok(ok);
    zl_grammar_free(g);
    free(ok);
    char *deep = repeat("root ::= ", "(", 65, "\"a\"", ")", "");
    parse_err(deep, ZL_EINVAL, "grammar: line 1 column 74: groups nested too deeply");
    free(deep);
}

Test(grammar_limits, json_nested_past_128) {
    char *deep = repeat("", "[", 129, "1", "]", "");
    schema_err(deep, strlen(deep), ZL_EINVAL, "schema: invalid JSON at byte 128: nested too deeply");
    free(deep);
}

Test(grammar_limits, schema_nested_past_64) {
    char *deep = repeat("", "{\"items\":", 66, "{}", "}", "");
    char *out = NULL;
    zl_err e = {0};
    cr_assert_eq(zl_json_schema_to_grammar(deep, strlen(deep), &out, &e), ZL_EUNSUP, "%s", e.msg);
    cr_assert(strstr(e.msg, "schema nested too deeply"), "%s", e.msg);
    cr_assert(!strncmp(e.msg, "schema: ", 8), "%s", e.msg);
    cr_assert_null(out);
    free(deep);
}

/* Optional parts in a row reach one position along many paths; each rule is
 * expanded once per frame below it, so ("" | "a"){0,3000} matches well within
 * the work bound (without that it was over it on the first byte), with the
 * same language: up to 3000 a's, then b. */
Test(grammar_limits, optional_run_matches_within_the_bound) {
    zl_grammar *g = parse_ok("root ::= (\"\" | \"a\"){0,3000} \"b\"");
    char *text = malloc(3002);
    memset(text, 'a', 3001);
    zl_gmatch *m = NULL;
    cr_assert_eq(zl_gmatch_new(&m, g, NULL), 0);
    cr_assert_eq(zl_gmatch_feed(m, "b", 1), 0);
    cr_assert(zl_gmatch_done(m));
    zl_gmatch_reset(m);
    cr_assert_eq(zl_gmatch_feed(m, text, 3000), 0);
    cr_assert_not(zl_gmatch_accepting(m));
    cr_assert_eq(zl_gmatch_feed(m, "a", 1), ZL_EINVAL); /* the 3001st */
    cr_assert_eq(zl_gmatch_feed(m, "b", 1), 0);
    cr_assert(zl_gmatch_done(m));
    zl_gmatch_reset(m);
    cr_assert_eq(zl_gmatch_feed(m, text, 17), 0);
    cr_assert_eq(zl_gmatch_feed(m, "c", 1), ZL_EINVAL);
    cr_assert_eq(zl_gmatch_feed(m, "b", 1), 0);
    cr_assert(zl_gmatch_done(m));
    zl_gmatch_free(m);
    free(text);
    zl_grammar_free(g);
}

/* A second repetition operator would apply to what the first one made of the
 * item (x{0} leaves nothing: the fuzzer's stacked_repetition read before the
 * sequence); it is refused, and the grouped forms mean what they say. */
Test(grammar_limits, stacked_repetition_refused) {
    const char *want = "a repetition operator right after another: put the repeated item in parentheses";
    char msg[200];
    snprintf(msg, sizeof msg, "grammar: line 1 column 14: %s", want);
    parse_err("root ::= a{0}+ b\na ::= \"x\"\nb ::= \"y\"", ZL_EINVAL, msg);
    parse_err("root ::= \"x\"*?", ZL_EINVAL, msg);
    snprintf(msg, sizeof msg, "grammar: line 1 column 17: %s", want);
    parse_err("root ::= \"ab\"{2}{3}", ZL_EINVAL, msg);
    zl_grammar *g = parse_ok("root ::= (\"x\"{2})* \"y\"");
    zl_gmatch *m = NULL;
    cr_assert_eq(zl_gmatch_new(&m, g, NULL), 0);
    cr_assert_eq(zl_gmatch_feed(m, "xxxxy", 5), 0);
    cr_assert(zl_gmatch_done(m));
    zl_gmatch_reset(m);
    cr_assert_eq(zl_gmatch_feed(m, "xxx", 3), 0);
    cr_assert_eq(zl_gmatch_feed(m, "y", 1), ZL_EINVAL);
    zl_gmatch_free(m);
    zl_grammar_free(g);
}

Test(grammar_limits, repetition_count_past_10000) {
    parse_err("root ::= \"a\"{10001}", ZL_EINVAL, "grammar: line 1 column 14: repetition count above 10000");
    parse_err("root ::= \"a\"{2,10001}", ZL_EINVAL, "grammar: line 1 column 16: repetition count above 10000");
}

Test(grammar_limits, long_repetition_matches) {
    zl_grammar *g = parse_ok("root ::= \"a\"{0,10000}");
    char *text = malloc(10002);
    memset(text, 'a', 10001);
    zl_gmatch *m = NULL;
    cr_assert_eq(zl_gmatch_new(&m, g, NULL), 0);
    cr_assert_eq(zl_gmatch_feed(m, text, 10000), 0);
    cr_assert(zl_gmatch_accepting(m));
    cr_assert(zl_gmatch_done(m));
    cr_assert_eq(zl_gmatch_feed(m, "a", 1), ZL_EINVAL); /* the 10001st */
    zl_gmatch_free(m);
    free(text);
    zl_grammar_free(g);
}

Test(grammar_limits, expanded_size_past_4194304_items) {
    /* 420 x 10000 items once the repetitions are expanded (a repetition of a group is a rule, not copies) */
    char *src = repeat("root ::= ", "\"a\"{10000} ", 420, "", "", "");
    parse_err(src, ZL_EINVAL, "grammar: line 1 column 4629: grammar too large (over 4194304 items once repetition is expanded)");
    free(src);
    zl_grammar *g = parse_ok("root ::= (\"ab\"{10000}){500}");
    zl_grammar_free(g);
}

Test(grammar_limits, wide_alternation_matches) {
    /* 20000 alternatives, every one a distinct 5-digit number */
    size_t cap = 20000 * 10 + 64;
    char *src = malloc(cap);
    size_t at = (size_t)snprintf(src, cap, "root ::= ");
    for (int i = 0; i < 20000; i++) at += (size_t)snprintf(src + at, cap - at, "%s\"%05d\"", i ? " | " : "", i * 3);
    zl_grammar *g = parse_ok(src);
    zl_gmatch *m = NULL;
    cr_assert_eq(zl_gmatch_new(&m, g, NULL), 0);
    cr_assert_eq(zl_gmatch_feed(m, "59997", 5), 0);
    cr_assert(zl_gmatch_done(m));
    zl_gmatch_reset(m);
    cr_assert_eq(zl_gmatch_feed(m, "59998", 5), ZL_EINVAL);
    zl_gmatch_free(m);
    zl_grammar_free(g);
    free(src);
}

Test(grammar_limits, work_bound_at_parse) {
    parse_err("root ::= " OVER, ZL_ERANGE, "grammar: rule 'root': " WORK_MSG
              " (the grammar is too ambiguous: nested or repeated optional parts)");
    /* only the root's start is tried at parse time: an expensive rule elsewhere is found when reached */
    zl_grammar *g = parse_ok("top ::= x\nx ::= " OVER "\nroot ::= \"b\"");
    zl_grammar_free(g);
}

static const char *VOCAB[] = {"<end>", "a", "b", "ab:", "ab:a", "ab:c", "x", "c"};
#define NV 8

static const char *piece(void *ud, int32_t id, size_t *len) {
    (void)ud;
    *len = strlen(VOCAB[id]);
    return VOCAB[id];
}

static zl_gvocab *vocab(void) {
    zl_gvocab *v = NULL;
    int32_t eog = 0;
    cr_assert_eq(zl_gvocab_new(&v, NV, piece, NULL, &eog, 1, NULL), 0);
    return v;
}

static void expect_failed(zl_gconstraint *c) {
    const char *msg = NULL;
    cr_assert_eq(zl_gconstraint_error(c, &msg), ZL_ERANGE);
    cr_assert_str_eq(msg, "grammar: " WORK_MSG " (the grammar is too ambiguous: nested or repeated optional parts)");
    int32_t n = -1;
    cr_assert_null(zl_gconstraint_mask(c, &n));
    cr_assert_eq(n, 0);
    float logits[NV] = {0};
    cr_assert_eq(zl_gconstraint_apply(c, logits), 0);
    for (int32_t t = 0; t < NV; t++) {
        cr_assert_eq(zl_gconstraint_check(c, t), 0, "token %d", t);
        cr_assert_eq(zl_gconstraint_accept(c, t), ZL_ERANGE, "token %d", t);
    }
}

Test(grammar_limits, work_bound_mid_match) {
    zl_grammar *g = parse_ok(MID_MATCH);
    zl_gmatch *m = NULL;
    cr_assert_eq(zl_gmatch_new(&m, g, NULL), 0);
    cr_assert_eq(zl_gmatch_feed(m, "a", 1), ZL_ERANGE);
    zl_gmatch_free(m);

    zl_gvocab *v = vocab();
    zl_gconstraint *c = NULL;
    cr_assert_eq(zl_gconstraint_new(&c, g, v, NULL, NULL), 0);
    cr_assert_eq(zl_gconstraint_error(c, NULL), 0);
    int32_t n = -1;
    cr_assert_null(zl_gconstraint_mask(c, &n)); /* the first mask's walk over the trie trips it */
    cr_assert_eq(n, 0);
    expect_failed(c);
    zl_gconstraint_free(c);

    /* lazy: the grammar starts at the trigger; the bytes after it trip it */
    cr_assert_eq(zl_gconstraint_new(&c, g, v, "ab:", NULL), 0);
    cr_assert_eq(zl_gconstraint_accept(c, 6), 0); /* "x": still watching */
    cr_assert_eq(zl_gconstraint_check(c, 4), 0);  /* "ab:a" */
    cr_assert_eq(zl_gconstraint_accept(c, 4), ZL_ERANGE);
    expect_failed(c);
    zl_gconstraint_free(c);
    zl_gvocab_free(v);
    zl_grammar_free(g);
}

/* A vocabulary of every string of 1 to 3 characters over [a-z ]. */
static char WORDS[27 + 27 * 27 + 27 * 27 * 27][4];
static const char *word(void *ud, int32_t id, size_t *len) {
    (void)ud;
    *len = strlen(WORDS[id]);
    return WORDS[id];
}

/* Each byte within the matcher's bound, but one mask's walk over the
 * vocabulary advances so many states over so many bytes that it is over
 * the walk's bound: the constraint fails with its own message rather than
 * hold the engine thread. */
Test(grammar_limits, work_bound_of_one_mask) {
    const char *abc = "abcdefghijklmnopqrstuvwxyz ";
    int32_t n = 0;
    for (int len = 1, m = 27; len <= 3; len++, m *= 27)
        for (int k = 0; k < m; k++, n++)
            for (int i = 0, x = k; i < len; i++, x /= 27) WORDS[n][i] = abc[x % 27];
    zl_gvocab *v = NULL;
    int32_t eog = 0;
    cr_assert_eq(zl_gvocab_new(&v, n, word, NULL, &eog, 1, NULL), 0);
    zl_grammar *g = parse_ok("root ::= (((\"\" | [a-z ]){0,200}){0,100})");
    zl_gmatch *m = NULL; /* the byte matcher: every byte within its bound */
    cr_assert_eq(zl_gmatch_new(&m, g, NULL), 0);
    cr_assert_eq(zl_gmatch_feed(m, "hello world", 11), 0);
    zl_gmatch_free(m);
    zl_gconstraint *c = NULL;
    cr_assert_eq(zl_gconstraint_new(&c, g, v, NULL, NULL), 0);
    int32_t na = -1;
    cr_assert_null(zl_gconstraint_mask(c, &na));
    cr_assert_eq(na, 0);
    const char *msg = NULL;
    cr_assert_eq(zl_gconstraint_error(c, &msg), ZL_ERANGE);
    cr_assert_str_eq(msg, "grammar: one token's mask needs more than 8388608 expansion steps (the grammar is too "
                          "ambiguous: nested or repeated optional parts)");
    cr_assert_eq(zl_gconstraint_accept(c, 1), ZL_ERANGE);
    zl_gconstraint_free(c);
    zl_grammar_free(g);
    zl_gvocab_free(v);
}

Test(grammar_limits, lazy_trigger_check_agrees_with_accept) {
    zl_grammar *g = parse_ok("root ::= \"a\" \"b\"");
    zl_gvocab *v = vocab();
    zl_gconstraint *c = NULL;
    cr_assert_eq(zl_gconstraint_new(&c, g, v, "ab:", NULL), 0);
    cr_assert_eq(zl_gconstraint_check(c, 5), 0); /* "ab:c": c cannot start the grammar */
    cr_assert_eq(zl_gconstraint_accept(c, 5), ZL_EINVAL);
    cr_assert_eq(zl_gconstraint_active(c), 0); /* refused: unchanged */
    cr_assert_eq(zl_gconstraint_check(c, 1), 1); /* "a" "b" then ":" would be the trigger; plain text is free */
    cr_assert_eq(zl_gconstraint_accept(c, 1), 0);
    cr_assert_eq(zl_gconstraint_accept(c, 2), 0);
    cr_assert_eq(zl_gconstraint_check(c, 7), 1); /* "c" does not complete "ab:" */
    cr_assert_eq(zl_gconstraint_check(c, 4), 1); /* "ab:a": the grammar starts with a */
    cr_assert_eq(zl_gconstraint_accept(c, 4), 0);
    cr_assert_eq(zl_gconstraint_active(c), 1);
    cr_assert_eq(zl_gconstraint_check(c, 1), 0);
    cr_assert_eq(zl_gconstraint_accept(c, 1), ZL_EINVAL);
    cr_assert_eq(zl_gconstraint_check(c, 2), 1);
    cr_assert_eq(zl_gconstraint_accept(c, 2), 0);
    cr_assert_eq(zl_gconstraint_active(c), 0); /* the grammar is whole: back to watching */
    zl_gconstraint_free(c);
    zl_gvocab_free(v);
    zl_grammar_free(g);
}

Test(grammar_limits, gbnf_text_not_utf8) {
    parse_err("root ::= \"\xc0\xaf\"", ZL_EINVAL, "grammar: line 1 column 11: invalid UTF-8 in the grammar text"); /* overlong '/' */
    parse_err("root ::= \"\xed\xa0\x80\"", ZL_EINVAL, "grammar: line 1 column 11: invalid UTF-8 in the grammar text"); /* U+D800 */
    parse_err("root ::= [\xf4\x90\x80\x80]", ZL_EINVAL, "grammar: line 1 column 11: invalid UTF-8 in the grammar text"); /* past U+10FFFF */
    parse_err("root ::= \"\xe2\x82\"", ZL_EINVAL, "grammar: line 1 column 11: invalid UTF-8 in the grammar text");
    zl_grammar *g = parse_ok("root ::= \"\xc3\xa9\xf0\x9f\x98\x80\" [\xe4\xb8\xad]");
    zl_grammar_free(g);
}

Test(grammar_limits, schema_strings_not_utf8) {
    static const struct {
        const char *s;
        const char *want;
    } cases[] = {
        {"{\"const\":\"a\xff" "b\"}", "schema: invalid JSON at byte 11: invalid UTF-8 in a string"},
        {"{\"enum\":[\"x\",\"\xc0\xaf\"]}", "schema: invalid JSON at byte 14: invalid UTF-8 in a string"},      /* overlong */
        {"{\"type\":\"string\",\"pattern\":\"\xed\xa0\x80\"}", "schema: invalid JSON at byte 28: invalid UTF-8 in a string"}, /* a surrogate */
        {"{\"properties\":{\"k\xf4\x90\x80\x80\":{}}}", "schema: invalid JSON at byte 17: invalid UTF-8 in a string"}, /* past U+10FFFF */
        {"{\"const\":\"\xe2\x82\"}", "schema: invalid JSON at byte 10: invalid UTF-8 in a string"},              /* cut short */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) schema_err(cases[i].s, strlen(cases[i].s), ZL_EINVAL, cases[i].want);
    /* the same characters well-formed compile */
    char *out = NULL;
    zl_err e = {0};
    const char *ok = "{\"enum\":[\"\xc3\xa9\",\"\xf0\x9f\x98\x80\",\"\\u00e9\"]}";
    cr_assert_eq(zl_json_schema_to_grammar(ok, strlen(ok), &out, &e), 0, "%s", e.msg);
    zl_grammar *g = parse_ok(out);
    zl_grammar_free(g);
    free(out);
}

/* ---- through the engine (stories260K) ---- */

static zl_llm *g_llm;

static void setup(void) {
    zl_llm_opts lo = {.n_threads = 1};
    zl_err err = {0};
    cr_assert_eq(zl_llm_open(&g_llm, STORIES, &lo, &err), 0, "%s", err.msg);
}
static void teardown(void) { zl_llm_close(g_llm); }

Test(grammar_limits_engine, work_bound_fails_the_job, .init = setup, .fini = teardown) {
    zl_sched_opts so = {.n_parallel = 1, .max_queue = 4, .n_ctx = 128, .step_tokens = 32};
    zl_sched *s = NULL;
    zl_err err = {0};
    cr_assert_eq(zl_sched_new(&s, g_llm, &so, &err), 0, "%s", err.msg);
    int32_t *ids = NULL;
    size_t n = 0;
    cr_assert_eq(zl_llm_tokenize(g_llm, "Once upon a time", 16, 1, 0, &ids, &n, &err), 0, "%s", err.msg);
    zl_sampling sp = zl_sampling_defaults();
    sp.temp = 0;
    zl_job *j = zl_job_new(ids, (int)n, &sp, 16, -1);
    free(ids);
    cr_assert_not_null(j);
    zl_grammar *g = parse_ok(MID_MATCH);
    cr_assert_eq(zl_job_constrain(j, g_llm, g, NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(zl_sched_submit(s, j), 0);
    zl_finish fin = ZL_FINISH_NONE;
    int got = 0;
    for (int spins = 0; !fin; spins++) {
        cr_assert_lt(spins, 20000, "the job never finished");
        zl_job_tok t[8];
        int k = zl_job_read(s, j, got, t, 8, &fin);
        got += k;
        if (!k && !fin) zl_sched_wait(s, 20);
    }
    zl_job_report rep;
    zl_job_get_report(s, j, &rep);
    cr_assert_eq(fin, ZL_FINISH_ERROR, "finish %d: the fallback token was taken for an answer", (int)fin);
    cr_assert_eq(got, 0, "%d tokens", got);
    cr_assert_eq(rep.error_code, ZL_ERANGE);
    cr_assert_str_eq(rep.error, "grammar: " WORK_MSG " (the grammar is too ambiguous: nested or repeated optional parts)");
    cr_assert_eq(rep.retryable, 0);
    zl_job_release(j);
    zl_sched_free(s);
}

Test(grammar_limits_engine, work_bound_fails_seq_step, .init = setup, .fini = teardown) {
    zl_seq_opts so = {.n_ctx = 64, .kv_type = ZL_KV_F16, .sampling = zl_sampling_defaults()};
    so.sampling.temp = 0;
    zl_seq *seq = NULL;
    zl_err err = {0};
    cr_assert_eq(zl_seq_new(&seq, g_llm, &so, &err), 0, "%s", err.msg);
    cr_assert_eq(zl_seq_set_grammar(seq, MID_MATCH, &err), 0, "%s", err.msg);
    int32_t *ids = NULL;
    size_t n = 0;
    cr_assert_eq(zl_llm_tokenize(g_llm, "Once", 4, 1, 0, &ids, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(zl_seq_eval(seq, ids, (int)n, 0, NULL, &err), 0, "%s", err.msg);
    free(ids);
    int32_t out[4];
    cr_assert_eq(zl_seq_step(seq, out, 4, &err), -1);
    cr_assert_eq(err.code, ZL_ERANGE);
    cr_assert_str_eq(err.msg, "grammar: " WORK_MSG " (the grammar is too ambiguous: nested or repeated optional parts)");
    zl_seq_free(seq);
}
