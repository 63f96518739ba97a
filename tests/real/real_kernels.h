/* real_kernels.h — the dot kernels on a trained model's own blocks.
 *
 * For every 2-D quantised tensor of a GGUF file: sampled rows through every
 * ISA level's one-token kernel against the scalar reference (tolerance
 * relative to sum |w x|), and a slice of rows through zl_matmul at the AVX2
 * and top levels, where each token of 2..11-token calls must give exactly
 * the bits of the same token alone (the prepared and multi-token kernels
 * included).  Shared by the real_kernels_* tests, one per model set. */
#ifndef ZL_REAL_KERNELS_H
#define ZL_REAL_KERNELS_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "base/cpu.h"
#include "base/pool.h"
#include "gguf/gguf.h"
#include "real/real_models.h"
#include "tensor/kernels.h"
#include "tensor/types.h"

#define ZL_RK_REQUIRE(cond, ...)                  \
    do {                                          \
        if (!(cond)) cr_assert_fail(__VA_ARGS__); \
    } while (0)

static uint64_t zl_rk_rng = 0x2545F4914F6CDD1Dull;
static float zl_rk_gauss(void) {
    float s = 0; /* Irwin-Hall: plenty for activations */
    for (int k = 0; k < 12; k++) {
        zl_rk_rng ^= zl_rk_rng << 13, zl_rk_rng ^= zl_rk_rng >> 7, zl_rk_rng ^= zl_rk_rng << 17;
        s += (float)(zl_rk_rng >> 40) / 16777216.0f;
    }
    return s - 6.0f;
}

/* sum |w_i x_i| over the dequantised rows: the scale of a dot's rounding */
static double zl_rk_abs_dot(zl_type t, const void *w, zl_type p, const void *xq, int64_t n) {
    float *a = malloc(sizeof(float) * (size_t)n), *b = malloc(sizeof(float) * (size_t)n);
    zl_dequant_row(t, w, a, n);
    zl_dequant_row(p, xq, b, n);
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += fabs((double)a[i] * b[i]);
    free(a);
    free(b);
    return s;
}

static int zl_rk_top_isa(void) { return zl_cpu_max_isa(); }

/* Runs the checks on every quantised 2-D tensor of model `name`; seen[t]
 * counts the tensors of each type. */
static void zl_rk_check_model(const char *name, int seen[ZL_TYPE_COUNT]) {
    enum { NT = 11, SLICE = 203 };
    zl_gguf *g = NULL;
    zl_err err = {0};
    cr_assert(zl_gguf_open(&g, zl_real_model(name), NULL, &err) == 0, "open %s", name);
    const int top = zl_rk_top_isa();
    zl_pool *pool = zl_pool_new(2);
    zl_work work = {0};
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const zl_gguf_tensor *tt = &g->tensors[i];
        const zl_type t = (zl_type)tt->type;
        if (tt->n_dims != 2 || !zl_type_traits_of(t)->supported || t == ZL_TYPE_F32 || t == ZL_TYPE_F16 ||
            t == ZL_TYPE_BF16)
            continue;
        seen[t]++;
        const int64_t cols = tt->ne[0], rows = tt->ne[1];
        const size_t rb = zl_row_size(t, cols);
        const zl_type p = zl_dot_partner(t);
        char tname[256];
        zl_str_copy(tt->name, tname, sizeof tname);
        float *x = malloc(sizeof(float) * (size_t)(cols * NT));
        for (int64_t k = 0; k < cols * NT; k++) x[k] = zl_rk_gauss();
        void *xq = malloc(zl_row_size(p, cols));
        zl_quantize_row(p, x, xq, cols);
        /* sampled rows, every level against the reference */
        for (int64_t r = 0; r < rows; r += rows / 40 + 1) {
            const uint8_t *wr = (const uint8_t *)tt->data + (size_t)r * rb;
            const double scale = zl_rk_abs_dot(t, wr, p, xq, cols);
            const float want = zl_vec_dot_isa(ZL_ISA_SCALAR, t, wr, xq, cols);
            for (int isa = ZL_ISA_AVX2; isa <= top; isa++) {
                const float got = zl_vec_dot_isa(isa, t, wr, xq, cols);
                ZL_RK_REQUIRE(fabs((double)got - want) <= 1e-5 * scale, "%s %s (%s) row %ld %s: %.9g vs ref %.9g", name,
                              tname, zl_type_traits_of(t)->name, (long)r, zl_isa_name(isa), got, want);
            }
        }
        /* a slice of rows through zl_matmul: n tokens at once == each alone, bit for bit */
        const int64_t nr = rows < SLICE ? rows : SLICE;
        zl_mat W = {t, nr, cols, tt->data, rb};
        float *y = malloc(sizeof(float) * (size_t)(nr * NT)), *y1 = malloc(sizeof(float) * (size_t)(nr * NT));
        for (int isa = ZL_ISA_AVX2; isa <= top; isa++) {
            if (isa != ZL_ISA_AVX2 && isa != top) continue;
            const zl_kernels *ks = zl_kernels_for((zl_isa)isa);
            for (int k = 0; k < NT; k++) zl_matmul(ks, &W, x + k * cols, cols, 1, y1 + k * nr, nr, pool, &work);
            for (int nt = 2; nt <= NT; nt += (nt < 9 ? 1 : 2)) {
                zl_matmul(ks, &W, x, cols, nt, y, nr, pool, &work);
                for (int k = 0; k < nt; k++)
                    for (int64_t r = 0; r < nr; r++)
                        ZL_RK_REQUIRE(memcmp(&y[k * nr + r], &y1[k * nr + r], sizeof(float)) == 0,
                                      "%s %s (%s) %s n_tok=%d tok %d row %ld: %.9g vs alone %.9g", name, tname,
                                      zl_type_traits_of(t)->name, zl_isa_name(isa), nt, k, (long)r, y[k * nr + r],
                                      y1[k * nr + r]);
            }
            /* and the matmul itself against the reference on its first token */
            for (int64_t r = 0; r < nr; r += 7) {
                const uint8_t *wr = (const uint8_t *)tt->data + (size_t)r * rb;
                const double scale = zl_rk_abs_dot(t, wr, p, xq, cols);
                const float want = zl_vec_dot_isa(ZL_ISA_SCALAR, t, wr, xq, cols);
                ZL_RK_REQUIRE(fabs((double)y1[r] - want) <= 1e-5 * scale, "%s %s %s matmul row %ld: %.9g vs ref %.9g",
                              name, tname, zl_isa_name(isa), (long)r, y1[r], want);
            }
        }
        free(y);
        free(y1);
        free(x);
        free(xq);
    }
    zl_work_free(&work);
    zl_pool_free(pool);
    zl_gguf_close(g);
}

#endif
