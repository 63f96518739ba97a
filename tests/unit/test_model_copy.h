/* test_model_copy.h — a model file rewritten with changed metadata, for
 * Criterion tests that need a loadable model with keys of their choosing:
 * copy_model(src, dst, edit, ctx) copies every key and tensor of src to dst
 * through the GGUF writer, calling edit(w, ctx) after the keys are copied
 * (its setters replace a copied key or add a new one).  Fails the test on
 * any error. */
#ifndef ZL_TEST_MODEL_COPY_H
#define ZL_TEST_MODEL_COPY_H

#include <criterion/criterion.h>

#include "gguf/gguf.h"

static void copy_model(const char *src, const char *dst, void (*edit)(zl_gguf_writer *w, void *ctx), void *ctx) {
    zl_err err = {0};
    zl_gguf *g = NULL;
    cr_assert_eq(zl_gguf_open(&g, src, NULL, &err), 0, "%s", err.msg);
    zl_gguf_writer *w = zl_gguf_writer_new();
    cr_assert(w);
    for (uint64_t i = 0; i < g->n_kv; i++) cr_assert_eq(zl_gguf_copy_kv(w, &g->kv[i]), 0);
    if (edit) edit(w, ctx);
    char nm[128];
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const zl_gguf_tensor *t = &g->tensors[i];
        cr_assert_eq(zl_gguf_add_tensor(w, zl_str_copy(t->name, nm, sizeof nm), t->type, t->n_dims, t->ne, t->data,
                                        t->nbytes),
                     0);
    }
    cr_assert_eq(zl_gguf_write(w, dst, &err), 0, "%s", err.msg);
    zl_gguf_writer_free(w);
    zl_gguf_close(g);
}

#endif
