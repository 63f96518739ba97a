/* test_grammar.c — grammar parsing, byte matching, JSON Schema compilation
 * and the token constraint.  The token masks are checked against a brute
 * force (every token fed to a fresh byte matcher: no trie, no cache); the
 * schema grammars against hand-written valid and invalid documents. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"

static zl_grammar *parse_ok(const char *src) {
    zl_grammar *g = NULL;
    zl_err e = {0};
    int rc = zl_grammar_parse(&g, src, strlen(src), NULL, &e);
    cr_assert_eq(rc, 0, "parse failed: %s\n%s", e.msg, src);
    return g;
}

static int matches(const zl_grammar *g, const char *text) {
    zl_gmatch *m = NULL;
    cr_assert_eq(zl_gmatch_new(&m, g, NULL), 0);
    int ok = zl_gmatch_feed(m, text, strlen(text)) == 0 && zl_gmatch_accepting(m);
    zl_gmatch_free(m);
    return ok;
}

static void parse_err(const char *src, const char *want) {
    zl_grammar *g = NULL;
    zl_err e = {0};
    int rc = zl_grammar_parse(&g, src, strlen(src), NULL, &e);
    cr_assert_neq(rc, 0, "accepted: %s", src);
    cr_assert(strstr(e.msg, want), "message '%s' lacks '%s'", e.msg, want);
    cr_assert_null(g);
}

Test(grammar, literals_classes_repetition) {
    zl_grammar *g = parse_ok("root ::= \"ab\" [0-9]+ (\"x\" | \"yz\")? tail\n"
                             "tail ::= [^a-z\\n]{2,3}  # comment\n");
    cr_assert(matches(g, "ab1x!!"));
    cr_assert(matches(g, "ab123yz!!!"));
    cr_assert(matches(g, "ab0AB"));
    cr_assert(!matches(g, "ab!!"));       /* needs a digit */
    cr_assert(!matches(g, "ab1xa!"));     /* a is excluded */
    cr_assert(!matches(g, "ab1x!!!!"));   /* at most 3 */
    cr_assert(!matches(g, "ab1x!"));      /* at least 2 */
    zl_grammar_free(g);
}

Test(grammar, utf8_classes_match_code_points) {
    zl_grammar *g = parse_ok("root ::= [\\u00e0-\\u00ff\\u4e00-\\u9fff]+ \".\" [^\\x00-\\x7f]");
    cr_assert(matches(g, "\xc3\xa9\xe4\xb8\xad.\xf0\x9f\x98\x80")); /* é中.😀 */
    cr_assert(!matches(g, "e."));
    cr_assert(!matches(g, "\xc3\xa9.a"));
    cr_assert(!matches(g, "\xc3\x9f.\xc3\xa9")); /* ß is U+00DF: below the range */
    zl_grammar_free(g);
    g = parse_ok("root ::= .{3}");
    cr_assert(matches(g, "a\xc3\xa9\xf0\x9f\x98\x80"));
    cr_assert(!matches(g, "ab"));
    cr_assert(!matches(g, "\xed\xa0\x80" "ab")); /* a surrogate is not a character */
    zl_grammar_free(g);
}

Test(grammar, recursion_and_empty_alternatives) {
    zl_grammar *g = parse_ok("root ::= list\nlist ::= \"[\" ( item ( \",\" item )* )? \"]\"\nitem ::= list | [a-z]");
    cr_assert(matches(g, "[]"));
    cr_assert(matches(g, "[a,[b,[]],c]"));
    cr_assert(!matches(g, "[a,]"));
    cr_assert(!matches(g, "[[a]"));
    zl_grammar_free(g);
}

Test(grammar, errors_name_line_and_column) {
    parse_err("root ::= \"a\"\nroot ::= \"b\"", "line 2 column 1: rule defined twice");
    parse_err("root ::= foo", "line 1 column 10: reference to an undefined rule");
    parse_err("root ::= \"abc", "line 1 column 10: unterminated string literal");
    parse_err("root ::= [a-", "unterminated character class");
    parse_err("root ::= x\nx ::= x \"a\" | \"b\"", "left-recursive");
    parse_err("root ::= y\ny ::= z* y | \"q\"\nz ::= \"a\"?", "left-recursive");
    parse_err("root ::= \"a\" r\nr ::= \"b\" r", "can never finish");
    parse_err("root ::= \"a\"{3,2}", "n < m");
    parse_err("root ::= (\"a\"", "unclosed '('");
    parse_err("x ::= \"a\"", "no rule named 'root'");
    parse_err("root ::= \"\\q\"", "unknown escape");
    parse_err("root = \"a\"", "expected '::='");
}

/* ---- JSON Schema ---- */

static zl_grammar *schema_ok(const char *schema) {
    char *text = NULL;
    zl_err e = {0};
    cr_assert_eq(zl_json_schema_to_grammar(schema, strlen(schema), &text, &e), 0, "%s: %s", schema, e.msg);
    zl_grammar *g = parse_ok(text);
    free(text);
    return g;
}

static void schema_err(const char *schema, int code, const char *want) {
    char *text = NULL;
    zl_err e = {0};
    int rc = zl_json_schema_to_grammar(schema, strlen(schema), &text, &e);
    cr_assert_eq(rc, code, "%s: rc %d (%s)", schema, rc, e.msg);
    cr_assert(strstr(e.msg, want), "message '%s' lacks '%s'", e.msg, want);
    cr_assert_null(text);
}

Test(json_schema, object_required_and_optional) {
    zl_grammar *g = schema_ok("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},"
                              "\"b\":{\"type\":\"string\",\"maxLength\":3},\"c\":{\"enum\":[\"x\",2,null]}},"
                              "\"required\":[\"b\"],\"additionalProperties\":false}");
    cr_assert(matches(g, "{\"b\":\"hi\"}"));
    cr_assert(matches(g, "{\"a\":-12,\"b\":\"\"}"));
    cr_assert(matches(g, "{\"a\": 0, \"b\": \"abc\", \"c\": null}"));
    cr_assert(matches(g, "{\"b\":\"q\",\"c\":2}"));
    cr_assert(!matches(g, "{}"));                   /* b is required */
    cr_assert(!matches(g, "{\"a\":1}"));
    cr_assert(!matches(g, "{\"b\":\"abcd\"}"));     /* maxLength */
    cr_assert(!matches(g, "{\"a\":01,\"b\":\"\"}")); /* no leading zero */
    cr_assert(!matches(g, "{\"b\":\"x\",\"c\":3}"));
    cr_assert(!matches(g, "{\"b\":\"x\",}"));
    zl_grammar_free(g);
}

Test(json_schema, arrays_refs_anyof_const) {
    zl_grammar *g = schema_ok("{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"number\"},"
                              "\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"},\"maxItems\":2}},"
                              "\"required\":[\"v\"]}},\"$ref\":\"#/$defs/node\"}");
    cr_assert(matches(g, "{\"v\":1.5e3,\"kids\":[{\"v\":2},{\"v\":-0.25,\"kids\":[]}]}"));
    cr_assert(!matches(g, "{\"v\":1,\"kids\":[{\"v\":2},{\"v\":3},{\"v\":4}]}"));
    zl_grammar_free(g);
    g = schema_ok("{\"type\":\"array\",\"items\":{\"anyOf\":[{\"type\":\"boolean\"},{\"const\":{\"k\":[1,\"\\u00e9\"]}}]},"
                  "\"minItems\":2}");
    cr_assert(matches(g, "[true,{\"k\":[1,\"\xc3\xa9\"]}]"));
    cr_assert(!matches(g, "[true]"));
    cr_assert(!matches(g, "[true,{\"k\":[1]}]"));
    zl_grammar_free(g);
    g = schema_ok("{\"type\":[\"string\",\"null\"],\"minLength\":2}");
    cr_assert(matches(g, "null"));
    cr_assert(matches(g, "\"a\\n\\u00e9\""));
    cr_assert(!matches(g, "\"a\""));
    zl_grammar_free(g);
    g = schema_ok("{}");
    cr_assert(matches(g, "[1,{\"a\":\"b\"},null]"));
    zl_grammar_free(g);
}

/* The server's JSON readers (jansson without JSON_ALLOW_NUL, gj for keys)
 * refuse "\u0000": a constrained answer never contains it. */
Test(json_schema, output_never_holds_a_nul_escape) {
    zl_grammar *g = schema_ok("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}}");
    cr_assert(matches(g, "{\"k\":\"\\u0001\\u0010\\u0100\\u1000\\uFFFF\\u00e9\"}"));
    cr_assert(!matches(g, "{\"k\":\"a\\u0000\"}"));
    cr_assert(!matches(g, "{\"\\u0000\":\"a\"}"));
    zl_grammar_free(g);
    g = schema_ok("{}");
    cr_assert(matches(g, "[\"\\u000a\"]"));
    cr_assert(!matches(g, "[\"\\u0000\"]"));
    zl_grammar_free(g);
    schema_err("{\"const\":\"a\\u0000\"}", ZL_EUNSUP, "holding a NUL");
    schema_err("{\"enum\":[\"a\",{\"k\":[\"\\u0000\"]}]}", ZL_EUNSUP, "holding a NUL");
}

Test(json_schema, unsupported_and_malformed_are_named) {
    schema_err("{\"type\":\"string\",\"pattern\":\"^a\"}", ZL_EUNSUP, "unsupported keyword 'pattern' at /");
    schema_err("{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\",\"minimum\":0}}}", ZL_EUNSUP,
               "unsupported keyword 'minimum' at /properties/n");
    schema_err("{\"type\":\"strin\"}", ZL_EINVAL, "unknown type 'strin'");
    schema_err("{\"type\":\"object\",", ZL_EINVAL, "invalid JSON");
    schema_err("{\"$ref\":\"http://x/y\"}", ZL_EUNSUP, "$ref 'http://x/y'");
    schema_err("{\"required\":[\"zz\"],\"properties\":{}}", ZL_EUNSUP, "required property 'zz'");
    schema_err("{\"type\":\"array\",\"minItems\":-1}", ZL_EINVAL, "'minItems' must be an integer");
}

/* ---- tokens ---- */

typedef struct tv {
    const char **p;
    int n;
} tv;

static const char *piece(void *ud, int32_t id, size_t *len) {
    tv *v = ud;
    *len = strlen(v->p[id]);
    return v->p[id];
}

/* Reference: a token is allowed iff its bytes, fed after the prefix, keep
 * the byte matcher alive (an end token iff the prefix is accepting). */
static int ref_allowed(const zl_grammar *g, const char *prefix, const char *tok, int is_end) {
    zl_gmatch *m = NULL;
    zl_gmatch_new(&m, g, NULL);
    int ok = zl_gmatch_feed(m, prefix, strlen(prefix)) == 0;
    if (ok) ok = is_end ? zl_gmatch_accepting(m) : (strlen(tok) > 0 && zl_gmatch_feed(m, tok, strlen(tok)) == 0);
    zl_gmatch_free(m);
    return ok;
}

static const char *VOCAB[] = {"<end>", "{", "}", "\"", "\"a", "a", "ab", "b\"", ":", ",", " ", "\": ", "1", "12",
                              "-", "0", "true", "tr", "ue", "null", "\xc3", "\xa9", "\xc3\xa9", "x\"}", "\"}", "",
                              "[", "]", "\\", "\\n", "e", "{\"", "\":\"", "b"};
#define NV ((int)(sizeof VOCAB / sizeof *VOCAB))

Test(gconstraint, mask_equals_brute_force_along_a_walk) {
    zl_grammar *g = schema_ok("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"},\"b\":{\"type\":"
                              "\"array\",\"items\":{\"type\":\"integer\"}}},\"required\":[\"a\"]}");
    tv v = {VOCAB, NV};
    int32_t eog = 0;
    zl_gvocab *gv = NULL;
    cr_assert_eq(zl_gvocab_new(&gv, NV, piece, &v, &eog, 1, NULL), 0);
    zl_gconstraint *c = NULL;
    cr_assert_eq(zl_gconstraint_new(&c, g, gv, NULL, NULL), 0);
    /* a path of tokens through {"a":"abé\n","b":[12,-0]} */
    const char *steps[] = {"{\"", "a", "\":\"", "ab", "\xc3", "\xa9", "\\n", "\"", ",", "\"", "b", "\": ", "[",
                           "12", ",", "-", "0", "]", "}", NULL};
    char prefix[256] = "";
    for (int s = 0;; s++) {
        int32_t n_allowed = -1;
        const uint64_t *mask = zl_gconstraint_mask(c, &n_allowed);
        cr_assert_not_null(mask);
        int count = 0;
        for (int t = 0; t < NV; t++) {
            int got = (int)((mask[t >> 6] >> (t & 63)) & 1);
            int want = ref_allowed(g, prefix, VOCAB[t], t == 0);
            cr_assert_eq(got, want, "after '%s': token %d '%s' got %d want %d", prefix, t, VOCAB[t], got, want);
            count += got;
        }
        cr_assert_eq(count, n_allowed);
        if (!steps[s]) break;
        int tok = -1;
        for (int t = 1; t < NV; t++)
            if (!strcmp(VOCAB[t], steps[s])) tok = t;
        cr_assert_geq(tok, 0);
        cr_assert_eq(zl_gconstraint_accept(c, tok), 0, "token '%s' after '%s'", steps[s], prefix);
        strcat(prefix, steps[s]);
    }
    cr_assert(zl_gconstraint_accepting(c));
    cr_assert_eq(zl_gconstraint_accept(c, 0), 0); /* the end token */
    cr_assert_eq(zl_gconstraint_accept(c, 5), ZL_EINVAL);
    float logits[NV];
    for (int t = 0; t < NV; t++) logits[t] = 1;
    cr_assert_eq(zl_gconstraint_apply(c, logits), 1); /* only the end token after the closing brace */
    for (int t = 0; t < NV; t++) cr_assert(t == 0 ? logits[t] == 1 : isinf(logits[t]));
    long walks = 0, hits = 0;
    zl_gconstraint_stats(c, &walks, &hits);
    cr_assert_gt(walks, 0);
    zl_gconstraint_free(c);
    zl_gvocab_free(gv);
    zl_grammar_free(g);
}

Test(gconstraint, rejected_token_leaves_state_and_cache_hits_repeat_states) {
    zl_grammar *g = parse_ok("root ::= \"[\" [a-z]* \"]\"");
    tv v = {VOCAB, NV};
    int32_t eog = 0;
    zl_gvocab *gv = NULL;
    cr_assert_eq(zl_gvocab_new(&gv, NV, piece, &v, &eog, 1, NULL), 0);
    zl_gconstraint *c = NULL;
    cr_assert_eq(zl_gconstraint_new(&c, g, gv, NULL, NULL), 0);
    cr_assert_eq(zl_gconstraint_accept(c, 2), ZL_EINVAL); /* "}" */
    cr_assert_eq(zl_gconstraint_accept(c, 26), 0);        /* "[" */
    for (int k = 0; k < 5; k++) {
        cr_assert_not_null(zl_gconstraint_mask(c, NULL));
        cr_assert_eq(zl_gconstraint_accept(c, 6), 0); /* "ab" */
    }
    long walks = 0, hits = 0;
    zl_gconstraint_stats(c, &walks, &hits);
    cr_assert_eq(walks, 1);
    cr_assert_eq(hits, 4);
    cr_assert_eq(zl_gconstraint_accept(c, 0), ZL_EINVAL); /* not finished */
    cr_assert_eq(zl_gconstraint_accept(c, 27), 0);
    cr_assert_eq(zl_gconstraint_accept(c, 0), 0);
    zl_gconstraint_free(c);
    zl_gvocab_free(gv);
    zl_grammar_free(g);
}

Test(gconstraint, lazy_trigger_starts_the_grammar) {
    zl_grammar *g = parse_ok("root ::= \"1\" \"}\"");
    tv v = {VOCAB, NV};
    int32_t eog = 0;
    zl_gvocab *gv = NULL;
    cr_assert_eq(zl_gvocab_new(&gv, NV, piece, &v, &eog, 1, NULL), 0);
    zl_gconstraint *c = NULL;
    cr_assert_eq(zl_gconstraint_new(&c, g, gv, "ab:", NULL), 0);
    cr_assert_null(zl_gconstraint_mask(c, NULL));
    cr_assert_eq(zl_gconstraint_accept(c, 5), 0); /* a */
    cr_assert_eq(zl_gconstraint_accept(c, 6), 0); /* ab */
    cr_assert(!zl_gconstraint_active(c));
    cr_assert_eq(zl_gconstraint_accept(c, 8), 0); /* ":" completes "ab:" */
    cr_assert(zl_gconstraint_active(c));
    int32_t n = 0;
    const uint64_t *m = zl_gconstraint_mask(c, &n);
    cr_assert_not_null(m);
    cr_assert_eq(n, 1); /* only "1" continues toward "1}" */
    cr_assert_eq(zl_gconstraint_accept(c, 13), ZL_EINVAL); /* "12" */
    cr_assert_eq(zl_gconstraint_accept(c, 12), 0);
    cr_assert_eq(zl_gconstraint_accept(c, 2), 0);
    cr_assert(!zl_gconstraint_active(c)); /* done: watching for the trigger again */
    cr_assert_null(zl_gconstraint_mask(c, NULL));
    zl_gconstraint_free(c);
    zl_gvocab_free(gv);
    zl_grammar_free(g);
}
