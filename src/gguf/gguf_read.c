/* gguf_read.c — GGUF v2/v3 parser over an mmap'd file or a caller's buffer.
 *
 * Owns: turning untrusted bytes into zl_gguf.  Must never read outside the
 * buffer, trust a count before checking it against the bytes that remain, or
 * return a tensor whose extent is not inside the file.  All reads go through
 * the cursor helpers below, which are the only code that touches raw bytes.
 * Also owns the size table of GGUF's fixed-size value types (the writer asks it). */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../tensor/types.h"

#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_KEY_LEN 65535

typedef struct {
    const uint8_t *p;
    size_t size, pos;
    zl_err *err;
} cursor;

static size_t remaining(const cursor *c) { return c->size - c->pos; }

static int need(cursor *c, size_t n, const char *what) {
    if (n > remaining(c))
        return zl_errf(c->err, ZL_EFORMAT, "truncated file: %s at offset %zu needs %zu bytes, %zu left",
                       what, c->pos, n, remaining(c));
    return 0;
}

static int rd(cursor *c, void *dst, size_t n, const char *what) {
    if (need(c, n, what)) return ZL_EFORMAT;
    memcpy(dst, c->p + c->pos, n);
    c->pos += n;
    return 0;
}

static int rd_u32(cursor *c, uint32_t *v, const char *what) { return rd(c, v, 4, what); }
static int rd_u64(cursor *c, uint64_t *v, const char *what) { return rd(c, v, 8, what); }

static int rd_str(cursor *c, zl_str *s, const char *what) {
    uint64_t len;
    if (rd_u64(c, &len, what)) return ZL_EFORMAT;
    if (len > remaining(c))
        return zl_errf(c->err, ZL_EFORMAT, "%s: string length %llu at offset %zu exceeds the %zu bytes left",
                       what, (unsigned long long)len, c->pos - 8, remaining(c));
    s->ptr = (const char *)c->p + c->pos;
    s->len = len;
    c->pos += len;
    return 0;
}

size_t zl_gguf_vtype_size(uint32_t t) {
    static const uint8_t size[ZL_GGUF_NTYPES] = {
        [ZL_GGUF_U8] = 1, [ZL_GGUF_I8] = 1, [ZL_GGUF_BOOL] = 1, [ZL_GGUF_U16] = 2, [ZL_GGUF_I16] = 2,
        [ZL_GGUF_U32] = 4, [ZL_GGUF_I32] = 4, [ZL_GGUF_F32] = 4, [ZL_GGUF_U64] = 8, [ZL_GGUF_I64] = 8,
        [ZL_GGUF_F64] = 8,
    };
    return t < ZL_GGUF_NTYPES ? size[t] : 0;
}

const char *zl_gguf_vtype_name(uint32_t t) {
    static const char *names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool",
                                  "string", "array", "u64", "i64", "f64"};
    return t < ZL_GGUF_NTYPES ? names[t] : "invalid";
}

/* Decode one scalar of numeric type t from p into kv->v. */
static void load_scalar(zl_gguf_kv *kv, uint32_t t, const uint8_t *p) {
    switch (t) {
    case ZL_GGUF_U8: kv->v.u = p[0]; break;
    case ZL_GGUF_BOOL: kv->v.u = p[0] != 0; break;
    case ZL_GGUF_I8: kv->v.i = (int8_t)p[0]; break;
    case ZL_GGUF_U16: { uint16_t x; memcpy(&x, p, 2); kv->v.u = x; break; }
    case ZL_GGUF_I16: { int16_t x; memcpy(&x, p, 2); kv->v.i = x; break; }
    case ZL_GGUF_U32: { uint32_t x; memcpy(&x, p, 4); kv->v.u = x; break; }
    case ZL_GGUF_I32: { int32_t x; memcpy(&x, p, 4); kv->v.i = x; break; }
    case ZL_GGUF_F32: { float x; memcpy(&x, p, 4); kv->v.f = x; break; }
    case ZL_GGUF_U64: { uint64_t x; memcpy(&x, p, 8); kv->v.u = x; break; }
    case ZL_GGUF_I64: { int64_t x; memcpy(&x, p, 8); kv->v.i = x; break; }
    case ZL_GGUF_F64: { double x; memcpy(&x, p, 8); kv->v.f = x; break; }
    }
}

static int key_eq(zl_str a, zl_str b) { return a.len == b.len && !memcmp(a.ptr, b.ptr, a.len); }

static int parse_kv(cursor *c, zl_gguf_kv *kv, uint64_t idx) {
    char what[96];
    snprintf(what, sizeof what, "key of metadata entry %llu", (unsigned long long)idx);
    if (rd_str(c, &kv->key, what)) return ZL_EFORMAT;
    char kname[128];
    zl_str_copy(kv->key, kname, sizeof kname);
    if (kv->key.len == 0 || kv->key.len > GGUF_MAX_KEY_LEN)
        return zl_errf(c->err, ZL_EFORMAT, "metadata entry %llu has an invalid key length %llu",
                       (unsigned long long)idx, (unsigned long long)kv->key.len);
    snprintf(what, sizeof what, "type of metadata '%s'", kname);
    if (rd_u32(c, &kv->type, what)) return ZL_EFORMAT;
    snprintf(what, sizeof what, "value of metadata '%s'", kname);
    if (kv->type == ZL_GGUF_STRING) return rd_str(c, &kv->v.s, what);
    if (kv->type != ZL_GGUF_ARRAY) {
        size_t sz = zl_gguf_vtype_size(kv->type);
        if (!sz) return zl_errf(c->err, ZL_EFORMAT, "metadata '%s' has invalid value type %u", kname, kv->type);
        if (need(c, sz, what)) return ZL_EFORMAT;
        load_scalar(kv, kv->type, c->p + c->pos);
        c->pos += sz;
        return 0;
    }
    uint32_t et;
    uint64_t n;
    if (rd_u32(c, &et, what) || rd_u64(c, &n, what)) return ZL_EFORMAT;
    kv->v.arr.type = et;
    kv->v.arr.n = n;
    if (et == ZL_GGUF_STRING) {
        /* each string needs at least its 8-byte length */
        if (n > remaining(c) / 8)
            return zl_errf(c->err, ZL_EFORMAT, "metadata '%s': string array count %llu exceeds the file size",
                           kname, (unsigned long long)n);
        kv->v.arr.strs = malloc((n ? n : 1) * sizeof(zl_str));
        if (!kv->v.arr.strs) return zl_errf(c->err, ZL_ENOMEM, "out of memory reading '%s'", kname);
        kv->v.arr.data = c->p + c->pos;
        for (uint64_t i = 0; i < n; i++) {
            snprintf(what, sizeof what, "element %llu of metadata '%s'", (unsigned long long)i, kname);
            if (rd_str(c, &kv->v.arr.strs[i], what)) return ZL_EFORMAT;
        }
        return 0;
    }
    size_t sz = zl_gguf_vtype_size(et);
    if (!sz)
        return zl_errf(c->err, ZL_EFORMAT, "metadata '%s': invalid array element type %u%s", kname, et,
                       et == ZL_GGUF_ARRAY ? " (nested arrays are not supported)" : "");
    if (n > remaining(c) / sz)
        return zl_errf(c->err, ZL_EFORMAT, "metadata '%s': array of %llu %s elements extends past end of file",
                       kname, (unsigned long long)n, zl_gguf_vtype_name(et));
    kv->v.arr.data = c->p + c->pos;
    c->pos += n * sz;
    return 0;
}

static int parse_tensor_info(cursor *c, zl_gguf_tensor *t, uint64_t idx) {
    char what[160], tname[128];
    snprintf(what, sizeof what, "name of tensor %llu", (unsigned long long)idx);
    if (rd_str(c, &t->name, what)) return ZL_EFORMAT;
    zl_str_copy(t->name, tname, sizeof tname);
    if (t->name.len == 0 || t->name.len > 1024)
        return zl_errf(c->err, ZL_EFORMAT, "tensor %llu has an invalid name length %llu",
                       (unsigned long long)idx, (unsigned long long)t->name.len);
    snprintf(what, sizeof what, "dimensions of tensor %s", tname);
    if (rd_u32(c, &t->n_dims, what)) return ZL_EFORMAT;
    if (t->n_dims == 0 || t->n_dims > ZL_GGUF_MAX_DIMS)
        return zl_errf(c->err, ZL_EFORMAT, "tensor %s has %u dimensions (1..%d allowed)", tname, t->n_dims,
                       ZL_GGUF_MAX_DIMS);
    int64_t nel = 1;
    for (int d = 0; d < ZL_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        uint64_t ne;
        if (rd_u64(c, &ne, what)) return ZL_EFORMAT;
        if (ne == 0 || ne > (uint64_t)INT64_MAX || (int64_t)ne > INT64_MAX / nel)
            return zl_errf(c->err, ZL_EFORMAT, "tensor %s has an invalid shape (dimension %u = %llu)", tname, d,
                           (unsigned long long)ne);
        t->ne[d] = (int64_t)ne;
        nel *= (int64_t)ne;
    }
    snprintf(what, sizeof what, "type of tensor %s", tname);
    if (rd_u32(c, &t->type, what)) return ZL_EFORMAT;
    const zl_type_traits *tr = zl_type_traits_of(t->type);
    if (!tr->name) return zl_errf(c->err, ZL_EFORMAT, "tensor %s has unknown type id %u", tname, t->type);
    if (t->ne[0] % tr->blck)
        return zl_errf(c->err, ZL_EFORMAT, "tensor %s: row length %lld is not a multiple of the %s block size %d",
                       tname, (long long)t->ne[0], tr->name, tr->blck);
    uint64_t rows = (uint64_t)(nel / t->ne[0]), blocks = (uint64_t)(t->ne[0] / tr->blck);
    if (blocks > UINT64_MAX / (uint64_t)tr->size)
        return zl_errf(c->err, ZL_EFORMAT, "tensor %s is too large (row of %lld elements)", tname, (long long)t->ne[0]);
    uint64_t row_bytes = blocks * (uint64_t)tr->size;
    if (rows && row_bytes > UINT64_MAX / rows)
        return zl_errf(c->err, ZL_EFORMAT, "tensor %s is too large", tname);
    t->nbytes = rows * row_bytes;
    snprintf(what, sizeof what, "offset of tensor %s", tname);
    return rd_u64(c, &t->offset, what);
}

static void free_contents(zl_gguf *g) {
    if (g->kv)
        for (uint64_t i = 0; i < g->n_kv; i++)
            if (g->kv[i].type == ZL_GGUF_ARRAY) free(g->kv[i].v.arr.strs);
    free(g->kv);
    free(g->tensors);
}

static int parse(zl_gguf *g, zl_err *err) {
    cursor c = {g->base, g->size, 0, err};
    char magic[4];
    if (g->size < 4 || memcmp(g->base, "GGUF", 4) != 0) {
        if (g->size < 4) return zl_errf(err, ZL_EFORMAT, "not a GGUF file: only %zu bytes", g->size);
        return zl_errf(err, ZL_EFORMAT, "not a GGUF file: bad magic %02x %02x %02x %02x", g->base[0], g->base[1],
                       g->base[2], g->base[3]);
    }
    rd(&c, magic, 4, "magic");
    if (rd_u32(&c, &g->version, "version")) return ZL_EFORMAT;
    if (g->version == 1) return zl_errf(err, ZL_EUNSUP, "GGUF version 1 is not supported (only v2 and v3)");
    if (g->version != 2 && g->version != 3)
        return zl_errf(err, ZL_EFORMAT, "unsupported GGUF version %u (only v2 and v3)", g->version);
    if (rd_u64(&c, &g->n_tensors, "tensor count") || rd_u64(&c, &g->n_kv, "metadata count")) return ZL_EFORMAT;
    /* minimal sizes: kv = key len(8) + key(1) + type(4) + value(1); tensor = 8+1+4+8+4+8 */
    if (g->n_kv > remaining(&c) / 14)
        return zl_errf(err, ZL_EFORMAT, "metadata count %llu is impossible for a file of %zu bytes",
                       (unsigned long long)g->n_kv, g->size);
    if (g->n_tensors > remaining(&c) / 33)
        return zl_errf(err, ZL_EFORMAT, "tensor count %llu is impossible for a file of %zu bytes",
                       (unsigned long long)g->n_tensors, g->size);
    g->kv = calloc(g->n_kv ? g->n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->tensors);
    if (!g->kv || !g->tensors) return zl_errf(err, ZL_ENOMEM, "out of memory reading GGUF header");

    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        if (parse_kv(&c, &g->kv[i], i)) return err ? err->code : ZL_EFORMAT;
        for (uint64_t j = 0; j < i; j++)
            if (key_eq(g->kv[j].key, g->kv[i].key)) {
                char k[128];
                return zl_errf(err, ZL_EFORMAT, "duplicate metadata key '%s'", zl_str_copy(g->kv[i].key, k, sizeof k));
            }
        if (zl_str_eq(g->kv[i].key, "general.alignment")) {
            if (g->kv[i].type != ZL_GGUF_U32)
                return zl_errf(err, ZL_EFORMAT, "general.alignment must be u32, found %s",
                               zl_gguf_vtype_name(g->kv[i].type));
            uint64_t a = g->kv[i].v.u;
            if (a == 0 || (a & (a - 1)) || a > 65536)
                return zl_errf(err, ZL_EFORMAT, "general.alignment %llu is not a power of two up to 65536",
                               (unsigned long long)a);
            g->alignment = (uint32_t)a;
        }
    }
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (parse_tensor_info(&c, &g->tensors[i], i)) return err ? err->code : ZL_EFORMAT;

    uint64_t data_off = (c.pos + g->alignment - 1) / g->alignment * g->alignment;
    if (g->n_tensors && data_off > g->size)
        return zl_errf(err, ZL_EFORMAT, "tensor data section starts at %llu, past end of file (%zu bytes)",
                       (unsigned long long)data_off, g->size);
    g->data_offset = data_off;
    uint64_t data_size = g->size > data_off ? g->size - data_off : 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        zl_gguf_tensor *t = &g->tensors[i];
        char tname[128];
        zl_str_copy(t->name, tname, sizeof tname);
        for (uint64_t j = 0; j < i; j++)
            if (key_eq(g->tensors[j].name, t->name))
                return zl_errf(err, ZL_EFORMAT, "duplicate tensor name %s", tname);
        if (t->offset % g->alignment)
            return zl_errf(err, ZL_EFORMAT, "tensor %s offset %llu is not aligned to %u", tname,
                           (unsigned long long)t->offset, g->alignment);
        if (t->offset > data_size || t->nbytes > data_size - t->offset)
            return zl_errf(err, ZL_EFORMAT, "tensor %s extends past end of file (needs bytes %llu..%llu of a %llu-byte data section)",
                           tname, (unsigned long long)t->offset, (unsigned long long)(t->offset + t->nbytes),
                           (unsigned long long)data_size);
        t->data = g->base + data_off + t->offset;
    }
    return 0;
}

int zl_gguf_open_mem(zl_gguf **out, const void *data, size_t size, zl_err *err) {
    *out = NULL;
    zl_gguf *g = calloc(1, sizeof *g);
    if (!g) return zl_errf(err, ZL_ENOMEM, "out of memory");
    g->base = data;
    g->size = size;
    int rc = parse(g, err);
    if (rc) { zl_gguf_close(g); return rc; }
    *out = g;
    return 0;
}

/* Huge pages: the kernels stream every weight once per token, and with 4 KiB
 * pages that is a TLB miss per 4 KiB (130,000 per token on a 1B Q4_0 model).
 * A mapping placed at a 2 MiB-aligned address (the file offset 0 then
 * lines up with it) and advised MADV_HUGEPAGE lets the kernel map the page
 * cache's large folios with 2 MiB entries where the file system has them,
 * and a heap copy get transparent huge pages.  Both are hints: without them
 * everything works on 4 KiB pages. */
#define ZL_HUGE_PAGE ((size_t)2 << 20)

static void *map_huge_aligned(size_t size, int flags, int fd) {
    size_t span = size + ZL_HUGE_PAGE;
    uint8_t *res = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (res == MAP_FAILED) return mmap(NULL, size, PROT_READ, flags, fd, 0);
    uint8_t *want = (uint8_t *)(((uintptr_t)res + ZL_HUGE_PAGE - 1) & ~(uintptr_t)(ZL_HUGE_PAGE - 1));
    void *base = mmap(want, size, PROT_READ, flags | MAP_FIXED, fd, 0);
    if (base == MAP_FAILED) {
        munmap(res, span);
        return mmap(NULL, size, PROT_READ, flags, fd, 0);
    }
    /* give back the reservation around the mapping */
    size_t page = (size_t)sysconf(_SC_PAGESIZE), end = ((size_t)(want - res) + size + page - 1) & ~(page - 1);
    if (want > res) munmap(res, (size_t)(want - res));
    if (end < span) munmap(res + end, span - end);
    madvise(base, size, MADV_HUGEPAGE);
    return base;
}

int zl_gguf_open(zl_gguf **out, const char *path, const zl_gguf_open_opts *opts, zl_err *err) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return zl_errf(err, ZL_EIO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return zl_errf(err, ZL_EIO, "cannot stat %s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) { close(fd); return zl_errf(err, ZL_EIO, "%s is not a regular file", path); }
    size_t size = (size_t)st.st_size;
    if (size == 0) { close(fd); return zl_errf(err, ZL_EFORMAT, "%s: empty file, not a GGUF model", path); }
    void *base = NULL, *copy = NULL;
    if (opts && opts->no_mmap) {
        size_t al = (size + ZL_HUGE_PAGE - 1) & ~(ZL_HUGE_PAGE - 1);
        copy = aligned_alloc(ZL_HUGE_PAGE, al);
        if (copy) madvise(copy, al, MADV_HUGEPAGE);
        if (!copy) { close(fd); return zl_errf(err, ZL_ENOMEM, "cannot allocate %zu bytes for %s", size, path); }
        size_t got = 0;
        while (got < size) {
            ssize_t r = read(fd, (char *)copy + got, size - got);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) {
                int e = errno;
                free(copy);
                close(fd);
                return zl_errf(err, ZL_EIO, "reading %s: %s", path, r < 0 ? strerror(e) : "unexpected end of file");
            }
            got += (size_t)r;
        }
        base = copy;
    } else {
        int flags = MAP_PRIVATE | ((opts && opts->populate) ? MAP_POPULATE : 0);
        base = map_huge_aligned(size, flags, fd);
        if (base == MAP_FAILED) {
            int e = errno;
            close(fd);
            return zl_errf(err, ZL_EIO, "cannot mmap %s: %s", path, strerror(e));
        }
    }
    close(fd);
    zl_gguf *g;
    int rc = zl_gguf_open_mem(&g, base, size, err);
    if (rc) {
        zl_err_prefix(err, "%s", path);
        if (copy) free(copy); else munmap(base, size);
        return rc;
    }
    g->owns_map = copy == NULL;
    g->owned_copy = copy;
    *out = g;
    return 0;
}

void zl_gguf_close(zl_gguf *g) {
    if (!g) return;
    free_contents(g);
    if (g->owns_map) munmap((void *)g->base, g->size);
    free(g->owned_copy);
    free(g);
}

int zl_str_eq(zl_str s, const char *c) {
    size_t n = strlen(c);
    return s.len == n && !memcmp(s.ptr, c, n);
}

char *zl_str_copy(zl_str s, char *buf, size_t cap) {
    if (!cap) return buf;
    size_t n = s.len < cap - 1 ? (size_t)s.len : cap - 1;
    if (n) memcpy(buf, s.ptr, n);
    buf[n] = 0;
    return buf;
}

const zl_gguf_kv *zl_gguf_find(const zl_gguf *g, const char *key) {
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (zl_str_eq(g->kv[i].key, key)) return &g->kv[i];
    return NULL;
}

const zl_gguf_tensor *zl_gguf_find_tensor(const zl_gguf *g, const char *name) {
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (zl_str_eq(g->tensors[i].name, name)) return &g->tensors[i];
    return NULL;
}

static int is_unsigned(uint32_t t) {
    return t == ZL_GGUF_U8 || t == ZL_GGUF_U16 || t == ZL_GGUF_U32 || t == ZL_GGUF_U64 || t == ZL_GGUF_BOOL;
}
static int is_signed(uint32_t t) {
    return t == ZL_GGUF_I8 || t == ZL_GGUF_I16 || t == ZL_GGUF_I32 || t == ZL_GGUF_I64;
}

int zl_gguf_get_u64(const zl_gguf *g, const char *key, uint64_t *out) {
    const zl_gguf_kv *kv = zl_gguf_find(g, key);
    if (!kv) return ZL_EINVAL;
    if (is_unsigned(kv->type)) { *out = kv->v.u; return 0; }
    if (is_signed(kv->type) && kv->v.i >= 0) { *out = (uint64_t)kv->v.i; return 0; }
    return ZL_EINVAL;
}

int zl_gguf_get_u32(const zl_gguf *g, const char *key, uint32_t *out) {
    uint64_t v;
    if (zl_gguf_get_u64(g, key, &v) || v > UINT32_MAX) return ZL_EINVAL;
    *out = (uint32_t)v;
    return 0;
}

int zl_gguf_get_i64(const zl_gguf *g, const char *key, int64_t *out) {
    const zl_gguf_kv *kv = zl_gguf_find(g, key);
    if (!kv) return ZL_EINVAL;
    if (is_signed(kv->type)) { *out = kv->v.i; return 0; }
    if (is_unsigned(kv->type) && kv->v.u <= (uint64_t)INT64_MAX) { *out = (int64_t)kv->v.u; return 0; }
    return ZL_EINVAL;
}

int zl_gguf_get_f32(const zl_gguf *g, const char *key, float *out) {
    const zl_gguf_kv *kv = zl_gguf_find(g, key);
    if (!kv) return ZL_EINVAL;
    if (kv->type == ZL_GGUF_F32 || kv->type == ZL_GGUF_F64) { *out = (float)kv->v.f; return 0; }
    if (is_signed(kv->type)) { *out = (float)kv->v.i; return 0; }
    if (is_unsigned(kv->type)) { *out = (float)kv->v.u; return 0; }
    return ZL_EINVAL;
}

int zl_gguf_get_bool(const zl_gguf *g, const char *key, bool *out) {
    const zl_gguf_kv *kv = zl_gguf_find(g, key);
    if (!kv) return ZL_EINVAL;
    if (is_unsigned(kv->type)) { *out = kv->v.u != 0; return 0; }
    if (is_signed(kv->type)) { *out = kv->v.i != 0; return 0; }
    return ZL_EINVAL;
}

int zl_gguf_get_str(const zl_gguf *g, const char *key, zl_str *out) {
    const zl_gguf_kv *kv = zl_gguf_find(g, key);
    if (!kv || kv->type != ZL_GGUF_STRING) return ZL_EINVAL;
    *out = kv->v.s;
    return 0;
}

const zl_gguf_kv *zl_gguf_get_arr(const zl_gguf *g, const char *key, uint32_t elem_type) {
    const zl_gguf_kv *kv = zl_gguf_find(g, key);
    if (!kv || kv->type != ZL_GGUF_ARRAY || kv->v.arr.type != elem_type) return NULL;
    return kv;
}

double zl_gguf_arr_f64(const zl_gguf_kv *kv, uint64_t i) {
    zl_gguf_kv tmp;
    uint32_t t = kv->v.arr.type;
    load_scalar(&tmp, t, (const uint8_t *)kv->v.arr.data + i * zl_gguf_vtype_size(t));
    if (t == ZL_GGUF_F32 || t == ZL_GGUF_F64) return tmp.v.f;
    return is_signed(t) ? (double)tmp.v.i : (double)tmp.v.u;
}

int64_t zl_gguf_arr_i64(const zl_gguf_kv *kv, uint64_t i) {
    zl_gguf_kv tmp;
    uint32_t t = kv->v.arr.type;
    load_scalar(&tmp, t, (const uint8_t *)kv->v.arr.data + i * zl_gguf_vtype_size(t));
    if (t == ZL_GGUF_F32 || t == ZL_GGUF_F64) {
        double f = tmp.v.f;
        return f != f ? 0 : f >= 9.2e18 ? INT64_MAX : f <= -9.2e18 ? INT64_MIN : (int64_t)f;
    }
    return is_signed(t) ? tmp.v.i : (tmp.v.u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)tmp.v.u);
}
