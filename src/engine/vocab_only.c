/* vocab_only.c — zl_tokenizer: the vocabulary of a GGUF file without its
 * weights.  Opens the file, builds the zl_vocab from its metadata and closes
 * the file again; never looks at tensors or the architecture, so vocab-only
 * files and models the engine cannot run tokenize all the same. */
#include <stdlib.h>

#include "../gguf/gguf.h"
#include "../tokenizer/vocab.h"
#include "zerolayer.h"

struct zl_tokenizer {
    zl_vocab *vocab;
};

int zl_tokenizer_open(zl_tokenizer **out, const char *path, zl_err *err) {
    *out = NULL;
    zl_gguf *g;
    int rc = zl_gguf_open(&g, path, NULL, err);
    if (rc) return rc;
    zl_tokenizer *t = calloc(1, sizeof *t);
    if (!t) rc = zl_errf(err, ZL_ENOMEM, "out of memory");
    else if (!zl_gguf_find(g, "tokenizer.ggml.model") && !zl_gguf_find(g, "tokenizer.ggml.tokens"))
        rc = zl_errf(err, ZL_EFORMAT, "%s has no tokenizer (no tokenizer.ggml.model or tokenizer.ggml.tokens)", path);
    else if ((rc = zl_vocab_load(&t->vocab, g, err)))
        zl_err_prefix(err, "%s: vocabulary", path);
    zl_gguf_close(g);
    if (rc) {
        free(t);
        return rc;
    }
    *out = t;
    return 0;
}

void zl_tokenizer_close(zl_tokenizer *t) {
    if (!t) return;
    zl_vocab_free(t->vocab);
    free(t);
}

int zl_tokenizer_n_vocab(const zl_tokenizer *t) { return zl_vocab_n_tokens(t->vocab); }

int zl_tokenizer_tokenize(const zl_tokenizer *t, const char *text, size_t len, int add_special, int parse_special,
                          int32_t **ids, size_t *n, zl_err *err) {
    return zl_tokenize(t->vocab, text, len, add_special, parse_special, ids, n, err);
}

int zl_tokenizer_detokenize(const zl_tokenizer *t, const int32_t *ids, size_t n, int render_special, char **out,
                            size_t *len, zl_err *err) {
    return zl_detokenize(t->vocab, ids, n, render_special ? ZL_DETOK_SPECIAL : 0, out, len, err);
}
