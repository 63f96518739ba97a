/* fuzz_grammar.c — libFuzzer target: the grammar layer (src/grammar) on
 * arbitrary grammar text or JSON Schema, then the byte matcher and the
 * token constraint driven over a small fixed vocabulary.
 *
 * Input: a form byte, the text (GBNF or a JSON Schema) up to the first NUL,
 * then drive bytes.  Form bits 0-1: 0 or 3 GBNF, 1 a schema through
 * zl_json_schema_to_grammar, 2 a schema through zl_json_schema_rules + the
 * prelude; bit 2: the constraint is lazy (trigger "ab:").
 * Checked: a refusal says why and returns nothing; a compiled schema's
 * grammar parses; the byte matcher refuses a byte without changing state;
 * at every step of a token walk the mask has n_allowed bits, agrees with
 * zl_gconstraint_check for every token and (for the first steps) with a
 * byte matcher fed the text so far plus the token (the end token exactly
 * when accepting); a token that check allows is accepted, one it refuses
 * is refused; apply masks exactly the refused logits; a whole sentence of a
 * schema's grammar is JSON holding no NUL.  The matcher's work bound (ZL_ERANGE) is the
 * one failure allowed past the parse: a grammar is refused by the parse when
 * its start exceeds it, and a constraint that trips it later reports it
 * (zl_gconstraint_error) and from then on allows nothing, check and accept
 * agreeing.  Never crashes, hangs, reads out of bounds or leaks. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gjson.h"
#include "grammar/grammar.h"

#define MAX_TEXT 4096   /* longer inputs are cut: the grammar's size, not the fuzzer's, bounds the work */
#define MAX_STEPS 48
#define BRUTE_STEPS 6   /* steps whose whole mask is checked against the byte matcher */
#define TRIGGER "ab:"

static const char *VOCAB[] = {
    "<end>", "", "{", "}", "[", "]", "\"", ":", ",", " ", "\n", "\\", "a", "b", "e", "l", "n", "r", "s", "t", "u",
    "0", "1", "-", ".", "x", "\xc3", "\xa9", "\xff", "\"a", "ab", "true", "false", "null", "tr", "ue", "{\"",
    "\":", "\":\"", "\"}", "12", "-0", "1.5e", "\xc3\xa9", "\xc3\xa9\"", "\\n", "\\u00", "::=", "root", "abc",
    "aaaa", "b:", ":1", ":x", "b:{", "ab:1", "ab:{\"", "\"]", "],", "}]", "\t", "E+", "e-", "\xf0\x9f\x98\x80",
    "\x00", "0123456789"};
#define NV ((int32_t)(sizeof VOCAB / sizeof *VOCAB))

static size_t piece_len(int32_t id) { return id == 64 ? 1 : strlen(VOCAB[id]); } /* id 64 is the NUL byte */

static const char *piece(void *ud, int32_t id, size_t *len) {
    (void)ud;
    *len = piece_len(id);
    return VOCAB[id];
}

static zl_gvocab *vocab(void) {
    static zl_gvocab *v;
    if (!v) {
        int32_t eog = 0;
        if (zl_gvocab_new(&v, NV, piece, NULL, &eog, 1, NULL)) abort();
    }
    return v;
}

/* Whether the token keeps alive a byte matcher fed the text accepted so far
 * (base; tmp is scratch): the end token when that text is a whole sentence;
 * -1 when the matcher's work bound decided nothing. */
static int ref_allowed(const zl_gmatch *base, zl_gmatch *tmp, int32_t tok) {
    if (tok == 0) return zl_gmatch_accepting(base);
    if (!piece_len(tok)) return 0;
    if (zl_gmatch_copy(tmp, base)) abort();
    int rc = zl_gmatch_feed(tmp, VOCAB[tok], piece_len(tok));
    return rc == ZL_ERANGE ? -1 : rc == 0;
}

/* A constraint in its error state: the work bound (or memory) and nothing allowed. */
static void check_failed(zl_gconstraint *c) {
    const char *msg = NULL;
    int code = zl_gconstraint_error(c, &msg);
    if ((code != ZL_ERANGE && code != ZL_ENOMEM) || !msg || !*msg) abort();
    int32_t n_allowed = -1;
    if (zl_gconstraint_mask(c, &n_allowed) || n_allowed != 0) abort();
    float logits[NV];
    for (int32_t t = 0; t < NV; t++) logits[t] = 1.0f;
    if (zl_gconstraint_apply(c, logits) != 0) abort();
    for (int32_t t = 0; t < NV; t++)
        if (zl_gconstraint_check(c, t) || zl_gconstraint_accept(c, t) != code) abort();
}

static void drive_bytes(const zl_grammar *g, const uint8_t *d, size_t n) {
    zl_gmatch *m = NULL;
    if (zl_gmatch_new(&m, g, NULL)) abort();
    for (size_t i = 0; i < n; i++) {
        int acc = zl_gmatch_accepting(m), done = zl_gmatch_done(m);
        int rc = zl_gmatch_feed(m, (const char *)d + i, 1);
        if (rc == ZL_ERANGE) break; /* the work bound: a matcher may refuse to go on */
        if (rc && (zl_gmatch_accepting(m) != acc || zl_gmatch_done(m) != done)) abort(); /* refused: unchanged */
        if (!rc && done) abort(); /* nothing may follow a finished sentence */
    }
    zl_gmatch_free(m);
}

/* Whether a decoded value holds a string with a NUL byte. */
static int holds_nul(const gj *v) {
    if (v->t == GJ_STR) return memchr(v->s, 0, v->len) != NULL;
    for (int k = 0; (v->t == GJ_ARR || v->t == GJ_OBJ) && k < v->n; k++)
        if (holds_nul(v->kid[k])) return 1;
    return 0;
}

static void drive_tokens(const zl_grammar *g, int lazy, int schema, const uint8_t *d, size_t n) {
    zl_gconstraint *c = NULL;
    if (zl_gconstraint_new(&c, g, vocab(), lazy ? TRIGGER : NULL, NULL)) abort(); /* the start is within the bound */
    char text[MAX_STEPS * 16];
    size_t tn = 0; /* bytes the grammar has matched (non-lazy) */
    zl_gmatch *base = NULL, *tmp = NULL; /* the byte matcher fed text[0..tn) (NULL once over the work bound) */
    if (!lazy && (zl_gmatch_new(&base, g, NULL) || zl_gmatch_new(&tmp, g, NULL))) abort(); /* the start is within the bound */
    float logits[NV];
    for (size_t s = 0; s < n && s < MAX_STEPS; s++) {
        int32_t n_allowed = -1;
        const uint64_t *mask = zl_gconstraint_mask(c, &n_allowed);
        if (zl_gconstraint_error(c, NULL)) {
            check_failed(c);
            break;
        }
        if (!mask) {
            if (zl_gconstraint_active(c) || n_allowed != NV) abort(); /* NULL only for a lazy one not triggered */
        } else {
            int32_t count = 0;
            for (int32_t t = 0; t < NV; t++) {
                int bit = (int)((mask[t >> 6] >> (t & 63)) & 1);
                count += bit;
                if (bit != zl_gconstraint_check(c, t)) abort();
                if (base && s < BRUTE_STEPS) {
                    int ref = ref_allowed(base, tmp, t);
                    if (ref >= 0 && bit != ref) abort();
                }
                if (t == 1 && bit) abort(); /* a token without bytes is never allowed */
            }
            if (count != n_allowed) abort();
            for (int32_t t = 0; t < NV; t++) logits[t] = 1.0f;
            if (zl_gconstraint_apply(c, logits) != n_allowed) abort();
            for (int32_t t = 0; t < NV; t++)
                if ((logits[t] == 1.0f) != (int)((mask[t >> 6] >> (t & 63)) & 1)) abort();
        }
        if (!lazy && zl_gconstraint_accepting(c) != ((mask[0] & 1) != 0)) abort(); /* the end token */
        int32_t tok;
        if (d[s] & 0x80 || !mask || !n_allowed) {
            tok = (int32_t)(d[s] & 0x7f) % NV; /* any token: check decides */
        } else {
            int32_t k = (int32_t)d[s] % n_allowed;
            for (tok = 0; tok < NV; tok++)
                if ((mask[tok >> 6] >> (tok & 63)) & 1 && k-- == 0) break;
        }
        int ok = zl_gconstraint_check(c, tok), was_active = zl_gconstraint_active(c);
        int rc = zl_gconstraint_accept(c, tok);
        if (ok != (rc == 0)) abort(); /* accept agrees with check */
        if (zl_gconstraint_error(c, NULL)) {
            if (ok) abort(); /* a token check allowed cannot fail in accept */
            check_failed(c);
            break;
        }
        if (rc) continue;
        if (!lazy && tok == 0) break; /* the end token ends the walk */
        if (!lazy || was_active) {
            size_t pl = piece_len(tok);
            if (tn + pl <= sizeof text) {
                memcpy(text + tn, VOCAB[tok], pl);
                tn += pl;
            }
        }
        if (base) { /* the accepted token continues the byte matcher too */
            int brc = zl_gmatch_feed(base, VOCAB[tok], piece_len(tok));
            if (brc == ZL_ERANGE) {
                zl_gmatch_free(base);
                base = NULL;
            } else if (brc) {
                abort(); /* the constraint accepted bytes the grammar refuses */
            }
        }
    }
    zl_gmatch_free(base);
    zl_gmatch_free(tmp);
    if (!lazy && schema && zl_gconstraint_accepting(c)) { /* a schema's whole sentence is JSON */
        gj *j = NULL;
        zl_err je = {0};
        if (gj_parse(text, tn, &j, &je) || holds_nul(j)) abort(); /* and never "\u0000" (json_schema.c) */
        gj_free(j);
    }
    zl_gconstraint_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!size) return 0;
    int form = data[0] & 3, lazy = (data[0] >> 2) & 1;
    const uint8_t *src = data + 1;
    size_t n = size - 1, tl = 0;
    while (tl < n && src[tl]) tl++;
    const uint8_t *drive = tl < n ? src + tl + 1 : src + n;
    size_t dn = tl < n ? n - tl - 1 : 0;
    if (tl > MAX_TEXT) tl = MAX_TEXT;
    zl_err err = {0};
    char *text = NULL;
    if (form == 1 || form == 2) {
        int rc;
        if (form == 1) {
            rc = zl_json_schema_to_grammar((const char *)src, tl, &text, &err);
        } else {
            char *rules = NULL, top[64];
            rc = zl_json_schema_rules((const char *)src, tl, "f-", &rules, top, sizeof top, &err);
            if (!rc) {
                const char *pre = zl_json_schema_prelude();
                size_t rl = strlen(rules), pl = strlen(pre), ol = strlen(top);
                text = malloc(rl + pl + ol + 16);
                if (!text) abort();
                memcpy(text, "root ::= ", 9);
                memcpy(text + 9, top, ol);
                text[9 + ol] = '\n';
                memcpy(text + 10 + ol, rules, rl);
                memcpy(text + 10 + ol + rl, pre, pl + 1);
                free(rules);
            } else if (rules) {
                abort();
            }
        }
        if (rc) {
            if (text || !err.msg[0]) abort();
            return 0;
        }
    }
    zl_grammar *g = NULL;
    int rc = text ? zl_grammar_parse(&g, text, strlen(text), NULL, &err)
                  : zl_grammar_parse(&g, (const char *)src, tl, NULL, &err);
    if (rc) {
        /* a compiled schema always parses (but for the work bound); a refusal says why */
        if ((text && rc != ZL_ERANGE) || g || !err.msg[0]) abort();
        free(text);
        return 0;
    }
    free(text);
    drive_bytes(g, drive, dn);
    drive_tokens(g, lazy, form == 1 || form == 2, drive, dn);
    zl_grammar_free(g);
    return 0;
}
