/* kv.c — allocation and truncation of per-sequence KV storage; see kv.h. */
#include "kv.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static atomic_ullong g_kv_allocs;

unsigned long long zl_kv_allocs(void) { return atomic_load(&g_kv_allocs); }

/* Large caches come straight from mmap, zero and untouched until written:
 * a sequence holds the pages its rows touch, not its whole context.  They
 * are advised for transparent huge pages only once half the context is in
 * use (kv_note_use): attention reads every row of a layer once per token,
 * and with 4 KiB pages a deep cache costs a TLB miss per page (at 4,096
 * positions, 2 MiB of K and V per layer); but a 2 MiB page faults in whole,
 * and a layer's region of a small model is under 2 MiB, so advised from the
 * start every layer's first row would make the whole cache resident at the
 * first token (8 slots of SmolLM2-135M at 4,096 positions: 750 MiB for a
 * few short requests).  From half on, the cache holds at most twice what
 * its rows use.  *mapped gets the size (0: an ordinary calloc). */
#define ZL_KV_MAP_MIN ((size_t)2 << 20)

static uint8_t *kv_mem(size_t bytes, size_t *mapped) {
    if (bytes < ZL_KV_MAP_MIN) {
        *mapped = 0;
        return calloc(1, bytes);
    }
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    *mapped = bytes;
    return p;
}

static void kv_note_use(zl_kv *kv) {
    int hi = kv->n_dirty > kv->n_used ? kv->n_dirty : kv->n_used;
    if (!kv->mapped || kv->huge || 2 * (long)hi < kv->n_ctx) return;
    madvise(kv->k, kv->mapped, MADV_HUGEPAGE);
    madvise(kv->v, kv->mapped, MADV_HUGEPAGE);
    kv->huge = 1;
}

size_t zl_kv_bytes_held(const zl_kv *kv) {
    size_t layer = (size_t)kv->n_ctx * kv->row_bytes;
    if (kv->mapped && !kv->huge) { /* rows 0 .. max(n_used, n_dirty) of each layer have been written */
        int hi = kv->n_dirty > kv->n_used ? kv->n_dirty : kv->n_used;
        size_t page = 4096, used = ((size_t)hi * kv->row_bytes + page - 1) / page * page;
        layer = used < layer ? used : layer;
    }
    return 2 * (size_t)kv->n_layers * layer;
}

static void kv_mem_free(uint8_t *p, size_t mapped) {
    if (!p) return;
    if (mapped) munmap(p, mapped);
    else free(p);
}

int zl_kv_new(zl_kv **out, int n_layers, int n_ctx, int kv_dim, zl_type type, zl_err *err) {
    *out = NULL;
    if (n_layers <= 0 || n_ctx <= 0 || kv_dim <= 0)
        return zl_errf(err, ZL_EINVAL, "invalid KV cache shape (%d layers, %d slots, dim %d)", n_layers, n_ctx, kv_dim);
    if (type != ZL_TYPE_F16 && type != ZL_TYPE_F32 && type != ZL_TYPE_Q8_0)
        return zl_errf(err, ZL_EUNSUP, "KV cache type must be f16, f32 or q8_0");
    if (type == ZL_TYPE_Q8_0 && kv_dim % ZL_QK)
        return zl_errf(err, ZL_EUNSUP, "a q8_0 KV cache needs rows that are a multiple of %d (this model's is %d)", ZL_QK,
                       kv_dim);
    zl_kv *kv = calloc(1, sizeof *kv);
    if (!kv) return zl_errf(err, ZL_ENOMEM, "out of memory");
    kv->n_layers = n_layers;
    kv->n_ctx = n_ctx;
    kv->kv_dim = kv_dim;
    kv->type = type;
    kv->row_bytes = zl_row_size(type, kv_dim);
    kv->slices = 1;
    size_t total = (size_t)n_layers * (size_t)n_ctx * kv->row_bytes;
    kv->k = kv_mem(total, &kv->mapped);
    kv->v = kv_mem(total, &kv->mapped);
    if (!kv->k || !kv->v) {
        zl_kv_free(kv);
        return zl_errf(err, ZL_ENOMEM, "cannot allocate a %zu MiB KV cache for %d positions",
                       2 * total >> 20, n_ctx);
    }
    atomic_fetch_add(&g_kv_allocs, 1);
    *out = kv;
    return 0;
}

/* A freed cache never hands its rows to the next allocation: the rows that
 * were written are zeroed before heap memory goes back to malloc.  Mapped
 * memory goes back to the kernel, which zero-fills pages before any reuse,
 * so it is unmapped as it is. */
void zl_kv_free(zl_kv *kv) {
    if (!kv) return;
    if (!kv->mapped && kv->k && kv->v) zl_kv_truncate(kv, 0);
    kv_mem_free(kv->k, kv->mapped);
    kv_mem_free(kv->v, kv->mapped);
    free(kv->score_part);
    free(kv->anchor);
    free(kv->birth);
    free(kv->shift);
    free(kv->layer_off);
    free(kv->layer_budget);
    free(kv);
}

void zl_kv_truncate(zl_kv *kv, int n) {
    if (n < 0) n = 0;
    int hi = kv->n_dirty > kv->n_used ? kv->n_dirty : kv->n_used;
    if (n >= hi) return;
    kv->n_dirty = n;
    for (int l = 0; l < kv->n_layers; l++) {
        int from = zl_kv_slot(kv, l, n), to = zl_kv_slot(kv, l, hi);
        if (from < 0) from = 0;
        if (to <= from) continue;
        size_t cnt = (size_t)(to - from) * kv->row_bytes;
        memset(zl_kv_k(kv, l, from), 0, cnt);
        memset(zl_kv_v(kv, l, from), 0, cnt);
    }
    if (n >= kv->n_used) return; /* only scratch rows went */
    /* per-slot metadata: slice s follows layer s (or every layer when there is one slice) */
    for (int s = 0; s < kv->slices; s++) {
        int from = zl_kv_slot(kv, s, n), to = zl_kv_layer_used(kv, s);
        if (from < 0) from = 0;
        if (to <= from) continue;
        size_t m = (size_t)(to - from);
        for (int t = 0; t < kv->score_nth && kv->score_part; t++)
            memset(kv->score_part + ((size_t)t * kv->slices + s) * kv->n_ctx + from, 0, m * sizeof(float));
        if (kv->anchor) memset(kv->anchor + (size_t)s * kv->n_ctx + from, 0, m);
        if (kv->birth) memset(kv->birth + (size_t)s * kv->n_ctx + from, 0, m * sizeof *kv->birth);
        if (kv->shift) memset(kv->shift + (size_t)s * kv->n_ctx + from, 0, m * sizeof *kv->shift);
    }
    if (kv->layer_off)
        for (int l = 0; l < kv->n_layers; l++)
            if (n == 0 || kv->layer_off[l] > n) kv->layer_off[l] = n; /* an emptied layer starts again at n */
    kv->n_used = n;
    zl_kv_assert_ok(kv);
}

void zl_kv_cover(zl_kv *kv, int pos, int scratch) {
    ZL_ASSERT(pos >= 0 && pos < kv->n_ctx);
    int *end = scratch ? &kv->n_dirty : &kv->n_used;
    if (pos + 1 > *end) *end = pos + 1;
    kv_note_use(kv);
}

size_t zl_kv_bytes(const zl_kv *kv) { return 2 * (size_t)kv->n_layers * kv->n_ctx * kv->row_bytes; }

size_t zl_kv_token_bytes(const zl_kv *kv) { return 2 * (size_t)kv->n_layers * kv->row_bytes; }

/* pieces per layer's K (or V) region of `rows` slots */
static int pieces_per_region(const zl_kv *kv, int rows, size_t piece) {
    size_t region = (size_t)rows * kv->row_bytes;
    return (int)((region + piece - 1) / piece);
}

int zl_kv_pieces(const zl_kv *kv, int rows, size_t piece) {
    ZL_ASSERT(rows >= 0 && rows <= kv->n_ctx && piece > 0);
    return 2 * kv->n_layers * pieces_per_region(kv, rows, piece);
}

size_t zl_kv_piece(const zl_kv *kv, int rows, size_t piece, int p, void **at) {
    ZL_ASSERT(p >= 0 && p < zl_kv_pieces(kv, rows, piece));
    size_t region = (size_t)rows * kv->row_bytes;
    int per = pieces_per_region(kv, rows, piece);
    int layer = p / (2 * per), which = (p / per) % 2, sub = p % per;
    uint8_t *base = which ? zl_kv_v(kv, layer, 0) : zl_kv_k(kv, layer, 0);
    size_t off = (size_t)sub * piece;
    *at = base + off;
    return region - off < piece ? region - off : piece;
}

int zl_kv_cached(const zl_kv *kv) {
    if (!kv->layer_off) return kv->n_used;
    long sum = 0;
    for (int l = 0; l < kv->n_layers; l++) sum += zl_kv_layer_used(kv, l);
    return (int)((sum + kv->n_layers - 1) / kv->n_layers);
}
