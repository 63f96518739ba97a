/* gguf_write.c — the GGUF v3 writer (every file zerolayer makes).
 *
 * Owns: serialising metadata and tensors.  All metadata and every tensor's
 * name, type and shape are declared first; the header (offsets follow from
 * the shapes) is written by zl_gguf_write_begin, then tensor data goes out in
 * declaration order, in pieces of any size, and nothing is kept after a piece
 * is written — so quantize and synth write files larger than memory.
 * zl_gguf_write is the same path fed from tensor data held in memory.  The
 * output appears under its final name only when finish has checked that
 * every tensor received exactly its bytes; an abandoned writer removes its
 * temporary file.  Alignment 32, each tensor padded to it.  Never reads a
 * file and never interprets tensor data.  Metadata values are serialised
 * when set (copied from a reader's parsed kv, which may carry a new key). */
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
    uint8_t *val; /* serialised value (without key and type) */
    size_t len;
} wkv;

typedef struct {
    char *name;
    uint32_t type, n_dims;
    int64_t ne[ZL_GGUF_MAX_DIMS];
    uint64_t nbytes;
    const void *data; /* zl_gguf_add_tensor: the bytes zl_gguf_write sends; NULL when streamed */
} wtensor;

struct zl_gguf_writer {
    wkv *kv;
    size_t n_kv, cap_kv;
    wtensor *t;
    size_t n_t, cap_t;
    FILE *f;           /* open between begin and finish */
    char *path, *tmp;
    size_t cur;        /* tensor receiving data */
    uint64_t cur_done; /* its bytes written so far */
    int failed;
};

zl_gguf_writer *zl_gguf_writer_new(void) { return calloc(1, sizeof(zl_gguf_writer)); }

void zl_gguf_writer_free(zl_gguf_writer *w) {
    if (!w) return;
    if (w->f) {
        fclose(w->f);
        remove(w->tmp);
    }
    for (size_t i = 0; i < w->n_kv; i++) { free(w->kv[i].key); free(w->kv[i].val); }
    for (size_t i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->kv);
    free(w->t);
    free(w->path);
    free(w->tmp);
    free(w);
}

/* Set key (key_len bytes) to a serialised value, replacing an earlier one;
 * copies val.  ZL_EINVAL once the header is written. */
static int put(zl_gguf_writer *w, const char *key, size_t key_len, uint32_t type, const void *val, size_t len) {
    if (w->f) return ZL_EINVAL;
    uint8_t *v = malloc(len ? len : 1);
    if (!v) return ZL_ENOMEM;
    if (len) memcpy(v, val, len);
    for (size_t i = 0; i < w->n_kv; i++)
        if (strlen(w->kv[i].key) == key_len && !memcmp(w->kv[i].key, key, key_len)) {
            free(w->kv[i].val);
            w->kv[i] = (wkv){w->kv[i].key, type, v, len};
            return 0;
        }
    if (w->n_kv == w->cap_kv) {
        size_t nc = w->cap_kv ? 2 * w->cap_kv : 32;
        wkv *nk = realloc(w->kv, nc * sizeof *nk);
        if (!nk) { free(v); return ZL_ENOMEM; }
        w->kv = nk;
        w->cap_kv = nc;
    }
    char *k = strndup(key, key_len);
    if (!k) { free(v); return ZL_ENOMEM; }
    w->kv[w->n_kv++] = (wkv){k, type, v, len};
    return 0;
}

static int put_scalar(zl_gguf_writer *w, const char *key, uint32_t type, const void *v) {
    return put(w, key, strlen(key), type, v, zl_gguf_vtype_size(type));
}

int zl_gguf_set_u32(zl_gguf_writer *w, const char *k, uint32_t v) { return put_scalar(w, k, ZL_GGUF_U32, &v); }
int zl_gguf_set_i32(zl_gguf_writer *w, const char *k, int32_t v) { return put_scalar(w, k, ZL_GGUF_I32, &v); }
int zl_gguf_set_u64(zl_gguf_writer *w, const char *k, uint64_t v) { return put_scalar(w, k, ZL_GGUF_U64, &v); }
int zl_gguf_set_f32(zl_gguf_writer *w, const char *k, float v) { return put_scalar(w, k, ZL_GGUF_F32, &v); }
int zl_gguf_set_bool(zl_gguf_writer *w, const char *k, bool v) {
    uint8_t b = v;
    return put_scalar(w, k, ZL_GGUF_BOOL, &b);
}

int zl_gguf_set_str(zl_gguf_writer *w, const char *key, const char *v) {
    uint64_t n = strlen(v);
    uint8_t *b = malloc(8 + n);
    if (!b) return ZL_ENOMEM;
    memcpy(b, &n, 8);
    memcpy(b + 8, v, n);
    int rc = put(w, key, strlen(key), ZL_GGUF_STRING, b, 8 + n);
    free(b);
    return rc;
}

int zl_gguf_set_arr(zl_gguf_writer *w, const char *key, uint32_t et, const void *data, uint64_t n) {
    size_t es = zl_gguf_vtype_size(et);
    if (!es) return ZL_EINVAL;
    size_t len = 12 + (size_t)n * es;
    uint8_t *b = malloc(len);
    if (!b) return ZL_ENOMEM;
    memcpy(b, &et, 4);
    memcpy(b + 4, &n, 8);
    if (n) memcpy(b + 12, data, (size_t)n * es);
    int rc = put(w, key, strlen(key), ZL_GGUF_ARRAY, b, len);
    free(b);
    return rc;
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
    int rc = put(w, key, strlen(key), ZL_GGUF_ARRAY, b, len);
    free(b);
    return rc;
}

int zl_gguf_copy_kv(zl_gguf_writer *w, const zl_gguf_kv *kv) {
    char key[1024];
    if (kv->key.len >= sizeof key) return ZL_EINVAL;
    zl_str_copy(kv->key, key, sizeof key);
    switch (kv->type) {
    case ZL_GGUF_STRING: {
        uint8_t *b = malloc(8 + kv->v.s.len);
        if (!b) return ZL_ENOMEM;
        memcpy(b, &kv->v.s.len, 8);
        memcpy(b + 8, kv->v.s.ptr, kv->v.s.len);
        int rc = put(w, key, strlen(key), ZL_GGUF_STRING, b, 8 + kv->v.s.len);
        free(b);
        return rc;
    }
    case ZL_GGUF_ARRAY:
        if (kv->v.arr.type == ZL_GGUF_STRING) return zl_gguf_set_arr_str(w, key, kv->v.arr.strs, kv->v.arr.n);
        return zl_gguf_set_arr(w, key, kv->v.arr.type, kv->v.arr.data, kv->v.arr.n);
    default: { /* the reader widened scalars into u / i / f: narrow them back */
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
        return put_scalar(w, key, kv->type, raw);
    }
    }
}

static int add(zl_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
               const void *data, uint64_t *nbytes) {
    if (w->f || n_dims == 0 || n_dims > ZL_GGUF_MAX_DIMS) return ZL_EINVAL;
    wtensor t = {0};
    uint64_t rows = 1;
    for (int d = 0; d < ZL_GGUF_MAX_DIMS; d++) {
        t.ne[d] = d < (int)n_dims ? ne[d] : 1;
        if (t.ne[d] <= 0) return ZL_EINVAL;
        if (d) rows *= (uint64_t)t.ne[d];
    }
    size_t rb = zl_row_size((zl_type)type, t.ne[0]);
    if (!rb) return ZL_EINVAL;
    t.type = type;
    t.n_dims = n_dims;
    t.nbytes = rows * rb;
    t.data = data;
    if (nbytes && *nbytes != t.nbytes) return ZL_EINVAL;
    if (w->n_t == w->cap_t) {
        size_t nc = w->cap_t ? 2 * w->cap_t : 64;
        wtensor *nt = realloc(w->t, nc * sizeof *nt);
        if (!nt) return ZL_ENOMEM;
        w->t = nt;
        w->cap_t = nc;
    }
    if (!(t.name = strdup(name))) return ZL_ENOMEM;
    w->t[w->n_t++] = t;
    return 0;
}

int zl_gguf_add_tensor(zl_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
                       const void *data, uint64_t nbytes) {
    if (!data) return ZL_EINVAL;
    return add(w, name, type, n_dims, ne, data, &nbytes);
}

int zl_gguf_declare_tensor(zl_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne) {
    return add(w, name, type, n_dims, ne, NULL, NULL);
}

uint64_t zl_gguf_writer_tensor_bytes(const zl_gguf_writer *w, size_t i) { return i < w->n_t ? w->t[i].nbytes : 0; }

static void wr(zl_gguf_writer *w, const void *p, size_t n) {
    if (n && fwrite(p, 1, n, w->f) != n) w->failed = 1;
}

static void pad(zl_gguf_writer *w, uint64_t n) {
    static const uint8_t zeros[W_ALIGN];
    wr(w, zeros, (size_t)((W_ALIGN - n % W_ALIGN) % W_ALIGN));
}

static int io_error(zl_gguf_writer *w, zl_err *err) {
    return zl_errf(err, ZL_EIO, "writing %s failed: %s", w->path, errno ? strerror(errno) : "I/O error");
}

int zl_gguf_write_begin(zl_gguf_writer *w, const char *path, zl_err *err) {
    if (w->f) return zl_errf(err, ZL_EINVAL, "GGUF writer already started");
    /* alignment is fixed at 32; a copied general.alignment would contradict it */
    for (size_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, "general.alignment")) {
            free(w->kv[i].key);
            free(w->kv[i].val);
            w->kv[i] = w->kv[--w->n_kv];
            break;
        }
    free(w->path);
    free(w->tmp);
    w->path = strdup(path);
    w->tmp = malloc(strlen(path) + 5);
    if (!w->path || !w->tmp) return zl_errf(err, ZL_ENOMEM, "out of memory");
    sprintf(w->tmp, "%s.tmp", path);
    if (!(w->f = fopen(w->tmp, "wb"))) return zl_errf(err, ZL_EIO, "cannot create %s: %s", w->tmp, strerror(errno));
    setvbuf(w->f, NULL, _IOFBF, 1 << 20);
    w->failed = 0;
    uint32_t version = 3;
    uint64_t nt = w->n_t, nkv = w->n_kv, pos = 24;
    wr(w, "GGUF", 4);
    wr(w, &version, 4);
    wr(w, &nt, 8);
    wr(w, &nkv, 8);
    for (size_t i = 0; i < w->n_kv; i++) {
        uint64_t kl = strlen(w->kv[i].key);
        wr(w, &kl, 8);
        wr(w, w->kv[i].key, kl);
        wr(w, &w->kv[i].type, 4);
        wr(w, w->kv[i].val, w->kv[i].len);
        pos += 12 + kl + w->kv[i].len;
    }
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        uint64_t nl = strlen(t->name);
        wr(w, &nl, 8);
        wr(w, t->name, nl);
        wr(w, &t->n_dims, 4);
        for (uint32_t d = 0; d < t->n_dims; d++) wr(w, &t->ne[d], 8);
        wr(w, &t->type, 4);
        wr(w, &off, 8);
        pos += 8 + nl + 4 + 8ull * t->n_dims + 12;
        off += (t->nbytes + W_ALIGN - 1) / W_ALIGN * W_ALIGN;
    }
    pad(w, pos);
    w->cur = 0;
    w->cur_done = 0;
    return w->failed ? io_error(w, err) : 0;
}

int zl_gguf_write_data(zl_gguf_writer *w, const void *data, uint64_t nbytes, zl_err *err) {
    if (!w->f) return zl_errf(err, ZL_EINVAL, "GGUF writer not started");
    const uint8_t *p = data;
    while (nbytes) {
        if (w->cur >= w->n_t) return zl_errf(err, ZL_EINVAL, "more tensor data than the declared tensors hold");
        const wtensor *t = &w->t[w->cur];
        uint64_t take = t->nbytes - w->cur_done;
        if (take > nbytes) take = nbytes;
        wr(w, p, (size_t)take);
        p += take;
        nbytes -= take;
        w->cur_done += take;
        if (w->cur_done == t->nbytes) {
            if (w->cur + 1 < w->n_t) pad(w, t->nbytes);
            w->cur++;
            w->cur_done = 0;
        }
    }
    return w->failed ? io_error(w, err) : 0;
}

int zl_gguf_write_finish(zl_gguf_writer *w, zl_err *err) {
    if (!w->f) return zl_errf(err, ZL_EINVAL, "GGUF writer not started");
    if (w->cur < w->n_t)
        return zl_errf(err, ZL_EINVAL, "tensor %s received %llu of its %llu bytes", w->t[w->cur].name,
                       (unsigned long long)w->cur_done, (unsigned long long)w->t[w->cur].nbytes);
    int bad = w->failed || fflush(w->f) != 0;
    int e = errno;
    bad |= fclose(w->f) != 0;
    w->f = NULL;
    if (bad) {
        remove(w->tmp);
        errno = e;
        return io_error(w, err);
    }
    if (rename(w->tmp, w->path) != 0) {
        e = errno;
        remove(w->tmp);
        return zl_errf(err, ZL_EIO, "cannot rename %s to %s: %s", w->tmp, w->path, strerror(e));
    }
    return 0;
}

int zl_gguf_write(zl_gguf_writer *w, const char *path, zl_err *err) {
    for (size_t i = 0; i < w->n_t; i++)
        if (!w->t[i].data)
            return zl_errf(err, ZL_EINVAL, "tensor %s was declared without data: stream it with zl_gguf_write_data",
                           w->t[i].name);
    int rc = zl_gguf_write_begin(w, path, err);
    for (size_t i = 0; !rc && i < w->n_t; i++) rc = zl_gguf_write_data(w, w->t[i].data, w->t[i].nbytes, err);
    if (!rc) rc = zl_gguf_write_finish(w, err);
    if (rc && w->f) { /* a failed write leaves no temporary file */
        fclose(w->f);
        w->f = NULL;
        remove(w->tmp);
    }
    return rc;
}
