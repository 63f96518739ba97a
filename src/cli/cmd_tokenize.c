/* cmd_tokenize.c — `zerolayer tokenize`: token ids of a text, one line.
 * Loads only the vocabulary (zl_tokenizer), never the weights: any GGUF file
 * with tokenizer metadata works, vocab-only files included. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "zerolayer.h"

static const char *k_usage =
    "usage: zerolayer tokenize [-m MODEL] [--no-bos] [--special] (--stdin | TEXT)\n"
    "  Print the token ids of TEXT (or of standard input), space-separated, on one line.\n"
    "  MODEL may be any GGUF file with a tokenizer, weights or not (only the vocabulary is read).\n"
    "  --no-bos    do not add the BOS token the model's metadata asks for\n"
    "  --special   parse control-token text such as <|im_start|> into its id\n";

static char *read_all(FILE *f, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    if (!b) return NULL;
    for (;;) {
        if (n == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) { free(b); return NULL; }
            b = nb;
        }
        size_t r = fread(b + n, 1, cap - n, f);
        if (!r) break;
        n += r;
    }
    *len = n;
    return b;
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *text = NULL;
    int no_bos = 0, use_stdin = 0, special = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) { fputs(k_usage, stdout); return 0; }
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (++i >= argc) return cli_fail("%s needs a value", a);
            model = argv[i];
        } else if (!strcmp(a, "--no-bos")) no_bos = 1;
        else if (!strcmp(a, "--special")) special = 1;
        else if (!strcmp(a, "--stdin")) use_stdin = 1;
        else if (a[0] == '-' && a[1] && !text) return cli_fail("tokenize: unknown option '%s'", a);
        else if (text) return cli_fail("tokenize: more than one TEXT argument (quote the text)");
        else text = a;
    }
    if (use_stdin == (text != NULL)) return cli_fail("tokenize: give exactly one of --stdin or TEXT");
    size_t len = 0;
    char *buf = NULL;
    if (use_stdin) {
        if (!(buf = read_all(stdin, &len))) return cli_fail("cannot read standard input");
        text = buf;
    } else {
        len = strlen(text);
    }
    zl_err err = {0};
    zl_tokenizer *tok;
    if (zl_tokenizer_open(&tok, model ? model : cli_default_model(), &err)) { free(buf); return cli_fail("%s", err.msg); }
    int32_t *ids;
    size_t n;
    int rc = zl_tokenizer_tokenize(tok, text, len, !no_bos, special, &ids, &n, &err);
    if (!rc) {
        for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
        putchar('\n');
        free(ids);
    }
    zl_tokenizer_close(tok);
    free(buf);
    return rc ? cli_fail("%s", err.msg) : 0;
}
