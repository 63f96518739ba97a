/* test_arch.c — architecture variants checked against an identity instead
 * of a second implementation:
 *  - qwen2 uses NEOX rope (pairs i, i+d/2) where llama GGUFs use interleaved
 *    pairs (2i, 2i+1).  Rewriting stories260K as a qwen2 file with the Q/K
 *    rows of every head de-interleaved and zero QKV biases must give the same
 *    logits as the original: that pins the NEOX rotation, the qwen2 metadata
 *    path and the bias binding.  A non-zero bias must change them.
 *  - linear rope scaling with factor 1 is the identity; factor 2 is not.
 *  - missing tensors and unknown architectures are clear errors. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "model/model.h"

#define MODEL ZL_ROOT "/tests/fixtures/models/stories260K.gguf"
#define NTOK 40

static const int32_t k_ids[NTOK] = {1,   403, 407, 261, 378, 430, 271, 260, 1,   440, 261, 265, 272, 285,
                                    266, 350, 311, 270, 260, 410, 315, 273, 261, 340, 373, 258, 300, 301,
                                    302, 303, 304, 305, 306, 260, 280, 290, 295, 299, 310, 320};

static float *logits_of(const char *path, zl_err *err) {
    zl_model *m;
    if (zl_model_load(&m, path, NULL, err)) return NULL;
    zl_kv *kv;
    cr_assert_eq(zl_kv_new(&kv, m->hp.n_layers, 64, m->hp.n_kv_heads * m->hp.head_dim, ZL_TYPE_F32, err), 0);
    zl_fwd *f = zl_fwd_new();
    float *out = malloc(sizeof(float) * NTOK * m->hp.n_vocab);
    zl_batch_tok t[NTOK];
    for (int i = 0; i < NTOK; i++) t[i] = (zl_batch_tok){k_ids[i], i, 0, 1};
    cr_assert_eq(zl_forward(m, &kv, t, NTOK, out, f, NULL, err), 0, "%s", err->msg);
    zl_fwd_free(f);
    zl_kv_free(kv);
    zl_model_free(m);
    return out;
}

/* Copy stories260K into a new file, renaming the architecture keys and
 * transforming tensors.  mode: 0 = llama copy with rope scaling `scale`,
 * 1 = qwen2 with de-interleaved Q/K and bias value `bias`, 2 = llama without
 * output.weight (tied), 3 = llama with output.weight := token_embd.weight. */
static void rewrite(const char *out, int mode, float bias, float scale) {
    zl_err err = {0};
    zl_gguf *g;
    cr_assert_eq(zl_gguf_open(&g, MODEL, NULL, &err), 0, "%s", err.msg);
    zl_gguf_writer *w = zl_gguf_writer_new();
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const zl_gguf_kv *kv = &g->kv[i];
        char key[256];
        zl_str_copy(kv->key, key, sizeof key);
        if (mode == 1 && !strncmp(key, "llama.", 6)) {
            char nk[300];
            snprintf(nk, sizeof nk, "qwen2.%s", key + 6);
            zl_gguf_kv copy = *kv;
            copy.key = (zl_str){nk, strlen(nk)};
            cr_assert_eq(zl_gguf_copy_kv(w, &copy), 0);
        } else if (!strcmp(key, "general.architecture")) {
            zl_gguf_set_str(w, key, mode == 1 ? "qwen2" : "llama");
        } else {
            cr_assert_eq(zl_gguf_copy_kv(w, kv), 0);
        }
    }
    if (mode == 0 && scale != 1.0f) {
        zl_gguf_set_str(w, "llama.rope.scaling.type", "linear");
        zl_gguf_set_f32(w, "llama.rope.scaling.factor", scale);
    }
    uint32_t n_head = 0, n_embd = 0, n_head_kv = 0;
    zl_gguf_get_u32(g, "llama.attention.head_count", &n_head);
    zl_gguf_get_u32(g, "llama.attention.head_count_kv", &n_head_kv);
    zl_gguf_get_u32(g, "llama.embedding_length", &n_embd);
    int hd = (int)(n_embd / n_head);
    void *bufs[256];
    int nb = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const zl_gguf_tensor *t = &g->tensors[i];
        char name[128];
        zl_str_copy(t->name, name, sizeof name);
        const void *data = t->data;
        if (mode == 2 && !strcmp(name, "output.weight")) continue;
        if (mode == 3 && !strcmp(name, "output.weight")) {
            const zl_gguf_tensor *te = zl_gguf_find_tensor(g, "token_embd.weight");
            cr_assert_eq(te->nbytes, t->nbytes);
            data = te->data;
        }
        int is_q = strstr(name, "attn_q.weight") != NULL, is_k = strstr(name, "attn_k.weight") != NULL;
        if (mode == 1 && (is_q || is_k)) {
            cr_assert_eq(t->type, 0u, "test expects F32 weights");
            int64_t cols = t->ne[0], rows = t->ne[1];
            const float *src = t->data;
            float *dst = malloc(sizeof(float) * cols * rows);
            for (int64_t r = 0; r < rows; r++) {
                int64_t h = r / hd, j = r % hd;
                /* NEOX row j < hd/2 takes interleaved row 2j; j >= hd/2 takes 2(j-hd/2)+1 */
                int64_t src_r = h * hd + (j < hd / 2 ? 2 * j : 2 * (j - hd / 2) + 1);
                memcpy(dst + r * cols, src + src_r * cols, sizeof(float) * cols);
            }
            data = dst;
            bufs[nb++] = dst;
        }
        cr_assert_eq(zl_gguf_add_tensor(w, name, t->type, t->n_dims, t->ne, data, t->nbytes), 0);
        if (mode == 1 && (is_q || is_k || strstr(name, "attn_v.weight"))) {
            char bn[128];
            snprintf(bn, sizeof bn, "%.*s.bias", (int)(strlen(name) - 7), name);
            int64_t n = t->ne[1];
            float *b = malloc(sizeof(float) * n);
            for (int64_t j = 0; j < n; j++) b[j] = strstr(name, "attn_v") ? bias : 0.0f;
            bufs[nb++] = b;
            cr_assert_eq(zl_gguf_add_tensor(w, bn, 0, 1, &n, b, sizeof(float) * n), 0);
        }
    }
    cr_assert_eq(zl_gguf_write(w, out, &err), 0, "%s", err.msg);
    zl_gguf_writer_free(w);
    for (int i = 0; i < nb; i++) free(bufs[i]);
    zl_gguf_close(g);
}

static double max_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

Test(arch, qwen2_neox_equals_llama_interleaved) {
    zl_err err = {0};
    char p1[] = "/tmp/zl_qwen2_XXXXXX", p2[] = "/tmp/zl_qwen2b_XXXXXX";
    close(mkstemp(p1));
    close(mkstemp(p2));
    rewrite(p1, 1, 0.0f, 1.0f);
    rewrite(p2, 1, 0.5f, 1.0f);
    float *ref = logits_of(MODEL, &err), *q = logits_of(p1, &err);
    cr_assert(ref && q, "%s", err.msg);
    double d = max_diff(ref, q, (size_t)NTOK * 512);
    fprintf(stderr, "qwen2 (NEOX, de-interleaved) vs llama: max |d| = %.2e\n", d);
    cr_assert_lt(d, 1e-4);
    float *qb = logits_of(p2, &err);
    cr_assert(qb, "%s", err.msg);
    cr_assert_gt(max_diff(ref, qb, (size_t)NTOK * 512), 1e-2, "a V bias must change the logits");
    free(ref); free(q); free(qb);
    unlink(p1);
    unlink(p2);
}

Test(arch, linear_rope_scaling) {
    zl_err err = {0};
    char p1[] = "/tmp/zl_rope1_XXXXXX", p2[] = "/tmp/zl_rope2_XXXXXX";
    close(mkstemp(p1));
    close(mkstemp(p2));
    rewrite(p1, 0, 0, 1.0f);
    rewrite(p2, 0, 0, 2.0f);
    float *ref = logits_of(MODEL, &err), *a = logits_of(p1, &err), *b = logits_of(p2, &err);
    cr_assert(ref && a && b, "%s", err.msg);
    cr_assert_lt(max_diff(ref, a, (size_t)NTOK * 512), 1e-6);
    /* position 0 has no rotation, so the first row is unchanged; later rows differ */
    cr_assert_lt(max_diff(ref, b, 512), 1e-6);
    cr_assert_gt(max_diff(ref, b, (size_t)NTOK * 512), 1e-3);
    free(ref); free(a); free(b);
    unlink(p1);
    unlink(p2);
}

Test(arch, tied_output_uses_token_embd) {
    zl_err err = {0};
    char p1[] = "/tmp/zl_tied_XXXXXX", p2[] = "/tmp/zl_tied2_XXXXXX";
    close(mkstemp(p1));
    close(mkstemp(p2));
    rewrite(p1, 2, 0, 1.0f);
    rewrite(p2, 3, 0, 1.0f);
    zl_model *m;
    cr_assert_eq(zl_model_load(&m, p1, NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(m->hp.tied_output, 1);
    zl_model_free(m);
    float *a = logits_of(p1, &err), *b = logits_of(p2, &err), *ref = logits_of(MODEL, &err);
    cr_assert(a && b && ref, "%s", err.msg);
    cr_assert_lt(max_diff(a, b, (size_t)NTOK * 512), 1e-6);
    /* stories260K was trained with tied embeddings: its output.weight is a copy of token_embd */
    cr_assert_lt(max_diff(a, ref, (size_t)NTOK * 512), 1e-6);
    free(a); free(b); free(ref);
    unlink(p1);
    unlink(p2);
}

Test(arch, clear_errors) {
    zl_err err = {0};
    zl_model *m;
    cr_assert_neq(zl_model_load(&m, ZL_ROOT "/tests/fixtures/tokenizer/ggml-vocab-falcon.gguf", NULL, &err), 0);
    cr_assert(strstr(err.msg, "unsupported architecture 'falcon'"), "%s", err.msg);
    cr_assert_neq(zl_model_load(&m, ZL_ROOT "/tests/fixtures/tokenizer/ggml-vocab-llama-spm.gguf", NULL, &err), 0);
    cr_assert(strstr(err.msg, "missing"), "%s", err.msg);
}

/* ---- sliding-window layers (gemma3's local layers) ----
 * stories260K with every layer made local (window w, same RoPE base) is a
 * model whose logits at position p can depend only on tokens at p - L(w-1)
 * and later (L layers, each looking w - 1 back): changing earlier tokens must
 * leave them bit for bit unchanged, while the token exactly L(w-1) back must
 * still matter.  A window wider than the sequence is the global model, and
 * batch splits must not change a bit (a sliding row gets a tile of its own). */
#define SWA_N 80

static void swa_logits(zl_model *m, const int32_t *ids, int n, int chunk, float *out) {
    zl_err err = {0};
    zl_kv *kv;
    cr_assert_eq(zl_kv_new(&kv, m->hp.n_layers, 128, m->hp.n_kv_heads * m->hp.head_dim, ZL_TYPE_F32, &err), 0);
    zl_fwd *f = zl_fwd_new();
    zl_batch_tok t[SWA_N];
    for (int b = 0; b < n; b += chunk) {
        int k = n - b < chunk ? n - b : chunk;
        for (int i = 0; i < k; i++) t[i] = (zl_batch_tok){ids[b + i], b + i, 0, 1};
        cr_assert_eq(zl_forward(m, &kv, t, k, out + (size_t)b * m->hp.n_vocab, f, NULL, &err), 0, "%s", err.msg);
    }
    zl_fwd_free(f);
    zl_kv_free(kv);
}

static zl_model *swa_model(int window) {
    zl_err err = {0};
    zl_model *m;
    cr_assert_eq(zl_model_load(&m, MODEL, NULL, &err), 0, "%s", err.msg);
    m->hp.n_swa = window;
    m->hp.rope_base_swa = m->hp.rope_base;
    for (int l = 0; l < m->hp.n_layers; l++) m->layers[l].swa = 1;
    return m;
}

static void swa_ids(int32_t *ids, int salt) {
    for (int i = 0; i < SWA_N; i++) ids[i] = i == 0 ? 1 : 3 + (i * 37 + salt * (i < 41 ? 11 : 0)) % 500;
}

Test(arch, sliding_window_receptive_field) {
    zl_model *m = swa_model(8);
    const int nv = m->hp.n_vocab, reach = m->hp.n_layers * (8 - 1); /* 35 */
    int32_t a[SWA_N], b[SWA_N];
    swa_ids(a, 0);
    swa_ids(b, 1); /* differs from a at positions 1..40 */
    float *la = malloc(sizeof(float) * SWA_N * nv), *lb = malloc(sizeof(float) * SWA_N * nv);
    swa_logits(m, a, SWA_N, SWA_N, la);
    swa_logits(m, b, SWA_N, SWA_N, lb);
    for (int p = 40 + reach + 1; p < SWA_N; p++)
        cr_assert_eq(memcmp(la + (size_t)p * nv, lb + (size_t)p * nv, sizeof(float) * nv), 0,
                     "position %d sees a token more than %d back", p, reach);
    cr_assert_gt(max_diff(la + (size_t)(40 + reach) * nv, lb + (size_t)(40 + reach) * nv, nv), 1e-6,
                 "position %d must still see the token %d back", 40 + reach, reach);
    free(la); free(lb);
    zl_model_free(m);
}

Test(arch, sliding_window_batch_invariant_and_wide_is_global) {
    zl_model *m = swa_model(8), *g = swa_model(1000);
    zl_err err = {0};
    zl_model *plain;
    cr_assert_eq(zl_model_load(&plain, MODEL, NULL, &err), 0, "%s", err.msg);
    const int nv = m->hp.n_vocab;
    int32_t a[SWA_N];
    swa_ids(a, 0);
    float *one = malloc(sizeof(float) * SWA_N * nv), *tok = malloc(sizeof(float) * SWA_N * nv),
          *chunk = malloc(sizeof(float) * SWA_N * nv);
    swa_logits(m, a, SWA_N, SWA_N, one);
    swa_logits(m, a, SWA_N, 1, tok);
    swa_logits(m, a, SWA_N, 13, chunk);
    cr_assert_eq(memcmp(one, tok, sizeof(float) * SWA_N * nv), 0, "prefill vs token by token");
    cr_assert_eq(memcmp(one, chunk, sizeof(float) * SWA_N * nv), 0, "prefill vs chunks of 13");
    swa_logits(g, a, SWA_N, SWA_N, one);
    swa_logits(plain, a, SWA_N, SWA_N, tok);
    cr_assert_eq(memcmp(one, tok, sizeof(float) * SWA_N * nv), 0, "a window wider than the sequence is global");
    free(one); free(tok); free(chunk);
    zl_model_free(m); zl_model_free(g); zl_model_free(plain);
}
