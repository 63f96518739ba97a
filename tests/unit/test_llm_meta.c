/* test_llm_meta.c — the metadata accessors of the public API (zl_llm_meta_*).
 *
 * The embedded model is rewritten with extra keys of every kind (strings,
 * each integer width, bool, f32, f64, numeric and string arrays, an empty
 * string) set to known values, opened as a zl_llm, and every accessor must
 * return exactly those values; absent keys, keys of another kind and indexes
 * past an array's end must give their error codes. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_model_copy.h"
#include "zerolayer.h"

static char g_path[64];
static zl_llm *g_llm;

static void add_keys(zl_gguf_writer *w, void *ctx) {
    (void)ctx;
    cr_assert_eq(zl_gguf_set_str(w, "test.str", "héllo wörld"), 0);
    cr_assert_eq(zl_gguf_set_str(w, "test.empty", ""), 0);
    cr_assert_eq(zl_gguf_set_u32(w, "test.u32", 4000000000u), 0);
    cr_assert_eq(zl_gguf_set_i32(w, "test.i32", -123456), 0);
    cr_assert_eq(zl_gguf_set_u64(w, "test.u64", 1ull << 40), 0);
    cr_assert_eq(zl_gguf_set_u64(w, "test.u64_huge", UINT64_MAX), 0);
    cr_assert_eq(zl_gguf_set_bool(w, "test.bool", true), 0);
    cr_assert_eq(zl_gguf_set_f32(w, "test.f32", 0.1f), 0);
    const double f64 = 1.0 / 3.0;
    cr_assert_eq(zl_gguf_set_arr(w, "test.f64_one", ZL_GGUF_F64, &f64, 1), 0);
    const int16_t i16[] = {-7, 0, 32767};
    cr_assert_eq(zl_gguf_set_arr(w, "test.i16s", ZL_GGUF_I16, i16, 3), 0);
    const zl_str strs[] = {{"a", 1}, {"", 0}, {"ccc", 3}};
    cr_assert_eq(zl_gguf_set_arr_str(w, "test.strs", strs, 3), 0);
}

static void setup(void) {
    snprintf(g_path, sizeof g_path, "/tmp/zl_test_meta_%d.gguf", (int)getpid());
    copy_model(ZL_ROOT "/models/stories260K.gguf", g_path, add_keys, NULL);
    zl_err err = {0};
    zl_llm_opts lo = {.n_threads = 1};
    cr_assert_eq(zl_llm_open(&g_llm, g_path, &lo, &err), 0, "%s", err.msg);
}

static void teardown(void) {
    zl_llm_close(g_llm);
    remove(g_path);
}

TestSuite(llm_meta, .init = setup, .fini = teardown);

static int str_is(const char *key, const char *want) {
    const char *s = NULL;
    size_t n = 0;
    if (zl_llm_meta_str(g_llm, key, &s, &n)) return 0;
    return n == strlen(want) && !memcmp(s, want, n);
}

Test(llm_meta, strings) {
    cr_expect(str_is("general.architecture", "llama"));
    cr_expect(str_is("test.str", "héllo wörld"));
    cr_expect(str_is("test.empty", ""));
    const char *s;
    size_t n;
    cr_expect_eq(zl_llm_meta_str(g_llm, "test.absent", &s, &n), ZL_EINVAL);
    cr_expect_eq(zl_llm_meta_str(g_llm, "test.u32", &s, &n), ZL_EINVAL, "an integer is not a string");
}

Test(llm_meta, integers) {
    int64_t v;
    const struct { const char *key; int64_t want; } ok[] = {
        {"test.u32", 4000000000ll}, {"test.i32", -123456}, {"test.u64", 1ll << 40}, {"test.bool", 1}};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        cr_assert_eq(zl_llm_meta_int(g_llm, ok[i].key, &v), 0, "%s", ok[i].key);
        cr_expect_eq(v, ok[i].want, "%s", ok[i].key);
    }
    cr_expect_eq(zl_llm_meta_int(g_llm, "test.u64_huge", &v), ZL_EINVAL, "does not fit int64");
    cr_expect_eq(zl_llm_meta_int(g_llm, "test.f32", &v), ZL_EINVAL, "a float is not an integer");
    cr_expect_eq(zl_llm_meta_int(g_llm, "test.str", &v), ZL_EINVAL);
    cr_expect_eq(zl_llm_meta_int(g_llm, "test.absent", &v), ZL_EINVAL);
    /* the model's own hyper-parameters read as the engine reads them */
    cr_assert_eq(zl_llm_meta_int(g_llm, "llama.context_length", &v), 0);
    cr_expect_eq(v, zl_llm_n_ctx_train(g_llm));
}

Test(llm_meta, floats) {
    double d;
    cr_assert_eq(zl_llm_meta_float(g_llm, "test.f32", &d), 0);
    cr_expect_eq(d, (double)0.1f, "f32 widened exactly");
    cr_assert_eq(zl_llm_meta_float(g_llm, "test.i32", &d), 0);
    cr_expect_eq(d, -123456.0);
    cr_assert_eq(zl_llm_meta_float(g_llm, "test.u64_huge", &d), 0);
    cr_expect_eq(d, (double)UINT64_MAX);
    cr_expect_eq(zl_llm_meta_float(g_llm, "test.str", &d), ZL_EINVAL);
    cr_expect_eq(zl_llm_meta_float(g_llm, "test.i16s", &d), ZL_EINVAL, "an array is not a float");
}

Test(llm_meta, arrays) {
    size_t n;
    double d;
    const char *s;
    size_t len;
    cr_assert_eq(zl_llm_meta_arr_len(g_llm, "test.i16s", &n), 0);
    cr_expect_eq(n, 3);
    const double want[] = {-7, 0, 32767};
    for (size_t i = 0; i < 3; i++) {
        cr_assert_eq(zl_llm_meta_arr_num(g_llm, "test.i16s", i, &d), 0);
        cr_expect_eq(d, want[i]);
    }
    cr_expect_eq(zl_llm_meta_arr_num(g_llm, "test.i16s", 3, &d), ZL_ERANGE);
    cr_assert_eq(zl_llm_meta_arr_num(g_llm, "test.f64_one", 0, &d), 0);
    cr_expect_eq(d, 1.0 / 3.0);
    cr_assert_eq(zl_llm_meta_arr_len(g_llm, "test.strs", &n), 0);
    cr_expect_eq(n, 3);
    const char *ws[] = {"a", "", "ccc"};
    for (size_t i = 0; i < 3; i++) {
        cr_assert_eq(zl_llm_meta_arr_str(g_llm, "test.strs", i, &s, &len), 0);
        cr_expect(len == strlen(ws[i]) && !memcmp(s, ws[i], len), "element %zu", i);
    }
    cr_expect_eq(zl_llm_meta_arr_str(g_llm, "test.strs", 3, &s, &len), ZL_ERANGE);
    cr_expect_eq(zl_llm_meta_arr_str(g_llm, "test.i16s", 0, &s, &len), ZL_EINVAL, "numbers are not strings");
    cr_expect_eq(zl_llm_meta_arr_num(g_llm, "test.strs", 0, &d), ZL_EINVAL, "strings are not numbers");
    cr_expect_eq(zl_llm_meta_arr_len(g_llm, "test.str", &n), ZL_EINVAL, "a string is not an array");
    /* the vocabulary: one entry per token */
    cr_assert_eq(zl_llm_meta_arr_len(g_llm, "tokenizer.ggml.tokens", &n), 0);
    cr_expect_eq(n, (size_t)zl_llm_n_vocab(g_llm));
}
