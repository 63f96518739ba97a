/* kernels_bench.c — single-matrix zl_matmul throughput (weight GB/s).
 *
 * Times n_tok=1 (decode) and a small batch for each weight type on a
 * rows x cols matrix, twice: "hot", the same matrix again and again (it sits
 * in the last-level cache), and "stream", cycling through enough copies to
 * exceed the caches, which is what decode of a real model sees.
 *
 *   cmake --build build --target kernels_bench     (a CMake target, part of the default build)
 *   build/bin/kernels_bench [rows cols threads stream_MiB types batch]  (default 5632 2048 1 1024, the list
 *   below, 8)
 *
 * types: comma-separated names (Q4_1,Q5_0) to time only those; batch: the tokens of the batch column
 * (prefill-sized batches such as 64 time the tile kernels). *
 * ZL_ISA=scalar|avx2|avx512 caps the kernel level. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/cpu.h"
#include "base/pool.h"
#include "tensor/kernels.h"

/* With one thread, CPU time of the calling thread: the numbers then hold up
 * on a shared machine where wall time would count other people's work. */
static int g_thread_clock;
static double now_s(void) { return g_thread_clock ? zl_thread_cpu_s() : zl_now_s(); }

/* Seconds per call, best of a few rounds, each round >= ~0.2 s. */
static double time_matmul(zl_mat *W, const uint8_t *base, int copies, const float *x, int n_tok, float *y,
                          zl_pool *pool, zl_work *work) {
    double best = 1e30;
    int iters = 1;
    for (int round = 0; round < 6; round++) {
        double t0 = now_s();
        for (int it = 0; it < iters; it++) {
            W->data = base + (size_t)(it % copies) * W->row_bytes * (size_t)W->rows;
            zl_matmul(zl_kernels_for(zl_cpu_max_isa()), W, x, W->cols, n_tok, y, W->rows, pool, work);
        }
        double dt = (now_s() - t0) / iters;
        if (dt < best) best = dt;
        if (dt * iters < 0.2) iters = (int)(0.25 / dt) + 1;
    }
    return best;
}

int main(int argc, char **argv) {
    int64_t rows = argc > 1 ? atoll(argv[1]) : 5632, cols = argc > 2 ? atoll(argv[2]) : 2048;
    int threads = argc > 3 ? atoi(argv[3]) : 1;
    size_t stream_bytes = (size_t)(argc > 4 ? atoll(argv[4]) : 1024) << 20;
    zl_type types[16] = {ZL_TYPE_Q4_0, ZL_TYPE_Q8_0, ZL_TYPE_Q4_K, ZL_TYPE_Q5_K, ZL_TYPE_Q6_K,
                         ZL_TYPE_F16,  ZL_TYPE_Q4_1, ZL_TYPE_Q5_0, ZL_TYPE_Q5_1};
    size_t n_types = 9;
    if (argc > 5) {
        char list[256];
        snprintf(list, sizeof list, "%s", argv[5]);
        n_types = 0;
        for (char *tok = strtok(list, ","); tok && n_types < 16; tok = strtok(NULL, ",")) {
            int t = zl_type_from_name(tok);
            if (t < 0 || !zl_can_quantize((zl_type)t)) {
                fprintf(stderr, "kernels_bench: unknown or unquantisable type '%s'\n", tok);
                return 2;
            }
            types[n_types++] = (zl_type)t;
        }
    }
    const int batch = argc > 6 ? atoi(argv[6]) : 8;
    if (batch < 1 || batch > 4096) {
        fprintf(stderr, "kernels_bench: batch must be 1..4096\n");
        return 2;
    }
    const int64_t xrows = batch > 8 ? batch : 8;
    zl_pool *pool = threads > 1 ? zl_pool_new(threads) : NULL;
    g_thread_clock = threads <= 1;
    zl_work work = {0};
    float *x = malloc(sizeof(float) * (size_t)cols * xrows), *y = malloc(sizeof(float) * (size_t)rows * xrows);
    float *row = malloc(sizeof(float) * (size_t)cols);
    srand(1);
    for (int64_t i = 0; i < cols * xrows; i++) x[i] = (float)rand() / RAND_MAX - 0.5f;
    printf("matrix %ld x %ld, %d thread(s), isa %s, %s time\n", (long)rows, (long)cols, threads,
           zl_isa_name(zl_cpu_max_isa()), threads <= 1 ? "thread CPU" : "wall");
    char bh[32];
    snprintf(bh, sizeof bh, "%d-tok GMAC/s(h)", batch);
    printf("%-5s %9s %12s %12s %16s\n", "type", "MiB", "hot GB/s", "stream GB/s", bh);
    for (size_t ti = 0; ti < n_types; ti++) {
        zl_mat W = {types[ti], rows, cols, NULL, zl_row_size(types[ti], cols)};
        size_t mat_bytes = W.row_bytes * (size_t)rows;
        int copies = (int)(stream_bytes / mat_bytes);
        if (copies < 2) copies = 2;
        uint8_t *base = malloc(mat_bytes * (size_t)copies);
        if (!base) return 1;
        for (int64_t r = 0; r < rows; r++) {
            for (int64_t c = 0; c < cols; c++) row[c] = (float)rand() / RAND_MAX - 0.5f;
            zl_quantize_row(types[ti], row, base + (size_t)r * W.row_bytes, cols);
        }
        for (int k = 1; k < copies; k++) memcpy(base + (size_t)k * mat_bytes, base, mat_bytes);
        double hot = time_matmul(&W, base, 1, x, 1, y, pool, &work);
        double stream = time_matmul(&W, base, copies, x, 1, y, pool, &work);
        double tb = time_matmul(&W, base, 1, x, batch, y, pool, &work);
        printf("%-5s %9.2f %12.1f %12.1f %16.1f\n", zl_type_traits_of(types[ti])->name, mat_bytes / 1048576.0,
               mat_bytes / hot / 1e9, mat_bytes / stream / 1e9, (double)rows * (double)cols * batch / tb / 1e9);
        free(base);
    }
    zl_work_free(&work);
    zl_pool_free(pool);
    free(x);
    free(y);
    free(row);
    return 0;
}
