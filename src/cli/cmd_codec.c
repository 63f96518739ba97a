/* cmd_codec.c — `zerolayer codec train|eval`: fit a learned KV state codec
 * to a frozen model over real text and write it as a .zlc file; measure what
 * coding the cache costs (perplexity and greedy agreement against the exact
 * cache, bytes per token, empirical entropy, coding time) at one or more
 * ratios.  The codec itself is src/codec; this file only drives it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/clock.h"
#include "../base/err.h"
#include "../codec/codec.h"
#include "../codec/fingerprint.h"
#include "../codec/fusion.h"
#include "cli.h"
#include "zerolayer.h"

static const char *k_usage =
    "usage: zerolayer codec train -m MODEL -f TEXT [--ratio R] [--tokens N] [--skip N] [-t THREADS] -o FILE.zlc\n"
    "       zerolayer codec eval  -m MODEL --codec FILE.zlc -f TEXT [--ratio R[,R...]] [--tokens N] [--skip N]\n"
    "                             [--chunk C] [--prompt P] [--gen G] [--fusion cross_attention|additive]\n"
    "                             [--merge M] [--window W] [--decay D] [-t THREADS]\n"
    "  train: run the model over N tokens of TEXT (default 2048, after the first --skip) and fit per layer and\n"
    "         KV head the principal directions of pre-RoPE keys and of values, and bits per coefficient that\n"
    "         meet R of the f16 bytes (default 0.0625 = 1/16; also 1/2 .. 1/16 as fractions, e.g. 1/8)\n"
    "  eval:  over N tokens (default 1024, after --skip, default 0) in chunks of C (default 64), each chunk's\n"
    "         cache rows are encoded and decoded before the next chunk attends to them: perplexity vs the\n"
    "         exact cache; greedy agreement: G tokens (default 256) after a prompt of P (default 256) whose\n"
    "         cache is coded, against the exact greedy continuation; bytes per token; the empirical entropy\n"
    "         of the coded coefficients in bits per K/V element; encode/decode time per token.\n"
    "         --ratio re-allocates the codec's bits for each ratio given (default: the file's)\n"
    "         --fusion additive (state_fusion_mode): after each chunk, every M (default 4) rows older than the\n"
    "         newest W chunks (default 3) are merged into one, weights decaying by D (default 0.7; 0.92 is the\n"
    "         seed's document setting) towards the older, and coded again: a sequence-length reduction; also\n"
    "         measured without coding, and bytes per token count the rows really kept\n";

static int parse_ratio(const char *s, double *out) {
    const char *slash = strchr(s, '/');
    char *end;
    double v;
    if (slash) {
        double a = strtod(s, &end), b;
        if (end != slash) return cli_fail("--ratio: '%s' is not a number or a fraction like 1/16", s);
        b = strtod(slash + 1, &end);
        if (*end || !(b > 0)) return cli_fail("--ratio: '%s' is not a number or a fraction like 1/16", s);
        v = a / b;
    } else {
        v = strtod(s, &end);
        if (end == s || *end) return cli_fail("--ratio: '%s' is not a number or a fraction like 1/16", s);
    }
    if (!(v > 0 && v <= 1)) return cli_fail("--ratio: %s is not in (0, 1]", s);
    *out = v;
    return 0;
}

typedef struct {
    const char *model, *text, *out, *codec, *ratios;
    long tokens, skip, chunk, prompt, gen, threads;
    zl_fusion fusion;
} codec_args;

static int load_tokens(zl_llm *llm, const codec_args *a, long want, int32_t **ids, int *n) {
    size_t len, nt = 0;
    char *text = cli_read_text(a->text, &len);
    if (!text) return cli_fail("cannot read %s", a->text);
    zl_err err = {0};
    int rc = zl_llm_tokenize(llm, text, len, 1, 0, ids, &nt, &err);
    free(text);
    if (rc) return cli_fail("%s", err.msg);
    if ((long)nt < a->skip + want) {
        free(*ids);
        return cli_fail("%s has %zu tokens; --skip %ld + %ld tokens are needed", a->text, nt, a->skip, want);
    }
    memmove(*ids, *ids + a->skip, (size_t)want * sizeof **ids);
    *n = (int)want;
    return 0;
}

static void rank_of(const zl_codec *c, int part, double *rank, double *bits) {
    long r = 0, b = 0, n = 0;
    for (int l = 0; l < c->n_layers; l++)
        for (int h = 0; h < c->n_kv_heads; h++, n++) {
            const zl_codec_table *t = zl_codec_tab(c, l, h, part);
            for (int k = 0; k < c->head_dim; k++) r += t->bits[k] > 0, b += t->bits[k];
        }
    *rank = (double)r / n;
    *bits = (double)b / n;
}

static int cmd_train(const codec_args *a) {
    if (!a->text || !a->out) return cli_fail("codec train needs -f TEXT and -o FILE.zlc");
    double ratio = 0.0625;
    if (a->ratios && parse_ratio(a->ratios, &ratio)) return 1;
    zl_err err = {0};
    zl_llm_opts lo = {(int)a->threads, 0, 0, 0, 0, 0, NULL};
    zl_llm *llm;
    if (zl_llm_open(&llm, a->model ? a->model : cli_default_model(), &lo, &err)) return cli_fail("%s", err.msg);
    long want = a->tokens ? a->tokens : 2048;
    int32_t *ids;
    int n;
    if (load_tokens(llm, a, want, &ids, &n)) { zl_llm_close(llm); return 1; }
    zl_seq_opts so = {n, ZL_KV_F16, zl_sampling_defaults()};
    zl_seq *s = NULL;
    zl_codec *c = NULL;
    uint8_t fp[32];
    double t0 = zl_now_s(), t1 = 0;
    int rc = zl_seq_new(&s, llm, &so, &err);
    if (!rc) rc = zl_seq_eval(s, ids, n, 64, NULL, &err);
    if (!rc) rc = zl_fingerprint_llm(llm, fp, &err);
    if (!rc) { t1 = zl_now_s(); rc = zl_codec_fit(&c, s, fp, ratio, &err); }
    if (!rc) rc = zl_codec_save(c, a->out, &err);
    if (!rc) {
        double rk, bk, rv, bv;
        rank_of(c, 0, &rk, &bk);
        rank_of(c, 1, &rv, &bv);
        char hex[65];
        zl_fingerprint_hex(fp, hex);
        printf("codec: fitted on %d tokens in %.1f s (model pass %.1f s); ratio %.4f: %zu bytes per token (f16 %zu); "
               "rank of %d: K %.1f, V %.1f; model %.16s; wrote %s\n",
               n, zl_now_s() - t1, t1 - t0, c->ratio, zl_codec_token_bytes(c), zl_codec_f16_token_bytes(c),
               c->head_dim, rk, rv, hex, a->out);
    }
    zl_codec_free(c);
    zl_seq_free(s);
    free(ids);
    zl_llm_close(llm);
    return rc ? cli_fail("%s", err.msg) : 0;
}

static int argmax(const float *l, int n) {
    int best = 0;
    for (int j = 1; j < n; j++) if (l[j] > l[best]) best = j;
    return best;
}

static double nll_of(const float *l, int nv, int32_t next) {
    float mx = l[argmax(l, nv)];
    double s = 0;
    for (int j = 0; j < nv; j++) s += exp((double)l[j] - mx);
    return log(s) + mx - l[next];
}

/* Coding time in this thread's CPU seconds: coding runs on it alone, so the
 * figures hold on a busy machine. */
typedef struct { double enc_s, dec_s; long coded; } code_time;

/* Encode then decode positions [pos, pos + n) of s in place. */
static int code_rows(const zl_codec *c, zl_seq *s, int pos, int n, uint8_t *buf, zl_codec_hist *h, code_time *t,
                     zl_err *err) {
    if (pos < c->n_sink) { n -= c->n_sink - pos; pos = c->n_sink; } /* sinks stay exact */
    if (n <= 0) return 0;
    double t0 = zl_thread_cpu_s();
    int rc = zl_codec_encode(c, s, pos, n, buf, h, err);
    double t1 = zl_thread_cpu_s();
    if (!rc) rc = zl_codec_decode(c, s, pos, n, buf, err);
    t->enc_s += t1 - t0;
    t->dec_s += zl_thread_cpu_s() - t1;
    t->coded += n;
    return rc;
}

/* Code the n newest cached rows (their slots: cache-relative once additive
 * fusion merged older ones), then let f merge what left its window. */
static int code_newest(const zl_codec *c, zl_fusion *f, zl_seq *s, int n, uint8_t *buf, zl_codec_hist *h,
                       code_time *t, zl_err *err) {
    int rc = c ? code_rows(c, s, zl_seq_n_cached(s) - n, n, buf, h, t, err) : 0;
    return rc || !f ? rc : zl_fusion_apply(f, s, c, NULL, err);
}

/* Mean NLL over ids[1..n) fed in chunks; with a codec each chunk's rows are
 * coded after it ran, with additive fusion older rows merged too. */
static int ppl_pass(zl_seq *s, int nv, const int32_t *ids, int n, int chunk, const zl_codec *c, zl_fusion *f,
                    uint8_t *buf, zl_codec_hist *h, code_time *t, float *logits, double *ppl, zl_err *err) {
    zl_seq_truncate(s, 0);
    if (f) f->merged = 0;
    double nll = 0;
    int rc = 0;
    for (int p = 0; p < n && !rc; p += chunk) {
        int cnt = n - p < chunk ? n - p : chunk;
        if ((rc = zl_seq_eval(s, ids + p, cnt, chunk, logits, err))) break;
        for (int i = 0; i < cnt && p + i + 1 < n; i++) nll += nll_of(logits + (size_t)i * nv, nv, ids[p + i + 1]);
        rc = code_newest(c, f, s, cnt, buf, h, t, err);
    }
    *ppl = exp(nll / (n - 1));
    return rc;
}

/* Greedy tokens the coded cache would choose, teacher-forced on the exact
 * continuation g[0..gen): the prompt's first P-1 rows are coded, then its last
 * token and g[0..gen-1) are fed in one pass.  *agree = positions equal,
 * *first = first differing position (gen when none). */
static int greedy_pass(zl_seq *s, int nv, const int32_t *prompt, int P, const int32_t *g, int gen, const zl_codec *c,
                       zl_fusion *f, uint8_t *buf, code_time *t, float *logits, int *agree, int *first, zl_err *err) {
    zl_seq_truncate(s, 0);
    if (f) f->merged = 0;
    int rc = zl_seq_eval(s, prompt, P - 1, 64, NULL, err);
    if (!rc) rc = code_newest(c, f, s, P - 1, buf, NULL, t, err);
    int32_t *feed = malloc((size_t)gen * sizeof *feed);
    if (!feed) return zl_errf(err, ZL_ENOMEM, "out of memory");
    feed[0] = prompt[P - 1];
    memcpy(feed + 1, g, (size_t)(gen - 1) * sizeof *g);
    if (!rc) rc = zl_seq_eval(s, feed, gen, 64, logits, err);
    free(feed);
    *agree = 0;
    *first = gen;
    for (int i = 0; !rc && i < gen; i++) {
        int ok = argmax(logits + (size_t)i * nv, nv) == g[i];
        *agree += ok;
        if (!ok && *first == gen) *first = i;
    }
    return rc;
}

static int cmd_eval(const codec_args *a) {
    if (!a->text || !a->codec) return cli_fail("codec eval needs --codec FILE.zlc and -f TEXT");
    zl_err err = {0};
    zl_codec *c;
    if (zl_codec_load(&c, a->codec, &err)) return cli_fail("%s", err.msg);
    double ratios[16];
    int n_ratios = 0;
    if (a->ratios) {
        char buf[512];
        snprintf(buf, sizeof buf, "%s", a->ratios);
        for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
            if (n_ratios == 16) { zl_codec_free(c); return cli_fail("--ratio: at most 16 ratios"); }
            if (parse_ratio(tok, &ratios[n_ratios++])) { zl_codec_free(c); return 1; }
        }
    } else {
        ratios[n_ratios++] = c->ratio;
    }
    zl_llm_opts lo = {(int)a->threads, 0, 0, 0, 0, 0, NULL};
    zl_llm *llm;
    if (zl_llm_open(&llm, a->model ? a->model : cli_default_model(), &lo, &err)) {
        zl_codec_free(c);
        return cli_fail("%s", err.msg);
    }
    uint8_t fp[32];
    int rc = zl_fingerprint_llm(llm, fp, &err);
    if (!rc) rc = zl_codec_check_model(c, fp, zl_llm_kv_shape(llm), &err);
    if (rc) { zl_codec_free(c); zl_llm_close(llm); return cli_fail("%s: %s", a->codec, err.msg); }
    long want = a->tokens ? a->tokens : 1024, chunk = a->chunk ? a->chunk : 64;
    int P = a->prompt ? (int)a->prompt : 256, gen = a->gen ? (int)a->gen : 256;
    if (P > want) P = (int)want;
    int32_t *ids;
    int n;
    if (load_tokens(llm, a, want, &ids, &n)) { zl_codec_free(c); zl_llm_close(llm); return 1; }
    int nv = zl_llm_n_vocab(llm), ctx = n > P + gen ? n : P + gen;
    zl_seq_opts so = {ctx, ZL_KV_F16, zl_sampling_defaults()};
    zl_seq *s = NULL;
    size_t rows = (size_t)(chunk > P ? chunk : P);
    float *logits = malloc((size_t)(chunk > gen ? chunk : gen) * nv * sizeof *logits);
    int32_t *g = malloc((size_t)gen * sizeof *g);
    uint8_t *buf = NULL;
    if (!logits || !g) rc = zl_errf(&err, ZL_ENOMEM, "out of memory");
    if (!rc) rc = zl_seq_new(&s, llm, &so, &err);
    double ppl0 = 0;
    code_time none = {0};
    if (!rc) rc = ppl_pass(s, nv, ids, n, (int)chunk, NULL, NULL, NULL, NULL, &none, logits, &ppl0, &err);
    /* the exact greedy continuation of the prompt */
    if (!rc) { zl_seq_truncate(s, 0); rc = zl_seq_eval(s, ids, P, 64, NULL, &err); }
    for (int i = 0; !rc && i < gen; i++) {
        g[i] = argmax(zl_seq_logits(s), nv);
        rc = zl_seq_eval(s, &g[i], 1, 1, NULL, &err);
    }
    /* the harness itself: the exact cache fed the same way agrees everywhere */
    int agree0 = 0, first0 = 0;
    if (!rc) rc = greedy_pass(s, nv, ids, P, g, gen, NULL, NULL, NULL, &none, logits, &agree0, &first0, &err);
    if (!rc)
        printf("exact: perplexity %.4f over %d tokens (chunks of %ld); f16 KV %zu bytes per token; greedy: %d tokens "
               "after a %d-token prompt (teacher-forced exact agreement %d/%d)\n", ppl0, n, chunk,
               zl_codec_f16_token_bytes(c), gen, P, agree0, gen);
    zl_fusion fusion = a->fusion, *f = fusion.mode == ZL_FUSION_ADDITIVE ? &fusion : NULL;
    if (!rc && f) { /* the merging alone, rows exact */
        double ppl = 0;
        int agree = 0, first = 0;
        rc = ppl_pass(s, nv, ids, n, (int)chunk, NULL, f, NULL, NULL, &none, logits, &ppl, &err);
        int kept = zl_seq_n_cached(s);
        if (!rc) rc = greedy_pass(s, nv, ids, P, g, gen, NULL, f, NULL, &none, logits, &agree, &first, &err);
        if (!rc)
            printf("additive (merge %d, window %d chunks, decay %.2f), rows exact: perplexity %.4f (%+.2f%%), greedy "
                   "agreement %d/%d (first difference at %d), %d of %d rows kept, %.0f bytes per token of context\n",
                   f->merge, f->window, (double)f->decay, ppl, 100.0 * (ppl / ppl0 - 1), agree, gen, first, kept, n,
                   (double)kept * zl_codec_f16_token_bytes(c) / n);
    }
    for (int r = 0; !rc && r < n_ratios; r++) {
        if ((rc = zl_codec_set_ratio(c, ratios[r], &err))) break;
        free(buf);
        if (!(buf = calloc(rows, zl_codec_token_bytes(c)))) { rc = zl_errf(&err, ZL_ENOMEM, "out of memory"); break; }
        zl_codec_hist h;
        if ((rc = zl_codec_hist_new(&h, c, &err))) break;
        code_time t = {0};
        double ppl = 0;
        int agree = 0, first = 0;
        rc = ppl_pass(s, nv, ids, n, (int)chunk, c, f, buf, &h, &t, logits, &ppl, &err);
        int kept = zl_seq_n_cached(s);
        if (!rc) rc = greedy_pass(s, nv, ids, P, g, gen, c, f, buf, &t, logits, &agree, &first, &err);
        if (!rc) {
            size_t tb = zl_codec_token_bytes(c), fb = zl_codec_f16_token_bytes(c);
            if (f) /* what the cache really holds per token of context: sinks exact, every kept row coded */
                tb = (size_t)(((double)c->n_sink * fb + (double)(kept - c->n_sink) * tb) / n + 0.5);
            double rk, bk, rv, bv;
            rank_of(c, 0, &rk, &bk);
            rank_of(c, 1, &rv, &bv);
            printf("%sratio %.4f (1/%.1f): perplexity %.4f (%+.2f%%), greedy agreement %d/%d (first difference at %d), "
                   "%zu bytes per token (f16 %zu, %.2f%%), entropy %.3f bits per element (allocated %.3f), rank K %.1f "
                   "V %.1f of %d, encode %.1f, decode %.1f CPU us/token\n",
                   f ? "additive, " : "", c->ratio, 1.0 / c->ratio, ppl, 100.0 * (ppl / ppl0 - 1), agree, gen, first, tb, fb,
                   100.0 * tb / fb, zl_codec_hist_entropy(&h, c), (double)c->bits_per_token / (fb / 2), rk, rv,
                   c->head_dim, 1e6 * t.enc_s / t.coded, 1e6 * t.dec_s / t.coded);
        }
        zl_codec_hist_free(&h);
    }
    free(buf);
    free(g);
    free(logits);
    zl_seq_free(s);
    free(ids);
    zl_codec_free(c);
    zl_llm_close(llm);
    return rc ? cli_fail("%s", err.msg) : 0;
}

int cmd_codec(int argc, char **argv) {
    if (argc < 2 || cli_is_help(argv[1])) { fputs(k_usage, argc < 2 ? stderr : stdout); return argc < 2; }
    const char *sub = argv[1];
    if (strcmp(sub, "train") && strcmp(sub, "eval"))
        return cli_fail("codec: unknown subcommand '%s' (train or eval)", sub);
    codec_args a = {0};
    a.fusion = zl_fusion_defaults(ZL_FUSION_CROSS_ATTENTION);
    double decay = a.fusion.decay;
    for (int i = 2; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (cli_is_help(o)) { fputs(k_usage, stdout); return 0; }
#define VAL (i++, v)
        if (!strcmp(o, "-m") || !strcmp(o, "--model")) { if (!(a.model = VAL)) return cli_fail("%s needs a value", o); }
        else if (!strcmp(o, "-f") || !strcmp(o, "--file")) { if (!(a.text = VAL)) return cli_fail("%s needs a value", o); }
        else if (!strcmp(o, "-o")) { if (!(a.out = VAL)) return cli_fail("%s needs a value", o); }
        else if (!strcmp(o, "--codec")) { if (!(a.codec = VAL)) return cli_fail("%s needs a value", o); }
        else if (!strcmp(o, "--ratio")) { if (!(a.ratios = VAL)) return cli_fail("%s needs a value", o); }
        else if (!strcmp(o, "--tokens")) { if (cli_int(o, VAL, 16, 1 << 20, &a.tokens)) return 1; }
        else if (!strcmp(o, "--skip")) { if (cli_int(o, VAL, 0, 1 << 24, &a.skip)) return 1; }
        else if (!strcmp(o, "--chunk")) { if (cli_int(o, VAL, 1, 4096, &a.chunk)) return 1; }
        else if (!strcmp(o, "--prompt")) { if (cli_int(o, VAL, 2, 1 << 20, &a.prompt)) return 1; }
        else if (!strcmp(o, "--gen")) { if (cli_int(o, VAL, 1, 1 << 16, &a.gen)) return 1; }
        else if (!strcmp(o, "--fusion")) {
            if (!v || zl_fusion_from_name(VAL, &a.fusion.mode))
                return cli_fail("--fusion: '%s' is not cross_attention or additive", v ? v : "");
        }
        else if (!strcmp(o, "--merge")) { long x; if (cli_int(o, VAL, 2, 64, &x)) return 1; a.fusion.merge = (int)x; }
        else if (!strcmp(o, "--window")) { long x; if (cli_int(o, VAL, 0, 4096, &x)) return 1; a.fusion.window = (int)x; }
        else if (!strcmp(o, "--decay")) { if (cli_float(o, VAL, 1e-6, 1, &decay)) return 1; a.fusion.decay = (float)decay; }
        else if (!strcmp(o, "-t") || !strcmp(o, "--threads")) { if (cli_int(o, VAL, 1, 1024, &a.threads)) return 1; }
        else return cli_fail("codec %s: unknown option '%s' (see zerolayer codec --help)", sub, o);
#undef VAL
    }
    if (!strcmp(sub, "train")) {
        if (a.codec) return cli_fail("codec train: --codec is for eval (train writes -o FILE.zlc)");
        return cmd_train(&a);
    }
    if (a.out) return cli_fail("codec eval: -o is for train");
    return cmd_eval(&a);
}
