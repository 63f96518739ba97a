/* fuzz_tokenizer.c — libFuzzer target: the BPE/SentencePiece tokenizer and
 * the detokenizer on arbitrary bytes (invalid UTF-8, special-token text,
 * long runs), with the vocabulary of the bundled stories260K model (or
 * ZL_FUZZ_VOCAB=PATH, any GGUF with a vocabulary).  The first byte picks
 * parse_special / add_special / render_special; the rest is the text, and
 * also a token id list for the detokenizer (ids out of range must be a
 * clean error).  Tokenizing the detokenized text of valid ids must work. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "zerolayer.h"

#ifndef ZL_ROOT
#define ZL_ROOT "."
#endif

static zl_tokenizer *tok;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *path = getenv("ZL_FUZZ_VOCAB") ? getenv("ZL_FUZZ_VOCAB") : ZL_ROOT "/models/stories260K.gguf";
    zl_err err = {0};
    if (zl_tokenizer_open(&tok, path, &err)) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!size) return 0;
    int flags = data[0];
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    int32_t *ids = NULL;
    size_t n = 0;
    zl_err err = {0};
    if (!zl_tokenizer_tokenize(tok, text, len, flags & 1, (flags >> 1) & 1, &ids, &n, &err)) {
        char *out = NULL;
        size_t olen = 0;
        if (!zl_tokenizer_detokenize(tok, ids, n, (flags >> 2) & 1, &out, &olen, &err)) {
            int32_t *again = NULL;
            size_t n2 = 0;
            if (zl_tokenizer_tokenize(tok, out, olen, 0, 0, &again, &n2, &err)) abort(); /* text we produced */
            free(again);
        }
        free(out);
    }
    free(ids);
    /* the bytes as token ids */
    size_t nid = len / 4;
    if (nid) {
        int32_t *raw = malloc(nid * sizeof *raw);
        if (!raw) return 0;
        memcpy(raw, text, nid * sizeof *raw);
        int nv = zl_tokenizer_n_vocab(tok);
        if (flags & 8)
            for (size_t i = 0; i < nid; i++) raw[i] = (int32_t)((uint32_t)raw[i] % (uint32_t)nv);
        char *out = NULL;
        size_t olen = 0;
        zl_tokenizer_detokenize(tok, raw, nid, (flags >> 2) & 1, &out, &olen, &err);
        free(out);
        free(raw);
    }
    return 0;
}
