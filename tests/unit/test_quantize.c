/* test_quantize.c — quantize and synth (src/model/quantize.c).
 *
 * Type choice: the llama.cpp mixes are checked tensor by tensor against the
 * files llama.cpp itself wrote (the synth-small fixtures) and against the
 * use-more-bits layer set for a 22-layer model.  Quality: synth-small-F16 is
 * quantised to each type, reloaded, and its logits over the fixture ids are
 * compared with the F16 model's (exact forward mode, so the difference is
 * the weights' alone); each type must stay within a bound and, where
 * llama.cpp's own quantisation of the same model exists, within 1.5x of its
 * error.  stories260K has 172-column ffn_down rows that no block type fits:
 * the fallback must keep it loadable and generating.  The pipeline itself
 * (chunks, threads) must give exactly zl_quantize_row's bytes, and synth must
 * write a deterministic model that loads and generates through the public
 * API. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "model/model.h"
#include "model/quantize.h"
#include "tensor/kernels.h"
#include "zerolayer.h"

#define FIX ZL_ROOT "/tests/fixtures/logits/"
#define MODELS ZL_ROOT "/tests/fixtures/models/"
#define SYNTH_F16 FIX "synth-small-F16.gguf"
#define NPOS 64

#define ZL_TMP_TAG "quant"
#include "test_files.h"

static zl_qtarget target(const char *name) {
    zl_qtarget t;
    cr_assert_eq(zl_qtarget_parse(name, &t), 0, "target %s", name);
    return t;
}

static void quantize(const char *in, const char *out, const char *type, zl_qstats *st) {
    zl_qtarget t = target(type);
    zl_err err = {0};
    zl_quantize_opts o = {2, NULL, NULL};
    cr_assert_eq(zl_quantize_file(in, out, &t, &o, st, &err), 0, "quantize %s to %s: %s", in, type, err.msg);
}

static int read_ids(int32_t *ids, int n) {
    FILE *f = fopen(FIX "ids.txt", "r");
    cr_assert(f);
    int k = 0;
    while (k < n && fscanf(f, "%d", &ids[k]) == 1) k++;
    fclose(f);
    return k;
}

/* Logits of the first NPOS fixture ids, exact mode (f32 activations, f64
 * sums, F32 KV) so only the weights differ between models. */
static float *exact_logits(const char *path, int *nv) {
    zl_err err = {0};
    zl_model *m;
    cr_assert_eq(zl_model_load(&m, path, NULL, &err), 0, "%s", err.msg);
    int32_t ids[NPOS];
    cr_assert_eq(read_ids(ids, NPOS), NPOS);
    *nv = m->hp.n_vocab;
    zl_kv *kv;
    cr_assert_eq(zl_kv_new(&kv, m->hp.n_layers, NPOS, m->hp.n_kv_heads * m->hp.head_dim, ZL_TYPE_F32, &err), 0);
    zl_fwd *f = zl_fwd_new();
    zl_fwd_set_exact(f, 1);
    zl_pool *pool = zl_pool_new(2);
    float *out = malloc((size_t)NPOS * (size_t)*nv * sizeof *out);
    zl_batch_tok toks[16];
    for (int p = 0; p < NPOS; p += 16) {
        for (int i = 0; i < 16; i++) toks[i] = (zl_batch_tok){ids[p + i], p + i, 0, 1};
        cr_assert_eq(zl_forward(m, &kv, toks, 16, out + (size_t)p * (size_t)*nv, f, pool, &err), 0, "%s", err.msg);
    }
    zl_pool_free(pool);
    zl_fwd_free(f);
    zl_kv_free(kv);
    zl_model_free(m);
    return out;
}

typedef struct { double mean_abs, max_abs, top1; } delta;

static delta compare(const float *a, const float *b, int nv) {
    delta d = {0, 0, 0};
    for (int p = 0; p < NPOS; p++) {
        const float *x = a + (size_t)p * nv, *y = b + (size_t)p * nv;
        int ia = 0, ib = 0;
        for (int i = 0; i < nv; i++) {
            double e = fabs((double)x[i] - y[i]);
            d.mean_abs += e;
            if (e > d.max_abs) d.max_abs = e;
            if (x[i] > x[ia]) ia = i;
            if (y[i] > y[ib]) ib = i;
        }
        d.top1 += ia == ib;
    }
    d.mean_abs /= (double)NPOS * nv;
    d.top1 /= NPOS;
    return d;
}

static zl_type tensor_type(const zl_gguf *g, const char *name) {
    const zl_gguf_tensor *t = zl_gguf_find_tensor(g, name);
    cr_assert(t, "tensor %s missing", name);
    return (zl_type)t->type;
}

/* ---- type choice ---- */

Test(quantize, target_names) {
    zl_qtarget t;
    cr_assert_eq(zl_qtarget_parse("q4_k_m", &t), 0);
    cr_assert(!strcmp(t.name, "Q4_K_M") && t.base == ZL_TYPE_Q4_K && t.ftype == 15);
    const struct { const char *n; int ftype; } ft[] = {
        {"F32", 0}, {"F16", 1}, {"Q4_0", 2}, {"Q4_1", 3}, {"Q8_0", 7}, {"Q5_0", 8}, {"Q5_1", 9}, {"Q4_K_S", 14},
        {"Q4_K_M", 15}, {"Q5_K_S", 16}, {"Q5_K_M", 17}, {"Q6_K", 18}, {"BF16", 32}};
    for (size_t i = 0; i < sizeof ft / sizeof ft[0]; i++)
        cr_assert_eq(target(ft[i].n).ftype, ft[i].ftype, "%s", ft[i].n);
    cr_assert_eq(zl_qtarget_parse("Q3_K", &t), ZL_EINVAL);
    cr_assert_eq(zl_qtarget_parse("", &t), ZL_EINVAL);
    cr_assert_eq(zl_qtarget_parse("Q4_K_MM", &t), ZL_EINVAL);
}

/* The mixes must choose what llama.cpp chose when it wrote the fixtures. */
Test(quantize, mixes_match_the_llama_cpp_fixtures) {
    const char *names[] = {"Q8_0", "Q4_0", "Q6_K", "Q4_K_S", "Q4_K_M", "Q5_K_M"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        char path[256];
        snprintf(path, sizeof path, FIX "synth-small-%s.gguf", names[k]);
        zl_gguf *g;
        zl_err err = {0};
        cr_assert_eq(zl_gguf_open(&g, path, NULL, &err), 0, "%s", err.msg);
        zl_qtarget t = target(names[k]);
        uint32_t ft;
        cr_assert_eq(zl_gguf_get_u32(g, "general.file_type", &ft), 0);
        cr_assert_eq((int)ft, t.ftype, "%s: general.file_type", names[k]);
        for (uint64_t i = 0; i < g->n_tensors; i++) {
            const zl_gguf_tensor *gt = &g->tensors[i];
            char nm[128], note[192];
            zl_str_copy(gt->name, nm, sizeof nm);
            zl_type want = zl_quant_tensor_type(&t, nm, gt->n_dims, gt->ne, 4, 0, note, sizeof note);
            cr_assert_eq(want, gt->type, "%s %s: chose %s, llama.cpp wrote %s", names[k], nm,
                         zl_type_traits_of(want)->name, zl_type_traits_of(gt->type)->name);
        }
        zl_gguf_close(g);
    }
}

Test(quantize, more_bits_layers_of_a_22_layer_model) {
    /* first 1/8 (0,1), last 1/8 (19,20,21) and every third in between */
    const int more[22] = {1, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 1, 1};
    zl_qtarget m = target("Q4_K_M"), m5 = target("Q5_K_M"), s = target("Q4_K_S");
    int64_t ne[2] = {2048, 256}, down[2] = {5632, 2048};
    char nm[64], note[192];
    for (int l = 0; l < 22; l++) {
        snprintf(nm, sizeof nm, "blk.%d.attn_v.weight", l);
        cr_assert_eq(zl_quant_tensor_type(&m, nm, 2, ne, 22, 0, note, sizeof note), more[l] ? ZL_TYPE_Q6_K : ZL_TYPE_Q4_K,
                     "Q4_K_M %s", nm);
        cr_assert_eq(zl_quant_tensor_type(&m5, nm, 2, ne, 22, 0, note, sizeof note), more[l] ? ZL_TYPE_Q6_K : ZL_TYPE_Q5_K);
        cr_assert_eq(zl_quant_tensor_type(&s, nm, 2, ne, 22, 0, note, sizeof note), l < 4 ? ZL_TYPE_Q5_K : ZL_TYPE_Q4_K);
        snprintf(nm, sizeof nm, "blk.%d.ffn_down.weight", l);
        cr_assert_eq(zl_quant_tensor_type(&m, nm, 2, down, 22, 0, note, sizeof note), more[l] ? ZL_TYPE_Q6_K : ZL_TYPE_Q4_K);
        cr_assert_eq(zl_quant_tensor_type(&s, nm, 2, down, 22, 0, note, sizeof note), l < 2 ? ZL_TYPE_Q5_K : ZL_TYPE_Q4_K);
        snprintf(nm, sizeof nm, "blk.%d.attn_q.weight", l);
        cr_assert_eq(zl_quant_tensor_type(&m, nm, 2, ne, 22, 0, note, sizeof note), ZL_TYPE_Q4_K);
        cr_assert_eq(note[0], 0);
    }
    int64_t emb[2] = {2048, 32000}, vec[1] = {2048};
    cr_assert_eq(zl_quant_tensor_type(&m, "output.weight", 2, emb, 22, 0, note, sizeof note), ZL_TYPE_Q6_K);
    cr_assert_eq(zl_quant_tensor_type(&m, "token_embd.weight", 2, emb, 22, 0, note, sizeof note), ZL_TYPE_Q4_K);
    cr_assert_eq(zl_quant_tensor_type(&m, "token_embd.weight", 2, emb, 22, 1, note, sizeof note), ZL_TYPE_Q6_K,
                 "tied embeddings are quantised as the output");
    cr_assert_eq(zl_quant_tensor_type(&m, "blk.0.attn_norm.weight", 1, vec, 22, 0, note, sizeof note), ZL_TYPE_F32);
    zl_qtarget q8 = target("Q8_0"), f16 = target("F16"), pure = target("Q4_K");
    cr_assert_eq(zl_quant_tensor_type(&q8, "output.weight", 2, emb, 22, 0, note, sizeof note), ZL_TYPE_Q8_0);
    cr_assert_eq(zl_quant_tensor_type(&f16, "output.weight", 2, emb, 22, 0, note, sizeof note), ZL_TYPE_F16);
    cr_assert_eq(zl_quant_tensor_type(&f16, "blk.0.ffn_norm.weight", 1, vec, 22, 0, note, sizeof note), ZL_TYPE_F32);
    cr_assert_eq(zl_quant_tensor_type(&pure, "output.weight", 2, emb, 22, 0, note, sizeof note), ZL_TYPE_Q4_K);
    cr_assert_eq(zl_quant_tensor_type(&pure, "blk.1.attn_v.weight", 2, ne, 22, 0, note, sizeof note), ZL_TYPE_Q4_K);
}

Test(quantize, rows_that_do_not_fit_fall_back_with_a_note) {
    char note[192];
    int64_t n172[2] = {172, 64}, n64[2] = {64, 512}, n96[2] = {96, 8};
    zl_qtarget q4km = target("Q4_K_M"), q8 = target("Q8_0"), q6 = target("Q6_K"), q5k = target("Q5_K");
    cr_assert_eq(zl_quant_tensor_type(&q4km, "blk.0.ffn_up.weight", 2, n64, 5, 0, note, sizeof note), ZL_TYPE_Q5_0);
    cr_assert(strstr(note, "row length 64") && strstr(note, "Q4_K") && strstr(note, "Q5_0"), "%s", note);
    cr_assert_eq(zl_quant_tensor_type(&q5k, "blk.0.ffn_up.weight", 2, n96, 5, 0, note, sizeof note), ZL_TYPE_Q5_1);
    cr_assert_eq(zl_quant_tensor_type(&q6, "blk.0.ffn_up.weight", 2, n96, 5, 0, note, sizeof note), ZL_TYPE_Q8_0);
    cr_assert_eq(zl_quant_tensor_type(&q4km, "blk.0.ffn_down.weight", 2, n172, 5, 0, note, sizeof note), ZL_TYPE_F16);
    cr_assert(strstr(note, "F16"), "%s", note);
    cr_assert_eq(zl_quant_tensor_type(&q8, "blk.0.ffn_down.weight", 2, n172, 5, 0, note, sizeof note), ZL_TYPE_F16);
    /* output rows of 64 under a K mix: Q8_0, as llama.cpp does, and no note (planned, not a fallback) */
    cr_assert_eq(zl_quant_tensor_type(&q4km, "output.weight", 2, n64, 5, 0, note, sizeof note), ZL_TYPE_Q8_0);
    cr_assert_eq(note[0], 0);
}

/* ---- quality: quantised synth-small against its F16 original ---- */

typedef struct {
    const char *type;
    const char *llama_ref; /* llama.cpp's quantisation of the same model, or NULL */
    double max_mean;       /* bound on mean |d| against F16 */
    double min_top1;
} quality_case;

Test(quantize, synth_small_logits_stay_close_to_f16, .init = make_tmp_dir, .fini = rm_tmp_dir, .timeout = 120) {
    /* Bounds are 1.25x the mean |d| measured when this test was written (the
     * log line per type prints the figures, with llama.cpp's own quantisation
     * of the same model as the yardstick: ours came out within 2% of it, or
     * better).  The model's logits are large (random weights, sd of logits
     * ~1), so 4-bit types move them by ~0.2 and flip the top-1 of many of the
     * near-uniform positions. */
    const quality_case cases[] = {
        {"F16", NULL, 1e-6, 1.0},          {"BF16", NULL, 0.0056, 0.95},
        {"Q8_0", "Q8_0", 0.0176, 0.95},    {"Q6_K", "Q6_K", 0.057, 0.90},
        {"Q5_K_M", "Q5_K_M", 0.110, 0.80}, {"Q4_K_M", "Q4_K_M", 0.219, 0.62},
        {"Q4_K", NULL, 0.234, 0.58},       {"Q4_0", "Q4_0", 0.252, 0.52},
        /* measured but left out for time: Q5_0 0.106, Q5_1 0.085, Q4_K_S 0.177 (llama.cpp 0.176), Q4_1 0.173 */
    };
    int nv;
    float *ref = exact_logits(SYNTH_F16, &nv);
    zl_gguf *src;
    zl_err err = {0};
    cr_assert_eq(zl_gguf_open(&src, SYNTH_F16, NULL, &err), 0, "%s", err.msg);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const quality_case *c = &cases[k];
        const char *out = tmp_path("q.gguf");
        zl_qstats st;
        quantize(SYNTH_F16, out, c->type, &st);
        cr_assert_eq(st.n_tensors, (int)src->n_tensors);
        cr_assert_eq(st.n_fallback, 0);

        /* types and metadata as planned; every kv of the source is still there */
        zl_gguf *g;
        cr_assert_eq(zl_gguf_open(&g, out, NULL, &err), 0, "%s", err.msg);
        zl_qtarget t = target(c->type);
        uint32_t ft;
        cr_assert(!zl_gguf_get_u32(g, "general.file_type", &ft) && (int)ft == t.ftype);
        for (uint64_t i = 0; i < src->n_kv; i++) {
            char key[128];
            zl_str_copy(src->kv[i].key, key, sizeof key);
            cr_assert(zl_gguf_find(g, key), "%s: metadata %s was not copied", c->type, key);
        }
        cr_assert_eq(g->n_tensors, src->n_tensors);
        for (uint64_t i = 0; i < src->n_tensors; i++) {
            const zl_gguf_tensor *s = &src->tensors[i];
            char nm[128], note[192];
            zl_str_copy(s->name, nm, sizeof nm);
            cr_assert_eq(tensor_type(g, nm), zl_quant_tensor_type(&t, nm, s->n_dims, s->ne, 4, 0, note, sizeof note));
        }
        cr_assert_eq(tensor_type(g, "blk.0.attn_q.weight"), t.base);
        cr_assert_eq(tensor_type(g, "blk.0.attn_norm.weight"), ZL_TYPE_F32);
        zl_gguf_close(g);

        int nv2;
        float *q = exact_logits(out, &nv2);
        cr_assert_eq(nv2, nv);
        delta d = compare(q, ref, nv);
        char refline[160] = "";
        if (c->llama_ref) {
            char rp[256];
            snprintf(rp, sizeof rp, FIX "synth-small-%s.gguf", c->llama_ref);
            float *l = exact_logits(rp, &nv2);
            delta dl = compare(l, ref, nv);
            snprintf(refline, sizeof refline, " | llama.cpp's %s: mean|d| %.5f top1 %.0f%%", c->llama_ref,
                     dl.mean_abs, 100 * dl.top1);
            cr_expect(d.mean_abs <= 1.5 * dl.mean_abs + 1e-4, "%s: mean |d| %.5f vs llama.cpp's %.5f", c->type,
                      d.mean_abs, dl.mean_abs);
            free(l);
        }
        fprintf(stderr, "quantize %-6s vs F16: mean|d| %.5f max %.4f top1 %3.0f%%  (%.2f MiB)%s\n", c->type,
                d.mean_abs, d.max_abs, 100 * d.top1, st.out_bytes / 1048576.0, refline);
        cr_expect(d.mean_abs <= c->max_mean, "%s: mean |d| %.5f > %.5f", c->type, d.mean_abs, c->max_mean);
        cr_expect(d.top1 >= c->min_top1, "%s: top-1 %.3f < %.3f", c->type, d.top1, c->min_top1);
        free(q);
    }
    zl_gguf_close(src);
    free(ref);
}

/* ---- stories260K: rows of 172 fit no block type ---- */

static void greedy(const char *path, int n, int32_t *out) {
    zl_llm *llm;
    zl_err err = {0};
    zl_llm_opts o = {0};
    o.n_threads = 1;
    cr_assert_eq(zl_llm_open(&llm, path, &o, &err), 0, "%s", err.msg);
    zl_seq *s;
    zl_seq_opts so = {0};
    so.n_ctx = 128;
    so.sampling = zl_sampling_defaults();
    so.sampling.temp = 0;
    cr_assert_eq(zl_seq_new(&s, llm, &so, &err), 0, "%s", err.msg);
    int32_t tok = zl_llm_bos(llm);
    for (int i = 0; i < n; i++) {
        cr_assert_eq(zl_seq_eval(s, &tok, 1, 0, NULL, &err), 0, "%s", err.msg);
        tok = out[i] = zl_seq_sample(s);
    }
    zl_seq_free(s);
    zl_llm_close(llm);
}

Test(quantize, stories260K_falls_back_and_still_generates, .init = make_tmp_dir, .fini = rm_tmp_dir) {
    int32_t base[24], got[24];
    greedy(MODELS "stories260K.gguf", 24, base);
    const struct { const char *type; zl_type q, out, down; int min_same; } cases[] = {
        {"Q8_0", ZL_TYPE_Q8_0, ZL_TYPE_Q8_0, ZL_TYPE_F16, 24},
        {"Q6_K", ZL_TYPE_Q8_0, ZL_TYPE_Q8_0, ZL_TYPE_F16, 24},
        {"Q4_K_M", ZL_TYPE_Q5_0, ZL_TYPE_Q8_0, ZL_TYPE_F16, 4},
        {"Q4_0", ZL_TYPE_Q4_0, ZL_TYPE_Q8_0, ZL_TYPE_F16, 4},
        {"F16", ZL_TYPE_F16, ZL_TYPE_F16, ZL_TYPE_F16, 24},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const char *out = tmp_path("s.gguf");
        zl_qstats st;
        quantize(MODELS "stories260K.gguf", out, cases[k].type, &st);
        zl_gguf *g;
        zl_err err = {0};
        cr_assert_eq(zl_gguf_open(&g, out, NULL, &err), 0, "%s", err.msg);
        cr_assert_eq(tensor_type(g, "blk.0.attn_q.weight"), cases[k].q, "%s attn_q", cases[k].type);
        cr_assert_eq(tensor_type(g, "output.weight"), cases[k].out, "%s output", cases[k].type);
        for (int l = 0; l < 5; l++) {
            char nm[64];
            snprintf(nm, sizeof nm, "blk.%d.ffn_down.weight", l);
            cr_assert_eq(tensor_type(g, nm), cases[k].down, "%s %s", cases[k].type, nm);
        }
        zl_gguf_close(g);
        if (cases[k].q == ZL_TYPE_F16) cr_assert_eq(st.n_fallback, 0);
        else cr_assert_geq(st.n_fallback, 5, "%s: the five ffn_down fall back", cases[k].type);
        greedy(out, 24, got);
        int same = 0;
        while (same < 24 && got[same] == base[same]) same++;
        fprintf(stderr, "stories260K %-6s: %.3f MiB, greedy matches F32 for %d/24 tokens\n", cases[k].type,
                st.file_bytes / 1048576.0, same);
        cr_expect_geq(same, cases[k].min_same, "%s: greedy diverged after %d tokens", cases[k].type, same);
    }
}

/* ---- the pipeline gives exactly the quantiser's bytes ---- */

Test(quantize, output_bytes_equal_row_by_row_quantisation, .init = make_tmp_dir, .fini = rm_tmp_dir) {
    /* 36000 x 256: two 16 MiB chunks at F16/BF16, rows split across threads */
    const int64_t cols = 256, rows = 36000;
    float *w = malloc((size_t)(cols * rows) * sizeof *w);
    uint64_t s = 99;
    for (int64_t i = 0; i < cols * rows; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        w[i] = (float)((int64_t)(s >> 33) % 20001 - 10000) * 1e-4f;
    }
    zl_gguf_writer *wr = zl_gguf_writer_new();
    int64_t ne[2] = {cols, rows}, ne_small[2] = {cols, 3};
    zl_gguf_set_str(wr, "general.architecture", "llama");
    zl_gguf_add_tensor(wr, "big.weight", ZL_TYPE_F32, 2, ne, w, (uint64_t)(cols * rows) * 4);
    zl_gguf_add_tensor(wr, "small.weight", ZL_TYPE_F32, 2, ne_small, w, (uint64_t)(cols * 3) * 4);
    zl_err err = {0};
    char in[200];
    snprintf(in, sizeof in, "%s", tmp_path("in.gguf"));
    cr_assert_eq(zl_gguf_write(wr, in, &err), 0, "%s", err.msg);
    zl_gguf_writer_free(wr);
    const char *types[] = {"F16", "BF16", "Q8_0", "F32"};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        zl_qtarget t = target(types[k]);
        const char *out = tmp_path("out.gguf");
        zl_quantize_opts o = {3, NULL, NULL};
        cr_assert_eq(zl_quantize_file(in, out, &t, &o, NULL, &err), 0, "%s", err.msg);
        zl_gguf *g;
        cr_assert_eq(zl_gguf_open(&g, out, NULL, &err), 0, "%s", err.msg);
        const zl_gguf_tensor *bt = zl_gguf_find_tensor(g, "big.weight");
        cr_assert(bt && bt->type == t.base);
        size_t rb = zl_row_size(t.base, cols);
        uint8_t *row = malloc(rb);
        for (int64_t r = 0; r < rows; r += (r % 1000 == 999) ? 1 : 7) {
            zl_quantize_row(t.base, w + r * cols, row, cols);
            cr_assert_eq(memcmp(row, (const uint8_t *)bt->data + (size_t)r * rb, rb), 0, "%s row %lld", types[k],
                         (long long)r);
        }
        free(row);
        zl_gguf_close(g);
    }
    free(w);
}

/* quantize -> dequantize error of each type on Gaussian-like weights */
Test(quantize, round_trip_error_per_type) {
    const struct { zl_type t; double max_rel; } cases[] = {
        /* measured: 0.0002 0.0017 0.0083 0.025 0.044 0.041 0.065 0.087 0.084 0.128; bounds 1.2x */
        {ZL_TYPE_F16, 0.00025}, {ZL_TYPE_BF16, 0.0021}, {ZL_TYPE_Q8_0, 0.0100}, {ZL_TYPE_Q6_K, 0.030},
        {ZL_TYPE_Q5_K, 0.053},  {ZL_TYPE_Q5_1, 0.049},  {ZL_TYPE_Q5_0, 0.078},  {ZL_TYPE_Q4_K, 0.104},
        {ZL_TYPE_Q4_1, 0.101},  {ZL_TYPE_Q4_0, 0.154},
    };
    const int n = 256 * 64;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    uint8_t *q = malloc((size_t)n * 4);
    uint64_t s = 7;
    for (int i = 0; i < n; i++) { /* sum of 4 uniforms: roughly normal, with a few outliers */
        double a = 0;
        for (int j = 0; j < 4; j++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            a += (double)(s >> 11) / 9007199254740992.0;
        }
        x[i] = (float)((a - 2) * (i % 97 == 0 ? 8 : 1));
    }
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        cr_assert_eq(zl_quantize_row(cases[k].t, x, q, n), zl_row_size(cases[k].t, n));
        zl_dequant_row(cases[k].t, q, y, n);
        double se = 0, sx = 0;
        for (int i = 0; i < n; i++) {
            se += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
            sx += (double)x[i] * x[i];
        }
        double rel = sqrt(se / sx);
        fprintf(stderr, "round trip %-5s relative RMS error %.5f\n", zl_type_traits_of(cases[k].t)->name, rel);
        cr_expect_leq(rel, cases[k].max_rel, "%s: relative RMS error %.5f", zl_type_traits_of(cases[k].t)->name, rel);
    }
    free(x);
    free(y);
    free(q);
}

/* ---- errors ---- */

Test(quantize, errors_are_reported, .init = make_tmp_dir, .fini = rm_tmp_dir) {
    zl_qtarget t = target("Q4_0");
    zl_err err = {0};
    cr_assert_neq(zl_quantize_file(tmp_path("absent.gguf"), tmp_path("o.gguf"), &t, NULL, NULL, &err), 0);
    cr_assert(strstr(err.msg, "cannot open"), "%s", err.msg);
    cr_assert_neq(zl_quantize_file(SYNTH_F16, "/nonexistent-dir/o.gguf", &t, NULL, NULL, &err), 0);
    cr_assert(strstr(err.msg, "cannot create"), "%s", err.msg);

    /* a tensor type that can be stored but not converted */
    zl_gguf_writer *w = zl_gguf_writer_new();
    static uint8_t blob[84 * 2];
    int64_t ne[2] = {256, 2};
    zl_gguf_add_tensor(w, "odd.weight", ZL_TYPE_Q2_K, 2, ne, blob, sizeof blob);
    const char *in = tmp_path("q2k.gguf");
    cr_assert_eq(zl_gguf_write(w, in, &err), 0, "%s", err.msg);
    zl_gguf_writer_free(w);
    if (!zl_type_traits_of(ZL_TYPE_Q2_K)->supported) {
        cr_assert_neq(zl_quantize_file(in, tmp_path("o.gguf"), &t, NULL, NULL, &err), 0);
        cr_assert(strstr(err.msg, "odd.weight") && strstr(err.msg, "cannot be converted"), "%s", err.msg);
        cr_assert_neq(access(tmp_path("o.gguf.tmp"), F_OK), 0, "temporary output left behind");
    }
}

/* ---- synth ---- */

static zl_synth_params small_synth(const char *out, const char *type) {
    zl_synth_params p = {0};
    p.vocab_path = MODELS "stories260K.gguf";
    p.out_path = out;
    p.dim = 256;
    p.ffn = 512;
    p.n_layers = 3;
    p.n_heads = 8;
    p.n_kv_heads = 2;
    p.n_ctx = 256;
    p.seed = 42;
    p.target = target(type);
    p.opts.n_threads = 2;
    return p;
}

Test(quantize, synth_model_loads_generates_and_is_deterministic, .init = make_tmp_dir, .fini = rm_tmp_dir) {
    zl_err err = {0};
    const char *a = tmp_path("a.gguf");
    zl_synth_params p = small_synth(a, "Q4_K_M");
    zl_qstats st;
    cr_assert_eq(zl_synth_file(&p, &st, &err), 0, "%s", err.msg);
    cr_assert_eq(st.n_tensors, 3 + 9 * 3);

    zl_gguf *g, *v;
    cr_assert_eq(zl_gguf_open(&g, a, NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(zl_gguf_open(&v, MODELS "stories260K.gguf", NULL, &err), 0, "%s", err.msg);
    for (uint64_t i = 0; i < v->n_kv; i++) {
        char key[128];
        zl_str_copy(v->kv[i].key, key, sizeof key);
        if (strncmp(key, "tokenizer.", 10)) continue;
        const zl_gguf_kv *kv = zl_gguf_find(g, key);
        cr_assert(kv && kv->type == v->kv[i].type, "tokenizer key %s not copied", key);
    }
    uint32_t u;
    cr_assert(!zl_gguf_get_u32(g, "general.file_type", &u) && u == 15);
    cr_assert(!zl_gguf_get_u32(g, "llama.attention.head_count_kv", &u) && u == 2);
    cr_assert_eq(tensor_type(g, "output.weight"), ZL_TYPE_Q6_K);
    cr_assert_eq(tensor_type(g, "token_embd.weight"), ZL_TYPE_Q4_K);
    /* 3 layers: n/8 = 0 and 7n/8 = 2, so only layer 2 gets more bits */
    cr_assert_eq(tensor_type(g, "blk.0.attn_v.weight"), ZL_TYPE_Q4_K);
    cr_assert_eq(tensor_type(g, "blk.2.attn_v.weight"), ZL_TYPE_Q6_K);
    cr_assert_eq(tensor_type(g, "blk.2.ffn_down.weight"), ZL_TYPE_Q6_K);
    zl_gguf_close(v);

    /* weights look like N(0, 0.02^2), norms are 1 */
    const zl_gguf_tensor *t = zl_gguf_find_tensor(g, "blk.1.attn_q.weight");
    float *row = malloc(256 * sizeof *row);
    double s1 = 0, s2 = 0;
    for (int r = 0; r < 256; r++) {
        zl_dequant_row((zl_type)t->type, (const uint8_t *)t->data + (size_t)r * zl_row_size((zl_type)t->type, 256), row, 256);
        for (int i = 0; i < 256; i++) { s1 += row[i]; s2 += (double)row[i] * row[i]; }
    }
    double mean = s1 / 65536, sd = sqrt(s2 / 65536 - mean * mean);
    cr_assert(fabs(mean) < 0.001 && sd > 0.018 && sd < 0.022, "mean %g sd %g", mean, sd);
    t = zl_gguf_find_tensor(g, "blk.2.ffn_norm.weight");
    cr_assert(t && t->type == ZL_TYPE_F32 && ((const float *)t->data)[17] == 1.0f);
    zl_gguf_close(g);
    free(row);

    /* same seed, other thread count: same bytes; other seed: different */
    const char *b = tmp_path("b.gguf");
    p.out_path = b;
    p.opts.n_threads = 1;
    cr_assert_eq(zl_synth_file(&p, NULL, &err), 0, "%s", err.msg);
    size_t na, nb;
    uint8_t *ba = slurp(a, &na), *bb = slurp(b, &nb);
    cr_assert(na == nb && !memcmp(ba, bb, na), "synth output depends on the thread count");
    free(bb);
    p.seed = 43;
    cr_assert_eq(zl_synth_file(&p, NULL, &err), 0, "%s", err.msg);
    bb = slurp(b, &nb);
    cr_assert(na == nb && memcmp(ba, bb, na), "a different seed must give different weights");
    free(ba);
    free(bb);

    /* loads and generates through the public API */
    zl_llm *llm;
    zl_llm_opts o = {0};
    o.n_threads = 2;
    cr_assert_eq(zl_llm_open(&llm, a, &o, &err), 0, "%s", err.msg);
    cr_assert_eq(zl_llm_n_vocab(llm), 512);
    cr_assert_eq(zl_llm_n_ctx_train(llm), 256);
    zl_seq *s;
    zl_seq_opts so = {0};
    so.sampling = zl_sampling_defaults();
    so.sampling.seed = 5;
    so.sampling.temp = 0.8f;
    cr_assert_eq(zl_seq_new(&s, llm, &so, &err), 0, "%s", err.msg);
    int32_t *ids;
    size_t n;
    cr_assert_eq(zl_llm_tokenize(llm, "Once upon a time", 16, 1, 0, &ids, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(zl_seq_eval(s, ids, (int)n, 0, NULL, &err), 0, "%s", err.msg);
    free(ids);
    int32_t gen[16];
    for (int i = 0; i < 16; i++) {
        gen[i] = zl_seq_sample(s);
        cr_assert(gen[i] >= 0 && gen[i] < 512);
        const float *lg = zl_seq_logits(s);
        for (int j = 0; j < 512; j++) cr_assert(isfinite(lg[j]));
        cr_assert_eq(zl_seq_eval(s, &gen[i], 1, 0, NULL, &err), 0, "%s", err.msg);
    }
    char *text;
    size_t len;
    cr_assert_eq(zl_llm_detokenize(llm, gen, 16, 0, &text, &len, &err), 0, "%s", err.msg);
    free(text);
    zl_seq_free(s);
    zl_llm_close(llm);
}

Test(quantize, synth_rejects_bad_shapes_and_vocabularies, .init = make_tmp_dir, .fini = rm_tmp_dir) {
    zl_err err = {0};
    zl_synth_params p = small_synth(tmp_path("x.gguf"), "F16");
    p.n_heads = 7;
    cr_assert_neq(zl_synth_file(&p, NULL, &err), 0);
    cr_assert(strstr(err.msg, "not a multiple of heads 7"), "%s", err.msg);
    p = small_synth(tmp_path("x.gguf"), "F16");
    p.n_kv_heads = 3;
    cr_assert_neq(zl_synth_file(&p, NULL, &err), 0);
    cr_assert(strstr(err.msg, "kv-heads 3"), "%s", err.msg);
    p = small_synth(tmp_path("x.gguf"), "F16");
    p.dim = 24;
    p.n_heads = 8; /* head dim 3 */
    cr_assert_neq(zl_synth_file(&p, NULL, &err), 0);
    cr_assert(strstr(err.msg, "odd"), "%s", err.msg);
    p = small_synth(tmp_path("x.gguf"), "F16");
    p.vocab_path = tmp_path("none.gguf");
    cr_assert_neq(zl_synth_file(&p, NULL, &err), 0);
    cr_assert(strstr(err.msg, "cannot open"), "%s", err.msg);

    zl_gguf_writer *w = zl_gguf_writer_new();
    zl_gguf_set_str(w, "general.architecture", "llama");
    cr_assert_eq(zl_gguf_write(w, tmp_path("novocab.gguf"), &err), 0, "%s", err.msg);
    zl_gguf_writer_free(w);
    p.vocab_path = tmp_path("novocab.gguf");
    cr_assert_neq(zl_synth_file(&p, NULL, &err), 0);
    cr_assert(strstr(err.msg, "tokenizer.ggml.tokens"), "%s", err.msg);
    cr_assert_neq(access(tmp_path("x.gguf"), F_OK), 0, "no output on failure");

    /* rows that fit no block type fall back and still load */
    p = small_synth(tmp_path("x.gguf"), "Q4_K_M");
    p.dim = 96;
    p.ffn = 160;
    p.n_heads = 4;
    p.n_kv_heads = 4;
    zl_qstats st;
    cr_assert_eq(zl_synth_file(&p, &st, &err), 0, "%s", err.msg);
    cr_assert_gt(st.n_fallback, 0);
    zl_model *m;
    cr_assert_eq(zl_model_load(&m, tmp_path("x.gguf"), NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(m->layers[2].w_down.type, ZL_TYPE_Q8_0, "160 columns: Q6_K -> Q8_0");
    cr_assert_eq(m->layers[0].w_down.type, ZL_TYPE_Q5_0, "160 columns: Q4_K -> Q5_0");
    cr_assert_eq(m->layers[0].wq.type, ZL_TYPE_Q5_0, "96 columns: Q4_K -> Q5_0");
    cr_assert_eq(m->output.type, ZL_TYPE_Q8_0, "output rows of 96 under a K mix");
    zl_model_free(m);
}
