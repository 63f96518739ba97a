/* tok_corpus.h — the tokenizer on a real model's vocabulary against
 * llama.cpp, string by string, for tests/real/tok_*.c.
 *
 * The corpus is tests/fixtures/tokenizer/real/corpus.txt (strings each
 * followed by "\n__ggml_vocab_test__\n").  For a reference name R,
 * tests/fixtures/tokenizer/real/R.MODE.out holds one line of ids per string,
 * made by llama-tokenize (tools/ref/tokenize_ref.sh; the exact command is in
 * the README beside them), in four modes:
 *   plain        no BOS/EOS, special-token text left as text
 *   special      no BOS/EOS, special-token text parsed into ids
 *   bos-plain    BOS/EOS as the model's metadata asks, text left as text
 *   bos-special  BOS/EOS as the metadata asks, special-token text parsed
 * Every string must give exactly the reference ids in every mode.  Beyond
 * llama.cpp: detokenizing gives the input back (the vocabularies are
 * lossless, except that SentencePiece reads U+2581 as a space), and the
 * streaming detokenizer hands out only valid UTF-8 whose concatenation is the
 * whole text. */
#ifndef ZL_TOK_CORPUS_H
#define ZL_TOK_CORPUS_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "real/real_models.h"
#include "tokenizer/vocab.h"

#define TOK_REAL_DIR ZL_ROOT "/tests/fixtures/tokenizer/real/"
#define TOK_SEP "\n__ggml_vocab_test__\n"
#define TOK_MAX_STRINGS 1024

static char *tok_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    cr_assert(b && fread(b, 1, (size_t)n, f) == (size_t)n, "cannot read %s", path);
    fclose(f);
    b[n] = '\0';
    if (len) *len = (size_t)n;
    return b;
}

typedef struct {
    char *buf;
    const char *s[TOK_MAX_STRINGS];
    size_t len[TOK_MAX_STRINGS];
    int n;
} tok_corpus;

static void tok_corpus_read(tok_corpus *c) {
    size_t len;
    c->buf = tok_slurp(TOK_REAL_DIR "corpus.txt", &len);
    c->n = 0;
    char *p = c->buf, *end = c->buf + len;
    while (p < end) {
        char *q = memmem(p, (size_t)(end - p), TOK_SEP, strlen(TOK_SEP));
        cr_assert(q, "corpus string %d is not followed by a separator", c->n);
        cr_assert_lt(c->n, TOK_MAX_STRINGS);
        c->s[c->n] = p;
        c->len[c->n++] = (size_t)(q - p);
        p = q + strlen(TOK_SEP);
    }
    cr_assert_geq(c->n, 200, "the corpus has only %d strings", c->n);
}

/* Strict UTF-8: shortest forms, no surrogates, nothing above U+10FFFF. */
static int tok_utf8_valid(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned b = s[i], need;
        uint32_t cp, min;
        if (b < 0x80) { i++; continue; }
        if (b >= 0xC2 && b <= 0xDF) need = 1, cp = b & 0x1F, min = 0x80;
        else if (b >= 0xE0 && b <= 0xEF) need = 2, cp = b & 0x0F, min = 0x800;
        else if (b >= 0xF0 && b <= 0xF4) need = 3, cp = b & 0x07, min = 0x10000;
        else return 0;
        if (i + need >= n) return 0;
        for (unsigned k = 1; k <= need; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return 0;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
        i += need + 1;
    }
    return 1;
}

static void tok_print_ids(const char *label, const int32_t *ids, size_t n) {
    fprintf(stderr, "    %s:", label);
    for (size_t i = 0; i < n && i < 48; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, n > 48 ? " ... (%zu ids)\n" : "\n", n);
}

/* Printable head of a corpus string for failure messages. */
static const char *tok_show(const char *s, size_t len) {
    static char out[100];
    size_t o = 0;
    for (size_t i = 0; i < len && o + 5 < sizeof out; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '\n') out[o++] = '\\', out[o++] = 'n';
        else if (ch == '\t') out[o++] = '\\', out[o++] = 't';
        else if (ch < 0x20) o += (size_t)snprintf(out + o, 5, "\\x%02x", ch);
        else out[o++] = (char)ch;
    }
    out[o] = '\0';
    return out;
}

static const struct { const char *name; int bos, special; } tok_modes[4] = {
    {"plain", 0, 0}, {"special", 0, 1}, {"bos-plain", 1, 0}, {"bos-special", 1, 1}};

/* Tokenize every corpus string in one mode and compare with the reference
 * file; returns the number of strings that match (mismatches are printed). */
static int tok_check_mode(const zl_vocab *v, const tok_corpus *c, const char *label, const char *ref, int mode) {
    char path[1024];
    snprintf(path, sizeof path, TOK_REAL_DIR "%s.%s.out", ref, tok_modes[mode].name);
    char *exp = tok_slurp(path, NULL);
    char *line = exp;
    int good = 0, shown = 0;
    for (int k = 0; k < c->n; k++) {
        char *nl = strchr(line, '\n');
        cr_assert(nl, "%s: %d lines for %d corpus strings", path, k, c->n);
        *nl = '\0';
        static int32_t want[65536];
        size_t nw = 0;
        for (char *p = line, *e;; p = e) {
            long x = strtol(p, &e, 10);
            if (e == p) break;
            cr_assert_lt(nw, 65536);
            want[nw++] = (int32_t)x;
        }
        int32_t *ids;
        size_t n;
        zl_err err = {0};
        cr_assert_eq(zl_tokenize(v, c->s[k], c->len[k], tok_modes[mode].bos, tok_modes[mode].special, &ids, &n, &err),
                     0, "%s string %d: %s", label, k, err.msg);
        if (n == nw && (n == 0 || memcmp(ids, want, n * sizeof *ids) == 0)) {
            good++;
        } else if (shown++ < 12) {
            fprintf(stderr, "%s %s string %d \"%s\":\n", label, tok_modes[mode].name, k, tok_show(c->s[k], c->len[k]));
            tok_print_ids("zerolayer", ids, n);
            tok_print_ids("llama.cpp", want, nw);
        }
        free(ids);
        line = nl + 1;
    }
    cr_assert_eq(*line, '\0', "%s has more lines than the corpus has strings", path);
    free(exp);
    return good;
}

/* Detokenize whole and streamed; returns 1 when both give the input back. */
static int tok_round_trip(const zl_vocab *v, const tok_corpus *c, int k, int special, const char *label) {
    int32_t *ids;
    size_t n, len;
    zl_err err = {0};
    cr_assert_eq(zl_tokenize(v, c->s[k], c->len[k], 0, special, &ids, &n, &err), 0, "%s", err.msg);
    unsigned flags = special ? ZL_DETOK_SPECIAL : 0;
    if (zl_vocab_adds_space_prefix(v)) flags |= ZL_DETOK_STRIP_SPACE;
    char *whole;
    cr_assert_eq(zl_detokenize(v, ids, n, flags, &whole, &len, &err), 0, "%s", err.msg);
    int ok = len == c->len[k] && memcmp(whole, c->s[k], len) == 0;
    /* streaming: only valid UTF-8 pieces, adding up to the whole text */
    zl_detok *d;
    cr_assert_eq(zl_detok_new(&d, v, flags, &err), 0, "%s", err.msg);
    char *cat = malloc(len + 1);
    size_t at = 0;
    int pieces_ok = 1;
    for (size_t i = 0; i <= n; i++) {
        const char *o;
        size_t ol;
        if (i < n) cr_assert_eq(zl_detok_feed(d, ids[i], &o, &ol, &err), 0, "%s", err.msg);
        else cr_assert_eq(zl_detok_flush(d, &o, &ol, &err), 0, "%s", err.msg);
        if (!tok_utf8_valid((const unsigned char *)o, ol)) pieces_ok = 0;
        if (at + ol > len) { pieces_ok = 0; break; }
        memcpy(cat + at, o, ol);
        at += ol;
    }
    if (at != len || memcmp(cat, whole, len) != 0) pieces_ok = 0;
    if (!ok || !pieces_ok)
        fprintf(stderr, "%s string %d \"%s\": %s\n", label, k, tok_show(c->s[k], c->len[k]),
                !ok ? "detokenizes to something else" : "streamed pieces are not valid UTF-8 adding up to the text");
    zl_detok_free(d);
    free(cat);
    free(whole);
    free(ids);
    return ok && pieces_ok;
}

/* SentencePiece turns U+2581 into a space on the way back: not lossless. */
static int tok_lossless(const zl_vocab *v, const char *s, size_t len) {
    return zl_vocab_kind(v) != ZL_VOCAB_SPM || !memmem(s, len, "\xE2\x96\x81", 3);
}

/* The whole check for one model: every mode against the reference, then the
 * round trips.  Prints one summary line per mode. */
static void tok_check_model(const char *model, const char *ref) {
    tok_corpus *c = calloc(1, sizeof *c);
    tok_corpus_read(c);
    zl_gguf *g;
    zl_vocab *v;
    zl_err err = {0};
    const char *path = zl_real_model(model);
    cr_assert_eq(zl_gguf_open(&g, path, NULL, &err), 0, "%s: %s", path, err.msg);
    cr_assert_eq(zl_vocab_load(&v, g, &err), 0, "%s: %s", path, err.msg);
    zl_gguf_close(g);
    int bad = 0;
    for (int m = 0; m < 4; m++) {
        int good = tok_check_mode(v, c, model, ref, m);
        fprintf(stderr, "%s %-11s %d/%d strings match llama.cpp\n", model, tok_modes[m].name, good, c->n);
        bad += c->n - good;
    }
    int trips = 0, lossless = 0;
    for (int special = 0; special < 2; special++)
        for (int k = 0; k < c->n; k++) {
            if (!tok_lossless(v, c->s[k], c->len[k])) continue;
            lossless++;
            trips += tok_round_trip(v, c, k, special, model);
        }
    fprintf(stderr, "%s round trips (plain + special, whole and streamed): %d/%d\n", model, trips, lossless);
    zl_vocab_free(v);
    free(c->buf);
    free(c);
    cr_assert_eq(bad, 0, "%s: %d tokenizations differ from llama.cpp", model, bad);
    cr_assert_eq(trips, lossless, "%s: %d round trips failed", model, lossless - trips);
    cr_assert_geq(lossless, 2 * 200);
}

#endif
