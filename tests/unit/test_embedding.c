/* test_embedding.c — hidden states and pooled embeddings on stories260K.
 *  - the hidden state is what the output matrix turns into logits: the
 *    file's output.weight (read here from the GGUF, F32) times each token's
 *    hidden state reproduces zl_seq_eval's logits;
 *  - mean / cls / last pooling and the L2 normalisation, recomputed here in
 *    double from those hidden states;
 *  - an input's vector is bit-identical alone, batched with others and split
 *    over steps of any size;
 *  - bad inputs are errors, not crashes;
 *  - <arch>.pooling_type of a file (stories260K rewritten with each value). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "zerolayer.h"

#define STORIES ZL_ROOT "/tests/fixtures/models/stories260K.gguf"

static zl_llm *open_llm(void) {
    zl_err err = {0};
    zl_llm_opts lo = {1, 0, 0, 0, -1, 0, NULL};
    zl_llm *llm;
    cr_assert_eq(zl_llm_open(&llm, STORIES, &lo, &err), 0, "%s", err.msg);
    return llm;
}

static int32_t *tokens(zl_llm *llm, const char *text, int *n) {
    zl_err err = {0};
    int32_t *ids;
    size_t k;
    cr_assert_eq(zl_llm_tokenize(llm, text, strlen(text), 1, 0, &ids, &k, &err), 0, "%s", err.msg);
    *n = (int)k;
    return ids;
}

static float *hidden_of(zl_llm *llm, const int32_t *ids, int n, int batch) {
    zl_err err = {0};
    zl_seq_opts so = {n, ZL_KV_F16, zl_sampling_defaults()};
    zl_seq *s;
    cr_assert_eq(zl_seq_new(&s, llm, &so, &err), 0, "%s", err.msg);
    float *h = malloc((size_t)n * zl_llm_n_embd(llm) * sizeof *h);
    cr_assert_eq(zl_seq_eval_hidden(s, ids, n, batch, h, &err), 0, "%s", err.msg);
    cr_assert_null(zl_seq_logits(s), "no logits after a hidden-state pass");
    cr_assert_eq(zl_seq_n_past(s), n);
    zl_seq_free(s);
    return h;
}

Test(embedding, hidden_state_times_output_matrix_is_the_logits) {
    zl_llm *llm = open_llm();
    zl_err err = {0};
    int n, dim = zl_llm_n_embd(llm), nv = zl_llm_n_vocab(llm);
    int32_t *ids = tokens(llm, "Once upon a time there was a little girl", &n);
    float *h = hidden_of(llm, ids, n, 4);
    zl_seq_opts so = {n, ZL_KV_F16, zl_sampling_defaults()};
    zl_seq *s;
    cr_assert_eq(zl_seq_new(&s, llm, &so, &err), 0, "%s", err.msg);
    float *logits = malloc((size_t)n * nv * sizeof *logits);
    cr_assert_eq(zl_seq_eval(s, ids, n, 4, logits, &err), 0, "%s", err.msg);
    zl_gguf *g;
    cr_assert_eq(zl_gguf_open(&g, STORIES, NULL, &err), 0, "%s", err.msg);
    const zl_gguf_tensor *w = zl_gguf_find_tensor(g, "output.weight");
    cr_assert(w && w->type == 0 /* F32 */ && w->ne[0] == dim && w->ne[1] == nv);
    double worst = 0;
    for (int t = 0; t < n; t++)
        for (int v = 0; v < nv; v++) {
            const float *row = (const float *)w->data + (size_t)v * dim;
            double z = 0;
            for (int d = 0; d < dim; d++) z += (double)row[d] * h[(size_t)t * dim + d];
            double diff = fabs(z - logits[(size_t)t * nv + v]);
            if (diff > worst) worst = diff;
        }
    cr_assert_lt(worst, 1e-3, "W * hidden differs from the logits by %g", worst);
    zl_gguf_close(g);
    zl_seq_free(s);
    free(logits);
    free(h);
    free(ids);
    zl_llm_close(llm);
}

static void expect_pooled(const float *h, int n, int dim, zl_pooling p, const float *got) {
    double *ref = calloc((size_t)dim, sizeof *ref), ss = 0;
    for (int t = 0; t < n; t++) {
        if ((p == ZL_POOL_CLS && t) || (p == ZL_POOL_LAST && t != n - 1)) continue;
        for (int d = 0; d < dim; d++) ref[d] += h[(size_t)t * dim + d];
    }
    for (int d = 0; d < dim; d++) ss += ref[d] * ref[d];
    double norm = 0;
    for (int d = 0; d < dim; d++) {
        cr_assert_float_eq(got[d], ref[d] / sqrt(ss), 1e-6, "%s pooling, dim %d: %g vs %g", zl_pooling_name(p), d,
                           got[d], ref[d] / sqrt(ss));
        norm += (double)got[d] * got[d];
    }
    cr_assert_float_eq(norm, 1.0, 1e-5, "unit length");
    free(ref);
}

Test(embedding, pooling_and_normalisation) {
    zl_llm *llm = open_llm();
    zl_err err = {0};
    int n, dim = zl_llm_n_embd(llm);
    int32_t *ids = tokens(llm, "The cat sat on the mat. The dog sat on the log.", &n);
    float *h = hidden_of(llm, ids, n, 64);
    float *v = malloc((size_t)dim * sizeof *v);
    zl_pooling ps[] = {ZL_POOL_MEAN, ZL_POOL_CLS, ZL_POOL_LAST};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(zl_llm_embed(llm, ids, n, ps[i], v, &err), 0, "%s", err.msg);
        expect_pooled(h, n, dim, ps[i], v);
    }
    cr_assert_eq(zl_llm_pooling(llm), -1, "stories260K names no pooling");
    free(v);
    free(h);
    free(ids);
    zl_llm_close(llm);
}

Test(embedding, same_vector_alone_batched_and_split) {
    zl_llm *llm = open_llm();
    zl_err err = {0};
    int dim = zl_llm_n_embd(llm);
    const char *texts[] = {"Lily and Ben went to the park.", "Tom had a red ball.",
                           "One day, a little bird flew to a big tree and sang a song to the sun.", "Hi"};
    enum { NT = 4 };
    int32_t *ids[NT];
    int n[NT];
    for (int i = 0; i < NT; i++) ids[i] = tokens(llm, texts[i], &n[i]);
    float alone[NT][64];
    cr_assert_leq(dim, 64);
    for (int i = 0; i < NT; i++) cr_assert_eq(zl_llm_embed(llm, ids[i], n[i], ZL_POOL_MEAN, alone[i], &err), 0, "%s", err.msg);
    int steps_sizes[] = {1, 3, 7, 16, 256};
    for (int k = 0; k < 5; k++) {
        /* all four, in reverse order, with the first repeated */
        const int32_t *in[NT + 1];
        int nn[NT + 1], which[NT + 1];
        for (int i = 0; i < NT; i++) { in[i] = ids[NT - 1 - i]; nn[i] = n[NT - 1 - i]; which[i] = NT - 1 - i; }
        in[NT] = ids[NT - 1]; nn[NT] = n[NT - 1]; which[NT] = NT - 1;
        zl_embedder *e;
        cr_assert_eq(zl_embedder_new(&e, llm, in, nn, NT + 1, ZL_POOL_MEAN, &err), 0, "%s", err.msg);
        int done = 0, steps = 0;
        while (!done) {
            cr_assert_eq(zl_embedder_step(e, steps_sizes[k], &done, &err), 0, "%s", err.msg);
            steps++;
        }
        for (int i = 0; i < NT + 1; i++) {
            const float *v = zl_embedder_vector(e, i);
            cr_assert_not_null(v);
            cr_assert(memcmp(v, alone[which[i]], (size_t)dim * sizeof *v) == 0,
                      "step size %d: input %d differs from its vector alone", steps_sizes[k], i);
        }
        int total = 0;
        for (int i = 0; i < NT + 1; i++) total += nn[i];
        cr_assert_eq(steps, (total + steps_sizes[k] - 1) / steps_sizes[k], "steps are full: %d", steps);
        zl_embedder_free(e);
    }
    /* different texts, different vectors */
    cr_assert(memcmp(alone[0], alone[1], (size_t)dim * sizeof(float)) != 0);
    for (int i = 0; i < NT; i++) free(ids[i]);
    zl_llm_close(llm);
}

Test(embedding, bad_inputs_are_errors) {
    zl_llm *llm = open_llm();
    zl_err err = {0};
    zl_embedder *e = NULL;
    int32_t ok[2] = {1, 2}, bad[2] = {1, 1 << 20};
    const int32_t *in[1] = {bad};
    int n[1] = {2};
    cr_assert_neq(zl_embedder_new(&e, llm, in, n, 1, ZL_POOL_MEAN, &err), 0);
    cr_assert(strstr(err.msg, "out of range"), "%s", err.msg);
    cr_assert_null(e);
    in[0] = ok;
    n[0] = 0;
    cr_assert_neq(zl_embedder_new(&e, llm, in, n, 1, ZL_POOL_MEAN, &err), 0);
    cr_assert(strstr(err.msg, "empty"), "%s", err.msg);
    cr_assert_neq(zl_embedder_new(&e, llm, in, n, 0, ZL_POOL_MEAN, &err), 0);
    n[0] = 2;
    cr_assert_neq(zl_embedder_new(&e, llm, in, n, 1, (zl_pooling)7, &err), 0);
    zl_llm_close(llm);
}

/* stories260K rewritten with llama.pooling_type = v (every other key and tensor copied) */
static void write_with_pooling(const char *path, uint32_t v) {
    zl_err err = {0};
    zl_gguf *g;
    cr_assert_eq(zl_gguf_open(&g, STORIES, NULL, &err), 0, "%s", err.msg);
    zl_gguf_writer *w = zl_gguf_writer_new();
    for (uint64_t i = 0; i < g->n_kv; i++) cr_assert_eq(zl_gguf_copy_kv(w, &g->kv[i]), 0);
    cr_assert_eq(zl_gguf_set_u32(w, "llama.pooling_type", v), 0);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const zl_gguf_tensor *t = &g->tensors[i];
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        cr_assert_eq(zl_gguf_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data, t->nbytes), 0);
    }
    cr_assert_eq(zl_gguf_write(w, path, &err), 0, "%s", err.msg);
    zl_gguf_writer_free(w);
    zl_gguf_close(g);
}

Test(embedding, pooling_type_from_the_file) {
    /* llama.cpp's numbering: 0 none, 1 mean, 2 cls, 3 last, 4 rank */
    int want[5] = {-1, ZL_POOL_MEAN, ZL_POOL_CLS, ZL_POOL_LAST, -1};
    char path[64];
    snprintf(path, sizeof path, "/tmp/zl_test_pooling_%d.gguf", (int)getpid());
    for (uint32_t v = 0; v < 5; v++) {
        write_with_pooling(path, v);
        zl_err err = {0};
        zl_llm_opts lo = {1, 0, 0, 0, -1, 0, NULL};
        zl_llm *llm;
        cr_assert_eq(zl_llm_open(&llm, path, &lo, &err), 0, "%s", err.msg);
        cr_assert_eq(zl_llm_pooling(llm), want[v], "pooling_type %u -> %d, not %d", v, zl_llm_pooling(llm), want[v]);
        zl_llm_close(llm);
    }
    unlink(path);
}
