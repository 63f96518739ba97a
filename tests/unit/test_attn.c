/* test_attn.c — the attention tile (tensor/attn.h) at every ISA level this
 * CPU has, against a double-precision softmax-attention reference, for each
 * KV type, head sizes that exercise every vector path and lengths that cross
 * block boundaries; and the determinism contract: a row's output is
 * bit-identical alone and inside any tile. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "tensor/attn.h"
#include "tensor/kernels.h"

#define MAXLEN 300
#define MAXHD 128

typedef struct {
    zl_type t;
    int hd;
    size_t stride;
    uint8_t *k, *v;
    float *kf, *vf; /* the cache as the kernel sees it (after rounding to the type) */
} cache;

static void cache_make(cache *c, zl_type t, int hd, unsigned seed) {
    c->t = t;
    c->hd = hd;
    c->stride = zl_row_size(t, hd);
    c->k = malloc(c->stride * MAXLEN);
    c->v = malloc(c->stride * MAXLEN);
    c->kf = malloc(sizeof(float) * hd * MAXLEN);
    c->vf = malloc(sizeof(float) * hd * MAXLEN);
    srand(seed);
    float tmp[MAXHD];
    for (int p = 0; p < MAXLEN; p++)
        for (int which = 0; which < 2; which++) {
            for (int d = 0; d < hd; d++) tmp[d] = (float)rand() / RAND_MAX * 4 - 2;
            uint8_t *dst = (which ? c->v : c->k) + p * c->stride;
            if (t == ZL_TYPE_F32) memcpy(dst, tmp, sizeof(float) * hd);
            else if (t == ZL_TYPE_F16) for (int d = 0; d < hd; d++) ((zl_f16 *)dst)[d] = zl_f32_to_f16(tmp[d]);
            else zl_quantize_row(t, tmp, dst, hd);
            zl_attn_widen_ref(t, dst, c->stride, 1, hd, (which ? c->vf : c->kf) + p * hd);
        }
}

static void cache_free(cache *c) {
    free(c->k);
    free(c->v);
    free(c->kf);
    free(c->vf);
}

static void reference(const cache *c, const float *q, int len, double *out, double *prob) {
    int hd = c->hd;
    double s[MAXLEN], mx = -1e300, sum = 0;
    for (int p = 0; p < len; p++) {
        s[p] = 0;
        for (int d = 0; d < hd; d++) s[p] += (double)c->kf[p * hd + d] * q[d];
        s[p] /= sqrt((double)hd);
        if (s[p] > mx) mx = s[p];
    }
    for (int p = 0; p < len; p++) sum += (s[p] = exp(s[p] - mx));
    for (int d = 0; d < hd; d++) out[d] = 0;
    for (int p = 0; p < len; p++) {
        prob[p] = s[p] / sum;
        for (int d = 0; d < hd; d++) out[d] += prob[p] * c->vf[p * hd + d];
    }
}

/* run one tile of `rows` rows; row r has query qs + r*MAXHD and length lens[r] */
static void run_tile(zl_attn_fn fn, const cache *c, int rows, const float *qs, const int *lens, float *outs, float *probs) {
    const float *qp[ZL_ATTN_MAX_ROWS];
    float *op[ZL_ATTN_MAX_ROWS];
    int maxlen = 0;
    for (int r = 0; r < rows; r++) {
        qp[r] = qs + r * MAXHD;
        op[r] = outs + r * MAXHD;
        if (lens[r] > maxlen) maxlen = lens[r];
    }
    float *work = aligned_alloc(64, ((zl_attn_work_floats(c->hd, rows, maxlen, probs != NULL) * 4 + 63) / 64) * 64);
    zl_attn_tile t = {rows, c->hd, 1.0f / sqrtf((float)c->hd), qp, op, lens, c->t, c->k, c->v, c->stride, probs, work};
    fn(&t);
    free(work);
}

static void check_type(zl_type t) {
    int hds[] = {8, 16, 24, 32, 64, 80, 128};
    int lens_pool[] = {1, 2, 15, 16, 17, 63, 64, 65, 100, 128, 129, 300};
    for (int isa = ZL_ISA_SCALAR; isa <= ZL_ISA_TOP; isa++) {
        if (isa > (int)zl_cpu_max_isa()) continue;
        for (size_t hi = 0; hi < sizeof hds / sizeof *hds; hi++) {
            int hd = hds[hi];
            if (t == ZL_TYPE_Q8_0 && hd % 32) continue;
            zl_attn_fn fn = zl_attn_fn_for(isa, hd);
            cr_assert(fn);
            cache c;
            cache_make(&c, t, hd, 7 + hd);
            enum { R = 12 };
            static float qs[R * MAXHD], outs[R * MAXHD], alone[MAXHD * 2];
            int lens[R];
            for (int r = 0; r < R; r++) {
                lens[r] = lens_pool[(r * 5 + hd) % (sizeof lens_pool / sizeof *lens_pool)];
                for (int d = 0; d < hd; d++) qs[r * MAXHD + d] = sinf(0.37f * d + r) * 1.5f;
            }
            static float probs[MAXLEN];
            memset(probs, 0, sizeof probs);
            run_tile(fn, &c, R, qs, lens, outs, probs);
            double want[MAXHD], prob[MAXLEN], psum[MAXLEN] = {0};
            for (int r = 0; r < R; r++) {
                reference(&c, qs + r * MAXHD, lens[r], want, prob);
                for (int p = 0; p < lens[r]; p++) psum[p] += prob[p];
                for (int d = 0; d < hd; d++)
                    cr_assert(fabs(outs[r * MAXHD + d] - want[d]) <= 2e-5 * (1 + fabs(want[d])),
                              "type %d isa %d hd %d row %d len %d d %d: %g vs %g", t, isa, hd, r, lens[r], d,
                              outs[r * MAXHD + d], want[d]);
                /* determinism: the row alone, and with a different neighbour, bit for bit */
                run_tile(fn, &c, 1, qs + r * MAXHD, &lens[r], alone, NULL);
                cr_assert(memcmp(alone, outs + r * MAXHD, sizeof(float) * hd) == 0,
                          "type %d isa %d hd %d row %d: tile and alone differ", t, isa, hd, r);
                static float pair_q[2 * MAXHD], pair_o[2 * MAXHD];
                memcpy(pair_q, qs + ((r + 1) % R) * MAXHD, sizeof(float) * MAXHD);
                memcpy(pair_q + MAXHD, qs + r * MAXHD, sizeof(float) * MAXHD);
                int pl[2] = {MAXLEN, lens[r]};
                run_tile(fn, &c, 2, pair_q, pl, pair_o, NULL);
                cr_assert(memcmp(pair_o + MAXHD, outs + r * MAXHD, sizeof(float) * hd) == 0,
                          "type %d isa %d hd %d row %d: second in a pair differs", t, isa, hd, r);
            }
            for (int p = 0; p < MAXLEN; p++)
                cr_assert(fabs(probs[p] - psum[p]) <= 1e-5 * (1 + psum[p]), "probs isa %d hd %d pos %d: %g vs %g", isa,
                          hd, p, probs[p], psum[p]);
            cache_free(&c);
        }
    }
}

Test(attn, f16_all_isas) { check_type(ZL_TYPE_F16); }
Test(attn, f32_all_isas) { check_type(ZL_TYPE_F32); }
Test(attn, q8_0_all_isas) { check_type(ZL_TYPE_Q8_0); }

Test(attn, full_tile_of_64_rows) {
    zl_attn_fn fn = zl_attn_fn_for(zl_cpu_max_isa(), 64);
    cache c;
    cache_make(&c, ZL_TYPE_F16, 64, 3);
    static float qs[ZL_ATTN_MAX_ROWS * MAXHD], outs[ZL_ATTN_MAX_ROWS * MAXHD];
    int lens[ZL_ATTN_MAX_ROWS];
    for (int r = 0; r < ZL_ATTN_MAX_ROWS; r++) {
        lens[r] = 200 + r; /* a prefill chunk: consecutive positions */
        for (int d = 0; d < 64; d++) qs[r * MAXHD + d] = cosf(0.1f * d * (r + 1));
    }
    run_tile(fn, &c, ZL_ATTN_MAX_ROWS, qs, lens, outs, NULL);
    double want[MAXHD], prob[MAXLEN];
    for (int r = 0; r < ZL_ATTN_MAX_ROWS; r++) {
        reference(&c, qs + r * MAXHD, lens[r], want, prob);
        for (int d = 0; d < 64; d++) cr_assert(fabs(outs[r * MAXHD + d] - want[d]) <= 2e-5 * (1 + fabs(want[d])));
    }
    cache_free(&c);
}
