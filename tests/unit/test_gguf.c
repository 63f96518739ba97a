/* test_gguf.c — the GGUF reader and writer, and everything above them, on
 * good and hostile files.
 *
 * Round trips: every metadata value type (scalars, arrays of each element
 * type, string arrays with empty strings) and tensors of several types and
 * odd sizes through zl_gguf_write and through the writer's streaming calls
 * (whose output must be byte-identical).  Hostile input: a small valid file truncated at every
 * byte, thousands of seeded random byte flips, and hand-built headers with
 * absurd counts and lengths, bad magic/version, bad dimensions, types,
 * offsets and duplicates; each targeted case must fail with its own message.
 * Corrupted copies of a real model are also bound as a model, given to the
 * tokenizer, run through one forward step, and (for a subset) opened through
 * the public API from a file, so no layer above the parser can crash on what
 * the parser lets through.  Every buffer handed to the parser is exactly the
 * file's size, so ASan sees any read past the end. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "model/model.h"
#include "tensor/types.h"
#include "tokenizer/vocab.h"
#include "zerolayer.h"

#define STORIES ZL_ROOT "/tests/fixtures/models/stories260K.gguf"

/* ---- helpers ---- */

typedef struct { uint8_t *p; size_t n, cap; } bytes;

static void put(bytes *b, const void *v, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        cr_assert(b->p);
    }
    memcpy(b->p + b->n, v, n);
    b->n += n;
}
static void put_u32(bytes *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(bytes *b, uint64_t v) { put(b, &v, 8); }
static void put_str(bytes *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void put_pad(bytes *b, size_t align) {
    static const uint8_t z[64];
    put(b, z, (align - b->n % align) % align);
}
/* GGUF header start: magic, version, counts. */
static void put_head(bytes *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    put(b, "GGUF", 4);
    put_u32(b, version);
    put_u64(b, n_tensors);
    put_u64(b, n_kv);
}
static void put_tinfo(bytes *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t off) {
    put_str(b, name);
    put_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) put_u64(b, ne[d]);
    put_u32(b, type);
    put_u64(b, off);
}

#define ZL_TMP_TAG "gguf"
#include "test_files.h"

static uint8_t *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(sz > 0 ? (size_t)sz : 1);
    *n = fread(p, 1, (size_t)sz, f);
    fclose(f);
    return p;
}

static void write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite(p, 1, n, f), n);
    fclose(f);
}

/* Parse a copy of exactly n bytes; returns the error code, message in *err. */
static int parse_copy(const uint8_t *p, size_t n, zl_err *err) {
    uint8_t *c = malloc(n ? n : 1);
    memcpy(c, p, n);
    zl_gguf *g = NULL;
    memset(err, 0, sizeof *err);
    int rc = zl_gguf_open_mem(&g, c, n, err);
    if (!rc) zl_gguf_close(g);
    free(c);
    return rc;
}

static void expect_error(const bytes *b, const char *substr) {
    zl_err err;
    int rc = parse_copy(b->p, b->n, &err);
    cr_assert_neq(rc, 0, "expected an error containing '%s'", substr);
    cr_assert(strstr(err.msg, substr), "error '%s' does not mention '%s'", err.msg, substr);
}

/* ---- round trips ---- */

static const float k_f32[7] = {1.5f, -2.25f, 0, 3e-8f, -1e30f, 42, 0.125f};

/* A writer with one kv of each settable kind and four tensors of odd sizes. */
static zl_gguf_writer *sample_writer(uint16_t *f16data, zl_block_q8_0 *q8, float *row) {
    zl_gguf_writer *w = zl_gguf_writer_new();
    cr_assert(w);
    cr_assert_eq(zl_gguf_set_u32(w, "t.u32", 0xdeadbeefu), 0);
    cr_assert_eq(zl_gguf_set_i32(w, "t.i32", -123456), 0);
    cr_assert_eq(zl_gguf_set_u64(w, "t.u64", 0x0123456789abcdefull), 0);
    cr_assert_eq(zl_gguf_set_f32(w, "t.f32", -0.75f), 0);
    cr_assert_eq(zl_gguf_set_bool(w, "t.bool", true), 0);
    cr_assert_eq(zl_gguf_set_str(w, "t.str", "héllo wörld"), 0);
    cr_assert_eq(zl_gguf_set_str(w, "t.empty", ""), 0);
    uint8_t u8[3] = {0, 7, 255};
    int8_t i8[3] = {-128, 0, 127};
    uint16_t u16[2] = {1, 65535};
    int16_t i16[2] = {-32768, 32767};
    uint32_t u32[2] = {0, 4000000000u};
    int32_t i32[2] = {INT32_MIN, INT32_MAX};
    uint64_t u64[2] = {0, UINT64_MAX};
    int64_t i64[2] = {INT64_MIN, INT64_MAX};
    double f64[2] = {3.141592653589793, -1e300};
    uint8_t bl[2] = {1, 0};
    cr_assert_eq(zl_gguf_set_arr(w, "a.u8", ZL_GGUF_U8, u8, 3), 0);
    cr_assert_eq(zl_gguf_set_arr(w, "a.i8", ZL_GGUF_I8, i8, 3), 0);
    cr_assert_eq(zl_gguf_set_arr(w, "a.u16", ZL_GGUF_U16, u16, 2), 0);
    cr_assert_eq(zl_gguf_set_arr(w, "a.i16", ZL_GGUF_I16, i16, 2), 0);
    cr_assert_eq(zl_gguf_set_arr(w, "a.u32", ZL_GGUF_U32, u32, 2), 0);
    cr_assert_eq(zl_gguf_set_arr(w, "a.i32", ZL_GGUF_I32, i32, 2), 0);
    cr_assert_eq(zl_gguf_set_arr(w, "a.f32", ZL_GGUF_F32, k_f32, 7), 0);
    cr_assert_eq(zl_gguf_set_arr(w, "a.bool", ZL_GGUF_BOOL, bl, 2), 0);
    cr_assert_eq(zl_gguf_set_arr(w, "a.u64", ZL_GGUF_U64, u64, 2), 0);
    cr_assert_eq(zl_gguf_set_arr(w, "a.i64", ZL_GGUF_I64, i64, 2), 0);
    cr_assert_eq(zl_gguf_set_arr(w, "a.f64", ZL_GGUF_F64, f64, 2), 0);
    cr_assert_eq(zl_gguf_set_arr(w, "a.empty", ZL_GGUF_U32, NULL, 0), 0);
    zl_str strs[4] = {{"alpha", 5}, {"", 0}, {"\xe2\x96\x81x", 4}, {"z", 1}};
    cr_assert_eq(zl_gguf_set_arr_str(w, "a.str", strs, 4), 0);
    cr_assert_eq(zl_gguf_set_arr(w, "a.none", ZL_GGUF_STRING, NULL, 0), ZL_EINVAL);
    /* a later set replaces the earlier value */
    cr_assert_eq(zl_gguf_set_u32(w, "t.replaced", 1), 0);
    cr_assert_eq(zl_gguf_set_str(w, "t.replaced", "second"), 0);

    for (int i = 0; i < 64; i++) f16data[i] = zl_f32_to_f16((float)i - 31.5f);
    for (int i = 0; i < 64; i++) row[i] = (float)((i * 37) % 19) - 9.0f;
    cr_assert_eq(zl_quantize_row(ZL_TYPE_Q8_0, row, q8, 64), 2 * sizeof(zl_block_q8_0));
    int64_t ne1[1] = {7}, ne2[2] = {32, 2}, ne3[2] = {64, 1}, ne4[3] = {1, 3, 1};
    cr_assert_eq(zl_gguf_add_tensor(w, "v.f32", ZL_TYPE_F32, 1, ne1, k_f32, sizeof k_f32), 0);
    cr_assert_eq(zl_gguf_add_tensor(w, "m.f16", ZL_TYPE_F16, 2, ne2, f16data, 128), 0);
    cr_assert_eq(zl_gguf_add_tensor(w, "m.q8_0", ZL_TYPE_Q8_0, 2, ne3, q8, 68), 0);
    cr_assert_eq(zl_gguf_add_tensor(w, "c.f32", ZL_TYPE_F32, 3, ne4, k_f32, 12), 0);
    return w;
}

static void check_sample(const zl_gguf *g, const zl_block_q8_0 *q8, const uint16_t *f16data) {
    cr_assert_eq(g->version, 3);
    cr_assert_eq(g->n_tensors, 4);
    uint32_t u32;
    uint64_t u64;
    int64_t i64;
    float f;
    bool bv;
    zl_str s;
    cr_assert_eq(zl_gguf_get_u32(g, "t.u32", &u32), 0);
    cr_assert_eq(u32, 0xdeadbeefu);
    cr_assert_eq(zl_gguf_get_i64(g, "t.i32", &i64), 0);
    cr_assert_eq(i64, -123456);
    cr_assert_eq(zl_gguf_get_u64(g, "t.u64", &u64), 0);
    cr_assert_eq(u64, 0x0123456789abcdefull);
    cr_assert_eq(zl_gguf_get_u32(g, "t.u64", &u32), ZL_EINVAL, "u64 too large for u32 must not convert");
    cr_assert_eq(zl_gguf_get_f32(g, "t.f32", &f), 0);
    cr_assert_eq(f, -0.75f);
    cr_assert_eq(zl_gguf_get_bool(g, "t.bool", &bv), 0);
    cr_assert(bv);
    cr_assert_eq(zl_gguf_get_str(g, "t.str", &s), 0);
    cr_assert(zl_str_eq(s, "héllo wörld"));
    cr_assert_eq(zl_gguf_get_str(g, "t.empty", &s), 0);
    cr_assert_eq(s.len, 0);
    cr_assert_eq(zl_gguf_get_str(g, "t.replaced", &s), 0);
    cr_assert(zl_str_eq(s, "second"));
    cr_assert_null(zl_gguf_find(g, "t.absent"));

    const zl_gguf_kv *kv = zl_gguf_get_arr(g, "a.u8", ZL_GGUF_U8);
    cr_assert(kv && kv->v.arr.n == 3 && zl_gguf_arr_i64(kv, 2) == 255);
    kv = zl_gguf_get_arr(g, "a.i8", ZL_GGUF_I8);
    cr_assert(kv && zl_gguf_arr_i64(kv, 0) == -128 && zl_gguf_arr_i64(kv, 2) == 127);
    kv = zl_gguf_get_arr(g, "a.u16", ZL_GGUF_U16);
    cr_assert(kv && zl_gguf_arr_i64(kv, 1) == 65535);
    kv = zl_gguf_get_arr(g, "a.i16", ZL_GGUF_I16);
    cr_assert(kv && zl_gguf_arr_i64(kv, 0) == -32768);
    kv = zl_gguf_get_arr(g, "a.u32", ZL_GGUF_U32);
    cr_assert(kv && zl_gguf_arr_i64(kv, 1) == 4000000000ll);
    kv = zl_gguf_get_arr(g, "a.i32", ZL_GGUF_I32);
    cr_assert(kv && zl_gguf_arr_i64(kv, 0) == INT32_MIN && zl_gguf_arr_i64(kv, 1) == INT32_MAX);
    kv = zl_gguf_get_arr(g, "a.f32", ZL_GGUF_F32);
    cr_assert(kv && kv->v.arr.n == 7);
    for (int i = 0; i < 7; i++) cr_assert_eq((float)zl_gguf_arr_f64(kv, (uint64_t)i), k_f32[i]);
    kv = zl_gguf_get_arr(g, "a.bool", ZL_GGUF_BOOL);
    cr_assert(kv && zl_gguf_arr_i64(kv, 0) == 1 && zl_gguf_arr_i64(kv, 1) == 0);
    kv = zl_gguf_get_arr(g, "a.u64", ZL_GGUF_U64);
    cr_assert(kv && kv->v.arr.n == 2);
    uint64_t big;
    memcpy(&big, (const uint8_t *)kv->v.arr.data + 8, 8);
    cr_assert_eq(big, UINT64_MAX);
    kv = zl_gguf_get_arr(g, "a.i64", ZL_GGUF_I64);
    cr_assert(kv && zl_gguf_arr_i64(kv, 0) == INT64_MIN && zl_gguf_arr_i64(kv, 1) == INT64_MAX);
    kv = zl_gguf_get_arr(g, "a.f64", ZL_GGUF_F64);
    cr_assert(kv && zl_gguf_arr_f64(kv, 0) == 3.141592653589793 && zl_gguf_arr_f64(kv, 1) == -1e300);
    kv = zl_gguf_get_arr(g, "a.empty", ZL_GGUF_U32);
    cr_assert(kv && kv->v.arr.n == 0);
    cr_assert_null(zl_gguf_get_arr(g, "a.u32", ZL_GGUF_STRING), "element kind must match");
    kv = zl_gguf_get_arr(g, "a.str", ZL_GGUF_STRING);
    cr_assert(kv && kv->v.arr.n == 4);
    cr_assert(zl_str_eq(kv->v.arr.strs[0], "alpha") && kv->v.arr.strs[1].len == 0 &&
              zl_str_eq(kv->v.arr.strs[2], "\xe2\x96\x81x") && zl_str_eq(kv->v.arr.strs[3], "z"));

    cr_assert_eq(g->data_offset % g->alignment, 0);
    const zl_gguf_tensor *t = zl_gguf_find_tensor(g, "v.f32");
    cr_assert(t && t->n_dims == 1 && t->ne[0] == 7 && t->ne[1] == 1 && t->type == ZL_TYPE_F32 && t->nbytes == 28);
    cr_assert_eq(memcmp(t->data, k_f32, 28), 0);
    t = zl_gguf_find_tensor(g, "m.f16");
    cr_assert(t && t->n_dims == 2 && t->ne[0] == 32 && t->ne[1] == 2 && t->nbytes == 128);
    cr_assert_eq(t->offset % 32, 0, "offset %llu after a 28-byte tensor must be padded", (unsigned long long)t->offset);
    cr_assert_eq(memcmp(t->data, f16data, 128), 0);
    t = zl_gguf_find_tensor(g, "m.q8_0");
    cr_assert(t && t->type == ZL_TYPE_Q8_0 && t->nbytes == 68 && t->offset % 32 == 0);
    cr_assert_eq(memcmp(t->data, q8, 68), 0);
    t = zl_gguf_find_tensor(g, "c.f32");
    cr_assert(t && t->n_dims == 3 && t->ne[1] == 3 && t->ne[2] == 1 && t->nbytes == 12 && t->offset % 32 == 0);
    cr_assert_null(zl_gguf_find_tensor(g, "nope"));
}

Test(gguf, writer_reader_round_trip_of_every_type, .init = make_tmp_dir, .fini = rm_tmp_dir) {
    uint16_t f16data[64];
    zl_block_q8_0 q8[2];
    float row[64];
    zl_gguf_writer *w = sample_writer(f16data, q8, row);
    zl_err err = {0};
    const char *path = tmp_path("rt.gguf");
    cr_assert_eq(zl_gguf_write(w, path, &err), 0, "%s", err.msg);
    zl_gguf_writer_free(w);
    cr_assert_neq(access(tmp_path("rt.gguf.tmp"), F_OK), 0, "temporary file left behind");
    zl_gguf *g;
    cr_assert_eq(zl_gguf_open(&g, path, NULL, &err), 0, "%s", err.msg);
    check_sample(g, q8, f16data);
    /* and through --no-mmap */
    zl_gguf *g2;
    zl_gguf_open_opts o = {.no_mmap = 1};
    cr_assert_eq(zl_gguf_open(&g2, path, &o, &err), 0, "%s", err.msg);
    check_sample(g2, q8, f16data);
    zl_gguf_close(g2);

    /* copy_kv of every kv gives the same metadata again */
    zl_gguf_writer *w2 = zl_gguf_writer_new();
    for (uint64_t i = 0; i < g->n_kv; i++) cr_assert_eq(zl_gguf_copy_kv(w2, &g->kv[i]), 0);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const zl_gguf_tensor *t = &g->tensors[i];
        char nm[64];
        cr_assert_eq(zl_gguf_add_tensor(w2, zl_str_copy(t->name, nm, sizeof nm), t->type, t->n_dims, t->ne, t->data,
                                        t->nbytes), 0);
    }
    const char *path2 = tmp_path("rt2.gguf");
    cr_assert_eq(zl_gguf_write(w2, path2, &err), 0, "%s", err.msg);
    zl_gguf_writer_free(w2);
    size_t n1, n2;
    uint8_t *b1 = read_file(path, &n1), *b2 = read_file(path2, &n2);
    cr_assert(n1 == n2 && !memcmp(b1, b2, n1), "copy_kv round trip changed the file");
    free(b1);
    free(b2);
    zl_gguf_close(g);
}

Test(gguf, scalar_types_without_setters_round_trip_through_copy_kv, .init = make_tmp_dir, .fini = rm_tmp_dir) {
    bytes b = {0};
    put_head(&b, 2, 0, 6);
    put_str(&b, "s.u8"); put_u32(&b, ZL_GGUF_U8); uint8_t u8 = 200; put(&b, &u8, 1);
    put_str(&b, "s.i8"); put_u32(&b, ZL_GGUF_I8); int8_t i8 = -100; put(&b, &i8, 1);
    put_str(&b, "s.u16"); put_u32(&b, ZL_GGUF_U16); uint16_t u16 = 60000; put(&b, &u16, 2);
    put_str(&b, "s.i16"); put_u32(&b, ZL_GGUF_I16); int16_t i16 = -30000; put(&b, &i16, 2);
    put_str(&b, "s.i64"); put_u32(&b, ZL_GGUF_I64); int64_t i64 = -5000000000ll; put(&b, &i64, 8);
    put_str(&b, "s.f64"); put_u32(&b, ZL_GGUF_F64); double f64 = 2.5e-300; put(&b, &f64, 8);
    zl_gguf *g;
    zl_err err = {0};
    cr_assert_eq(zl_gguf_open_mem(&g, b.p, b.n, &err), 0, "%s", err.msg);
    cr_assert_eq(g->version, 2);
    zl_gguf_writer *w = zl_gguf_writer_new();
    zl_gguf_writer *s = zl_gguf_writer_new();
    for (uint64_t i = 0; i < g->n_kv; i++) {
        cr_assert_eq(zl_gguf_copy_kv(w, &g->kv[i]), 0);
        cr_assert_eq(zl_gguf_copy_kv(s, &g->kv[i]), 0);
    }
    cr_assert_eq(zl_gguf_write(w, tmp_path("a.gguf"), &err), 0, "%s", err.msg);
    cr_assert_eq(zl_gguf_write_begin(s, tmp_path("b.gguf"), &err), 0, "%s", err.msg);
    cr_assert_eq(zl_gguf_write_finish(s, &err), 0, "%s", err.msg);
    zl_gguf_writer_free(w);
    zl_gguf_writer_free(s);
    zl_gguf_close(g);
    free(b.p);
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(zl_gguf_open(&g, tmp_path(k ? "b.gguf" : "a.gguf"), NULL, &err), 0, "%s", err.msg);
        uint64_t u;
        int64_t i;
        float f;
        cr_assert(!zl_gguf_get_u64(g, "s.u8", &u) && u == 200);
        cr_assert(!zl_gguf_get_i64(g, "s.i8", &i) && i == -100);
        cr_assert(!zl_gguf_get_u64(g, "s.u16", &u) && u == 60000);
        cr_assert(!zl_gguf_get_i64(g, "s.i16", &i) && i == -30000);
        cr_assert(!zl_gguf_get_i64(g, "s.i64", &i) && i == -5000000000ll);
        cr_assert_eq(zl_gguf_find(g, "s.f64")->v.f, 2.5e-300);
        cr_assert(!zl_gguf_get_f32(g, "s.f64", &f));
        cr_assert_eq(zl_gguf_find(g, "s.i8")->type, ZL_GGUF_I8);
        zl_gguf_close(g);
    }
}

Test(gguf, streamed_data_gives_the_same_bytes_as_a_whole_write, .init = make_tmp_dir, .fini = rm_tmp_dir) {
    uint16_t f16data[64];
    zl_block_q8_0 q8[2];
    float row[64];
    zl_gguf_writer *w = sample_writer(f16data, q8, row);
    zl_err err = {0};
    const char *pa = tmp_path("w.gguf"), *pb = tmp_path("s.gguf");
    cr_assert_eq(zl_gguf_write(w, pa, &err), 0, "%s", err.msg);
    zl_gguf_writer_free(w);
    zl_gguf *g;
    cr_assert_eq(zl_gguf_open(&g, pa, NULL, &err), 0, "%s", err.msg);
    zl_gguf_writer *s = zl_gguf_writer_new();
    for (uint64_t i = 0; i < g->n_kv; i++) cr_assert_eq(zl_gguf_copy_kv(s, &g->kv[i]), 0);
    char nm[64];
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const zl_gguf_tensor *t = &g->tensors[i];
        cr_assert_eq(zl_gguf_declare_tensor(s, zl_str_copy(t->name, nm, sizeof nm), t->type, t->n_dims, t->ne), 0);
        cr_assert_eq(zl_gguf_writer_tensor_bytes(s, i), t->nbytes);
    }
    cr_assert_eq(zl_gguf_write_begin(s, pb, &err), 0, "%s", err.msg);
    /* pieces of every size, some spanning tensor boundaries */
    bytes all = {0};
    for (uint64_t i = 0; i < g->n_tensors; i++) put(&all, g->tensors[i].data, g->tensors[i].nbytes);
    for (size_t off = 0, step = 1; off < all.n; off += step, step = step * 3 % 41 + 1) {
        size_t k = off + step > all.n ? all.n - off : step;
        cr_assert_eq(zl_gguf_write_data(s, all.p + off, k, &err), 0, "%s", err.msg);
    }
    cr_assert_eq(zl_gguf_write_finish(s, &err), 0, "%s", err.msg);
    zl_gguf_writer_free(s);
    zl_gguf_close(g);
    free(all.p);
    size_t na, nb;
    uint8_t *a = read_file(pa, &na), *b = read_file(pb, &nb);
    cr_assert_eq(na, nb);
    cr_assert_eq(memcmp(a, b, na), 0, "streamed output differs from zl_gguf_write output");
    free(a);
    free(b);
}

Test(gguf, writer_rejects_misuse_and_leaves_no_file, .init = make_tmp_dir, .fini = rm_tmp_dir) {
    zl_err err = {0};
    zl_gguf_writer *s = zl_gguf_writer_new();
    int64_t ne[2] = {32, 2}, bad[2] = {33, 2};
    cr_assert_eq(zl_gguf_declare_tensor(s, "x", ZL_TYPE_Q8_0, 2, bad), ZL_EINVAL, "33 is not a Q8_0 row");
    cr_assert_eq(zl_gguf_declare_tensor(s, "x", ZL_TYPE_F32, 0, ne), ZL_EINVAL);
    cr_assert_eq(zl_gguf_declare_tensor(s, "x", ZL_TYPE_F32, 2, ne), 0);
    cr_assert_neq(zl_gguf_write_data(s, "x", 1, &err), 0);
    cr_assert(strstr(err.msg, "not started"));
    cr_assert_eq(zl_gguf_write_begin(s, tmp_path("m.gguf"), &err), 0, "%s", err.msg);
    cr_assert_eq(zl_gguf_set_u32(s, "late", 1), ZL_EINVAL, "metadata after begin");
    float data[65] = {0};
    cr_assert_eq(zl_gguf_write_data(s, data, 100, &err), 0);
    cr_assert_neq(zl_gguf_write_finish(s, &err), 0);
    cr_assert(strstr(err.msg, "received 100 of its 256 bytes"), "%s", err.msg);
    zl_gguf_writer_free(s);

    s = zl_gguf_writer_new();
    cr_assert_eq(zl_gguf_declare_tensor(s, "x", ZL_TYPE_F32, 2, ne), 0);
    cr_assert_eq(zl_gguf_write_begin(s, tmp_path("m.gguf"), &err), 0, "%s", err.msg);
    cr_assert_neq(zl_gguf_write_data(s, data, sizeof data, &err), 0);
    cr_assert(strstr(err.msg, "more tensor data"), "%s", err.msg);
    zl_gguf_writer_free(s); /* abandoned: removes the temporary file */
    cr_assert_neq(access(tmp_path("m.gguf"), F_OK), 0);
    cr_assert_neq(access(tmp_path("m.gguf.tmp"), F_OK), 0);

    s = zl_gguf_writer_new();
    cr_assert_neq(zl_gguf_write_begin(s, "/nonexistent-dir/x.gguf", &err), 0);
    cr_assert(strstr(err.msg, "cannot create"), "%s", err.msg);
    zl_gguf_writer_free(s);

    /* a whole write needs every tensor's bytes, exactly as many as its shape takes */
    s = zl_gguf_writer_new();
    cr_assert_eq(zl_gguf_add_tensor(s, "x", ZL_TYPE_F32, 2, ne, data, 255), ZL_EINVAL, "255 bytes for 64 floats");
    cr_assert_eq(zl_gguf_add_tensor(s, "x", ZL_TYPE_F32, 2, ne, NULL, 256), ZL_EINVAL, "no data");
    cr_assert_eq(zl_gguf_add_tensor(s, "x", ZL_TYPE_F32, 2, ne, data, 256), 0);
    cr_assert_eq(zl_gguf_declare_tensor(s, "y", ZL_TYPE_F32, 2, ne), 0);
    cr_assert_neq(zl_gguf_write(s, tmp_path("m.gguf"), &err), 0);
    cr_assert(strstr(err.msg, "tensor y was declared without data"), "%s", err.msg);
    cr_assert_neq(access(tmp_path("m.gguf"), F_OK), 0);
    cr_assert_neq(access(tmp_path("m.gguf.tmp"), F_OK), 0);
    zl_gguf_writer_free(s);
}

/* ---- hostile input: a small valid file, cut and flipped ---- */

/* A small valid GGUF: a few kv (with a string array) and three tensors. */
static uint8_t *small_file(size_t *n) {
    zl_gguf_writer *w = zl_gguf_writer_new();
    zl_gguf_set_str(w, "general.architecture", "llama");
    zl_gguf_set_u32(w, "llama.block_count", 2);
    zl_str toks[3] = {{"<s>", 3}, {"a", 1}, {"bc", 2}};
    zl_gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, 3);
    zl_gguf_set_arr(w, "tokenizer.ggml.scores", ZL_GGUF_F32, k_f32, 3);
    static uint16_t h[64];
    static zl_block_q8_0 q[2];
    int64_t ne1[1] = {7}, ne2[2] = {32, 2}, ne3[2] = {32, 2};
    zl_gguf_add_tensor(w, "a.weight", ZL_TYPE_F32, 1, ne1, k_f32, 28);
    zl_gguf_add_tensor(w, "b.weight", ZL_TYPE_F16, 2, ne2, h, 128);
    zl_gguf_add_tensor(w, "c.weight", ZL_TYPE_Q8_0, 2, ne3, q, 68);
    char path[] = "/tmp/zl_small_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    zl_err err = {0};
    cr_assert_eq(zl_gguf_write(w, path, &err), 0, "%s", err.msg);
    zl_gguf_writer_free(w);
    uint8_t *p = read_file(path, n);
    unlink(path);
    return p;
}

Test(gguf, truncation_at_every_byte_is_an_error) {
    size_t n;
    uint8_t *p = small_file(&n);
    zl_err err;
    cr_assert_eq(parse_copy(p, n, &err), 0, "the untruncated file must parse: %s", err.msg);
    int past_end = 0;
    for (size_t cut = 0; cut < n; cut++) {
        int rc = parse_copy(p, cut, &err);
        cr_assert_neq(rc, 0, "file cut to %zu of %zu bytes was accepted", cut, n);
        cr_assert(err.msg[0], "no message for a cut at %zu", cut);
        past_end += strstr(err.msg, "extends past end of file") != NULL;
    }
    cr_assert_gt(past_end, 0, "cuts inside the tensor data must name the tensor");
    free(p);
}

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

Test(gguf, random_byte_flips_never_crash) {
    size_t n;
    uint8_t *p = small_file(&n);
    uint64_t seed = 12345;
    int ok = 0, bad = 0;
    for (int it = 0; it < 5000; it++) {
        uint8_t *c = malloc(n);
        memcpy(c, p, n);
        int flips = 1 + (int)(rng_next(&seed) % 4);
        for (int f = 0; f < flips; f++) {
            size_t at = rng_next(&seed) % n;
            uint64_t r = rng_next(&seed);
            /* mostly single-bit flips, sometimes a whole random or extreme byte */
            c[at] = r % 3 == 0 ? (uint8_t)(r >> 8) : r % 3 == 1 ? (uint8_t)(c[at] ^ (1u << (r >> 8) % 8)) : 0xff;
        }
        zl_gguf *g;
        zl_err err = {0};
        if (zl_gguf_open_mem(&g, c, n, &err) == 0) {
            ok++;
            /* whatever was accepted must be internally consistent */
            for (uint64_t i = 0; i < g->n_tensors; i++) {
                const zl_gguf_tensor *t = &g->tensors[i];
                cr_assert((const uint8_t *)t->data >= c && (const uint8_t *)t->data + t->nbytes <= c + n);
            }
            zl_gguf_close(g);
        } else {
            bad++;
            cr_assert(err.msg[0]);
        }
        free(c);
    }
    cr_log_info("byte flips: %d accepted, %d rejected with a message", ok, bad);
    cr_assert_gt(bad, 500);
    free(p);
}

/* ---- hostile input: hand-built headers, one problem each ---- */

#define HUGE (1ull << 63)

Test(gguf, bad_magic_and_versions) {
    bytes b = {0};
    put(&b, "GGML", 4);
    put_u32(&b, 3);
    put_u64(&b, 0);
    put_u64(&b, 0);
    expect_error(&b, "bad magic");
    b.n = 0;
    put(&b, "GG", 2);
    expect_error(&b, "not a GGUF file");
    b.n = 0;
    expect_error(&b, "not a GGUF file");
    b.n = 0;
    put_head(&b, 1, 0, 0);
    expect_error(&b, "version 1 is not supported");
    b.n = 0;
    put_head(&b, 4, 0, 0);
    expect_error(&b, "unsupported GGUF version 4");
    b.n = 0;
    put_head(&b, 0x03000000, 0, 0); /* big-endian v3 */
    expect_error(&b, "unsupported GGUF version");
    b.n = 0;
    put_head(&b, 3, 0, 0);
    zl_err err;
    cr_assert_eq(parse_copy(b.p, b.n, &err), 0, "an empty v3 file is valid: %s", err.msg);
    free(b.p);
}

Test(gguf, absurd_counts_and_lengths) {
    bytes b = {0};
    put_head(&b, 3, 0, HUGE);
    expect_error(&b, "metadata count");
    b.n = 0;
    put_head(&b, 3, HUGE, 0);
    expect_error(&b, "tensor count");
    b.n = 0;
    put_head(&b, 3, UINT64_MAX, UINT64_MAX);
    expect_error(&b, "is impossible");
    /* key length 2^63 */
    b.n = 0;
    put_head(&b, 3, 0, 1);
    put_u64(&b, HUGE);
    put(&b, "k", 1);
    put_pad(&b, 64); /* enough bytes that the count itself is plausible */
    expect_error(&b, "string length");
    /* string value length 2^63 */
    b.n = 0;
    put_head(&b, 3, 0, 1);
    put_str(&b, "k");
    put_u32(&b, ZL_GGUF_STRING);
    put_u64(&b, HUGE);
    put(&b, "xx", 2);
    put_pad(&b, 64);
    expect_error(&b, "string length");
    /* numeric array of 2^63 elements, and of 2^62 u32s (byte count overflows 64 bits) */
    uint64_t counts[2] = {HUGE, 1ull << 62};
    for (int k = 0; k < 2; k++) {
        b.n = 0;
        put_head(&b, 3, 0, 1);
        put_str(&b, "arr");
        put_u32(&b, ZL_GGUF_ARRAY);
        put_u32(&b, ZL_GGUF_U32);
        put_u64(&b, counts[k]);
        put_u32(&b, 1);
        expect_error(&b, "extends past end of file");
    }
    /* string array of 2^63 strings */
    b.n = 0;
    put_head(&b, 3, 0, 1);
    put_str(&b, "strs");
    put_u32(&b, ZL_GGUF_ARRAY);
    put_u32(&b, ZL_GGUF_STRING);
    put_u64(&b, HUGE);
    put_str(&b, "a");
    expect_error(&b, "string array count");
    /* string array whose element is longer than the file */
    b.n = 0;
    put_head(&b, 3, 0, 1);
    put_str(&b, "strs");
    put_u32(&b, ZL_GGUF_ARRAY);
    put_u32(&b, ZL_GGUF_STRING);
    put_u64(&b, 2);
    put_str(&b, "a");
    put_u64(&b, 1000);
    put(&b, "abc", 3);
    expect_error(&b, "element 1 of metadata 'strs'");
    /* tensor name length 2^63 */
    b.n = 0;
    put_head(&b, 3, 1, 0);
    put_u64(&b, HUGE);
    for (int i = 0; i < 8; i++) put_u32(&b, 0);
    expect_error(&b, "string length");
    /* a dimension of 2^63 - 1 and a product that overflows */
    uint64_t ne_huge[1] = {INT64_MAX}, ne_prod[2] = {1ull << 32, 1ull << 32};
    b.n = 0;
    put_head(&b, 3, 1, 0);
    put_tinfo(&b, "t", 1, ne_huge, ZL_TYPE_F32, 0);
    expect_error(&b, "");
    b.n = 0;
    put_head(&b, 3, 1, 0);
    put_tinfo(&b, "t", 2, ne_prod, ZL_TYPE_F32, 0);
    expect_error(&b, "invalid shape");
    free(b.p);
}

Test(gguf, bad_metadata_types_keys_and_duplicates) {
    bytes b = {0};
    put_head(&b, 3, 0, 1);
    put_str(&b, "k");
    put_u32(&b, 13);
    put_u32(&b, 0);
    expect_error(&b, "invalid value type 13");
    b.n = 0;
    put_head(&b, 3, 0, 1);
    put_str(&b, "nest");
    put_u32(&b, ZL_GGUF_ARRAY);
    put_u32(&b, ZL_GGUF_ARRAY);
    put_u64(&b, 1);
    put_u64(&b, 0);
    expect_error(&b, "nested arrays");
    b.n = 0;
    put_head(&b, 3, 0, 1);
    put_str(&b, "");
    put_u32(&b, ZL_GGUF_U32);
    put_u32(&b, 0);
    expect_error(&b, "invalid key length");
    b.n = 0;
    put_head(&b, 3, 0, 2);
    put_str(&b, "same.key");
    put_u32(&b, ZL_GGUF_U32);
    put_u32(&b, 1);
    put_str(&b, "same.key");
    put_u32(&b, ZL_GGUF_STRING);
    put_str(&b, "x");
    expect_error(&b, "duplicate metadata key 'same.key'");
    b.n = 0;
    put_head(&b, 3, 0, 1);
    put_str(&b, "general.alignment");
    put_u32(&b, ZL_GGUF_U32);
    put_u32(&b, 48);
    expect_error(&b, "not a power of two");
    b.n = 0;
    put_head(&b, 3, 0, 1);
    put_str(&b, "general.alignment");
    put_u32(&b, ZL_GGUF_U64);
    put_u64(&b, 32);
    expect_error(&b, "must be u32");
    free(b.p);
}

/* One tensor "t" [32 x 2] F32 (256 bytes) with the given fields, data after. */
static void one_tensor(bytes *b, uint32_t n_dims, uint32_t type, uint64_t off, size_t data_bytes) {
    uint64_t ne[5] = {32, 2, 1, 1, 1};
    b->n = 0;
    put_head(b, 3, 1, 0);
    put_tinfo(b, "blk.3.ffn_up.weight", n_dims, ne, type, off);
    put_pad(b, 32);
    static const uint8_t z[512];
    put(b, z, data_bytes);
}

Test(gguf, bad_tensor_infos) {
    bytes b = {0};
    zl_err err;
    one_tensor(&b, 2, ZL_TYPE_F32, 0, 256);
    cr_assert_eq(parse_copy(b.p, b.n, &err), 0, "baseline must parse: %s", err.msg);
    one_tensor(&b, 0, ZL_TYPE_F32, 0, 256);
    expect_error(&b, "has 0 dimensions");
    one_tensor(&b, 5, ZL_TYPE_F32, 0, 256);
    expect_error(&b, "has 5 dimensions");
    one_tensor(&b, 2, 99, 0, 256);
    expect_error(&b, "unknown type id 99");
    one_tensor(&b, 2, 4, 0, 256); /* Q4_2: removed from ggml, id unknown */
    expect_error(&b, "unknown type id 4");
    one_tensor(&b, 2, ZL_TYPE_Q4_K, 0, 256);
    expect_error(&b, "not a multiple of the Q4_K block size 256");
    one_tensor(&b, 2, ZL_TYPE_F32, 0, 255);
    expect_error(&b, "tensor blk.3.ffn_up.weight extends past end of file");
    one_tensor(&b, 2, ZL_TYPE_F32, 1024, 256);
    expect_error(&b, "tensor blk.3.ffn_up.weight extends past end of file");
    one_tensor(&b, 2, ZL_TYPE_F32, UINT64_MAX - 31, 256);
    expect_error(&b, "extends past end of file");
    one_tensor(&b, 2, ZL_TYPE_F32, 4, 300);
    expect_error(&b, "offset 4 is not aligned to 32");
    /* zero-sized dimension */
    uint64_t ne0[2] = {0, 2};
    b.n = 0;
    put_head(&b, 3, 1, 0);
    put_tinfo(&b, "t", 2, ne0, ZL_TYPE_F32, 0);
    put_pad(&b, 32);
    expect_error(&b, "invalid shape");
    /* header claims tensors but the data section would start past the end */
    b.n = 0;
    uint64_t ne[1] = {8};
    put_head(&b, 3, 1, 0);
    put_tinfo(&b, "t", 1, ne, ZL_TYPE_F32, 0);
    expect_error(&b, "past end of file");
    free(b.p);
}

/* A row whose byte size overflows 64 bits (2^62 F32 elements = 2^64 bytes)
 * must be rejected, not wrapped to a 0-byte tensor. */
Test(gguf, row_byte_size_overflow) {
    bytes b = {0};
    uint64_t ne[1] = {1ull << 62};
    put_head(&b, 3, 1, 0);
    put_tinfo(&b, "wrap.weight", 1, ne, ZL_TYPE_F32, 0);
    put_pad(&b, 32);
    put_pad(&b, 64);
    zl_err err;
    cr_assert_neq(parse_copy(b.p, b.n, &err), 0, "a row size that overflows 64 bits must be rejected");
    cr_assert(strstr(err.msg, "wrap.weight"), "%s", err.msg);
    free(b.p);
}

Test(gguf, duplicate_and_overlapping_tensors) {
    bytes b = {0};
    uint64_t ne[1] = {8};
    put_head(&b, 3, 2, 0);
    put_tinfo(&b, "dup.weight", 1, ne, ZL_TYPE_F32, 0);
    put_tinfo(&b, "dup.weight", 1, ne, ZL_TYPE_F32, 32);
    put_pad(&b, 32);
    static const uint8_t z[64];
    put(&b, z, 64);
    expect_error(&b, "duplicate tensor name dup.weight");
    /* two tensors sharing bytes: the reader may accept it (the mapping is
     * read-only, so aliasing is harmless) but must not crash */
    b.n = 0;
    put_head(&b, 3, 2, 0);
    put_tinfo(&b, "a", 1, ne, ZL_TYPE_F32, 0);
    put_tinfo(&b, "b", 1, ne, ZL_TYPE_F32, 0);
    put_pad(&b, 32);
    put(&b, z, 32);
    zl_err err;
    int rc = parse_copy(b.p, b.n, &err);
    cr_assert(rc == 0 || err.msg[0]);
    free(b.p);
}

/* ---- layers above the parser on corrupted real models ---- */

/* Parse, bind as a model, load the vocabulary and run one token: every
 * outcome but a crash is acceptable; failures must carry a message. */
static int load_all_layers(uint8_t *c, size_t n, int forward) {
    zl_gguf *g;
    zl_err err = {0};
    if (zl_gguf_open_mem(&g, c, n, &err)) {
        cr_assert(err.msg[0]);
        return 0;
    }
    zl_vocab *v = NULL;
    if (zl_vocab_load(&v, g, &err)) cr_assert(err.msg[0]);
    zl_vocab_free(v);
    zl_model *m;
    memset(&err, 0, sizeof err);
    if (zl_model_from_gguf(&m, g, &err)) {
        cr_assert(err.msg[0]);
        zl_gguf_close(g);
        return 1;
    }
    if (forward) {
        zl_kv *kv;
        const zl_hparams *hp = &m->hp;
        if (hp->n_layers <= 64 && hp->dim <= 4096 && zl_kv_new(&kv, hp->n_layers, 4, hp->n_kv_heads * hp->head_dim,
                                                               ZL_TYPE_F32, &err) == 0) {
            zl_fwd *f = zl_fwd_new();
            float *logits = malloc((size_t)hp->n_vocab * sizeof(float));
            zl_batch_tok t = {1, 0, 0, 1};
            zl_forward(m, &kv, &t, 1, logits, f, NULL, &err);
            free(logits);
            zl_fwd_free(f);
            zl_kv_free(kv);
        }
    }
    zl_model_free(m);
    return 2;
}

Test(gguf, corrupted_models_never_crash_the_model_tokenizer_or_api, .init = make_tmp_dir, .fini = rm_tmp_dir,
     .timeout = 120) {
    size_t n;
    uint8_t *p = read_file(STORIES, &n);
    cr_assert(p, "cannot read %s", STORIES);
    zl_gguf *g;
    zl_err err = {0};
    cr_assert_eq(zl_gguf_open_mem(&g, p, n, &err), 0, "%s", err.msg);
    size_t header = (size_t)g->data_offset;
    zl_gguf_close(g);
    uint8_t *c = malloc(n);
    memcpy(c, p, n);
    cr_assert_eq(load_all_layers(c, n, 1), 2, "the intact model must load");

    uint64_t seed = 777;
    int outcome[3] = {0, 0, 0};
    for (int it = 0; it < 2000; it++) {
        /* flip header bytes (metadata, vocabulary, tensor infos) */
        size_t at[3];
        uint8_t old[3];
        int k = 1 + (int)(rng_next(&seed) % 3);
        for (int j = 0; j < k; j++) {
            at[j] = rng_next(&seed) % header;
            old[j] = c[at[j]];
            uint64_t r = rng_next(&seed);
            c[at[j]] = r & 1 ? (uint8_t)(old[j] ^ (1u << (r >> 8) % 8)) : (uint8_t)(r >> 16);
        }
        outcome[load_all_layers(c, n, 1)]++;
        if (it % 100 == 0) { /* the public API, from a file */
            const char *path = tmp_path("corrupt.gguf");
            write_file(path, c, n);
            zl_llm *llm = NULL;
            zl_llm_opts o = {0};
            o.n_threads = 1;
            memset(&err, 0, sizeof err);
            if (zl_llm_open(&llm, path, &o, &err) == 0) zl_llm_close(llm);
            else cr_assert(err.msg[0]);
        }
        for (int j = k - 1; j >= 0; j--) c[at[j]] = old[j];
    }
    /* truncations: every byte of the header, a sample of the data */
    for (size_t cut = 0; cut < n; cut += cut < header + 64 ? 1 : 4099) {
        uint8_t *t = malloc(cut ? cut : 1);
        memcpy(t, p, cut);
        cr_assert_eq(load_all_layers(t, cut, 0), 0, "model cut at %zu accepted", cut);
        free(t);
    }
    cr_log_info("corrupted model: %d rejected by the parser, %d by the model binder, %d loaded and ran", outcome[0],
                outcome[1], outcome[2]);
    free(c);
    free(p);
}

/* Rewrite stories260K without one tensor / with another architecture. */
static void rewrite_model(const char *out, const char *skip_tensor, const char *arch) {
    zl_gguf *g;
    zl_err err = {0};
    cr_assert_eq(zl_gguf_open(&g, STORIES, NULL, &err), 0, "%s", err.msg);
    zl_gguf_writer *w = zl_gguf_writer_new();
    for (uint64_t i = 0; i < g->n_kv; i++) cr_assert_eq(zl_gguf_copy_kv(w, &g->kv[i]), 0);
    if (arch) zl_gguf_set_str(w, "general.architecture", arch);
    char nm[128];
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const zl_gguf_tensor *t = &g->tensors[i];
        zl_str_copy(t->name, nm, sizeof nm);
        if (skip_tensor && !strcmp(nm, skip_tensor)) continue;
        cr_assert_eq(zl_gguf_add_tensor(w, nm, t->type, t->n_dims, t->ne, t->data, t->nbytes), 0);
    }
    cr_assert_eq(zl_gguf_write(w, out, &err), 0, "%s", err.msg);
    zl_gguf_writer_free(w);
    zl_gguf_close(g);
}

Test(gguf, missing_tensor_and_unsupported_architecture_are_clear_errors, .init = make_tmp_dir, .fini = rm_tmp_dir) {
    zl_err err = {0};
    zl_model *m = NULL;
    const char *p1 = tmp_path("missing.gguf");
    rewrite_model(p1, "blk.3.ffn_up.weight", NULL);
    cr_assert_neq(zl_model_load(&m, p1, NULL, &err), 0);
    cr_assert(strstr(err.msg, "missing tensor blk.3.ffn_up.weight"), "%s", err.msg);
    cr_assert(strstr(err.msg, p1), "the message names the file: %s", err.msg);

    const char *p2 = tmp_path("gpt2.gguf");
    rewrite_model(p2, NULL, "gpt2");
    zl_llm *llm = NULL;
    zl_llm_opts o = {0};
    cr_assert_neq(zl_llm_open(&llm, p2, &o, &err), 0);
    cr_assert(strstr(err.msg, "unsupported architecture 'gpt2'"), "%s", err.msg);

    const char *p3 = tmp_path("noemb.gguf");
    rewrite_model(p3, "token_embd.weight", NULL);
    cr_assert_neq(zl_model_load(&m, p3, NULL, &err), 0);
    cr_assert(strstr(err.msg, "missing tensor token_embd.weight"), "%s", err.msg);

    /* an output.weight-less model is tied, not broken */
    const char *p4 = tmp_path("tied.gguf");
    rewrite_model(p4, "output.weight", NULL);
    cr_assert_eq(zl_model_load(&m, p4, NULL, &err), 0, "%s", err.msg);
    cr_assert(m->hp.tied_output);
    zl_model_free(m);

    cr_assert_neq(zl_model_load(&m, tmp_path("does-not-exist.gguf"), NULL, &err), 0);
    cr_assert(strstr(err.msg, "cannot open"), "%s", err.msg);
}
