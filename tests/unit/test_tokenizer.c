/* test_tokenizer.c — the tokenizers against llama.cpp's test vectors, plus
 * round trips, streaming detokenization, special tokens and bad metadata.
 *
 * Vectors: tests/fixtures/tokenizer/NAME.gguf.inp holds strings separated by
 * "\n__ggml_vocab_test__\n" (the file ends with a separator), and line k of
 * NAME.gguf.out the ids llama.cpp gives string k without BOS and without
 * special-token parsing.  Every string of every family must match exactly. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "tokenizer/pretok.h"
#include "tokenizer/vocab.h"

#define TOKDIR ZL_ROOT "/tests/fixtures/tokenizer/"
#define SEP "\n__ggml_vocab_test__\n"

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) b[n] = '\0';
    if (len) *len = (size_t)n;
    return b;
}

typedef struct {
    zl_gguf *g;
    zl_vocab *v;
} loaded;

static loaded load(const char *path) {
    loaded l = {0};
    zl_err err = {0};
    cr_assert_eq(zl_gguf_open(&l.g, path, NULL, &err), 0, "%s: %s", path, err.msg);
    cr_assert_eq(zl_vocab_load(&l.v, l.g, &err), 0, "%s: %s", path, err.msg);
    return l;
}

static void unload(loaded l) {
    zl_vocab_free(l.v);
    zl_gguf_close(l.g);
}

/* The test strings of an .inp file: pointers into buf, NUL-terminated in place. */
typedef struct {
    char *buf;
    char *s[128];
    size_t len[128];
    int n;
} strings;

static strings read_inp(const char *path) {
    strings t = {0};
    size_t len;
    t.buf = slurp(path, &len);
    cr_assert(t.buf, "cannot read %s", path);
    char *p = t.buf, *end = t.buf + len;
    while (p < end) {
        char *q = memmem(p, (size_t)(end - p), SEP, strlen(SEP));
        cr_assert(q, "%s: string %d is not followed by a separator", path, t.n);
        cr_assert_lt(t.n, 128);
        *q = '\0';
        t.s[t.n] = p;
        t.len[t.n++] = (size_t)(q - p);
        p = q + strlen(SEP);
    }
    return t;
}

static int tokenize(const zl_vocab *v, const char *s, size_t len, int add_bos, int special, int32_t **ids, size_t *n) {
    zl_err err = {0};
    int rc = zl_tokenize(v, s, len, add_bos, special, ids, n, &err);
    cr_assert_eq(rc, 0, "tokenize: %s", err.msg);
    return rc;
}

static char *detok(const zl_vocab *v, const int32_t *ids, size_t n, unsigned flags, size_t *len) {
    zl_err err = {0};
    char *out;
    cr_assert_eq(zl_detokenize(v, ids, n, flags, &out, len, &err), 0, "detokenize: %s", err.msg);
    return out;
}

/* Run every vector of one family; returns the number of strings checked. */
static int check_vectors(const char *gguf, const char *inp, const char *outp) {
    loaded l = load(gguf);
    strings t = read_inp(inp);
    char *exp = slurp(outp, NULL);
    cr_assert(exp, "cannot read %s", outp);
    char *line = exp;
    int bad = 0;
    for (int k = 0; k < t.n; k++) {
        char *nl = strchr(line, '\n');
        cr_assert(nl, "%s: only %d lines for %d strings", outp, k, t.n);
        *nl = '\0';
        int32_t want[1024];
        size_t nw = 0;
        for (char *p = line, *e; nw < 1024; p = e) {
            long x = strtol(p, &e, 10);
            if (e == p) break;
            want[nw++] = (int32_t)x;
        }
        int32_t *ids;
        size_t n;
        tokenize(l.v, t.s[k], t.len[k], 0, 0, &ids, &n);
        int same = n == nw && (n == 0 || memcmp(ids, want, n * sizeof *ids) == 0);
        if (!same) {
            bad++;
            fprintf(stderr, "%s string %d: got", gguf, k);
            for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
            fprintf(stderr, "\n  want %s\n", line);
        }
        free(ids);
        line = nl + 1;
    }
    cr_assert_eq(*line, '\0', "%s has more lines than %s has strings", outp, inp);
    cr_assert_eq(bad, 0, "%s: %d of %d strings differ from llama.cpp", gguf, bad, t.n);
    free(exp);
    free(t.buf);
    unload(l);
    return t.n;
}

#define FAMILY(test, file)                                                                                 \
    Test(vectors, test) {                                                                                  \
        cr_assert_eq(check_vectors(TOKDIR file ".gguf", TOKDIR file ".gguf.inp", TOKDIR file ".gguf.out"), 46); \
    }

FAMILY(llama_spm, "ggml-vocab-llama-spm")
FAMILY(phi_3, "ggml-vocab-phi-3")
FAMILY(gpt_2, "ggml-vocab-gpt-2")
FAMILY(deepseek_llm, "ggml-vocab-deepseek-llm")
FAMILY(deepseek_coder, "ggml-vocab-deepseek-coder")
FAMILY(falcon, "ggml-vocab-falcon")
FAMILY(mpt, "ggml-vocab-mpt")
FAMILY(starcoder, "ggml-vocab-starcoder")
FAMILY(refact, "ggml-vocab-refact")

Test(vectors, stories260K) {
    cr_assert_eq(check_vectors(ZL_ROOT "/models/stories260K.gguf", TOKDIR "stories260K.gguf.inp",
                               TOKDIR "stories260K.gguf.out"),
                 46);
}

/* detokenize(tokenize(s)) == s for every vector string, SPM dummy prefix
 * stripped: no family loses or invents a byte. */
static void check_round_trips(const char *gguf) {
    loaded l = load(gguf);
    strings t = read_inp(TOKDIR "ggml-vocab-gpt-2.gguf.inp");
    for (int k = 0; k < t.n; k++) {
        int32_t *ids;
        size_t n, len;
        tokenize(l.v, t.s[k], t.len[k], 0, 0, &ids, &n);
        char *back = detok(l.v, ids, n, ZL_DETOK_STRIP_SPACE, &len);
        cr_expect(len == t.len[k] && memcmp(back, t.s[k], len) == 0, "%s string %d: round trip gave '%s' for '%s'",
                  gguf, k, back, t.s[k]);
        free(back);
        free(ids);
    }
    free(t.buf);
    unload(l);
}

Test(round_trip, all_families) {
    static const char *const files[] = {"ggml-vocab-llama-spm", "ggml-vocab-phi-3", "ggml-vocab-gpt-2",
                                        "ggml-vocab-deepseek-llm", "ggml-vocab-deepseek-coder", "ggml-vocab-falcon",
                                        "ggml-vocab-mpt", "ggml-vocab-starcoder", "ggml-vocab-refact"};
    char path[512];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s%s.gguf", TOKDIR, files[i]);
        check_round_trips(path);
    }
    check_round_trips(ZL_ROOT "/models/stories260K.gguf");
}
