/* gguf_stream.c — GGUF v3 writer that streams tensor data to disk.
 *
 * Owns: writing model files larger than memory (quantize, synth).  Unlike
 * zl_gguf_write, which needs every tensor's bytes at once, a stream declares
 * all metadata and every tensor's name, type and shape first; begin writes
 * the whole header (offsets follow from the shapes), then tensor data is
 * appended in declaration order, in pieces of any size, and nothing is kept
 * after a piece is written.  The output appears under its final name only
 * when finish has checked that every tensor received exactly its bytes; an
 * abandoned stream removes its temporary file.  Layout matches
 * zl_gguf_write: alignment 32, each tensor padded to it.
 *
 * Metadata copied from a reader is copied as the raw bytes it occupies in
 * the source mapping (a parsed kv's value follows its key and type there),
 * so every value type round-trips without a serialiser per type. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tensor/types.h"
#include "gguf.h"

#define S_ALIGN 32

typedef struct {
    char *key;
    uint32_t type;
    uint8_t *val; /* serialised value */
    size_t len;
} skv;

typedef struct {
    char *name;
    uint32_t type, n_dims;
    int64_t ne[ZL_GGUF_MAX_DIMS];
    uint64_t nbytes;
} stensor;

struct zl_gguf_stream {
    skv *kv;
    size_t n_kv, cap_kv;
    stensor *t;
    size_t n_t, cap_t;
    FILE *f;
    char *path, *tmp;
    size_t cur;        /* tensor receiving data */
    uint64_t cur_done; /* its bytes written so far */
    int failed;
};

zl_gguf_stream *zl_gguf_stream_new(void) { return calloc(1, sizeof(zl_gguf_stream)); }

void zl_gguf_stream_free(zl_gguf_stream *s) {
    if (!s) return;
    if (s->f) {
        fclose(s->f);
        remove(s->tmp);
    }
    for (size_t i = 0; i < s->n_kv; i++) { free(s->kv[i].key); free(s->kv[i].val); }
    for (size_t i = 0; i < s->n_t; i++) free(s->t[i].name);
    free(s->kv);
    free(s->t);
    free(s->path);
    free(s->tmp);
    free(s);
}

/* Set key to a serialised value, replacing an earlier one; copies val. */
static int put(zl_gguf_stream *s, const char *key, size_t key_len, uint32_t type, const void *val, size_t len) {
    if (s->f) return ZL_EINVAL;
    uint8_t *v = malloc(len ? len : 1);
    if (!v) return ZL_ENOMEM;
    memcpy(v, val, len);
    for (size_t i = 0; i < s->n_kv; i++)
        if (strlen(s->kv[i].key) == key_len && !memcmp(s->kv[i].key, key, key_len)) {
            free(s->kv[i].val);
            s->kv[i] = (skv){s->kv[i].key, type, v, len};
            return 0;
        }
    if (s->n_kv == s->cap_kv) {
        size_t nc = s->cap_kv ? 2 * s->cap_kv : 32;
        skv *nk = realloc(s->kv, nc * sizeof *nk);
        if (!nk) { free(v); return ZL_ENOMEM; }
        s->kv = nk;
        s->cap_kv = nc;
    }
    char *k = strndup(key, key_len);
    if (!k) { free(v); return ZL_ENOMEM; }
    s->kv[s->n_kv++] = (skv){k, type, v, len};
    return 0;
}

int zl_gguf_stream_set_u32(zl_gguf_stream *s, const char *key, uint32_t v) {
    return put(s, key, strlen(key), ZL_GGUF_U32, &v, 4);
}

int zl_gguf_stream_set_f32(zl_gguf_stream *s, const char *key, float v) {
    return put(s, key, strlen(key), ZL_GGUF_F32, &v, 4);
}

int zl_gguf_stream_set_str(zl_gguf_stream *s, const char *key, const char *v) {
    uint64_t n = strlen(v);
    uint8_t *b = malloc(8 + n);
    if (!b) return ZL_ENOMEM;
    memcpy(b, &n, 8);
    memcpy(b + 8, v, n);
    int rc = put(s, key, strlen(key), ZL_GGUF_STRING, b, 8 + n);
    free(b);
    return rc;
}

static size_t scalar_size(uint32_t t) {
    switch (t) {
    case ZL_GGUF_U8: case ZL_GGUF_I8: case ZL_GGUF_BOOL: return 1;
    case ZL_GGUF_U16: case ZL_GGUF_I16: return 2;
    case ZL_GGUF_U32: case ZL_GGUF_I32: case ZL_GGUF_F32: return 4;
    case ZL_GGUF_U64: case ZL_GGUF_I64: case ZL_GGUF_F64: return 8;
    default: return 0;
    }
}

int zl_gguf_stream_copy_kv(zl_gguf_stream *s, const zl_gguf_kv *kv) {
    const uint8_t *val = (const uint8_t *)kv->key.ptr + kv->key.len + 4;
    size_t len;
    switch (kv->type) {
    case ZL_GGUF_STRING: len = 8 + kv->v.s.len; break;
    case ZL_GGUF_ARRAY:
        if (kv->v.arr.type == ZL_GGUF_STRING) {
            const zl_str *last = kv->v.arr.n ? &kv->v.arr.strs[kv->v.arr.n - 1] : NULL;
            len = last ? (size_t)((const uint8_t *)last->ptr + last->len - val) : 12;
        } else {
            size_t es = scalar_size(kv->v.arr.type);
            if (!es) return ZL_EINVAL;
            len = 12 + (size_t)kv->v.arr.n * es;
        }
        break;
    default:
        len = scalar_size(kv->type);
        if (!len) return ZL_EINVAL;
    }
    return put(s, kv->key.ptr, (size_t)kv->key.len, kv->type, val, len);
}

int zl_gguf_stream_add_tensor(zl_gguf_stream *s, const char *name, uint32_t type, uint32_t n_dims,
                              const int64_t *ne) {
    if (s->f || n_dims == 0 || n_dims > ZL_GGUF_MAX_DIMS) return ZL_EINVAL;
    stensor t = {0};
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
    if (s->n_t == s->cap_t) {
        size_t nc = s->cap_t ? 2 * s->cap_t : 64;
        stensor *nt = realloc(s->t, nc * sizeof *nt);
        if (!nt) return ZL_ENOMEM;
        s->t = nt;
        s->cap_t = nc;
    }
    if (!(t.name = strdup(name))) return ZL_ENOMEM;
    s->t[s->n_t++] = t;
    return 0;
}

uint64_t zl_gguf_stream_tensor_bytes(const zl_gguf_stream *s, size_t i) { return i < s->n_t ? s->t[i].nbytes : 0; }

static void wr(zl_gguf_stream *s, const void *p, size_t n) {
    if (n && fwrite(p, 1, n, s->f) != n) s->failed = 1;
}

static void pad(zl_gguf_stream *s, uint64_t n) {
    static const uint8_t zeros[S_ALIGN];
    wr(s, zeros, (size_t)((S_ALIGN - n % S_ALIGN) % S_ALIGN));
}

static int io_error(zl_gguf_stream *s, zl_err *err) {
    return zl_errf(err, ZL_EIO, "writing %s failed: %s", s->path, errno ? strerror(errno) : "I/O error");
}

int zl_gguf_stream_begin(zl_gguf_stream *s, const char *path, zl_err *err) {
    if (s->f) return zl_errf(err, ZL_EINVAL, "stream already started");
    /* alignment is fixed at 32; a copied general.alignment would contradict it */
    for (size_t i = 0; i < s->n_kv; i++)
        if (!strcmp(s->kv[i].key, "general.alignment")) {
            free(s->kv[i].key);
            free(s->kv[i].val);
            s->kv[i] = s->kv[--s->n_kv];
            break;
        }
    free(s->path);
    free(s->tmp);
    s->path = strdup(path);
    s->tmp = malloc(strlen(path) + 5);
    if (!s->path || !s->tmp) return zl_errf(err, ZL_ENOMEM, "out of memory");
    sprintf(s->tmp, "%s.tmp", path);
    if (!(s->f = fopen(s->tmp, "wb"))) return zl_errf(err, ZL_EIO, "cannot create %s: %s", s->tmp, strerror(errno));
    setvbuf(s->f, NULL, _IOFBF, 1 << 20);
    uint32_t version = 3;
    uint64_t nt = s->n_t, nkv = s->n_kv, pos = 24;
    wr(s, "GGUF", 4);
    wr(s, &version, 4);
    wr(s, &nt, 8);
    wr(s, &nkv, 8);
    for (size_t i = 0; i < s->n_kv; i++) {
        uint64_t kl = strlen(s->kv[i].key);
        wr(s, &kl, 8);
        wr(s, s->kv[i].key, kl);
        wr(s, &s->kv[i].type, 4);
        wr(s, s->kv[i].val, s->kv[i].len);
        pos += 12 + kl + s->kv[i].len;
    }
    uint64_t off = 0;
    for (size_t i = 0; i < s->n_t; i++) {
        const stensor *t = &s->t[i];
        uint64_t nl = strlen(t->name);
        wr(s, &nl, 8);
        wr(s, t->name, nl);
        wr(s, &t->n_dims, 4);
        for (uint32_t d = 0; d < t->n_dims; d++) wr(s, &t->ne[d], 8);
        wr(s, &t->type, 4);
        wr(s, &off, 8);
        pos += 8 + nl + 4 + 8ull * t->n_dims + 12;
        off += (t->nbytes + S_ALIGN - 1) / S_ALIGN * S_ALIGN;
    }
    pad(s, pos);
    s->cur = 0;
    s->cur_done = 0;
    return s->failed ? io_error(s, err) : 0;
}

int zl_gguf_stream_write(zl_gguf_stream *s, const void *data, uint64_t nbytes, zl_err *err) {
    if (!s->f) return zl_errf(err, ZL_EINVAL, "stream not started");
    const uint8_t *p = data;
    while (nbytes) {
        if (s->cur >= s->n_t) return zl_errf(err, ZL_EINVAL, "more tensor data than the declared tensors hold");
        const stensor *t = &s->t[s->cur];
        uint64_t take = t->nbytes - s->cur_done;
        if (take > nbytes) take = nbytes;
        wr(s, p, (size_t)take);
        p += take;
        nbytes -= take;
        s->cur_done += take;
        if (s->cur_done == t->nbytes) {
            if (s->cur + 1 < s->n_t) pad(s, t->nbytes);
            s->cur++;
            s->cur_done = 0;
        }
    }
    return s->failed ? io_error(s, err) : 0;
}

int zl_gguf_stream_finish(zl_gguf_stream *s, zl_err *err) {
    if (!s->f) return zl_errf(err, ZL_EINVAL, "stream not started");
    if (s->cur < s->n_t)
        return zl_errf(err, ZL_EINVAL, "tensor %s received %llu of its %llu bytes", s->t[s->cur].name,
                       (unsigned long long)s->cur_done, (unsigned long long)s->t[s->cur].nbytes);
    int bad = s->failed || fflush(s->f) != 0;
    int e = errno;
    bad |= fclose(s->f) != 0;
    s->f = NULL;
    if (bad) {
        remove(s->tmp);
        errno = e;
        return io_error(s, err);
    }
    if (rename(s->tmp, s->path) != 0) {
        e = errno;
        remove(s->tmp);
        return zl_errf(err, ZL_EIO, "cannot rename %s to %s: %s", s->tmp, s->path, strerror(e));
    }
    return 0;
}
