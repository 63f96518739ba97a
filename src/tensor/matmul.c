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
 * Some kernels read a "prepared" activation instead of the partner row: the
 * partner rearranged (once per call, beside it in zl_work) into the layout
 * that lets the per-row loop touch only weights.  That is an internal detail
 * between this file and the ISA files (kernels_isa.h); zl_vec_dot keeps the
 * plain partner format.
 *
 * Dispatch is a pure function of (ISA level, type): the per-ISA files hand
 * out their kernel or NULL, and the scalar reference fills the gaps.  This
 * module never allocates except by growing the caller's zl_work. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/cpu.h"
#include "kernels.h"
#include "kernels_isa.h"

#define ZL_WORK_ALIGN 64
#define ZL_TILE_BYTES (96 * 1024) /* weight bytes per row tile when n_tok > 1 */

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

/* Highest level this CPU can actually execute (ignores the ZL_ISA cap). */
static int isa_supported(int isa) {
    const zl_cpu *c = zl_cpu_get();
    int avx2 = c->avx2 && c->fma && c->f16c;
    if (isa >= ZL_ISA_AVX512) return avx2 && c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq;
    if (isa >= ZL_ISA_AVX2) return avx2;
    return 1;
}

static zl_dot_fn pick_dot(int isa, zl_type t) {
    zl_dot_fn f = NULL;
    if (isa >= ZL_ISA_AVX512 && isa_supported(ZL_ISA_AVX512)) f = zl_dot_fn_avx512(t);
    if (!f && isa >= ZL_ISA_AVX2 && isa_supported(ZL_ISA_AVX2)) f = zl_dot_fn_avx2(t);
    if (!f) f = zl_dot_fn_ref(t);
    return f;
}

/* A four-token kernel only where the single-token one comes from the same level. */
static zl_dot4_fn pick_dot4(int isa, zl_type t) {
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

float zl_vec_dot_isa(int isa, zl_type t, const void *wrow, const void *xrow, int64_t n) {
    zl_dot_fn f = pick_dot(isa, t);
    return f ? f(wrow, xrow, n) : NAN;
}

float zl_vec_dot(zl_type t, const void *wrow, const void *xrow, int64_t n) {
    return zl_vec_dot_isa(zl_cpu_isa(), t, wrow, xrow, n);
}

/* ------------------------------------------------------------------ */

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

typedef struct {
    const zl_mat *W;
    zl_dot_fn dot;
    zl_dot4_fn dotk[9]; /* dotk[k]: k tokens per weight row (k = 2, 3, 4, 8), or NULL */
    const uint8_t *xq;
    size_t xq_stride;
    int n_tok;
    float *y;
    int64_t ldy;
    int64_t tile; /* rows per tile (n_tok > 1) */
} dot_job;

static void dot_rows(void *ctx, int ith, int nth) {
    const dot_job *j = ctx;
    const uint8_t *w = j->W->data;
    const size_t rb = j->W->row_bytes;
    const int64_t cols = j->W->cols;
    if (j->n_tok == 1) {
        long b, e;
        zl_split((long)j->W->rows, ith, nth, &b, &e);
        for (long r = b; r < e; r++) j->y[r] = j->dot(w + (size_t)r * rb, j->xq, cols);
        return;
    }
    /* never fewer tiles than threads, or some threads would sit idle */
    int64_t tile = j->tile, per_thread = (j->W->rows + nth - 1) / nth;
    if (tile > per_thread) tile = per_thread;
    long n_tiles = (long)((j->W->rows + tile - 1) / tile), tb, te;
    zl_split(n_tiles, ith, nth, &tb, &te);
    for (long tl = tb; tl < te; tl++) {
        int64_t r0 = tl * tile, r1 = r0 + tile;
        if (r1 > j->W->rows) r1 = j->W->rows;
        int t = 0;
        /* widest kernel first: each weight row is read once per group of tokens */
        static const int widths[4] = {8, 4, 3, 2};
        for (int wi = 0; wi < 4; wi++) {
            const int k = widths[wi];
            zl_dot4_fn f = j->dotk[k];
            if (!f) continue;
            for (; t + k <= j->n_tok; t += k) {
                const uint8_t *xt = j->xq + (size_t)t * j->xq_stride;
                float *yt = j->y + (int64_t)t * j->ldy, out[8];
                for (int64_t r = r0; r < r1; r++) {
                    f(w + (size_t)r * rb, xt, j->xq_stride, cols, out);
                    for (int q = 0; q < k; q++) yt[q * j->ldy + r] = out[q];
                }
            }
        }
        for (; t < j->n_tok; t++) {
            const uint8_t *xt = j->xq + (size_t)t * j->xq_stride;
            float *yt = j->y + (int64_t)t * j->ldy;
            for (int64_t r = r0; r < r1; r++) yt[r] = j->dot(w + (size_t)r * rb, xt, cols);
        }
    }
}

void zl_matmul(const zl_mat *W, const float *x, int64_t ldx, int n_tok, float *y, int64_t ldy,
               zl_pool *pool, zl_work *work) {
    if (n_tok <= 0 || W->rows <= 0) return;
    if (!work) { /* no scratch from the caller: a temporary one */
        zl_work tmp = {0};
        zl_matmul(W, x, ldx, n_tok, y, ldy, pool, &tmp);
        zl_work_free(&tmp);
        return;
    }
    int isa = zl_cpu_isa();
    zl_type partner = zl_dot_partner(W->type);
    zl_dot_fn dot = pick_dot(isa, W->type);
    size_t xrow = zl_row_size(partner, W->cols);
    if (!dot || !xrow || zl_row_size(W->type, W->cols) == 0) goto fail;

    const uint8_t *xq;
    size_t stride;
    zl_dot4_fn dot4 = NULL;
    zl_prep_kernel pk_used = {0};
    int prep_used = 0;
    int avx512 = isa >= ZL_ISA_AVX512 && isa_supported(ZL_ISA_AVX512);
    if (partner == ZL_TYPE_F32) {
        xq = (const uint8_t *)x;
        stride = (size_t)ldx * sizeof(float);
        dot4 = pick_dot4(isa, W->type);
    } else {
        /* partner rows, then (if the level has one) the prepared rows the kernel reads */
        zl_prep_kernel pk;
        int prep = avx512 && zl_prep_kernel_avx512(W->type, &pk);
        if (!prep && isa >= ZL_ISA_AVX2 && isa_supported(ZL_ISA_AVX2) && !(avx512 && zl_dot_fn_avx512(W->type)))
            prep = zl_prep_kernel_avx2(W->type, &pk);
        size_t qstride = round_up(xrow, ZL_WORK_ALIGN);
        size_t pstride = prep ? round_up(pk.size(W->cols), ZL_WORK_ALIGN) : 0;
        uint8_t *buf = work_reserve(work, (qstride + pstride) * (size_t)n_tok);
        if (!buf) goto fail;
        uint8_t *pbuf = buf + qstride * (size_t)n_tok;
        quant_job qj = {x, ldx, W->cols, n_tok, partner, pick_quant(isa, partner), buf, qstride,
                        prep ? pk.prep : NULL, pbuf, pstride};
        if (n_tok > 1 && pool) zl_pool_run(pool, quant_rows, &qj);
        else quant_rows(&qj, 0, 1);
        xq = prep ? pbuf : buf;
        stride = prep ? pstride : qstride;
        if (prep) {
            dot = pk.dot;
            dot4 = pk.dot4;
            pk_used = pk;
            prep_used = 1;
        } else {
            dot4 = pick_dot4(isa, W->type);
        }
    }

    int64_t tile = (int64_t)(ZL_TILE_BYTES / (W->row_bytes ? W->row_bytes : 1));
    if (tile < 1) tile = 1;
    dot_job dj = {W, dot, {NULL}, xq, stride, n_tok, y, ldy, tile};
    dj.dotk[4] = dot4;
    if (prep_used) {
        dj.dotk[2] = pk_used.dot2;
        dj.dotk[3] = pk_used.dot3;
        dj.dotk[8] = pk_used.dot8;
    } else if (dot4 && avx512 && zl_dot_fn_avx512(W->type) && zl_dotT_fn_avx512(W->type, 4) == dot4) {
        dj.dotk[2] = zl_dotT_fn_avx512(W->type, 2);
        dj.dotk[3] = zl_dotT_fn_avx512(W->type, 3);
        dj.dotk[8] = zl_dotT_fn_avx512(W->type, 8);
    }
    zl_pool_run(pool, dot_rows, &dj);
    return;
fail:
    for (int t = 0; t < n_tok; t++)
        for (int64_t r = 0; r < W->rows; r++) y[(int64_t)t * ldy + r] = NAN;
}

/* ---- several matrices, one input row, one dispatch ---------------- */

#define ZL_MULTI_MAX 4

typedef struct {
    int nm;
    long total; /* rows of all matrices */
    struct {
        const zl_mat *W;
        zl_dot_fn dot;
        const uint8_t *xq;
        float *y;
        long first; /* first combined row index */
    } m[ZL_MULTI_MAX];
} multi_job;

static void multi_rows(void *ctx, int ith, int nth) {
    const multi_job *j = ctx;
    long b, e;
    zl_split(j->total, ith, nth, &b, &e);
    for (int k = 0; k < j->nm && b < e; k++) {
        long lo = j->m[k].first, hi = lo + (long)j->m[k].W->rows;
        if (e <= lo || b >= hi) continue;
        long rb = b > lo ? b : lo, re = e < hi ? e : hi;
        const uint8_t *w = j->m[k].W->data;
        size_t rbytes = j->m[k].W->row_bytes;
        int64_t cols = j->m[k].W->cols;
        for (long r = rb; r < re; r++) j->m[k].y[r - lo] = j->m[k].dot(w + (size_t)(r - lo) * rbytes, j->m[k].xq, cols);
    }
}

void zl_matmul_multi(const zl_mat *const *W, int nm, const float *x, float *const *y, zl_pool *pool, zl_work *work) {
    if (nm <= 0) return;
    if (nm > ZL_MULTI_MAX || !work) {
        for (int k = 0; k < nm; k++) zl_matmul(W[k], x, W[k]->cols, 1, y[k], W[k]->rows, pool, work);
        return;
    }
    int isa = zl_cpu_isa(), avx512 = isa >= ZL_ISA_AVX512 && isa_supported(ZL_ISA_AVX512);
    multi_job j = {nm, 0, {{0}}};
    /* sizes of each matrix's activation (partner row + prepared row), deduplicated by type */
    size_t off[ZL_MULTI_MAX], need = 0;
    int same_as[ZL_MULTI_MAX];
    zl_prep_kernel pk[ZL_MULTI_MAX];
    int prep[ZL_MULTI_MAX];
    for (int k = 0; k < nm; k++) {
        same_as[k] = -1;
        for (int i = 0; i < k; i++)
            if (W[i]->type == W[k]->type && W[i]->cols == W[k]->cols) { same_as[k] = i; break; }
        if (W[k]->cols != W[0]->cols || !zl_row_size(W[k]->type, W[k]->cols)) {
            for (int i = 0; i < nm; i++) zl_matmul(W[i], x, W[i]->cols, 1, y[i], W[i]->rows, pool, work);
            return;
        }
        prep[k] = 0;
        off[k] = need;
        if (same_as[k] >= 0) continue;
        zl_type partner = zl_dot_partner(W[k]->type);
        if (partner == ZL_TYPE_F32) continue;
        prep[k] = avx512 && zl_prep_kernel_avx512(W[k]->type, &pk[k]);
        if (!prep[k] && isa >= ZL_ISA_AVX2 && isa_supported(ZL_ISA_AVX2) && !(avx512 && zl_dot_fn_avx512(W[k]->type)))
            prep[k] = zl_prep_kernel_avx2(W[k]->type, &pk[k]);
        need += round_up(zl_row_size(partner, W[k]->cols), ZL_WORK_ALIGN);
        if (prep[k]) need += round_up(pk[k].size(W[k]->cols), ZL_WORK_ALIGN);
    }
    uint8_t *buf = need ? work_reserve(work, need) : NULL;
    if (need && !buf) {
        for (int k = 0; k < nm; k++) zl_matmul(W[k], x, W[k]->cols, 1, y[k], W[k]->rows, pool, NULL);
        return;
    }
    for (int k = 0; k < nm; k++) {
        j.m[k].W = W[k];
        j.m[k].y = y[k];
        j.m[k].first = j.total;
        j.total += (long)W[k]->rows;
        if (same_as[k] >= 0) {
            j.m[k].dot = j.m[same_as[k]].dot;
            j.m[k].xq = j.m[same_as[k]].xq;
            continue;
        }
        zl_type partner = zl_dot_partner(W[k]->type);
        j.m[k].dot = pick_dot(isa, W[k]->type);
        if (partner == ZL_TYPE_F32) {
            j.m[k].xq = (const uint8_t *)x;
            continue;
        }
        uint8_t *q = buf + off[k];
        size_t qsize = round_up(zl_row_size(partner, W[k]->cols), ZL_WORK_ALIGN);
        zl_quant_fn qf = pick_quant(isa, partner);
        if (qf) qf(x, q, W[k]->cols);
        else zl_quantize_row(partner, x, q, W[k]->cols);
        j.m[k].xq = q;
        if (prep[k]) {
            pk[k].prep(q, q + qsize, W[k]->cols);
            j.m[k].xq = q + qsize;
            j.m[k].dot = pk[k].dot;
        }
    }
    zl_pool_run(pool, multi_rows, &j);
}
