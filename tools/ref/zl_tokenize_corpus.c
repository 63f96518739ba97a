/* zl_tokenize_corpus.c — zerolayer's side of tools/ref/fuzz_tokenizer.sh:
 * the ids of every corpus string in the four modes of llama_tokenize_corpus.c
 * (same files, same layout), from the tokenizer in src/tokenizer.
 *
 *   zl_tokenize_corpus MODEL.gguf CORPUS OUT_PREFIX */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "tokenizer/vocab.h"

static const char SEP[] = "\n__ggml_vocab_test__\n";

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s MODEL.gguf CORPUS OUT_PREFIX\n", argv[0]);
        return 2;
    }
    zl_gguf *g;
    zl_vocab *v;
    zl_err e = {0};
    if (zl_gguf_open(&g, argv[1], NULL, &e) || zl_vocab_load(&v, g, &e)) {
        fprintf(stderr, "%s: %s\n", argv[1], e.msg);
        return 1;
    }
    zl_gguf_close(g);
    FILE *f = fopen(argv[2], "rb");
    if (!f) {
        perror(argv[2]);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) return 1;
    fclose(f);
    static const char *const modes[4] = {"plain", "special", "bos-plain", "bos-special"};
    for (int m = 0; m < 4; m++) {
        char path[4096];
        snprintf(path, sizeof path, "%s.%s.out", argv[3], modes[m]);
        FILE *out = fopen(path, "w");
        if (!out) {
            perror(path);
            return 1;
        }
        for (char *p = buf, *end = buf + n; p < end;) {
            char *q = memmem(p, (size_t)(end - p), SEP, strlen(SEP));
            if (!q) {
                fprintf(stderr, "%s does not end with the separator\n", argv[2]);
                return 1;
            }
            int32_t *ids;
            size_t k;
            if (zl_tokenize(v, p, (size_t)(q - p), m >= 2, m & 1, &ids, &k, &e)) {
                fprintf(stderr, "%s\n", e.msg);
                return 1;
            }
            for (size_t i = 0; i < k; i++) fprintf(out, i ? " %d" : "%d", ids[i]);
            fputc('\n', out);
            free(ids);
            p = q + strlen(SEP);
        }
        fclose(out);
    }
    zl_vocab_free(v);
    free(buf);
    return 0;
}
