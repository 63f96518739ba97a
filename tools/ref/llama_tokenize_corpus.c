/* llama_tokenize_corpus.c — reference ids for a whole corpus from libllama in
 * one process (llama-tokenize loads the vocabulary anew for every string,
 * which takes seconds per call for a 262k-token vocabulary).
 *
 *   llama_tokenize_corpus MODEL.gguf CORPUS OUT_PREFIX
 *
 * Loads MODEL's vocabulary only (vocab_only, as llama-tokenize does) and, for
 * every string of CORPUS (each followed by "\n__ggml_vocab_test__\n"), makes
 * the call llama-tokenize makes through common_tokenize:
 *   llama_tokenize(vocab, text, len, ..., add_special, parse_special)
 * with add_special = (mode adds BOS) && llama_vocab_get_add_bos(vocab), the
 * way llama-tokenize combines --no-bos with the model's metadata.  Writes
 * OUT_PREFIX.{plain,special,bos-plain,bos-special}.out, one line of
 * space-separated ids per string.  Built and run by tools/ref/tokenize_ref.sh
 * against the reference build; it is a tool for making fixtures, not part of
 * zerolayer. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static const char SEP[] = "\n__ggml_vocab_test__\n";

static void quiet(enum ggml_log_level level, const char *text, void *ud) {
    (void)ud;
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s MODEL.gguf CORPUS OUT_PREFIX\n", argv[0]);
        return 2;
    }
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "cannot load %s\n", argv[1]);
        return 1;
    }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    FILE *f = fopen(argv[2], "rb");
    if (!f) {
        perror(argv[2]);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "cannot read %s\n", argv[2]);
        return 1;
    }
    fclose(f);
    static const char *const modes[4] = {"plain", "special", "bos-plain", "bos-special"};
    int count = 0;
    for (int m = 0; m < 4; m++) {
        char path[4096];
        snprintf(path, sizeof path, "%s.%s.out", argv[3], modes[m]);
        FILE *out = fopen(path, "w");
        if (!out) {
            perror(path);
            return 1;
        }
        bool add_special = (m >= 2) && llama_vocab_get_add_bos(vocab);
        bool parse_special = (m & 1) != 0;
        count = 0;
        for (char *p = buf, *end = buf + n; p < end; count++) {
            char *q = memmem(p, (size_t)(end - p), SEP, strlen(SEP));
            if (!q) {
                fprintf(stderr, "%s: string %d is not followed by the separator\n", argv[2], count);
                return 1;
            }
            int32_t len = (int32_t)(q - p), cap = len + 2 * add_special + 1;
            llama_token *ids = malloc((size_t)cap * sizeof *ids);
            int32_t k = llama_tokenize(vocab, p, len, ids, cap, add_special, parse_special);
            if (k < 0) {
                cap = -k;
                ids = realloc(ids, (size_t)cap * sizeof *ids);
                k = llama_tokenize(vocab, p, len, ids, cap, add_special, parse_special);
            }
            if (k < 0) {
                fprintf(stderr, "llama_tokenize failed on string %d\n", count);
                return 1;
            }
            for (int32_t i = 0; i < k; i++) fprintf(out, i ? " %d" : "%d", ids[i]);
            fputc('\n', out);
            free(ids);
            p = q + strlen(SEP);
        }
        fclose(out);
        printf("%s: %d strings\n", path, count);
    }
    llama_model_free(model);
    free(buf);
    return 0;
}
