/* test_gguf_counts.c — the model loader checks every count of a GGUF against
 * the file before it allocates by it.
 *
 * Files are rewritten from the bundled stories260K (five layers) with one
 * count changed: block_count far beyond the tensor table (the 67,108,865 of
 * issue 21, and the largest value the metadata reader accepts), a layer
 * missing or extra, heads x head size overflowing an int.  Each must fail
 * with a message naming the count, through zl_model_load and through the
 * public zl_llm_open, and no single allocation during the load may exceed
 * the file's size: malloc, calloc, realloc and aligned_alloc are wrapped at
 * link time (-Wl,--wrap, tests/CMakeLists.txt), refuse any request over
 * ZL_TEST_ALLOC_CAP and record the largest one, so a count trusted before it
 * is checked shows up as an oversized request and not as 20 GiB of RAM. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "model/model.h"
#include "zerolayer.h"

#define ZL_TMP_TAG "gguf_counts"
#include "test_files.h"

#define STORIES ZL_ROOT "/tests/fixtures/models/stories260K.gguf"

/* ---- allocation accounting (the library's calls come here) ---- */

#define ZL_TEST_ALLOC_CAP ((size_t)64 << 20)
static size_t largest, refused;

void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t a, size_t n);

static int admit(size_t n) {
    if (n > largest) largest = n;
    if (n > ZL_TEST_ALLOC_CAP) { refused++; return 0; }
    return 1;
}
void *__wrap_malloc(size_t n) { return admit(n) ? __real_malloc(n) : NULL; }
void *__wrap_realloc(void *p, size_t n) { return admit(n) ? __real_realloc(p, n) : NULL; }
void *__wrap_aligned_alloc(size_t a, size_t n) { return admit(n) ? __real_aligned_alloc(a, n) : NULL; }
void *__wrap_calloc(size_t k, size_t n) {
    size_t t;
    if (__builtin_mul_overflow(k, n, &t)) t = SIZE_MAX;
    return admit(t) ? __real_calloc(k, n) : NULL;
}

/* ---- rewritten models ---- */

typedef struct {
    const char *key;  /* a u32 metadata key to set (or NULL) */
    uint32_t value;
    int drop_layer;   /* blk.N.* tensors to leave out, or -1 */
    int dup_layer_as; /* copy blk.0.* as blk.N.*, or -1 */
} edit;

static const char *rewrite(const char *name, edit e) {
    zl_gguf *g;
    zl_err err = {0};
    cr_assert_eq(zl_gguf_open(&g, STORIES, NULL, &err), 0, "%s", err.msg);
    zl_gguf_writer *w = zl_gguf_writer_new();
    for (uint64_t i = 0; i < g->n_kv; i++) cr_assert_eq(zl_gguf_copy_kv(w, &g->kv[i]), 0);
    if (e.key) cr_assert_eq(zl_gguf_set_u32(w, e.key, e.value), 0);
    char nm[128], drop[32] = "", dup[160];
    if (e.drop_layer >= 0) snprintf(drop, sizeof drop, "blk.%d.", e.drop_layer);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const zl_gguf_tensor *t = &g->tensors[i];
        zl_str_copy(t->name, nm, sizeof nm);
        if (drop[0] && !strncmp(nm, drop, strlen(drop))) continue;
        cr_assert_eq(zl_gguf_add_tensor(w, nm, t->type, t->n_dims, t->ne, t->data, t->nbytes), 0);
        if (e.dup_layer_as >= 0 && !strncmp(nm, "blk.0.", 6)) {
            snprintf(dup, sizeof dup, "blk.%d.%s", e.dup_layer_as, nm + 6);
            cr_assert_eq(zl_gguf_add_tensor(w, dup, t->type, t->n_dims, t->ne, t->data, t->nbytes), 0);
        }
    }
    const char *out = tmp_path(name);
    cr_assert_eq(zl_gguf_write(w, out, &err), 0, "%s", err.msg);
    zl_gguf_writer_free(w);
    zl_gguf_close(g);
    return out;
}

static size_t file_size(const char *path) {
    FILE *f = fopen(path, "rb");
    cr_assert(f);
    fseek(f, 0, SEEK_END);
    size_t n = (size_t)ftell(f);
    fclose(f);
    return n;
}

/* Load through the model binder and the public API; both must fail with
 * `want` in the message, and no request may be larger than the file. */
static void expect_rejected(const char *path, const char *want) {
    size_t size = file_size(path);
    zl_err err = {0};
    zl_model *m = NULL;
    largest = refused = 0;
    cr_assert_neq(zl_model_load(&m, path, NULL, &err), 0, "%s loaded", path);
    cr_assert(strstr(err.msg, want), "expected '%s' in: %s", want, err.msg);
    cr_assert_eq(refused, 0, "the loader asked for %zu bytes (file: %zu)", largest, size);
    cr_assert_leq(largest, size, "the loader asked for %zu bytes in one request (file: %zu)", largest, size);

    zl_llm *llm = NULL;
    zl_llm_opts o = {.n_threads = 1};
    memset(&err, 0, sizeof err);
    largest = refused = 0;
    cr_assert_neq(zl_llm_open(&llm, path, &o, &err), 0, "%s opened", path);
    cr_assert(strstr(err.msg, want), "expected '%s' in: %s", want, err.msg);
    cr_assert_eq(refused, 0, "zl_llm_open asked for %zu bytes (file: %zu)", largest, size);
    cr_assert_leq(largest, size, "zl_llm_open asked for %zu bytes in one request (file: %zu)", largest, size);
}

TestSuite(gguf_counts, .init = make_tmp_dir, .fini = rm_tmp_dir);

Test(gguf_counts, the_unmodified_model_loads_within_the_bound) {
    const char *p = rewrite("same.gguf", (edit){NULL, 0, -1, -1});
    zl_err err = {0};
    zl_model *m = NULL;
    largest = refused = 0;
    cr_assert_eq(zl_model_load(&m, p, NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(m->hp.n_layers, 5);
    cr_assert_eq(refused, 0);
    cr_assert_leq(largest, file_size(p));
    zl_model_free(m);
}

Test(gguf_counts, block_count_beyond_the_tensor_table_is_refused_before_allocating) {
    expect_rejected(rewrite("bc_issue21.gguf", (edit){"llama.block_count", 67108865, -1, -1}),
                    "llama.block_count is 67108865 but the tensor table holds 5 layers (blk.0 .. blk.4)");
    expect_rejected(rewrite("bc_max.gguf", (edit){"llama.block_count", 1u << 30, -1, -1}),
                    "llama.block_count is 1073741824 but the tensor table holds 5 layers");
    expect_rejected(rewrite("bc_six.gguf", (edit){"llama.block_count", 6, -1, -1}),
                    "llama.block_count is 6 but the tensor table holds 5 layers");
}

Test(gguf_counts, a_missing_or_extra_layer_is_named) {
    /* the top layer left out: four layers for a count of five */
    expect_rejected(rewrite("drop4.gguf", (edit){NULL, 0, 4, -1}),
                    "llama.block_count is 5 but the tensor table holds 4 layers (blk.0 .. blk.3)");
    /* a sixth layer the count does not mention */
    expect_rejected(rewrite("extra5.gguf", (edit){NULL, 0, -1, 5}),
                    "llama.block_count is 5 but the tensor table holds 6 layers (blk.0 .. blk.5)");
    /* a layer in the middle left out: the binding names its first tensor */
    expect_rejected(rewrite("drop2.gguf", (edit){NULL, 0, 2, -1}), "missing tensor blk.2.attn_norm.weight");
}

Test(gguf_counts, heads_times_head_size_must_fit_before_binding) {
    expect_rejected(rewrite("kl.gguf", (edit){"llama.attention.key_length", 1u << 30, -1, -1}),
                    "head dimension 1073741824 exceeds");
    expect_rejected(rewrite("heads.gguf", (edit){"llama.attention.head_count", 1u << 30, -1, -1}),
                    "is not a multiple of head_count");
}
