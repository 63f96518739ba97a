/* cmd_perplexity.c — `zerolayer perplexity`: perplexity of a token stream,
 * optionally dumping every position's logits (float32, [positions][vocab],
 * the format of tests/fixtures/logits).  The input is cut into windows of
 * --ctx tokens, each evaluated from an empty cache; within a window token i
 * is scored by the logits after tokens 0..i-1 of that window. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../base/clock.h"
#include "cli.h"
#include "zerolayer.h"

static const char *k_usage =
    "usage: zerolayer perplexity [-m MODEL] (--ids FILE | -f TEXTFILE) [--ctx N] [-b BATCH] [-t THREADS]\n"
    "                            [--dump-logits OUT] [--kv-type f16|f32|q8_0] [--exact]\n"
    "                            [--kv-policy full|window|anchor] [--kv-budget N|F] [--kv-layer-max N]\n"
    "  --ids FILE         whitespace-separated token ids (used as they are, no BOS added)\n"
    "  -f TEXTFILE        UTF-8 text, tokenized with the model's BOS rule\n"
    "  --ctx N            window length (default: the model's training context, at most 4096)\n"
    "  --dump-logits OUT  write float32 logits for every input position, row-major [positions][vocab]\n"
    "  --exact            reference arithmetic (f32 activations, f64 sums)\n"
    "  --kv-policy P      KV slicing while scoring each window (see zerolayer run --help)\n"
    "  --kv-budget B      tokens kept (count, or fraction of --ctx)\n"
    "  --kv-layer-max N   most tokens one layer keeps (default: --ctx; the model's training context when\n"
    "                     its file claims more)\n";

static int32_t *read_ids(const char *path, size_t *n) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    size_t cap = 1024, k = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    long v;
    int c;
    while (ids && (c = fscanf(f, "%ld", &v)) == 1) {
        if (v < 0 || v > INT32_MAX) { free(ids); ids = NULL; break; }
        if (k == cap) {
            int32_t *ni = realloc(ids, (cap *= 2) * sizeof *ids);
            if (!ni) { free(ids); ids = NULL; break; }
            ids = ni;
        }
        ids[k++] = (int32_t)v;
    }
    if (ids && !feof(f)) { free(ids); ids = NULL; } /* a non-number in the file */
    fclose(f);
    *n = k;
    return ids;
}

int cmd_perplexity(int argc, char **argv) {
    const char *model = NULL, *ids_path = NULL, *text_path = NULL, *dump = NULL;
    long ctx = 0, batch = 64, threads = 0, layer_max = 0;
    int exact = 0;
    const char *kv_policy = "full", *kv_budget = NULL;
    zl_kv_type kvt = ZL_KV_F16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (cli_is_help(a)) { fputs(k_usage, stdout); return 0; }
#define VAL (i++, v)
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) { if (!(model = VAL)) return cli_fail("%s needs a value", a); }
        else if (!strcmp(a, "--ids")) { if (!(ids_path = VAL)) return cli_fail("%s needs a value", a); }
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) { if (!(text_path = VAL)) return cli_fail("%s needs a value", a); }
        else if (!strcmp(a, "--dump-logits")) { if (!(dump = VAL)) return cli_fail("%s needs a value", a); }
        else if (!strcmp(a, "--ctx") || !strcmp(a, "-c")) { if (cli_int(a, VAL, 2, 1 << 24, &ctx)) return 1; }
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch")) { if (cli_int(a, VAL, 1, 4096, &batch)) return 1; }
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { if (cli_int(a, VAL, 1, 1024, &threads)) return 1; }
        else if (!strcmp(a, "--exact")) exact = 1;
        else if (!strcmp(a, "--kv-policy")) { if (!(kv_policy = VAL)) return cli_fail("%s needs a value", a); }
        else if (!strcmp(a, "--kv-budget")) { if (!(kv_budget = VAL)) return cli_fail("%s needs a value", a); }
        else if (!strcmp(a, "--kv-layer-max")) { if (cli_int(a, VAL, 1, 1 << 24, &layer_max)) return 1; }
        else if (!strcmp(a, "--kv-type")) {
            const char *t = VAL;
            if (t && !strcmp(t, "f16")) kvt = ZL_KV_F16;
            else if (t && !strcmp(t, "f32")) kvt = ZL_KV_F32;
            else if (t && !strcmp(t, "q8_0")) kvt = ZL_KV_Q8_0;
            else return cli_fail("--kv-type must be f16, f32 or q8_0");
        }
        else return cli_fail("perplexity: unknown option '%s' (see zerolayer perplexity --help)", a);
#undef VAL
    }
    if (!ids_path == !text_path) return cli_fail("perplexity: give exactly one of --ids FILE or -f TEXTFILE");
    zl_kv_policy_kind pk;
    if (cli_kv_policy(kv_policy, &pk)) return 1;
    zl_err err = {0};
    zl_llm_opts lo = {(int)threads, 0, 0, 0, 0, (int)layer_max, NULL};
    zl_llm *llm;
    if (zl_llm_open(&llm, model ? model : cli_default_model(), &lo, &err)) return cli_fail("%s", err.msg);
    int nv = zl_llm_n_vocab(llm);
    int32_t *ids = NULL;
    size_t n = 0;
    if (ids_path) {
        if (!(ids = read_ids(ids_path, &n))) { zl_llm_close(llm); return cli_fail("%s: cannot read token ids", ids_path); }
    } else {
        size_t len;
        char *text = cli_read_file(text_path, &len);
        if (!text) { zl_llm_close(llm); return cli_fail("cannot read %s", text_path); }
        int rc = zl_llm_tokenize(llm, text, len, 1, 0, &ids, &n, &err);
        free(text);
        if (rc) { zl_llm_close(llm); return cli_fail("%s", err.msg); }
    }
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= nv) {
            free(ids);
            zl_llm_close(llm);
            return cli_fail("token id %d at position %zu is outside the vocabulary (%d)", ids[i], i, nv);
        }
    if (n < 2) { free(ids); zl_llm_close(llm); return cli_fail("need at least 2 tokens, have %zu", n); }
    int n_ctx = ctx ? (int)ctx : zl_llm_n_ctx_train(llm);
    if (!ctx && n_ctx > 4096) n_ctx = 4096;
    FILE *df = NULL;
    if (dump && !(df = fopen(dump, "wb"))) {
        free(ids); zl_llm_close(llm);
        return cli_fail("cannot create %s", dump);
    }
    zl_seq_opts so = {n_ctx, kvt, zl_sampling_defaults()};
    zl_seq *seq;
    if (zl_seq_new(&seq, llm, &so, &err)) { free(ids); zl_llm_close(llm); if (df) fclose(df); return cli_fail("%s", err.msg); }
    zl_seq_set_exact(seq, exact);
    long budget = 0;
    if (kv_budget && cli_budget("--kv-budget", kv_budget, n_ctx, &budget)) {
        zl_seq_free(seq); free(ids); zl_llm_close(llm); if (df) fclose(df);
        return 1;
    }
    if (zl_seq_set_kv_policy(seq, pk, (int)budget, &err)) {
        zl_seq_free(seq); free(ids); zl_llm_close(llm); if (df) fclose(df);
        return cli_fail("%s", err.msg);
    }
    float *logits = malloc((size_t)n_ctx * nv * sizeof *logits);
    double nll = 0;
    long scored = 0;
    int rc = logits ? 0 : (snprintf(err.msg, sizeof err.msg, "out of memory"), ZL_ENOMEM);
    double t0 = zl_now_s();
    for (size_t w = 0; !rc && w < n; w += (size_t)n_ctx) {
        int len = n - w < (size_t)n_ctx ? (int)(n - w) : n_ctx;
        zl_seq_truncate(seq, 0);
        if ((rc = zl_seq_eval(seq, ids + w, len, (int)batch, logits, &err))) break;
        for (int i = 0; i + 1 < len; i++) {
            const float *l = logits + (size_t)i * nv;
            float mx = l[0];
            for (int j = 1; j < nv; j++) if (l[j] > mx) mx = l[j];
            double s = 0;
            for (int j = 0; j < nv; j++) s += exp((double)l[j] - mx);
            nll += log(s) + mx - l[ids[w + i + 1]];
            scored++;
        }
        if (df && fwrite(logits, sizeof(float) * nv, (size_t)len, df) != (size_t)len)
            rc = (snprintf(err.msg, sizeof err.msg, "writing %s failed", dump), ZL_EIO);
        fprintf(stderr, "\rzerolayer: %zu/%zu tokens", w + (size_t)len, n);
    }
    double secs = zl_now_s() - t0;
    fputc('\n', stderr);
    if (df && fclose(df) != 0 && !rc) rc = (snprintf(err.msg, sizeof err.msg, "writing %s failed", dump), ZL_EIO);
    if (!rc && scored) {
        zl_kv_stats ks;
        zl_seq_kv_stats(seq, &ks);
        printf("perplexity: %.4f over %ld predictions (%zu tokens, windows of %d, kv %s budget %d)\n", exp(nll / scored),
               scored, n, n_ctx, kv_policy, ks.budget);
        fprintf(stderr, "zerolayer: %.1f tok/s\n", n / secs);
    }
    free(logits);
    zl_seq_free(seq);
    free(ids);
    zl_llm_close(llm);
    return rc ? cli_fail("%s", err.msg) : 0;
}
