/* cmd_synth.c — `zerolayer synth`: write a random-weight llama model with the
 * vocabulary of another GGUF (benchmarks build TinyLlama-shaped files with
 * it), or, with --embed-from, a large-shaped model that computes what a small
 * llama model computes.  Argument parsing only; the work is zl_synth_file in
 * src/model/quantize.c and zl_embed_file in src/model/embed.c. */
#include <stdio.h>
#include <string.h>

#include "../model/embed.h"
#include "../model/quantize.h"
#include "cli.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: zerolayer synth --vocab-from VOCAB.gguf --dim D --ffn F --layers L --heads H\n"
            "                       [--kv-heads K] [--type TYPE] -o OUT.gguf [--seed S] [--ctx N]\n"
            "                       [--rope-base B] [-t THREADS]\n"
            "       zerolayer synth --embed-from SMALL.gguf --dim D --ffn F --layers L --heads H\n"
            "                       [--kv-heads K] [--type TYPE] -o OUT.gguf [--seed S] [--ctx N]\n"
            "                       [--perturb P] [-t THREADS]\n"
            "  write a llama model with random weights (about N(0, 0.02^2), norms 1) whose\n"
            "  tokenizer (all tokenizer.* metadata, and so the vocabulary size) comes from VOCAB.gguf\n"
            "  --embed-from SMALL.gguf  instead embed the llama model SMALL in the big shape: the\n"
            "                   output's logits equal SMALL's (up to rounding and TYPE's quantisation)\n"
            "                   while every weight of the big shape is stored and read; the weights\n"
            "                   nothing depends on are random.  Needs D >= SMALL's width, F >= its ffn,\n"
            "                   L >= its layers, K >= its kv heads, H/K >= its heads per kv head, and\n"
            "                   D/H a multiple of its head dimension; rope base, context and the\n"
            "                   tokenizer come from SMALL (see src/model/embed.c)\n"
            "  --perturb P      (with --embed-from) the extra layers (L minus SMALL's) add random\n"
            "                   updates of relative size P to the residual: a different model whose\n"
            "                   first layers are still SMALL (a draft/target pair); default 0\n"
            "  --kv-heads K     key/value heads (default: H)\n"
            "  --type TYPE      %s (default F16)\n"
            "  --seed S         generator seed (default 1); the same seed gives the same file\n"
            "  --ctx N          llama.context_length (default 2048; with --embed-from, SMALL's)\n"
            "  --rope-base B    llama.rope.freq_base (default 10000)\n"
            "  -t, --threads N  worker threads (default: all CPUs)\n"
            "  e.g. TinyLlama-1.1B: --dim 2048 --ffn 5632 --layers 22 --heads 32 --kv-heads 4\n",
            zl_qtarget_names());
}

static void progress(void *ud, const zl_qevent *ev) {
    (void)ud;
    fprintf(stderr, "[%4d/%d] %-32s %-5s %8.2f MiB\n", ev->index + 1, ev->count, ev->name,
            zl_type_traits_of(ev->to)->name, ev->out_bytes / 1048576.0);
    if (ev->note) fprintf(stderr, "         note: %s: %s\n", ev->name, ev->note);
}

/* One "--flag VALUE" integer option; returns 1 if a matched flag failed. */
static int int_opt(const char *a, const char *flag, const char *v, long lo, long hi, int *out, int *matched) {
    if (strcmp(a, flag)) return 0;
    *matched = 1;
    long x;
    if (cli_int(flag, v, lo, hi, &x)) return 1;
    *out = (int)x;
    return 0;
}

int cmd_synth(int argc, char **argv) {
    zl_synth_params p = {0};
    p.seed = 1;
    const char *type = "F16", *embed_from = NULL;
    double perturb = -1;
    int threads = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (cli_is_help(a)) { usage(stdout); return 0; }
        int m = 0;
        if (int_opt(a, "--dim", v, 1, 65536, &p.dim, &m) || int_opt(a, "--ffn", v, 1, 1 << 20, &p.ffn, &m) ||
            int_opt(a, "--layers", v, 1, 4096, &p.n_layers, &m) || int_opt(a, "--heads", v, 1, 4096, &p.n_heads, &m) ||
            int_opt(a, "--kv-heads", v, 1, 4096, &p.n_kv_heads, &m) ||
            int_opt(a, "--ctx", v, 1, 1 << 24, &p.n_ctx, &m) || int_opt(a, "-t", v, 1, 1024, &threads, &m) ||
            int_opt(a, "--threads", v, 1, 1024, &threads, &m))
            return 1;
        if (m) { i++; continue; }
        if (!strcmp(a, "--vocab-from") || !strcmp(a, "--embed-from") || !strcmp(a, "-o") || !strcmp(a, "--type")) {
            if (!v) return cli_fail("synth: %s needs a value", a);
            if (!strcmp(a, "--vocab-from")) p.vocab_path = v;
            else if (!strcmp(a, "--embed-from")) embed_from = v;
            else if (!strcmp(a, "-o")) p.out_path = v;
            else type = v;
            i++;
        } else if (!strcmp(a, "--perturb")) {
            if (cli_float(a, v, 0.0, 1e6, &perturb)) return 1;
            i++;
        } else if (!strcmp(a, "--seed")) {
            unsigned long long s;
            if (cli_u64(a, v, &s)) return 1;
            p.seed = s;
            i++;
        } else if (!strcmp(a, "--rope-base")) {
            double b;
            if (cli_float(a, v, 1.0, 1e9, &b)) return 1;
            p.rope_base = (float)b;
            i++;
        } else {
            return cli_fail("synth: unexpected argument '%s' (see zerolayer synth --help)", a);
        }
    }
    if (embed_from && p.vocab_path) return cli_fail("synth: --embed-from and --vocab-from exclude each other");
    if (!embed_from && perturb >= 0) return cli_fail("synth: --perturb needs --embed-from SMALL.gguf");
    if (embed_from && p.rope_base > 0)
        return cli_fail("synth: --rope-base cannot be set with --embed-from (the small model's rope base is kept)");
    if (!p.vocab_path && !embed_from) return cli_fail("synth: --vocab-from VOCAB.gguf (or --embed-from SMALL.gguf) is required");
    if (!p.out_path) return cli_fail("synth: -o OUT.gguf is required");
    if (!p.dim || !p.ffn || !p.n_layers || !p.n_heads)
        return cli_fail("synth: --dim, --ffn, --layers and --heads are required");
    if (!p.n_kv_heads) p.n_kv_heads = p.n_heads;
    if (zl_qtarget_parse(type, &p.target)) return cli_fail("synth: unknown type '%s' (one of %s)", type, zl_qtarget_names());
    p.opts = (zl_quantize_opts){threads, progress, NULL};
    zl_qstats st;
    zl_err err = {0};
    if (embed_from) {
        zl_embed_params e = {embed_from, p.out_path, p.dim, p.ffn, p.n_layers, p.n_heads, p.n_kv_heads,
                             p.n_ctx, p.seed, perturb > 0 ? (float)perturb : 0.0f, p.target, p.opts};
        if (zl_embed_file(&e, &st, &err)) return cli_fail("synth: %s", err.msg);
    } else if (zl_synth_file(&p, &st, &err)) {
        return cli_fail("synth: %s", err.msg);
    }
    fprintf(stderr, "wrote %s: %d tensors, %s, %.2f MiB, %.2f s\n", p.out_path, st.n_tensors, p.target.name,
            st.file_bytes / 1048576.0, st.seconds);
    return 0;
}
