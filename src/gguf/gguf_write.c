/* gguf_write.c — GGUF v3 writer.
 *
 * Owns: serialising metadata and tensors.  Metadata values are copied into
 * the writer; tensor data is only referenced until zl_gguf_write, so a
 * quantiser can stream a large model without holding two copies. Tensors
 * are laid out in insertion order, each aligned to general.alignment (32). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tensor/types.h"
#include "gguf.h"

#define W_ALIGN 32

typedef struct {
    char *key;
    uint32_t type;
    uint8_t *blob; /* serialised value (without key/type) */
    size_t blob_len;
} wkv;

typedef struct {
    char *name;
    uint32_t type, n_dims;
    int64_t ne[ZL_GGUF_MAX_DIMS];
    const void *data;
    uint64_t nbytes, offset;
} wtensor;

struct zl_gguf_writer {
    wkv *kv;
    size_t n_kv, cap_kv;
    wtensor *t;
    size_t n_t, cap_t;
};

zl_gguf_writer *zl_gguf_writer_new(void) { return calloc(1, sizeof(zl_gguf_writer)); }

void zl_gguf_writer_free(zl_gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) { free(w->kv[i].key); free(w->kv[i].blob); }
    for (size_t i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->kv);
    free(w->t);
    free(w);
}

/* Replace an existing key or append a new one; takes ownership of blob. */
static int put(zl_gguf_writer *w, const char *key, uint32_t type, uint8_t *blob, size_t len) {
    if (!blob && len) return ZL_ENOMEM;
    for (size_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, key)) {
            free(w->kv[i].blob);
            w->kv[i].type = type;
            w->kv[i].blob = blob;
            w->kv[i].blob_len = len;
            return 0;
        }
    if (w->n_kv == w->cap_kv) {
        size_t nc = w->cap_kv ? w->cap_kv * 2 : 32;
        wkv *nk = realloc(w->kv, nc * sizeof *nk);
        if (!nk) { free(blob); return ZL_ENOMEM; }
        w->kv = nk;
        w->cap_kv = nc;
    }
    char *k = strdup(key);
    if (!k) { free(blob); return ZL_ENOMEM; }
    w->kv[w->n_kv++] = (wkv){k, type, blob, len};
    return 0;
}

static int put_scalar(zl_gguf_writer *w, const char *key, uint32_t type, const void *v, size_t n) {
    uint8_t *b = malloc(n);
    if (b) memcpy(b, v, n);
    return put(w, key, type, b, n);
}

int zl_gguf_set_u32(zl_gguf_writer *w, const char *k, uint32_t v) { return put_scalar(w, k, ZL_GGUF_U32, &v, 4); }
int zl_gguf_set_i32(zl_gguf_writer *w, const char *k, int32_t v) { return put_scalar(w, k, ZL_GGUF_I32, &v, 4); }
int zl_gguf_set_u64(zl_gguf_writer *w, const char *k, uint64_t v) { return put_scalar(w, k, ZL_GGUF_U64, &v, 8); }
int zl_gguf_set_f32(zl_gguf_writer *w, const char *k, float v) { return put_scalar(w, k, ZL_GGUF_F32, &v, 4); }
int zl_gguf_set_bool(zl_gguf_writer *w, const char *k, bool v) {
    uint8_t b = v;
    return put_scalar(w, k, ZL_GGUF_BOOL, &b, 1);
}

int zl_gguf_set_str(zl_gguf_writer *w, const char *key, const char *v) {
    uint64_t n = strlen(v);
    uint8_t *b = malloc(8 + n);
    if (b) { memcpy(b, &n, 8); memcpy(b + 8, v, n); }
    return put(w, key, ZL_GGUF_STRING, b, 8 + n);
}

static size_t elem_size(uint32_t t) {
    switch (t) {
    case ZL_GGUF_U8: case ZL_GGUF_I8: case ZL_GGUF_BOOL: return 1;
    case ZL_GGUF_U16: case ZL_GGUF_I16: return 2;
    case ZL_GGUF_U32: case ZL_GGUF_I32: case ZL_GGUF_F32: return 4;
    case ZL_GGUF_U64: case ZL_GGUF_I64: case ZL_GGUF_F64: return 8;
    default: return 0;
    }
}

int zl_gguf_set_arr(zl_gguf_writer *w, const char *key, uint32_t et, const void *data, uint64_t n) {
    size_t es = elem_size(et);
    if (!es) return ZL_EINVAL;
    size_t len = 12 + (size_t)n * es;
    uint8_t *b = malloc(len);
    if (b) {
        memcpy(b, &et, 4);
        memcpy(b + 4, &n, 8);
        if (n) memcpy(b + 12, data, (size_t)n * es);
    }
    return put(w, key, ZL_GGUF_ARRAY, b, len);
}

int zl_gguf_set_arr_str(zl_gguf_writer *w, const char *key, const zl_str *s, uint64_t n) {
    size_t len = 12;
    for (uint64_t i = 0; i < n; i++) len += 8 + s[i].len;
    uint8_t *b = malloc(len);
    if (!b) return ZL_ENOMEM;
    uint32_t et = ZL_GGUF_STRING;
    memcpy(b, &et, 4);
    memcpy(b + 4, &n, 8);
    size_t p = 12;
    for (uint64_t i = 0; i < n; i++) {
        memcpy(b + p, &s[i].len, 8);
        if (s[i].len) memcpy(b + p + 8, s[i].ptr, s[i].len);
        p += 8 + s[i].len;
    }
    return put(w, key, ZL_GGUF_ARRAY, b, len);
}

int zl_gguf_copy_kv(zl_gguf_writer *w, const zl_gguf_kv *kv) {
    char key[1024];
    zl_str_copy(kv->key, key, sizeof key);
    switch (kv->type) {
    case ZL_GGUF_STRING: {
        uint8_t *b = malloc(8 + kv->v.s.len);
        if (b) { memcpy(b, &kv->v.s.len, 8); memcpy(b + 8, kv->v.s.ptr, kv->v.s.len); }
        return put(w, key, ZL_GGUF_STRING, b, 8 + kv->v.s.len);
    }
    case ZL_GGUF_ARRAY:
        if (kv->v.arr.type == ZL_GGUF_STRING) return zl_gguf_set_arr_str(w, key, kv->v.arr.strs, kv->v.arr.n);
        return zl_gguf_set_arr(w, key, kv->v.arr.type, kv->v.arr.data, kv->v.arr.n);
    default: {
        size_t es = elem_size(kv->type);
        uint8_t raw[8];
        switch (kv->type) {
        case ZL_GGUF_U8: case ZL_GGUF_BOOL: raw[0] = (uint8_t)kv->v.u; break;
        case ZL_GGUF_I8: raw[0] = (uint8_t)(int8_t)kv->v.i; break;
        case ZL_GGUF_U16: { uint16_t x = (uint16_t)kv->v.u; memcpy(raw, &x, 2); break; }
        case ZL_GGUF_I16: { int16_t x = (int16_t)kv->v.i; memcpy(raw, &x, 2); break; }
        case ZL_GGUF_U32: { uint32_t x = (uint32_t)kv->v.u; memcpy(raw, &x, 4); break; }
        case ZL_GGUF_I32: { int32_t x = (int32_t)kv->v.i; memcpy(raw, &x, 4); break; }
        case ZL_GGUF_F32: { float x = (float)kv->v.f; memcpy(raw, &x, 4); break; }
        case ZL_GGUF_U64: memcpy(raw, &kv->v.u, 8); break;
        case ZL_GGUF_I64: memcpy(raw, &kv->v.i, 8); break;
        case ZL_GGUF_F64: memcpy(raw, &kv->v.f, 8); break;
        default: return ZL_EINVAL;
        }
        return put_scalar(w, key, kv->type, raw, es);
    }
    }
}

int zl_gguf_add_tensor(zl_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
                       const void *data, uint64_t nbytes) {
    if (n_dims == 0 || n_dims > ZL_GGUF_MAX_DIMS) return ZL_EINVAL;
    if (w->n_t == w->cap_t) {
        size_t nc = w->cap_t ? w->cap_t * 2 : 64;
        wtensor *nt = realloc(w->t, nc * sizeof *nt);
        if (!nt) return ZL_ENOMEM;
        w->t = nt;
        w->cap_t = nc;
    }
    wtensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    if (!t->name) return ZL_ENOMEM;
    t->type = type;
    t->n_dims = n_dims;
    for (int d = 0; d < ZL_GGUF_MAX_DIMS; d++) t->ne[d] = d < (int)n_dims ? ne[d] : 1;
    t->data = data;
    t->nbytes = nbytes;
    w->n_t++;
    return 0;
}

static int wr(FILE *f, const void *p, size_t n) { return n == 0 || fwrite(p, 1, n, f) == n ? 0 : -1; }

static int pad(FILE *f, uint64_t *pos) {
    static const uint8_t zeros[W_ALIGN];
    uint64_t np = (*pos + W_ALIGN - 1) / W_ALIGN * W_ALIGN;
    int rc = wr(f, zeros, (size_t)(np - *pos));
    *pos = np;
    return rc;
}

int zl_gguf_write(zl_gguf_writer *w, const char *path, zl_err *err) {
    /* alignment is fixed at 32; drop any copied general.alignment */
    for (size_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, "general.alignment")) {
            free(w->kv[i].key);
            free(w->kv[i].blob);
            w->kv[i] = w->kv[--w->n_kv];
            break;
        }
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return zl_errf(err, ZL_EINVAL, "output path too long");
    FILE *f = fopen(tmp, "wb");
    if (!f) return zl_errf(err, ZL_EIO, "cannot create %s: %s", tmp, strerror(errno));
    int bad = 0;
    uint32_t version = 3;
    uint64_t nt = w->n_t, nkv = w->n_kv, pos = 0;
    bad |= wr(f, "GGUF", 4) | wr(f, &version, 4) | wr(f, &nt, 8) | wr(f, &nkv, 8);
    pos = 24;
    for (size_t i = 0; i < w->n_kv; i++) {
        uint64_t kl = strlen(w->kv[i].key);
        bad |= wr(f, &kl, 8) | wr(f, w->kv[i].key, kl) | wr(f, &w->kv[i].type, 4) |
               wr(f, w->kv[i].blob, w->kv[i].blob_len);
        pos += 12 + kl + w->kv[i].blob_len;
    }
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        wtensor *t = &w->t[i];
        t->offset = off;
        off = (off + t->nbytes + W_ALIGN - 1) / W_ALIGN * W_ALIGN;
        uint64_t nl = strlen(t->name);
        bad |= wr(f, &nl, 8) | wr(f, t->name, nl) | wr(f, &t->n_dims, 4);
        for (uint32_t d = 0; d < t->n_dims; d++) {
            uint64_t ne = (uint64_t)t->ne[d];
            bad |= wr(f, &ne, 8);
        }
        bad |= wr(f, &t->type, 4) | wr(f, &t->offset, 8);
        pos += 8 + nl + 4 + 8ull * t->n_dims + 12;
    }
    bad |= pad(f, &pos);
    for (size_t i = 0; i < w->n_t; i++) {
        bad |= wr(f, w->t[i].data, w->t[i].nbytes);
        pos += w->t[i].nbytes;
        if (i + 1 < w->n_t) bad |= pad(f, &pos);
    }
    if (fclose(f) != 0) bad = 1;
    if (bad) {
        remove(tmp);
        return zl_errf(err, ZL_EIO, "writing %s failed: %s", path, strerror(errno));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        remove(tmp);
        return zl_errf(err, ZL_EIO, "cannot rename %s to %s: %s", tmp, path, strerror(e));
    }
    return 0;
}
