/* matmul.c — the fused dequant·dot matmul and the per-ISA dispatch.
 *
 * zl_matmul converts the activations once per call into the weight type's
 * dot partner (into the caller's zl_work scratch) and then walks the weight
 * rows straight from their source, split over the pool's threads.  With
 * several tokens, each thread takes a tile of rows small enough to stay in
 * cache and runs every token through it before moving on, so the weights are
 * streamed from memory once per call rather than once per token; where the
 * level has a four-token kernel, each weight row is unpacked once per four
 * tokens.
 *
 * With many tokens (prefill), types that have a tile kernel (kernels_isa.h)
 * go another way: each thread packs the 16- or 8-row groups of its tile once
 * into its own slice of zl_work (one row per int32 lane) and runs the
 * tokens through them eight at a time, which gives the same bits.
 *
 * Some kernels read a "prepared" activation instead of the partner row: the
 * partner rearranged (once per call, beside it in zl_work) into the layout
 * that lets the per-row loop touch only weights.  That is an internal detail
 * between this file and the ISA files (kernels_isa.h); zl_vec_dot keeps the
 * plain partner format.
 *
 * Dispatch is a pure function of (ISA level, type): the per-ISA files hand
 * out their kernel or NULL, and the scalar reference fills the gaps.  The
 * choice is made once per level into an immutable table (zl_kernels) that
 * callers pass in; nothing here reads a process-wide level at call time.
 * This module never allocates except by growing the caller's zl_work. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../base/cpu.h"
#include "kernels.h"
#include "kernels_isa.h"

#define ZL_WORK_ALIGN 64
#define ZL_TILE_BYTES (96 * 1024) /* weight bytes per row tile when n_tok > 1 */
#define ZL_MULTI_MAX 4            /* matrices per zl_matmul_multi call */

void zl_work_free(zl_work *w) {
    if (!w) return;
    free(w->p);
    w->p = NULL;
    w->cap = 0;
}

static size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

static void *work_reserve(zl_work *w, size_t bytes) {
    if (w->cap >= bytes && w->p) return w->p;
    size_t cap = (bytes + ZL_WORK_ALIGN - 1) / ZL_WORK_ALIGN * ZL_WORK_ALIGN;
    void *p = aligned_alloc(ZL_WORK_ALIGN, cap);
    if (!p) return NULL;
    free(w->p);
    w->p = p;
    w->cap = cap;
    return p;
}

#if defined(__aarch64__)
/* The NEON level for isa (which tests may ask above the CPU's): capped by
 * what this process may run; ZL_ISA_SCALAR (0) means the reference. */
static int neon_level(int isa) {
    int top = (int)zl_cpu_max_isa();
    return isa < top ? isa : top;
}

static zl_dot_fn pick_dot(int isa, zl_type t) {
    zl_dot_fn f = neon_level(isa) >= ZL_ISA_NEON ? zl_dot_fn_neon(neon_level(isa), t) : NULL;
    return f ? f : zl_dot_fn_ref(t);
}

static zl_quant_fn pick_quant(int isa, zl_type partner) {
    return neon_level(isa) >= ZL_ISA_NEON ? zl_quant_fn_neon(partner) : NULL;
}
#else
/* Whether this process may run level isa (the CPU's level, capped by ZL_ISA). */
static int isa_supported(int isa) { return isa <= (int)zl_cpu_max_isa(); }

static zl_dot_fn pick_dot(int isa, zl_type t) {
    zl_dot_fn f = NULL;
    if (isa >= ZL_ISA_AVX512 && isa_supported(ZL_ISA_AVX512)) f = zl_dot_fn_avx512(t);
    if (!f && isa >= ZL_ISA_AVX2 && isa_supported(ZL_ISA_AVX2)) f = zl_dot_fn_avx2(t);
    if (!f) f = zl_dot_fn_ref(t);
    return f;
}

/* A four-token kernel only where the single-token one comes from the same level. */
static zl_dot_multi_fn pick_dot4(int isa, zl_type t) {
    if (isa >= ZL_ISA_AVX512 && isa_supported(ZL_ISA_AVX512) && zl_dot_fn_avx512(t)) return zl_dot4_fn_avx512(t);
    if (isa >= ZL_ISA_AVX2 && isa_supported(ZL_ISA_AVX2) && zl_dot_fn_avx2(t)) return zl_dot4_fn_avx2(t);
    return NULL;
}

static zl_quant_fn pick_quant(int isa, zl_type partner) {
    zl_quant_fn f = NULL;
    if (isa >= ZL_ISA_AVX512 && isa_supported(ZL_ISA_AVX512)) f = zl_quant_fn_avx512(partner);
    if (!f && isa >= ZL_ISA_AVX2 && isa_supported(ZL_ISA_AVX2)) f = zl_quant_fn_avx2(partner);
    return f;
}

#endif

float zl_vec_dot_isa(int isa, zl_type t, const void *wrow, const void *xrow, int64_t n) {
    zl_dot_fn f = pick_dot(isa, t);
    return f ? f(wrow, xrow, n) : NAN;
}

float zl_vec_dot(zl_type t, const void *wrow, const void *xrow, int64_t n) {
    return zl_vec_dot_isa(zl_cpu_max_isa(), t, wrow, xrow, n);
}

/* ------------------------------------------------------------------ */

/* One matrix of a call: its kernels, its (quantised, maybe prepared) input
 * rows and where its outputs go. */
typedef struct {
    const zl_mat *W;
    zl_dot_fn dot;
    zl_dot_multi_fn dotk[9]; /* dotk[k]: k tokens per weight row (k = 2..8), or NULL */
    zl_dot2r_fn dot2r[9]; /* dot2r[k]: two weight rows at once with k tokens, or NULL */
    const zl_tile_kernel *tk; /* tile kernel for this call, or NULL */
    const uint8_t *xq;
    size_t xq_stride;
    float *y;
    int64_t ldy;
} mm_part;

typedef struct {
    int nm, n_tok;
    long tile[ZL_MULTI_MAX];      /* rows per work item of each matrix */
    long first_item[ZL_MULTI_MAX + 1]; /* work items of matrix k: [first_item[k], first_item[k+1]) */
    atomic_long next;             /* next work item to take */
    mm_part m[ZL_MULTI_MAX];
    uint8_t *pack;                /* tile kernels: pack_stride bytes of packed rows per thread */
    size_t pack_stride;
} mm_job;

/* rows [r0, r1) of one matrix for every token, widest kernel first: each
 * weight row is read once per group of tokens */
/* Weights are read ZL_PREFETCH_BYTES ahead of the row being computed.  The
 * hardware prefetchers stop at 4 KiB page boundaries, and mapped GGUF files
 * come in 4 KiB pages: without this every page of weights starts with a
 * full miss (the A/B figures: BENCHMARKS.md, "Weight prefetch").  Batches of
 * more than ZL_PREFETCH_MAX_TOK tokens are compute-bound in the first pass
 * over a tile: no gain there. */
#ifndef ZL_PREFETCH_BYTES /* -D for bench experiments (BENCHMARKS.md, "Prefetch distance") */
#define ZL_PREFETCH_BYTES 1536
#endif
#define ZL_PREFETCH_MAX_TOK 16

/* prefetch the bytes [a + ZL_PREFETCH_BYTES, b + ZL_PREFETCH_BYTES): called
 * once per row with that row's extent, it covers every line once */
static inline void prefetch_ahead(const uint8_t *a, const uint8_t *b) {
    uintptr_t s = ((uintptr_t)a + ZL_PREFETCH_BYTES) & ~(uintptr_t)63, e = (uintptr_t)b + ZL_PREFETCH_BYTES;
    for (; s < e; s += 64) __builtin_prefetch((const void *)s, 0, 3);
}

static void part_rows(const mm_part *p, int n_tok, int64_t r0, int64_t r1) {
    const uint8_t *w = p->W->data;
    const size_t rb = p->W->row_bytes;
    const int64_t cols = p->W->cols;
    if (n_tok == 1) {
        for (int64_t r = r0; r < r1; r++) {
            const uint8_t *row = w + (size_t)r * rb;
            prefetch_ahead(row, row + rb);
            p->y[r] = p->dot(row, p->xq, cols);
        }
        return;
    }
    static const int widths[7] = {8, 7, 6, 5, 4, 3, 2};
    /* the pass starting at token 0 reads the tile from memory; a long batch is compute-bound there anyway */
    const int pf_batch = n_tok <= ZL_PREFETCH_MAX_TOK;
    int t = 0;
    for (int wi = 0; wi < 7; wi++) {
        const int k = widths[wi];
        zl_dot_multi_fn f = p->dotk[k];
        if (!f) continue;
        for (; t + k <= n_tok; t += k) {
            const int pf = pf_batch && t == 0;
            const uint8_t *xt = p->xq + (size_t)t * p->xq_stride;
            float *yt = p->y + (int64_t)t * p->ldy, out[16];
            int64_t r = r0;
            if (p->dot2r[k])
                for (; r + 2 <= r1; r += 2) {
                    const uint8_t *row = w + (size_t)r * rb;
                    if (pf) prefetch_ahead(row, row + 2 * rb);
                    p->dot2r[k](row, rb, xt, p->xq_stride, cols, out);
                    for (int q = 0; q < k; q++) {
                        yt[q * p->ldy + r] = out[q];
                        yt[q * p->ldy + r + 1] = out[k + q];
                    }
                }
            for (; r < r1; r++) {
                const uint8_t *row = w + (size_t)r * rb;
                if (pf) prefetch_ahead(row, row + rb);
                f(row, xt, p->xq_stride, cols, out);
                for (int q = 0; q < k; q++) yt[q * p->ldy + r] = out[q];
            }
        }
    }
    for (; t < n_tok; t++) {
        const uint8_t *xt = p->xq + (size_t)t * p->xq_stride;
        float *yt = p->y + (int64_t)t * p->ldy;
        for (int64_t r = r0; r < r1; r++) {
            const uint8_t *row = w + (size_t)r * rb;
            if (pf_batch && t == 0) prefetch_ahead(row, row + rb);
            yt[r] = p->dot(row, xt, cols);
        }
    }
}

/* rows [r0, r1) for every token through the tile kernel: the rows packed
 * once into `pack` in groups of tk->rows, then eight tokens at a time
 * against every group */
static void part_rows_tile(const mm_part *p, int n_tok, int64_t r0, int64_t r1, uint8_t *pack) {
    const uint8_t *w = p->W->data;
    const size_t rb = p->W->row_bytes, gb = p->tk->size(p->W->cols);
    const int64_t cols = p->W->cols;
    const int R = p->tk->rows, ng = (int)((r1 - r0 + R - 1) / R);
    for (int g = 0; g < ng; g++) {
        const int64_t a = r0 + (int64_t)g * R;
        const int nr = (int)(r1 - a < R ? r1 - a : R);
        p->tk->pack(w + (size_t)a * rb, rb, nr, cols, pack + (size_t)g * gb);
    }
    float out[8 * ZL_TILE_ROWS_MAX];
    for (int t0 = 0; t0 < n_tok; t0 += 8) {
        const int T = n_tok - t0 < 8 ? n_tok - t0 : 8;
        const uint8_t *xt = p->xq + (size_t)t0 * p->xq_stride;
        for (int g = 0; g < ng; g++) {
            const int64_t a = r0 + (int64_t)g * R;
            const int nr = (int)(r1 - a < R ? r1 - a : R);
            p->tk->run(pack + (size_t)g * gb, xt, p->xq_stride, T, cols, out);
            for (int t = 0; t < T; t++) {
                float *yt = p->y + (int64_t)(t0 + t) * p->ldy + a;
                for (int r = 0; r < nr; r++) yt[r] = out[t * R + r];
            }
        }
    }
}

/* The rows of all matrices are cut into tiles (weight bytes small enough to
 * stay in cache while every token runs through them) and the threads take
 * tiles from a shared counter until none is left: a thread that is slowed
 * (a busy neighbour, a preempted vCPU) does fewer tiles instead of making the
 * others wait at the end of the call.  A row's result never depends on which
 * thread computed it. */
static void mm_rows(void *ctx, int ith, int nth) {
    mm_job *j = ctx;
    (void)nth;
    const long n_items = j->first_item[j->nm];
    int k = 0;
    for (;;) {
        long it = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (it >= n_items) return;
        while (it >= j->first_item[k + 1]) k++;
        const mm_part *p = &j->m[k];
        int64_t r = (it - j->first_item[k]) * j->tile[k], re = r + j->tile[k];
        if (re > p->W->rows) re = p->W->rows;
        if (p->tk) part_rows_tile(p, j->n_tok, r, re, j->pack + (size_t)ith * j->pack_stride);
        else part_rows(p, j->n_tok, r, re);
    }
}

/* rows per work item: ZL_TILE_BYTES of weights (at least one row; for a
 * tile kernel, whole groups of `group` rows) */
static long mm_tile_rows(const zl_mat *W, int group) {
    long t = (long)(ZL_TILE_BYTES / (W->row_bytes ? W->row_bytes : 1));
    if (group) return t < group ? group : t / group * group;
    return t < 1 ? 1 : t;
}

typedef struct {
    const float *x;
    int64_t ldx, cols;
    int n_tok;
    zl_type partner;
    zl_quant_fn quant; /* NULL: reference quantiser */
    uint8_t *xq;
    size_t xq_stride;
    void (*prep)(const void *xq, void *xp, int64_t n); /* NULL: no prepared layout */
    uint8_t *xp;
    size_t xp_stride;
} quant_job;

static void quant_rows(void *ctx, int ith, int nth) {
    const quant_job *j = ctx;
    long b, e;
    zl_split(j->n_tok, ith, nth, &b, &e);
    for (long t = b; t < e; t++) {
        const float *src = j->x + t * j->ldx;
        void *dst = j->xq + (size_t)t * j->xq_stride;
        if (j->quant) j->quant(src, dst, j->cols);
        else zl_quantize_row(j->partner, src, dst, j->cols);
        if (j->prep) j->prep(dst, j->xp + (size_t)t * j->xp_stride, j->cols);
    }
}

/* Below this many tokens the activations are quantised on the calling thread:
 * a dispatch costs more than the work. */
#define ZL_QUANT_PARALLEL_MIN 4

typedef struct { /* how one weight type reads its input at one level */
    zl_dot_fn dot; /* NULL: the type has no kernel */
    zl_dot_multi_fn dotk[9];
    zl_dot2r_fn dot2r[9];
    zl_type partner;
    zl_quant_fn quant; /* NULL: the reference quantiser */
    int prep;
    zl_prep_kernel pk;
    int tile;           /* tk is bit-identical to dot */
    zl_tile_kernel tk;
} mm_kern;

struct zl_kernels {
    zl_isa isa;
    mm_kern type[ZL_TYPE_COUNT];
};

static void kern_fill(int isa, zl_type t, mm_kern *pl) {
    memset(pl, 0, sizeof *pl);
    if (!zl_type_traits_of(t)->name) return;
    pl->partner = zl_dot_partner(t);
    pl->dot = pick_dot(isa, t);
    if (!pl->dot) return;
#if defined(__aarch64__)
    if (neon_level(isa) >= ZL_ISA_NEON)
        for (int k = 2; k <= 8; k++) {
            pl->dotk[k] = zl_dotT_fn_neon(neon_level(isa), t, k);
            pl->dot2r[k] = zl_dot2r_fn_neon(neon_level(isa), t, k);
        }
    if (pl->dot2r[2]) /* i8mm: token groups of even width, where the two-row kernels are */
        pl->dotk[3] = pl->dotk[5] = pl->dotk[7] = NULL;
    if (pl->partner == ZL_TYPE_F32) return;
    pl->quant = pick_quant(isa, pl->partner);
#else
    int avx512 = isa >= ZL_ISA_AVX512 && isa_supported(ZL_ISA_AVX512);
    pl->dotk[4] = pick_dot4(isa, t);
    if (avx512 && zl_dot_fn_avx512(t) && pl->dotk[4] && zl_dotT_fn_avx512(t, 4) == pl->dotk[4]) {
        pl->dotk[2] = zl_dotT_fn_avx512(t, 2);
        pl->dotk[3] = zl_dotT_fn_avx512(t, 3);
        for (int k = 5; k <= 8; k++) pl->dotk[k] = zl_dotT_fn_avx512(t, k);
    }
    if (pl->partner == ZL_TYPE_F32) return;
    pl->quant = pick_quant(isa, pl->partner);
    pl->prep = avx512 && zl_prep_kernel_avx512(t, &pl->pk);
    if (!pl->prep && isa >= ZL_ISA_AVX2 && isa_supported(ZL_ISA_AVX2) && !(avx512 && zl_dot_fn_avx512(t)))
        pl->prep = zl_prep_kernel_avx2(t, &pl->pk);
    /* the tile kernels read what the level's row kernels read: on AVX-512
     * VNNI the prepared Q8_K row for Q4_K/Q5_K and the plain one for Q6_K, on
     * AVX2 the plain one */
    if (avx512 && zl_dot_fn_avx512(t)) {
        if (zl_tile_kernel_avx512(t, &pl->tk)) pl->tile = t == ZL_TYPE_Q6_K ? !pl->prep : pl->prep;
    } else if (isa >= ZL_ISA_AVX2 && isa_supported(ZL_ISA_AVX2) && pl->dot == zl_dot_fn_avx2(t) && !pl->prep) {
        pl->tile = zl_tile_kernel_avx2(t, &pl->tk);
    }
#endif
    if (pl->prep) {
        pl->dot = pl->pk.dot;
        pl->dotk[2] = pl->pk.dot2;
        pl->dotk[3] = pl->pk.dot3;
        pl->dotk[4] = pl->pk.dot4;
        pl->dotk[5] = pl->pk.dot5;
        pl->dotk[6] = pl->pk.dot6;
        pl->dotk[7] = pl->pk.dot7;
        pl->dotk[8] = pl->pk.dot8;
    }
}

static zl_kernels g_tables[ZL_ISA_TOP + 1]; /* written once, in tables_fill */
static pthread_once_t g_tables_once = PTHREAD_ONCE_INIT;

static void tables_fill(void) {
    for (int isa = ZL_ISA_SCALAR; isa <= (int)zl_cpu_max_isa(); isa++) {
        g_tables[isa].isa = (zl_isa)isa;
        for (int t = 0; t < ZL_TYPE_COUNT; t++) kern_fill(isa, (zl_type)t, &g_tables[isa].type[t]);
    }
}

const zl_kernels *zl_kernels_for(zl_isa isa) {
    pthread_once(&g_tables_once, tables_fill);
    return &g_tables[zl_cpu_cap_isa(isa)];
}

zl_isa zl_kernels_isa(const zl_kernels *k) { return k->isa; }

typedef struct { /* one weight type's kernels and the scratch layout of one call */
    const mm_kern *k;
    size_t qstride, pstride; /* 0 when the input is read as f32 */
} mm_plan;

static int plan_type(const zl_kernels *ks, zl_type t, int64_t cols, mm_plan *pl) {
    memset(pl, 0, sizeof *pl);
    if ((unsigned)t >= ZL_TYPE_COUNT) return 0;
    pl->k = &ks->type[t];
    size_t xrow = zl_row_size(pl->k->partner, cols);
    if (!pl->k->dot || !xrow || zl_row_size(t, cols) == 0) return 0;
    if (pl->k->partner == ZL_TYPE_F32) return 1;
    pl->qstride = round_up(xrow, ZL_WORK_ALIGN);
    if (pl->k->prep) pl->pstride = round_up(pl->k->pk.size(cols), ZL_WORK_ALIGN);
    return 1;
}

/* y[k][i*ldy[k] + r] = W[k] row r · x row i, for nm matrices sharing x: the
 * input is quantised (and prepared) once per weight type, then one dispatch
 * covers every row of every matrix.  Returns 0 (and touches nothing) when a
 * type is unsupported or scratch cannot be had. */
static int matmul_run(const zl_kernels *ks, const zl_mat *const *W, int nm, const float *x, int64_t ldx, int n_tok,
                      float *const *y, const int64_t *ldy, zl_pool *pool, zl_work *work) {
    mm_plan plan[ZL_MULTI_MAX];
    int same_as[ZL_MULTI_MAX];
    size_t off[ZL_MULTI_MAX], need = 0;
    for (int k = 0; k < nm; k++) {
        same_as[k] = -1;
        for (int i = 0; i < k; i++)
            if (W[i]->type == W[k]->type && W[i]->cols == W[k]->cols) { same_as[k] = i; break; }
        off[k] = need;
        if (same_as[k] >= 0) continue;
        if (!plan_type(ks, W[k]->type, W[k]->cols, &plan[k])) return 0;
        need += (plan[k].qstride + plan[k].pstride) * (size_t)n_tok;
    }
    mm_job j;
    memset(&j, 0, sizeof j);
    j.nm = nm;
    j.n_tok = n_tok;
    atomic_init(&j.next, 0);
    int use_tile[ZL_MULTI_MAX];
    for (int k = 0; k < nm; k++) {
        const mm_kern *kn = plan[same_as[k] >= 0 ? same_as[k] : k].k;
        use_tile[k] = kn->tile && n_tok >= kn->tk.min_tok;
        j.tile[k] = mm_tile_rows(W[k], use_tile[k] ? kn->tk.rows : 0);
        j.first_item[k + 1] = j.first_item[k] + ((long)W[k]->rows + j.tile[k] - 1) / j.tile[k];
        if (use_tile[k]) {
            size_t b = round_up(kn->tk.size(W[k]->cols) * (size_t)(j.tile[k] / kn->tk.rows), ZL_WORK_ALIGN);
            if (b > j.pack_stride) j.pack_stride = b;
        }
    }
    const size_t pack_off = need;
    need += j.pack_stride * (size_t)(pool ? zl_pool_size(pool) : 1);
    uint8_t *buf = need ? work_reserve(work, need) : NULL;
    if (need && !buf) return 0;
    j.pack = buf ? buf + pack_off : NULL;
    for (int k = 0; k < nm; k++) {
        mm_part *p = &j.m[k];
        const int src = same_as[k] >= 0 ? same_as[k] : k;
        const mm_plan *pl = &plan[src];
        const mm_kern *kn = pl->k;
        p->W = W[k];
        p->y = y[k];
        p->ldy = ldy[k];
        p->dot = kn->dot;
        memcpy(p->dotk, kn->dotk, sizeof p->dotk);
        memcpy(p->dot2r, kn->dot2r, sizeof p->dot2r);
        p->tk = use_tile[k] ? &kn->tk : NULL;
        if (same_as[k] >= 0) {
            p->xq = j.m[src].xq;
            p->xq_stride = j.m[src].xq_stride;
            continue;
        }
        if (kn->partner == ZL_TYPE_F32) {
            p->xq = (const uint8_t *)x;
            p->xq_stride = (size_t)ldx * sizeof(float);
            continue;
        }
        uint8_t *q = buf + off[k], *pb = q + pl->qstride * (size_t)n_tok;
        quant_job qj = {x, ldx, W[k]->cols, n_tok, kn->partner, kn->quant, q, pl->qstride,
                        kn->prep ? kn->pk.prep : NULL, pb, pl->pstride};
        if (n_tok >= ZL_QUANT_PARALLEL_MIN && pool) zl_pool_run(pool, quant_rows, &qj);
        else quant_rows(&qj, 0, 1);
        p->xq = kn->prep ? pb : q;
        p->xq_stride = kn->prep ? pl->pstride : pl->qstride;
    }
    zl_pool_run(pool, mm_rows, &j);
    return 1;
}

void zl_matmul(const zl_kernels *k, const zl_mat *W, const float *x, int64_t ldx, int n_tok, float *y, int64_t ldy,
               zl_pool *pool, zl_work *work) {
    if (n_tok <= 0 || W->rows <= 0) return;
    if (!work) { /* no scratch from the caller: a temporary one */
        zl_work tmp = {0};
        zl_matmul(k, W, x, ldx, n_tok, y, ldy, pool, &tmp);
        zl_work_free(&tmp);
        return;
    }
    if (matmul_run(k, &W, 1, x, ldx, n_tok, &y, &ldy, pool, work)) return;
    for (int t = 0; t < n_tok; t++)
        for (int64_t r = 0; r < W->rows; r++) y[(int64_t)t * ldy + r] = NAN;
}

void zl_matmul_multi(const zl_kernels *ks, const zl_mat *const *W, int nm, const float *x, int n_tok, float *const *y, zl_pool *pool,
                     zl_work *work) {
    if (nm <= 0 || n_tok <= 0) return;
    int64_t ldy[ZL_MULTI_MAX];
    int ok = nm <= ZL_MULTI_MAX && work != NULL;
    for (int k = 0; ok && k < nm; k++) {
        ldy[k] = W[k]->rows;
        ok = W[k]->cols == W[0]->cols;
    }
    if (ok && matmul_run(ks, W, nm, x, W[0]->cols, n_tok, y, ldy, pool, work)) return;
    for (int k = 0; k < nm; k++) zl_matmul(ks, W[k], x, W[k]->cols, n_tok, y[k], W[k]->rows, pool, work);
}
