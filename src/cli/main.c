/* main.c — the zerolayer command line: dispatch to subcommands.
 * Every subcommand prints only its result to stdout, diagnostics to stderr,
 * and exits non-zero with a one-line "zerolayer: ..." error on failure. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#ifndef ZL_SOURCE_DIR
#define ZL_SOURCE_DIR "."
#endif

int cli_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("zerolayer: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

int cli_int(const char *flag, const char *s, long lo, long hi, long *out) {
    if (!s) return cli_fail("%s needs a value", flag);
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return cli_fail("%s: '%s' is not an integer in [%ld, %ld]", flag, s, lo, hi);
    *out = v;
    return 0;
}

int cli_ring_cost(const char *s, float *cost, int *n) {
    if (!s) return cli_fail("--ring-cost needs a value");
    *n = 0;
    if (!strcmp(s, "measure")) return 0;
    const char *p = s;
    for (;;) {
        char *end = NULL;
        double c = strtod(p, &end);
        if (end == p || !(c > 0 && c < 1000) || *n == CLI_RING_COST_MAX)
            return cli_fail("--ring-cost: expected 'measure' or up to %d positive numbers separated by commas, got '%s'",
                            CLI_RING_COST_MAX, s);
        cost[(*n)++] = (float)c;
        if (!*end) return 0;
        if (*end != ',') return cli_fail("--ring-cost: expected numbers separated by commas, got '%s'", s);
        p = end + 1;
    }
}

int cli_float(const char *flag, const char *s, double lo, double hi, double *out) {
    if (!s) return cli_fail("%s needs a value", flag);
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi))
        return cli_fail("%s: '%s' is not a number in [%g, %g]", flag, s, lo, hi);
    *out = v;
    return 0;
}

int cli_u64(const char *flag, const char *s, unsigned long long *out) {
    if (!s) return cli_fail("%s needs a value", flag);
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-') return cli_fail("%s: '%s' is not a non-negative integer", flag, s);
    *out = v;
    return 0;
}

void cli_progress(size_t done, size_t total, void *label) {
    if (!isatty(2)) return;
    int w = 40, fill = total ? (int)((double)done / total * w) : w;
    fprintf(stderr, "\r%s [", label ? (const char *)label : "");
    for (int i = 0; i < w; i++) fputc(i < fill ? '#' : '.', stderr);
    fprintf(stderr, "] %3.0f%% %.0f/%.0f MiB", total ? 100.0 * done / total : 100.0, done / 1048576.0, total / 1048576.0);
    if (done >= total) fputc('\n', stderr);
}

int cli_kv_policy(const char *name, zl_kv_policy_kind *kind) {
    if (zl_kv_policy_from_name(name, kind))
        return cli_fail("--kv-policy must be %s (got '%s')", zl_kv_policy_names(), name);
    return 0;
}

int cli_budget(const char *flag, const char *s, long n_ctx, long *out) {
    if (strchr(s, '.')) {
        double f;
        if (cli_float(flag, s, 1e-6, 1.0, &f)) return 1;
        *out = (long)(f * n_ctx);
        if (*out < 1) return cli_fail("%s: %s of %ld tokens is empty", flag, s, n_ctx);
        return 0;
    }
    return cli_int(flag, s, 1, 1L << 30, out);
}

char *cli_read_text(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t n = 0, cap = 4096;
    char *b = malloc(cap);
    for (size_t got; b && (got = fread(b + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (n + 1 == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) { free(b); b = NULL; }
            else b = nb;
        }
    }
    if (b && ferror(f)) { free(b); b = NULL; }
    fclose(f);
    if (b) { b[n] = 0; *len = n; }
    return b;
}

int cli_is_help(const char *a) { return !strcmp(a, "-h") || !strcmp(a, "--help"); }

char *cli_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = sz >= 0 ? malloc((size_t)sz + 1) : NULL;
    if (b && fread(b, 1, (size_t)sz, f) != (size_t)sz) { free(b); b = NULL; }
    fclose(f);
    if (b) { b[sz] = 0; *len = (size_t)sz; }
    return b;
}

const char *cli_default_model(void) {
    static char path[PATH_MAX];
    const char *env = getenv("ZL_DEFAULT_MODEL");
    if (env && *env) return env;
    /* next to the binary first (build/bin/../../models), then the source tree */
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            snprintf(path, sizeof path, "%s/../../models/stories260K.gguf", exe);
            if (access(path, R_OK) == 0) return path;
        }
    }
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", ZL_SOURCE_DIR);
    return path;
}

static void usage(FILE *f) {
    fputs("usage: zerolayer <command> [options]   (zerolayer <command> --help for details)\n"
          "commands:\n"
          "  run         generate text from a prompt\n"
          "  chat        chat with a model in the terminal (its own chat template)\n"
          "  tokenize    print the token ids of a text\n"
          "  perplexity  perplexity of a text or id file; dump logits\n"
          "  codec       train / evaluate a learned KV state codec (.zlc) for a model\n"
          "  quantize    convert a GGUF model to another tensor type\n"
          "  synth       write a random-weight llama model\n"
          "  inspect     print a GGUF file's metadata and tensors\n"
          "  bench       measure prompt and generation speed\n"
          "  serve       OpenAI- and Anthropic-compatible HTTP server\n"
          "  version     print the version (also --version)\n",
          f);
}

int main(int argc, char **argv) {
    if (argc < 2) { usage(stderr); return 1; }
    const char *c = argv[1];
    if (cli_is_help(c)) { usage(stdout); return 0; }
    if (!strcmp(c, "--version") || !strcmp(c, "version")) {
        printf("zerolayer %s (built with C compiler %s)\n", ZEROLAYER_VERSION, __VERSION__);
        return 0;
    }
    if (!strcmp(c, "run")) return cmd_run(argc - 1, argv + 1);
    if (!strcmp(c, "chat")) return cmd_chat(argc - 1, argv + 1);
    if (!strcmp(c, "tokenize")) return cmd_tokenize(argc - 1, argv + 1);
    if (!strcmp(c, "perplexity")) return cmd_perplexity(argc - 1, argv + 1);
    if (!strcmp(c, "codec")) return cmd_codec(argc - 1, argv + 1);
    if (!strcmp(c, "quantize")) return cmd_quantize(argc - 1, argv + 1);
    if (!strcmp(c, "synth")) return cmd_synth(argc - 1, argv + 1);
    if (!strcmp(c, "inspect")) return cmd_inspect(argc - 1, argv + 1);
    if (!strcmp(c, "bench")) return cmd_bench(argc - 1, argv + 1);
    if (!strcmp(c, "serve")) return cmd_serve(argc - 1, argv + 1);
    return cli_fail("unknown command '%s' (see zerolayer --help)", c);
}
