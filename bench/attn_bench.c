/* attn_bench.c — one attention tile (src/tensor/attn.h) in isolation.
 *
 * Times a tile of R query rows against L cached positions of one KV head
 * (head dimension 64, f16 cache) on the calling thread, CPU time, best of a
 * few rounds, and reports ns per row per position and the multiply-add rate
 * (2 * hd MACs per row and position: q.k and p.v).  Shapes: a decode tile
 * (GQA group of 8 heads x 1 token) and prefill tiles (8 heads x 4 and x 8 tokens).
 *
 *   cmake --build build --target attn_bench     (a CMake target, part of the default build)
 *   build/bin/attn_bench [len=2048]
 *
 * ZL_ISA=scalar|avx2|avx512 caps the kernel level. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/cpu.h"
#include "base/f16.h"
#include "tensor/attn.h"

static double rnd(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return (double)(*s >> 8) / (double)(1u << 24) - 0.5;
}

int main(int argc, char **argv) {
    const int hd = 64, len = argc > 1 ? atoi(argv[1]) : 2048;
    if (len < 1 || len > 1 << 20) { fprintf(stderr, "len out of range\n"); return 2; }
    zl_attn_fn fn = zl_attn_fn_for(zl_cpu_max_isa(), hd);
    unsigned seed = 1;
    uint16_t *k = malloc((size_t)len * hd * 2), *v = malloc((size_t)len * hd * 2);
    float *q = malloc((size_t)ZL_ATTN_MAX_ROWS * hd * 4), *o = malloc((size_t)ZL_ATTN_MAX_ROWS * hd * 4);
    size_t wf = zl_attn_work_floats(hd, ZL_ATTN_MAX_ROWS, len, 0);
    float *work = aligned_alloc(64, (wf * 4 + 63) / 64 * 64);
    if (!k || !v || !q || !o || !work) { fprintf(stderr, "out of memory\n"); return 1; }
    for (size_t i = 0; i < (size_t)len * hd; i++) {
        k[i] = zl_f32_to_f16((float)rnd(&seed));
        v[i] = zl_f32_to_f16((float)rnd(&seed));
    }
    for (int i = 0; i < ZL_ATTN_MAX_ROWS * hd; i++) q[i] = (float)rnd(&seed);
    static const int shapes[][2] = {{8, 1}, {8, 4}, {8, 8}}; /* heads per KV head, tokens */
    printf("len %d, head dim %d, f16 cache, isa %d\n", len, hd, zl_cpu_max_isa());
    for (int sh = 0; sh < 3; sh++) {
        int heads = shapes[sh][0], toks = shapes[sh][1], rows = heads * toks;
        const float *qp[ZL_ATTN_MAX_ROWS];
        float *op[ZL_ATTN_MAX_ROWS];
        int lens[ZL_ATTN_MAX_ROWS];
        for (int r = 0; r < rows; r++) {
            qp[r] = q + (size_t)r * hd;
            op[r] = o + (size_t)r * hd;
            lens[r] = len - (toks - 1) + r / heads; /* token-major: a token's heads are adjacent */
        }
        zl_attn_tile t = {rows, hd, 0.125f, qp, op, lens, ZL_TYPE_F16, (const uint8_t *)k, (const uint8_t *)v,
                          (size_t)hd * 2, NULL, work};
        double best = 1e30;
        int iters = 1;
        for (int round = 0; round < 6; round++) {
            double t0 = zl_thread_cpu_s();
            for (int it = 0; it < iters; it++) fn(&t);
            double dt = (zl_thread_cpu_s() - t0) / iters;
            if (dt < best) best = dt;
            if (dt * iters < 0.2) iters = (int)(0.25 / dt) + 1;
        }
        double rp = (double)rows * len;
        printf("%2d heads x %d tokens: %8.1f us per tile, %.3f ns per row-position, %.1f GMAC/s\n", heads, toks,
               best * 1e6, best * 1e9 / rp, 2.0 * hd * rp / best * 1e-9);
    }
    free(k), free(v), free(q), free(o), free(work);
    return 0;
}
