/* gguf.h — GGUF v2/v3 reader (mmap, bounds-checked) and the one writer.
 *
 * The reader validates the whole header before returning: every count,
 * string length, array length, tensor dimension, type, offset, alignment and
 * tensor extent is checked against the file size, and a malformed file gives
 * an error naming the problem.  After zl_gguf_open succeeds, every pointer it
 * hands out is inside the mapping and every tensor's bytes are present.
 * Strings point into the mapping and are NOT NUL-terminated (use .len). */
#ifndef ZL_GGUF_H
#define ZL_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/err.h"

typedef enum {
    ZL_GGUF_U8 = 0, ZL_GGUF_I8 = 1, ZL_GGUF_U16 = 2, ZL_GGUF_I16 = 3,
    ZL_GGUF_U32 = 4, ZL_GGUF_I32 = 5, ZL_GGUF_F32 = 6, ZL_GGUF_BOOL = 7,
    ZL_GGUF_STRING = 8, ZL_GGUF_ARRAY = 9, ZL_GGUF_U64 = 10, ZL_GGUF_I64 = 11,
    ZL_GGUF_F64 = 12, ZL_GGUF_NTYPES = 13
} zl_gguf_vtype;

typedef struct zl_str { const char *ptr; uint64_t len; } zl_str;

typedef struct zl_gguf_kv {
    zl_str key;
    uint32_t type;            /* zl_gguf_vtype */
    union {
        uint64_t u;           /* unsigned ints and bool */
        int64_t i;            /* signed ints */
        double f;             /* F32 / F64 */
        zl_str s;             /* STRING */
        struct {
            uint32_t type;    /* element type (never ARRAY: nested arrays are rejected) */
            uint64_t n;
            const void *data; /* packed numeric elements (unaligned; read with memcpy) */
            zl_str *strs;     /* STRING arrays: n parsed strings (owned by zl_gguf) */
        } arr;
    } v;
} zl_gguf_kv;

#define ZL_GGUF_MAX_DIMS 4

typedef struct zl_gguf_tensor {
    zl_str name;
    uint32_t n_dims;
    int64_t ne[ZL_GGUF_MAX_DIMS]; /* ne[0] is the contiguous (row) dimension; unused dims are 1 */
    uint32_t type;                /* zl_type */
    uint64_t offset;              /* relative to the data section */
    uint64_t nbytes;
    const void *data;             /* inside the mapping */
} zl_gguf_tensor;

typedef struct zl_gguf {
    uint32_t version;
    uint64_t n_kv, n_tensors;
    zl_gguf_kv *kv;
    zl_gguf_tensor *tensors;
    uint32_t alignment;
    uint64_t data_offset;   /* file offset of the tensor data section */
    const uint8_t *base;    /* mapping (or caller's buffer) */
    size_t size;
    int owns_map;           /* 1 if base was mmap'd by zl_gguf_open */
    void *owned_copy;       /* --no-mmap: malloc'd file contents */
} zl_gguf;

typedef struct zl_gguf_open_opts {
    int no_mmap;  /* read the file into memory instead of mapping it */
    int populate; /* MAP_POPULATE */
} zl_gguf_open_opts;

int zl_gguf_open(zl_gguf **out, const char *path, const zl_gguf_open_opts *opts, zl_err *err);
/* Parse a buffer the caller keeps alive for the life of the result. */
int zl_gguf_open_mem(zl_gguf **out, const void *data, size_t size, zl_err *err);
void zl_gguf_close(zl_gguf *g);

/* Lookups return NULL / -1 when absent. */
const zl_gguf_kv *zl_gguf_find(const zl_gguf *g, const char *key);
const zl_gguf_tensor *zl_gguf_find_tensor(const zl_gguf *g, const char *name);
/* Typed getters: 0 on success; ZL_EINVAL if the key is absent or not
 * convertible (integers convert between widths when the value fits). */
int zl_gguf_get_u64(const zl_gguf *g, const char *key, uint64_t *out);
int zl_gguf_get_u32(const zl_gguf *g, const char *key, uint32_t *out);
int zl_gguf_get_i64(const zl_gguf *g, const char *key, int64_t *out);
int zl_gguf_get_f32(const zl_gguf *g, const char *key, float *out);
int zl_gguf_get_bool(const zl_gguf *g, const char *key, bool *out);
int zl_gguf_get_str(const zl_gguf *g, const char *key, zl_str *out);
/* Array accessors: the kv must be an ARRAY of the requested element kind. */
const zl_gguf_kv *zl_gguf_get_arr(const zl_gguf *g, const char *key, uint32_t elem_type);
/* Element i of a numeric array as double / int64 (any numeric element type). */
double zl_gguf_arr_f64(const zl_gguf_kv *kv, uint64_t i);
int64_t zl_gguf_arr_i64(const zl_gguf_kv *kv, uint64_t i);
int zl_str_eq(zl_str s, const char *c);
/* Copy into a NUL-terminated buffer (truncating); returns buf. */
char *zl_str_copy(zl_str s, char *buf, size_t cap);
const char *zl_gguf_vtype_name(uint32_t t);
/* Bytes of one value of a fixed-size vtype; 0 for STRING, ARRAY and unknown types. */
size_t zl_gguf_vtype_size(uint32_t t);

/* ---- writer (gguf_write.c) ----
 * The one writer of GGUF files.  Declare all metadata and every tensor's
 * name, type and shape first; then either zl_gguf_write sends the data given
 * to zl_gguf_add_tensor, or zl_gguf_write_begin writes the header and
 * zl_gguf_write_data appends the tensors' bytes in declaration order, in
 * pieces of any size (files larger than memory), until zl_gguf_write_finish.
 * The file appears under its name only after finish; freeing an unfinished
 * writer removes its temporary file.  Alignment 32. */
typedef struct zl_gguf_writer zl_gguf_writer;
zl_gguf_writer *zl_gguf_writer_new(void);
void zl_gguf_writer_free(zl_gguf_writer *w);
/* Setters copy their arguments and replace an earlier value of the key.
 * 0, ZL_ENOMEM, or ZL_EINVAL (a bad element type; any call after begin). */
int zl_gguf_set_u32(zl_gguf_writer *w, const char *key, uint32_t v);
int zl_gguf_set_i32(zl_gguf_writer *w, const char *key, int32_t v);
int zl_gguf_set_u64(zl_gguf_writer *w, const char *key, uint64_t v);
int zl_gguf_set_f32(zl_gguf_writer *w, const char *key, float v);
int zl_gguf_set_bool(zl_gguf_writer *w, const char *key, bool v);
int zl_gguf_set_str(zl_gguf_writer *w, const char *key, const char *v);
/* Numeric array (elem_type a numeric vtype; data packed little-endian). */
int zl_gguf_set_arr(zl_gguf_writer *w, const char *key, uint32_t elem_type, const void *data, uint64_t n);
int zl_gguf_set_arr_str(zl_gguf_writer *w, const char *key, const zl_str *strs, uint64_t n);
/* Copy a kv of an open reader (any type, arrays included). */
int zl_gguf_copy_kv(zl_gguf_writer *w, const zl_gguf_kv *kv);
/* A tensor whose nbytes bytes zl_gguf_write sends: data is referenced, not
 * copied, and must stay valid until then.  ZL_EINVAL if the shape is empty,
 * its rows do not fit the type's blocks, or nbytes is not what it takes. */
int zl_gguf_add_tensor(zl_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                       const int64_t *ne, const void *data, uint64_t nbytes);
/* A tensor whose bytes come later through zl_gguf_write_data. */
int zl_gguf_declare_tensor(zl_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne);
/* Bytes tensor i (declaration order) takes; 0 if there is no such tensor. */
uint64_t zl_gguf_writer_tensor_bytes(const zl_gguf_writer *w, size_t i);
/* The whole file from the data given to zl_gguf_add_tensor. */
int zl_gguf_write(zl_gguf_writer *w, const char *path, zl_err *err);
/* Streaming: header, then data in declaration order, then the file. */
int zl_gguf_write_begin(zl_gguf_writer *w, const char *path, zl_err *err);
int zl_gguf_write_data(zl_gguf_writer *w, const void *data, uint64_t nbytes, zl_err *err);
int zl_gguf_write_finish(zl_gguf_writer *w, zl_err *err);

#endif
