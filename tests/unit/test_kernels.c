/* test_kernels.c — block formats, quantisers, dot kernels and matmul.
 *
 * The hand-built block tests decode with their own formulation of each
 * layout (not the library's helpers), so a layout mistake in kernels_ref.c
 * cannot agree with itself.  SIMD kernels are then compared against the
 * scalar reference on random bytes (every bit pattern a file may hold) and on
 * real llama.cpp-quantised tensors from the fixtures. */
#include <criterion/criterion.h>
#if defined(__x86_64__) || defined(__i386__)
#define ZL_TEST_X86 1
#include <immintrin.h>
#else
#define ZL_TEST_X86 0
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "base/f16.h"
#include "base/pool.h"
#include "gguf/gguf.h"
#include "tensor/kernels.h"
#include "tensor/kernels_isa.h"
#include "tensor/types.h"

/* ---- helpers ---------------------------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng_u64(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static float rng_unif(void) { return (float)((rng_u64() >> 11) * (1.0 / 9007199254740992.0)); }
static float rng_gauss(void) {
    float u = rng_unif(), v = rng_unif();
    if (u < 1e-12f) u = 1e-12f;
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}
static void fill_gauss(float *x, int64_t n, float scale) {
    for (int64_t i = 0; i < n; i++) x[i] = scale * rng_gauss();
}

static const zl_type k_weight_types[] = {ZL_TYPE_F32,  ZL_TYPE_F16,  ZL_TYPE_BF16, ZL_TYPE_Q4_0,
                                         ZL_TYPE_Q4_1, ZL_TYPE_Q5_0, ZL_TYPE_Q5_1, ZL_TYPE_Q8_0,
                                         ZL_TYPE_Q4_K, ZL_TYPE_Q5_K, ZL_TYPE_Q6_K};
#define N_WEIGHT_TYPES (int)(sizeof k_weight_types / sizeof k_weight_types[0])

/* Criterion records every assertion it evaluates; loops check first and
 * only call into it on failure. */
#define REQUIRE(cond, ...)                            \
    do {                                              \
        if (!(cond)) cr_assert_fail(__VA_ARGS__);     \
    } while (0)

static const char *tname(zl_type t) { return zl_type_traits_of(t)->name; }

static int max_isa(void) { return zl_cpu_max_isa(); }

static void put_f16(void *dst, float v) {
    zl_f16 h = zl_f32_to_f16(v);
    memcpy(dst, &h, 2);
}

/* ---- f16 / bf16 ------------------------------------------------------- */

Test(f16, edge_cases) {
    cr_expect_eq(zl_f32_to_f16(0.0f), 0x0000);
    cr_expect_eq(zl_f32_to_f16(-0.0f), 0x8000);
    cr_expect_eq(zl_f32_to_f16(1.0f), 0x3c00);
    cr_expect_eq(zl_f32_to_f16(-2.0f), 0xc000);
    cr_expect_eq(zl_f32_to_f16(65504.0f), 0x7bff);
    cr_expect_eq(zl_f32_to_f16(65519.0f), 0x7bff);  /* below the halfway point to 2^16 */
    cr_expect_eq(zl_f32_to_f16(65520.0f), 0x7c00);  /* halfway rounds (to even) to inf */
    cr_expect_eq(zl_f32_to_f16(1e9f), 0x7c00);
    cr_expect_eq(zl_f32_to_f16(-INFINITY), 0xfc00);
    cr_expect_eq(zl_f32_to_f16(ldexpf(1, -24)), 0x0001); /* smallest subnormal */
    cr_expect_eq(zl_f32_to_f16(ldexpf(1, -25)), 0x0000); /* tie -> even (0) */
    cr_expect_eq(zl_f32_to_f16(ldexpf(1.5f, -25)), 0x0001);
    cr_expect_eq(zl_f32_to_f16(ldexpf(3, -25)), 0x0002); /* 1.5 ulp tie -> even (2) */
    cr_expect_eq(zl_f32_to_f16(ldexpf(1, -14)), 0x0400); /* smallest normal */
    cr_expect_eq(zl_f32_to_f16(1.0f + ldexpf(1, -11)), 0x3c00);     /* tie -> even */
    cr_expect_eq(zl_f32_to_f16(1.0f + 3 * ldexpf(1, -11)), 0x3c02); /* tie -> even */
    cr_expect(isnan(zl_f16_to_f32(zl_f32_to_f16(NAN))));
    cr_expect_eq(zl_f16_to_f32(0x0001), ldexpf(1, -24));
    cr_expect_eq(zl_f16_to_f32(0x03ff), ldexpf(1023, -24));
    cr_expect_eq(zl_f16_to_f32(0xfbff), -65504.0f);
    cr_expect(isinf(zl_f16_to_f32(0x7c00)));
}

Test(f16, every_half_round_trips) {
    for (uint32_t h = 0; h < 65536; h++) {
        float f = zl_f16_to_f32((zl_f16)h);
        if (isnan(f)) {
            REQUIRE((h & 0x7c00) == 0x7c00 && (h & 0x3ff), "0x%04x", h);
            REQUIRE(isnan(zl_f16_to_f32(zl_f32_to_f16(f))), "0x%04x", h);
            continue;
        }
        REQUIRE(zl_f32_to_f16(f) == h, "half 0x%04x -> %g -> 0x%04x", h, f, zl_f32_to_f16(f));
    }
}

/* The hardware conversion (round to nearest even) is the oracle. */
#if ZL_TEST_X86
__attribute__((target("f16c"))) static uint16_t hw_f16(float f) { return (uint16_t)_cvtss_sh(f, 0); }
#else /* AArch64: FCVT to half, round to nearest even */
static uint16_t hw_f16(float f) {
    __fp16 h = (__fp16)f;
    uint16_t u;
    memcpy(&u, &h, 2);
    return u;
}
#endif

Test(f16, matches_f16c_on_random_floats) {
    if (ZL_TEST_X86 && !zl_cpu_get()->f16c) cr_skip_test("no F16C");
    for (int i = 0; i < 2000000; i++) {
        uint32_t u = (uint32_t)rng_u64();
        /* concentrate on the f16 range: exponents 100..150 */
        if (i & 1) u = (u & 0x807fffffu) | ((100u + (u >> 8) % 51) << 23);
        float f = zl_f32_from_bits(u);
        if (isnan(f)) continue;
        REQUIRE(zl_f32_to_f16(f) == hw_f16(f), "bits 0x%08x", u);
    }
}

Test(bf16, conversions) {
    cr_expect_eq(zl_f32_to_bf16(1.0f), 0x3f80);
    cr_expect_eq(zl_f32_to_bf16(zl_f32_from_bits(0x3f808000u)), 0x3f80); /* tie -> even */
    cr_expect_eq(zl_f32_to_bf16(zl_f32_from_bits(0x3f818000u)), 0x3f82); /* tie -> even */
    cr_expect_eq(zl_f32_to_bf16(zl_f32_from_bits(0x3f808001u)), 0x3f81);
    cr_expect_eq(zl_f32_to_bf16(-INFINITY), 0xff80);
    cr_expect_eq(zl_f32_to_bf16(zl_f32_from_bits(0x7f7fffffu)), 0x7f80); /* FLT_MAX -> inf */
    zl_bf16 qn = zl_f32_to_bf16(zl_f32_from_bits(0x7f800001u)); /* signalling NaN stays NaN */
    cr_expect(isnan(zl_bf16_to_f32(qn)));
    for (uint32_t h = 0; h < 65536; h++) {
        float f = zl_bf16_to_f32((zl_bf16)h);
        if (isnan(f)) continue;
        REQUIRE(zl_f32_to_bf16(f) == h, "bf16 0x%04x", h);
    }
}

/* ---- hand-built blocks ------------------------------------------------ */

static void expect_deq(zl_type t, const void *blk, const float *want, int n) {
    float got[256];
    zl_dequant_row(t, blk, got, n);
    for (int i = 0; i < n; i++)
        REQUIRE(fabsf(got[i] - want[i]) <= 1e-6f, "%s element %d: got %g want %g", tname(t), i, got[i], want[i]);
}

Test(dequant, q4_0_q4_1_q8_0) {
    zl_block_q4_0 a;
    a.d = 0x3800; /* 0.5 */
    for (int j = 0; j < 16; j++) a.qs[j] = (uint8_t)(j | (15 - j) << 4);
    float want[32];
    for (int j = 0; j < 16; j++) {
        want[j] = 0.5f * (float)(j - 8);
        want[16 + j] = 0.5f * (float)(7 - j);
    }
    expect_deq(ZL_TYPE_Q4_0, &a, want, 32);

    zl_block_q4_1 b;
    b.d = 0x3400; /* 0.25 */
    b.m = 0xbc00; /* -1 */
    memcpy(b.qs, a.qs, 16);
    for (int j = 0; j < 16; j++) {
        want[j] = 0.25f * (float)j - 1;
        want[16 + j] = 0.25f * (float)(15 - j) - 1;
    }
    expect_deq(ZL_TYPE_Q4_1, &b, want, 32);

    zl_block_q8_0 c;
    c.d = 0x3000; /* 0.125 */
    for (int j = 0; j < 32; j++) c.qs[j] = (int8_t)(j * 8 - 128);
    for (int j = 0; j < 32; j++) want[j] = 0.125f * (float)(j * 8 - 128);
    expect_deq(ZL_TYPE_Q8_0, &c, want, 32);
}

Test(dequant, q5_0_q5_1) {
    const uint8_t qh[4] = {0xF0, 0x0F, 0xAA, 0x55};
    const uint32_t qbits = 0x55AA0FF0u;
    zl_block_q5_0 a;
    a.d = 0x3c00;
    memcpy(a.qh, qh, 4);
    for (int j = 0; j < 16; j++) a.qs[j] = (uint8_t)(j | j << 4);
    float want[32];
    for (int e = 0; e < 32; e++) want[e] = (float)((e % 16) + 16 * (int)((qbits >> e) & 1) - 16);
    expect_deq(ZL_TYPE_Q5_0, &a, want, 32);

    zl_block_q5_1 b;
    b.d = 0x3800; /* 0.5 */
    b.m = 0x4000; /* 2 */
    memcpy(b.qh, qh, 4);
    memcpy(b.qs, a.qs, 16);
    for (int e = 0; e < 32; e++) want[e] = 0.5f * (float)((e % 16) + 16 * (int)((qbits >> e) & 1)) + 2;
    expect_deq(ZL_TYPE_Q5_1, &b, want, 32);
}

/* Scales/mins of the K formats, packed from the byte diagram
 *   bytes 0-3 : hi2(sc[4+i]) lo6(sc[i])     bytes 4-7 : hi2(m[4+i]) lo6(m[i])
 *   bytes 8-11: lo4(m[4+i])  lo4(sc[4+i]) */
static const int k_sc[8] = {1, 17, 33, 63, 5, 40, 21, 62};
static const int k_mn[8] = {0, 3, 60, 15, 16, 47, 2, 63};
static void pack_k_scales_by_diagram(uint8_t s[12]) {
    for (int i = 0; i < 4; i++) {
        s[i] = (uint8_t)(k_sc[i] | (k_sc[4 + i] >> 4) << 6);
        s[4 + i] = (uint8_t)(k_mn[i] | (k_mn[4 + i] >> 4) << 6);
        s[8 + i] = (uint8_t)((k_sc[4 + i] & 15) | (k_mn[4 + i] & 15) << 4);
    }
}

Test(dequant, q4_k_q5_k) {
    zl_block_q4_k a;
    a.d = 0x3c00;    /* 1 */
    a.dmin = 0x3800; /* 0.5 */
    pack_k_scales_by_diagram(a.scales);
    for (int k = 0; k < 128; k++) a.qs[k] = (uint8_t)(k * 7 + 3);
    float want[256];
    /* 4 chunks x {low nibble, high nibble} x 32 bytes */
    for (int c = 0; c < 4; c++)
        for (int half = 0; half < 2; half++)
            for (int l = 0; l < 32; l++) {
                int e = c * 64 + half * 32 + l, sub = e / 32;
                int q = (a.qs[c * 32 + l] >> (4 * half)) & 15;
                want[e] = 1.0f * (float)(k_sc[sub] * q) - 0.5f * (float)k_mn[sub];
            }
    expect_deq(ZL_TYPE_Q4_K, &a, want, 256);

    zl_block_q5_k b;
    b.d = 0x3400;    /* 0.25 */
    b.dmin = 0x3c00; /* 1 */
    memcpy(b.scales, a.scales, 12);
    memcpy(b.qs, a.qs, 128);
    for (int l = 0; l < 32; l++) b.qh[l] = (uint8_t)(l * 37 + 11);
    for (int c = 0; c < 4; c++)
        for (int half = 0; half < 2; half++)
            for (int l = 0; l < 32; l++) {
                int e = c * 64 + half * 32 + l, sub = e / 32;
                int q = ((b.qs[c * 32 + l] >> (4 * half)) & 15) + 16 * ((b.qh[l] >> sub) & 1);
                want[e] = 0.25f * (float)(k_sc[sub] * q) - 1.0f * (float)k_mn[sub];
            }
    expect_deq(ZL_TYPE_Q5_K, &b, want, 256);
}

Test(dequant, q6_k) {
    zl_block_q6_k a;
    a.d = 0x3800; /* 0.5 */
    for (int k = 0; k < 128; k++) a.ql[k] = (uint8_t)(k * 13 + 5);
    for (int k = 0; k < 64; k++) a.qh[k] = (uint8_t)(k * 29 + 7);
    for (int k = 0; k < 16; k++) a.scales[k] = (int8_t)(k * 17 - 128);
    int q[256];
    /* per 128-element half: 64 ql bytes, low nibbles give elements 0..63, high 64..127;
     * 32 qh bytes, 2-bit fields at shifts 0,2,4,6 give the top bits of 32-element groups */
    for (int h = 0; h < 2; h++) {
        for (int sh = 0; sh < 2; sh++)
            for (int k = 0; k < 64; k++) q[h * 128 + sh * 64 + k] = (a.ql[h * 64 + k] >> (4 * sh)) & 15;
        for (int s = 0; s < 4; s++)
            for (int l = 0; l < 32; l++) q[h * 128 + s * 32 + l] |= ((a.qh[h * 32 + l] >> (2 * s)) & 3) << 4;
    }
    float want[256];
    for (int e = 0; e < 256; e++) want[e] = 0.5f * (float)(a.scales[e / 16] * (q[e] - 32));
    expect_deq(ZL_TYPE_Q6_K, &a, want, 256);
}

Test(dequant, float_types) {
    const float v[4] = {1.5f, -0.0f, 65504.0f, ldexpf(1, -24)};
    uint16_t h[4], bh[4];
    for (int i = 0; i < 4; i++) {
        h[i] = zl_f32_to_f16(v[i]);
        bh[i] = zl_f32_to_bf16(v[i]);
    }
    float out[4];
    zl_dequant_row(ZL_TYPE_F16, h, out, 4);
    for (int i = 0; i < 4; i++) cr_expect_eq(out[i], v[i]);
    zl_dequant_row(ZL_TYPE_BF16, bh, out, 4);
    cr_expect_eq(out[0], 1.5f);
    cr_expect_eq(out[2], 65536.0f);
    zl_dequant_row(ZL_TYPE_F32, v, out, 4);
    cr_expect_eq(memcmp(out, v, sizeof v), 0);
}

/* ---- quantise -> dequantise round trips -------------------------------- */

static double rel_rmse(zl_type t, const float *x, int64_t n) {
    size_t bytes = zl_row_size(t, n);
    cr_assert(bytes > 0);
    void *q = malloc(bytes);
    float *y = malloc((size_t)n * sizeof(float));
    cr_assert_eq(zl_quantize_row(t, x, q, n), bytes);
    zl_dequant_row(t, q, y, n);
    double se = 0, ss = 0;
    for (int64_t i = 0; i < n; i++) {
        se += (double)(y[i] - x[i]) * (y[i] - x[i]);
        ss += (double)x[i] * x[i];
    }
    free(q);
    free(y);
    return sqrt(se / ss);
}

Test(quant, round_trip_error) {
    static const struct { zl_type t; double bound; } cases[] = {
        {ZL_TYPE_F32, 0},       {ZL_TYPE_F16, 3e-4},    {ZL_TYPE_BF16, 2.5e-3}, {ZL_TYPE_Q8_0, 6.5e-3},
        {ZL_TYPE_Q8_1, 6.5e-3}, {ZL_TYPE_Q8_K, 8e-3},   {ZL_TYPE_Q6_K, 2.2e-2}, {ZL_TYPE_Q5_0, 4.5e-2},
        {ZL_TYPE_Q5_1, 4.0e-2}, {ZL_TYPE_Q5_K, 4.0e-2}, {ZL_TYPE_Q4_0, 9.5e-2}, {ZL_TYPE_Q4_1, 8.5e-2},
        {ZL_TYPE_Q4_K, 8.0e-2},
    };
    enum { N = 8192 };
    float *x = malloc(N * sizeof(float));
    fill_gauss(x, N, 0.02f);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double e = rel_rmse(cases[i].t, x, N);
        cr_expect(e <= cases[i].bound, "%s: relative rmse %.4g > %.4g", tname(cases[i].t), e, cases[i].bound);
    }
    /* outliers and a shifted distribution (exercises the mins) */
    for (int i = 0; i < N; i++) x[i] = 0.5f + rng_gauss() + (i % 97 == 0 ? 8.0f : 0.0f);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double e = rel_rmse(cases[i].t, x, N);
        cr_expect(e <= cases[i].bound * 2.0, "%s (shifted): relative rmse %.4g", tname(cases[i].t), e);
    }
    free(x);
}

Test(quant, zeros_and_bad_lengths) {
    float z[256] = {0};
    uint8_t buf[1024];
    float y[256];
    const zl_type ts[] = {ZL_TYPE_Q4_0, ZL_TYPE_Q4_1, ZL_TYPE_Q5_0, ZL_TYPE_Q5_1, ZL_TYPE_Q8_0,
                          ZL_TYPE_Q8_1, ZL_TYPE_Q4_K, ZL_TYPE_Q5_K, ZL_TYPE_Q6_K, ZL_TYPE_Q8_K};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        cr_assert(zl_can_quantize(ts[i]));
        cr_assert_gt(zl_quantize_row(ts[i], z, buf, 256), 0);
        zl_dequant_row(ts[i], buf, y, 256);
        for (int j = 0; j < 256; j++) REQUIRE(y[j] == 0.0f, "%s", tname(ts[i]));
        cr_expect_eq(zl_quantize_row(ts[i], z, buf, 16), 0, "%s accepted a partial block", tname(ts[i]));
    }
    cr_expect_not(zl_can_quantize(ZL_TYPE_Q2_K));
    cr_expect_eq(zl_quantize_row(ZL_TYPE_Q2_K, z, buf, 256), 0);
}

Test(quant, q8_k_bsums) {
    float x[256];
    fill_gauss(x, 256, 3.0f);
    zl_block_q8_k b;
    zl_quantize_row(ZL_TYPE_Q8_K, x, &b, 256);
    for (int g = 0; g < 16; g++) {
        int s = 0;
        for (int l = 0; l < 16; l++) s += b.qs[16 * g + l];
        cr_expect_eq(b.bsums[g], s);
    }
    zl_block_q8_1 c;
    zl_quantize_row(ZL_TYPE_Q8_1, x, &c, 32);
    int s = 0;
    for (int l = 0; l < 32; l++) s += c.qs[l];
    cr_expect_float_eq(zl_f16_to_f32(c.s), zl_f16_to_f32(c.d) * (float)s, 1e-2f * fabsf(zl_f16_to_f32(c.s)) + 1e-6f);
}

/* ---- vec_dot: reference vs dequantised, SIMD vs reference ------------- */

/* Random weight bytes with sane scale fields (any quant bit pattern is legal). */
static void random_weight_row(zl_type t, void *dst, int64_t n) {
    size_t bytes = zl_row_size(t, n);
    uint8_t *p = dst;
    for (size_t i = 0; i < bytes; i++) p[i] = (uint8_t)rng_u64();
    const zl_type_traits *tr = zl_type_traits_of(t);
    int64_t nb = n / tr->blck;
    for (int64_t i = 0; i < nb; i++) {
        uint8_t *b = p + i * tr->size;
        switch (t) {
        case ZL_TYPE_F32: case ZL_TYPE_F16: case ZL_TYPE_BF16: break;
        case ZL_TYPE_Q4_0: case ZL_TYPE_Q5_0: case ZL_TYPE_Q8_0: put_f16(b, 0.01f * rng_gauss()); break;
        case ZL_TYPE_Q4_1: case ZL_TYPE_Q5_1: case ZL_TYPE_Q4_K: case ZL_TYPE_Q5_K:
            put_f16(b, 0.01f * rng_gauss());
            put_f16(b + 2, 0.01f * rng_gauss());
            break;
        case ZL_TYPE_Q6_K: put_f16(b + 208, 0.01f * rng_gauss()); break;
        default: break;
        }
    }
    if (t == ZL_TYPE_F32 || t == ZL_TYPE_F16 || t == ZL_TYPE_BF16) {
        float *f = malloc((size_t)n * sizeof(float));
        fill_gauss(f, n, 1.0f);
        zl_quantize_row(t, f, dst, n);
        free(f);
    }
}

/* Random activation row in the partner format, extremes included. */
static void random_partner_row(zl_type partner, void *dst, int64_t n) {
    float *f = malloc((size_t)n * sizeof(float));
    fill_gauss(f, n, 1.0f);
    for (int64_t i = 0; i < n; i += 37) f[i] *= 6; /* spikes hit +-127 */
    zl_quantize_row(partner, f, dst, n);
    free(f);
}

/* sum |w_i * x_i| in double: the scale for dot tolerances */
static double abs_dot(zl_type t, const void *w, zl_type partner, const void *x, int64_t n, double *exact) {
    float *a = malloc((size_t)n * sizeof(float)), *b = malloc((size_t)n * sizeof(float));
    zl_dequant_row(t, w, a, n);
    zl_dequant_row(partner, x, b, n);
    double s = 0, e = 0;
    for (int64_t i = 0; i < n; i++) {
        s += fabs((double)a[i] * b[i]);
        e += (double)a[i] * b[i];
    }
    free(a);
    free(b);
    if (exact) *exact = e;
    return s;
}

Test(vec_dot, reference_matches_dequantised) {
    const int64_t sizes[] = {256, 768, 4096};
    for (int ti = 0; ti < N_WEIGHT_TYPES; ti++) {
        zl_type t = k_weight_types[ti], p = zl_dot_partner(t);
        for (size_t si = 0; si < 3; si++) {
            int64_t n = sizes[si];
            void *w = malloc(zl_row_size(t, n)), *x = malloc(zl_row_size(p, n));
            random_weight_row(t, w, n);
            random_partner_row(p, x, n);
            double exact, scale = abs_dot(t, w, p, x, n, &exact);
            float got = zl_vec_dot_isa(ZL_ISA_SCALAR, t, w, x, n);
            /* Q8_1's s is an f16 product: allow its rounding on the *_1 min term */
            double tol = 2e-5 * scale + (p == ZL_TYPE_Q8_1 ? 2e-3 * scale : 0);
            cr_expect(fabs(got - exact) <= tol, "%s n=%ld: ref %.9g exact %.9g", tname(t), (long)n, got, exact);
            free(w);
            free(x);
        }
    }
}

Test(vec_dot, every_isa_matches_reference) {
    int top = max_isa();
    const int64_t sizes[] = {256, 512, 1280, 4096, 11008};
    for (int isa = ZL_ISA_AVX2; isa <= top; isa++) {
        for (int ti = 0; ti < N_WEIGHT_TYPES; ti++) {
            zl_type t = k_weight_types[ti], p = zl_dot_partner(t);
            for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
                int64_t n = sizes[si];
                for (int rep = 0; rep < 3; rep++) {
                    void *w = malloc(zl_row_size(t, n)), *x = malloc(zl_row_size(p, n));
                    random_weight_row(t, w, n);
                    random_partner_row(p, x, n);
                    double scale = abs_dot(t, w, p, x, n, NULL);
                    float ref = zl_vec_dot_isa(ZL_ISA_SCALAR, t, w, x, n);
                    float got = zl_vec_dot_isa(isa, t, w, x, n);
                    REQUIRE(fabs((double)got - ref) <= 1e-5 * scale + 1e-30, "%s %s n=%ld: got %.9g ref %.9g (scale %g)",
                              zl_isa_name(isa), tname(t), (long)n, got, ref, scale);
                    free(w);
                    free(x);
                }
            }
        }
    }
}

#if ZL_TEST_X86 /* the x86 levels' own kernels */
/* Every AVX-512 instantiation this CPU can run (with/without VNNI, with/without VBMI). */
Test(vec_dot, avx512_variants) {
    if (max_isa() < ZL_ISA_AVX512) cr_skip_test("no AVX-512");
    const int has_vnni = zl_cpu_get()->avx512vnni, has_vbmi = !!__builtin_cpu_supports("avx512vbmi");
    const int64_t sizes[] = {32, 64, 96, 128, 160, 256, 576, 1056, 4096, 4352, 4864};
    for (int vnni = 0; vnni <= has_vnni; vnni++)
        for (int vbmi = 0; vbmi <= has_vbmi; vbmi++)
            for (int ti = 0; ti < N_WEIGHT_TYPES; ti++) {
                zl_type t = k_weight_types[ti], p = zl_dot_partner(t);
                zl_dot_fn f = zl_dot_fn_avx512_variant(t, vnni, vbmi);
                if (!f) continue;
                for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
                    int64_t n = sizes[si];
                    if (n % zl_type_traits_of(t)->blck) continue;
                    void *w = malloc(zl_row_size(t, n)), *x = malloc(zl_row_size(p, n));
                    random_weight_row(t, w, n);
                    random_partner_row(p, x, n);
                    double scale = abs_dot(t, w, p, x, n, NULL);
                    float ref = zl_vec_dot_isa(ZL_ISA_SCALAR, t, w, x, n), got = f(w, x, n);
                    REQUIRE(fabs((double)got - ref) <= 1e-5 * scale, "%s vnni=%d vbmi=%d n=%ld: got %.9g ref %.9g",
                            tname(t), vnni, vbmi, (long)n, got, ref);
                    free(w);
                    free(x);
                }
            }
}

/* Small 32-block rows: the block-pair loops of the SIMD kernels must handle odd counts. */
#endif

Test(vec_dot, short_rows_every_isa) {
    int top = max_isa();
    const zl_type ts[] = {ZL_TYPE_F32, ZL_TYPE_F16, ZL_TYPE_BF16, ZL_TYPE_Q4_0, ZL_TYPE_Q4_1,
                          ZL_TYPE_Q5_0, ZL_TYPE_Q5_1, ZL_TYPE_Q8_0};
    for (int isa = ZL_ISA_AVX2; isa <= top; isa++)
        for (size_t ti = 0; ti < sizeof ts / sizeof ts[0]; ti++)
            for (int64_t n = 32; n <= 352; n += 32) {
                zl_type t = ts[ti], p = zl_dot_partner(t);
                void *w = malloc(zl_row_size(t, n)), *x = malloc(zl_row_size(p, n));
                random_weight_row(t, w, n);
                random_partner_row(p, x, n);
                double scale = abs_dot(t, w, p, x, n, NULL);
                float ref = zl_vec_dot_isa(ZL_ISA_SCALAR, t, w, x, n);
                float got = zl_vec_dot_isa(isa, t, w, x, n);
                REQUIRE(fabs((double)got - ref) <= 1e-5 * scale, "%s %s n=%ld: got %.9g ref %.9g",
                          zl_isa_name(isa), tname(t), (long)n, got, ref);
                free(w);
                free(x);
            }
}

#if ZL_TEST_X86 /* the x86 levels' own kernels */
/* AVX2's prepared kernels against the reference, tails included; where
 * they have multi-token versions, each token bit-identical to one token. */
Test(vec_dot, prepared_kernels_avx2) {
    if (max_isa() < ZL_ISA_AVX2) cr_skip_test("no AVX2");
    const zl_type ts[] = {ZL_TYPE_Q4_0, ZL_TYPE_Q8_0, ZL_TYPE_Q4_1, ZL_TYPE_Q5_0, ZL_TYPE_Q5_1};
    for (size_t ti = 0; ti < sizeof ts / sizeof ts[0]; ti++)
        for (int64_t n = 32; n <= 1056; n += 32) {
            zl_prep_kernel pk;
            cr_assert(zl_prep_kernel_avx2(ts[ti], &pk));
            zl_type t = ts[ti], p = zl_dot_partner(t);
            void *w = malloc(zl_row_size(t, n)), *x = malloc(zl_row_size(p, n));
            void *xp = aligned_alloc(64, (pk.size(n) + 127) / 64 * 64);
            random_weight_row(t, w, n);
            random_partner_row(p, x, n);
            pk.prep(x, xp, n);
            double scale = abs_dot(t, w, p, x, n, NULL);
            float ref = zl_vec_dot_isa(ZL_ISA_SCALAR, t, w, x, n), got = pk.dot(w, xp, n);
            REQUIRE(fabs((double)got - ref) <= 1e-5 * scale, "%s n=%ld: got %.9g ref %.9g", tname(t), (long)n, got, ref);
            size_t xs = zl_row_size(p, n), ps = (pk.size(n) + 127) / 64 * 64;
            uint8_t *x4 = malloc(4 * xs), *xp4 = aligned_alloc(64, 4 * ps);
            float out[4];
            for (int k = 0; k < 4; k++) {
                random_partner_row(p, x4 + k * xs, n);
                pk.prep(x4 + k * xs, xp4 + k * ps, n);
            }
            if (pk.dot4) pk.dot4(w, xp4, ps, n, out);
            for (int k = 0; k < 4 && pk.dot4; k++) {
                double sc = abs_dot(t, w, p, x4 + k * xs, n, NULL);
                float r = zl_vec_dot_isa(ZL_ISA_SCALAR, t, w, x4 + k * xs, n);
                REQUIRE(fabs((double)out[k] - r) <= 1e-5 * sc, "%s dot4 n=%ld tok %d: got %.9g ref %.9g", tname(t),
                        (long)n, k, out[k], r);
            }
            /* every listed type comes in every width 2..8 */
            zl_dot_multi_fn fs[7] = {pk.dot2, pk.dot3, pk.dot4, pk.dot5, pk.dot6, pk.dot7, pk.dot8};
            {
                uint8_t *xp8 = aligned_alloc(64, 8 * ps), *x1 = malloc(xs);
                float one[8], many[8];
                for (int k = 0; k < 8; k++) {
                    random_partner_row(p, x1, n);
                    pk.prep(x1, xp8 + k * ps, n);
                    one[k] = pk.dot(w, xp8 + k * ps, n);
                }
                for (int fi = 0; fi < 7; fi++) {
                    cr_assert(fs[fi], "%s: no AVX2 %d-token kernel", tname(t), fi + 2);
                    fs[fi](w, xp8, ps, n, many);
                    for (int k = 0; k < fi + 2; k++)
                        REQUIRE(memcmp(&many[k], &one[k], sizeof(float)) == 0,
                                "%s AVX2 dot%d n=%ld tok %d: %.9g differs from one-token %.9g", tname(t), fi + 2,
                                (long)n, k, many[k], one[k]);
                }
                free(xp8);
                free(x1);
            }
            free(x4);
            free(xp4);
            free(w);
            free(x);
            free(xp);
        }
}

/* Four-token kernels over plain partner rows. */
Test(vec_dot, four_token_kernels) {
    if (max_isa() < ZL_ISA_AVX2) cr_skip_test("no AVX2");
    const zl_type ts[] = {ZL_TYPE_F32, ZL_TYPE_F16, ZL_TYPE_BF16, ZL_TYPE_Q6_K};
    const int64_t sizes[] = {7, 8, 16, 24, 172, 256, 1280};
    for (int level = ZL_ISA_AVX2; level <= max_isa(); level++)
    for (size_t ti = 0; ti < sizeof ts / sizeof ts[0]; ti++) {
        zl_dot_multi_fn f = level == ZL_ISA_AVX512 ? zl_dot4_fn_avx512(ts[ti]) : zl_dot4_fn_avx2(ts[ti]);
        if (!f) continue;
        zl_type t = ts[ti], p = zl_dot_partner(t);
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            int64_t n = sizes[si];
            if (n % zl_type_traits_of(t)->blck) continue;
            size_t xs = zl_row_size(p, n) + 12;
            uint8_t *w = malloc(zl_row_size(t, n)), *x = malloc(4 * xs);
            random_weight_row(t, w, n);
            for (int k = 0; k < 4; k++) random_partner_row(p, x + k * xs, n);
            float out[4];
            f(w, x, xs, n, out);
            for (int k = 0; k < 4; k++) {
                double sc = abs_dot(t, w, p, x + k * xs, n, NULL);
                float r = zl_vec_dot_isa(ZL_ISA_SCALAR, t, w, x + k * xs, n);
                REQUIRE(fabs((double)out[k] - r) <= 1e-5 * sc, "%s n=%ld tok %d: got %.9g ref %.9g", tname(t), (long)n,
                        k, out[k], r);
                if (level == ZL_ISA_AVX2) { /* every length's tails: bit-identical to the one-token kernel */
                    float o = zl_dot_fn_avx2(t)(w, x + k * xs, n);
                    REQUIRE(memcmp(&o, &out[k], sizeof o) == 0, "avx2 %s dot4 n=%ld tok %d: %.9g vs one-token %.9g",
                            tname(t), (long)n, k, out[k], o);
                }
            }
            if (level == ZL_ISA_AVX512) {
                /* 2..8 tokens: each bit-identical to the level's one-token kernel */
                uint8_t *x8 = malloc(8 * xs);
                for (int k = 0; k < 8; k++) random_partner_row(p, x8 + k * xs, n);
                zl_dot_fn one = zl_dot_fn_avx512(t);
                int Ts[7] = {2, 3, 4, 5, 6, 7, 8};
                for (int ti2 = 0; ti2 < 7; ti2++) {
                    zl_dot_multi_fn g = zl_dotT_fn_avx512(t, Ts[ti2]);
                    cr_assert(g, "%s: no %d-token kernel", tname(t), Ts[ti2]);
                    float many[8];
                    g(w, x8, xs, n, many);
                    for (int k = 0; k < Ts[ti2]; k++) {
                        float o = one(w, x8 + k * xs, n);
                        REQUIRE(memcmp(&o, &many[k], sizeof o) == 0, "%s %s dot%d n=%ld tok %d: %.9g vs one-token %.9g",
                                zl_isa_name(level), tname(t), Ts[ti2], (long)n, k, many[k], o);
                    }
                }
                free(x8);
            }
            free(w);
            free(x);
        }
    }
}

#endif

/* Float weights take any row length (stories260K's ffn_down rows have 172). */
Test(vec_dot, float_rows_any_length) {
    int top = max_isa();
    const zl_type ts[] = {ZL_TYPE_F32, ZL_TYPE_F16, ZL_TYPE_BF16};
    float x[203], f[203];
    uint8_t w[203 * 4];
    for (int64_t n = 1; n <= 203; n += (n < 40 ? 1 : 17)) {
        fill_gauss(x, n, 1.0f);
        fill_gauss(f, n, 1.0f);
        for (size_t ti = 0; ti < 3; ti++) {
            zl_quantize_row(ts[ti], f, w, n);
            double scale = abs_dot(ts[ti], w, ZL_TYPE_F32, x, n, NULL);
            float ref = zl_vec_dot_isa(ZL_ISA_SCALAR, ts[ti], w, x, n);
            for (int isa = ZL_ISA_AVX2; isa <= top; isa++) {
                float got = zl_vec_dot_isa(isa, ts[ti], w, x, n);
                REQUIRE(fabs((double)got - ref) <= 1e-5 * scale, "%s %s n=%ld: %.9g vs %.9g", zl_isa_name(isa),
                        tname(ts[ti]), (long)n, got, ref);
            }
        }
    }
}

/* ---- matmul ----------------------------------------------------------- */

typedef struct {
    zl_mat W;
    void *data;
    float *deq; /* rows x cols */
} test_mat;

static test_mat make_mat(zl_type t, int64_t rows, int64_t cols) {
    test_mat m;
    m.W.type = t;
    m.W.rows = rows;
    m.W.cols = cols;
    m.W.row_bytes = zl_row_size(t, cols);
    m.data = malloc(m.W.row_bytes * (size_t)rows);
    m.deq = malloc(sizeof(float) * (size_t)(rows * cols));
    float *f = malloc(sizeof(float) * (size_t)cols);
    for (int64_t r = 0; r < rows; r++) {
        fill_gauss(f, cols, 0.05f);
        zl_quantize_row(t, f, (uint8_t *)m.data + (size_t)r * m.W.row_bytes, cols);
        zl_dequant_row(t, (uint8_t *)m.data + (size_t)r * m.W.row_bytes, m.deq + r * cols, cols);
    }
    free(f);
    m.W.data = m.data;
    return m;
}

static void free_mat(test_mat *m) {
    free(m->data);
    free(m->deq);
}

Test(matmul, matches_double_reference) {
    zl_pool *pools[2] = {zl_pool_new(1), zl_pool_new(2)};
    cr_assert(pools[0] && pools[1]);
    zl_work work = {0};
    const int toks[] = {1, 3, 17};
    const int64_t rows = 37, cols = 512, ldx = cols + 5, ldy = rows + 3;
    int top = max_isa();
    float *x = malloc(sizeof(float) * (size_t)(17 * ldx));
    float *y = malloc(sizeof(float) * (size_t)(17 * ldy));
    fill_gauss(x, 17 * ldx, 1.0f);
    for (int ti = 0; ti < N_WEIGHT_TYPES; ti++) {
        zl_type t = k_weight_types[ti];
        test_mat m = make_mat(t, rows, cols);
        for (int isa = ZL_ISA_SCALAR; isa <= top; isa++) {
            const zl_kernels *ks = zl_kernels_for((zl_isa)isa);
            cr_assert_eq(zl_kernels_isa(ks), (zl_isa)isa);
            for (int pi = 0; pi < 2; pi++)
                for (int k = 0; k < 3; k++) {
                    int nt = toks[k];
                    for (int64_t i = 0; i < 17 * ldy; i++) y[i] = -12345.0f;
                    zl_matmul(ks, &m.W, x, ldx, nt, y, ldy, pools[pi], &work);
                    double act_err = zl_dot_partner(t) == ZL_TYPE_F32 ? 1e-5 : 1.5e-2;
                    for (int tok = 0; tok < 17; tok++)
                        for (int64_t r = 0; r < ldy; r++) {
                            float got = y[tok * ldy + r];
                            if (tok >= nt || r >= rows) {
                                REQUIRE(got == -12345.0f, "wrote outside the output");
                                continue;
                            }
                            double want = 0, scale = 0;
                            for (int64_t c = 0; c < cols; c++) {
                                double v = (double)m.deq[r * cols + c] * x[tok * ldx + c];
                                want += v;
                                scale += fabs(v);
                            }
                            REQUIRE(fabs(got - want) <= act_err * scale,
                                      "%s isa=%s threads=%d n_tok=%d tok=%d row=%ld: got %g want %g", tname(t),
                                      zl_isa_name(isa), pi + 1, nt, tok, (long)r, got, want);
                        }
                }
        }
        free_mat(&m);
    }
    zl_work_free(&work);
    free(x);
    free(y);
    zl_pool_free(pools[0]);
    zl_pool_free(pools[1]);
}

/* matmul must agree with vec_dot on the same quantised activations (its
 * prepared-activation kernels may sum in another order: rounding only). */
Test(matmul, equals_vec_dot) {
    zl_pool *pool = zl_pool_new(2);
    zl_work work = {0};
    const int64_t rows = 300, cols = 1056; /* 33 blocks: exercises the 4-block tails */
    float *x = malloc(sizeof(float) * 5 * cols), *y = malloc(sizeof(float) * 5 * rows);
    fill_gauss(x, 5 * cols, 1.0f);
    for (int ti = 0; ti < N_WEIGHT_TYPES; ti++) {
        zl_type t = k_weight_types[ti], p = zl_dot_partner(t);
        int64_t c = cols - cols % zl_type_traits_of(t)->blck;
        test_mat m = make_mat(t, rows, c);
        zl_matmul(zl_kernels_for(zl_cpu_max_isa()), &m.W, x, cols, 5, y, rows, pool, &work);
        void *xq = malloc(zl_row_size(p, c));
        for (int tok = 0; tok < 5; tok++) {
            zl_quantize_row(p, x + tok * cols, xq, c);
            for (int64_t r = 0; r < rows; r++) {
                const void *wr = (uint8_t *)m.data + (size_t)r * m.W.row_bytes;
                float want = zl_vec_dot(t, wr, xq, c), got = y[tok * rows + r];
                double scale = abs_dot(t, wr, p, xq, c, NULL);
                REQUIRE(fabs((double)got - want) <= 1e-5 * scale, "%s tok %d row %ld: %.9g vs %.9g", tname(t), tok,
                        (long)r, got, want);
            }
        }
        free(xq);
        free_mat(&m);
    }
    zl_work_free(&work);
    zl_pool_free(pool);
    free(x);
    free(y);
}

#if ZL_TEST_X86
/* Prepared-activation kernels against the reference, every variant the CPU runs. */
Test(vec_dot, prepared_kernels) {
    if (max_isa() < ZL_ISA_AVX512) cr_skip_test("no AVX-512");
    const int has_vnni = zl_cpu_get()->avx512vnni, has_vbmi = !!__builtin_cpu_supports("avx512vbmi");
    const zl_type ts[] = {ZL_TYPE_Q4_0, ZL_TYPE_Q8_0, ZL_TYPE_Q4_K, ZL_TYPE_Q5_K,
                          ZL_TYPE_Q4_1, ZL_TYPE_Q5_0, ZL_TYPE_Q5_1};
    int covered[ZL_TYPE_COUNT] = {0};
    for (int vnni = 0; vnni <= has_vnni; vnni++)
        for (int vbmi = 0; vbmi <= has_vbmi; vbmi++)
            for (size_t ti = 0; ti < sizeof ts / sizeof ts[0]; ti++)
                for (int64_t n = zl_type_traits_of(ts[ti])->blck; n <= 33 * 32 * (ts[ti] >= ZL_TYPE_Q4_K ? 2 : 1);
                     n += zl_type_traits_of(ts[ti])->blck) {
                    zl_prep_kernel pk;
                    if (!zl_prep_kernel_avx512_variant(ts[ti], vnni, vbmi, &pk)) continue;
                    zl_type t = ts[ti], p = zl_dot_partner(t);
                    covered[t]++;
                    void *w = malloc(zl_row_size(t, n)), *x = malloc(zl_row_size(p, n)), *xp = malloc(pk.size(n) + 1);
                    random_weight_row(t, w, n);
                    random_partner_row(p, x, n);
                    pk.prep(x, xp, n);
                    double scale = abs_dot(t, w, p, x, n, NULL);
                    float ref = zl_vec_dot_isa(ZL_ISA_SCALAR, t, w, x, n), got = pk.dot(w, xp, n);
                    REQUIRE(fabs((double)got - ref) <= 1e-5 * scale, "%s vnni=%d vbmi=%d n=%ld: got %.9g ref %.9g",
                            tname(t), vnni, vbmi, (long)n, got, ref);
                    /* four tokens at once, rows further apart than their size (kept
                     * 64-byte aligned, as zl_matmul lays them out) */
                    size_t xs = zl_row_size(p, n), ps = (pk.size(n) + 127) / 64 * 64;
                    uint8_t *x4 = malloc(4 * xs), *xp4 = aligned_alloc(64, 4 * ps);
                    float out[4];
                    for (int k = 0; k < 4; k++) {
                        random_partner_row(p, x4 + k * xs, n);
                        pk.prep(x4 + k * xs, xp4 + k * ps, n);
                    }
                    pk.dot4(w, xp4, ps, n, out);
                    for (int k = 0; k < 4; k++) {
                        double sc = abs_dot(t, w, p, x4 + k * xs, n, NULL);
                        float r = zl_vec_dot_isa(ZL_ISA_SCALAR, t, w, x4 + k * xs, n);
                        REQUIRE(fabs((double)out[k] - r) <= 1e-5 * sc, "%s dot4 vbmi=%d n=%ld tok %d: got %.9g ref %.9g",
                                tname(t), vbmi, (long)n, k, out[k], r);
                    }
                    /* two to eight tokens at once: each token's result
                     * bit-identical to the one-token kernel's (batch-size independence) */
                    uint8_t *xp8 = aligned_alloc(64, 8 * ps), *x1 = malloc(xs);
                    float one[8], many[8];
                    for (int k = 0; k < 8; k++) {
                        random_partner_row(p, x1, n);
                        pk.prep(x1, xp8 + k * ps, n);
                        one[k] = pk.dot(w, xp8 + k * ps, n);
                    }
                    zl_dot_multi_fn fs[7] = {pk.dot2, pk.dot3, pk.dot4, pk.dot5, pk.dot6, pk.dot7, pk.dot8};
                    int ks[7] = {2, 3, 4, 5, 6, 7, 8};
                    for (int fi = 0; fi < 7; fi++) {
                        cr_assert(fs[fi], "%s: no %d-token kernel", tname(t), ks[fi]);
                        fs[fi](w, xp8, ps, n, many);
                        for (int k = 0; k < ks[fi]; k++)
                            REQUIRE(memcmp(&many[k], &one[k], sizeof(float)) == 0,
                                    "%s dot%d vbmi=%d n=%ld tok %d: %.9g differs from one-token %.9g", tname(t), ks[fi],
                                    vbmi, (long)n, k, many[k], one[k]);
                    }
                    free(xp8);
                    free(x1);
                    free(x4);
                    free(xp4);
                    free(w);
                    free(x);
                    free(xp);
                }
    /* with VNNI every listed type has a prepared kernel (VBMI or not) */
    for (size_t ti = 0; ti < sizeof ts / sizeof ts[0] && has_vnni; ti++)
        cr_expect(covered[ts[ti]] > 0, "%s: no prepared AVX-512 kernel", tname(ts[ti]));
}

/* Tile kernels (prefill), called directly: rows packed in groups (full and
 * partial), T = 1..8 tokens per call; each (row, token) result has exactly
 * the bits of the level's one-token kernel (the prepared one where the level
 * uses it) and matches the scalar reference. */
Test(vec_dot, tile_kernels) {
    const zl_type ts[] = {ZL_TYPE_Q4_K, ZL_TYPE_Q5_K, ZL_TYPE_Q6_K};
    int ran = 0;
    for (int level = ZL_ISA_AVX2; level <= max_isa(); level++)
        for (size_t ti = 0; ti < sizeof ts / sizeof ts[0]; ti++) {
            const zl_type t = ts[ti], p = zl_dot_partner(t);
            zl_tile_kernel tk;
            zl_prep_kernel pk;
            int prep = 0;
            zl_dot_fn dot;
            if (level == ZL_ISA_AVX512) {
                if (!zl_tile_kernel_avx512(t, &tk)) continue;
                prep = t != ZL_TYPE_Q6_K && zl_prep_kernel_avx512(t, &pk);
                cr_assert(prep || t == ZL_TYPE_Q6_K, "%s: AVX-512 tile without the prepared kernel", tname(t));
                dot = prep ? pk.dot : zl_dot_fn_avx512(t);
            } else {
                cr_assert(zl_tile_kernel_avx2(t, &tk), "%s: no AVX2 tile kernel", tname(t));
                dot = zl_dot_fn_avx2(t);
            }
            for (int64_t n = 256; n <= 2304; n += 1024)
                for (int nrows = tk.rows; nrows >= 1; nrows -= tk.rows - 3) { /* full, then partial groups */
                    const size_t rb = zl_row_size(t, n), xs = zl_row_size(p, n);
                    const size_t ps = prep ? (pk.size(n) + 63) / 64 * 64 : xs;
                    uint8_t *w = malloc(rb * (size_t)nrows), *x = malloc(8 * xs), *xp = aligned_alloc(64, (8 * ps + 63) / 64 * 64);
                    uint8_t *packed = aligned_alloc(64, (tk.size(n) + 63) / 64 * 64); /* sizes: multiples of the alignment */
                    for (int r = 0; r < nrows; r++) random_weight_row(t, w + r * rb, n);
                    for (int k = 0; k < 8; k++) {
                        random_partner_row(p, x + k * xs, n);
                        if (prep) pk.prep(x + k * xs, xp + k * ps, n);
                        else memcpy(xp + k * ps, x + k * xs, xs);
                    }
                    tk.pack(w, rb, nrows, n, packed);
                    for (int T = 1; T <= 8; T++) {
                        float out[8 * ZL_TILE_ROWS_MAX];
                        tk.run(packed, xp, ps, T, n, out);
                        for (int k = 0; k < T; k++)
                            for (int r = 0; r < nrows; r++) {
                                float one = dot(w + r * rb, xp + k * ps, n), got = out[k * tk.rows + r];
                                REQUIRE(memcmp(&got, &one, sizeof got) == 0,
                                        "%s %s n=%ld rows=%d T=%d tok %d row %d: %.9g vs one-token %.9g",
                                        zl_isa_name(level), tname(t), (long)n, nrows, T, k, r, got, one);
                                double sc = abs_dot(t, w + r * rb, p, x + k * xs, n, NULL);
                                float ref = zl_vec_dot_isa(ZL_ISA_SCALAR, t, w + r * rb, x + k * xs, n);
                                REQUIRE(fabs((double)got - ref) <= 1e-5 * sc, "%s %s tile vs reference: %.9g vs %.9g",
                                        zl_isa_name(level), tname(t), got, ref);
                            }
                    }
                    ran++;
                    free(w);
                    free(x);
                    free(xp);
                    free(packed);
                }
        }
    if (max_isa() < ZL_ISA_AVX2) cr_skip_test("no AVX2");
    cr_expect(ran > 0);
}
#endif

/* Batch-size independence end to end: at every ISA level, each token of an
 * n-token zl_matmul (every kernel width and the leftovers, prepared or not,
 * rows spread over tiles and threads) gives exactly the bits of the same
 * token alone.  Row counts are odd and not a multiple of the row tile; the
 * column counts give partial four-block groups (576 = 18 blocks).  Calls of
 * 16 tokens and more take the tile kernels where a type has one (partial
 * 16-row groups and token blocks of fewer than eight included). */
Test(matmul, batch_bit_identical) {
    zl_pool *pool = zl_pool_new(2);
    zl_work work = {0};
    int top = max_isa();
    enum { NT = 35 };
    const int64_t shapes[][2] = {{331, 576}, {37, 1536}};
    for (size_t si = 0; si < 2; si++)
        for (int ti = 0; ti < N_WEIGHT_TYPES; ti++) {
            zl_type t = k_weight_types[ti];
            const int64_t rows = shapes[si][0], cols = shapes[si][1] - shapes[si][1] % zl_type_traits_of(t)->blck;
            if (cols == 0) continue;
            test_mat m = make_mat(t, rows, cols);
            REQUIRE(rows % (96 * 1024 / (int64_t)m.W.row_bytes) != 0, "rows fill whole tiles");
            float *x = malloc(sizeof(float) * (size_t)(NT * cols)), *y = malloc(sizeof(float) * (size_t)(NT * rows));
            float *y1 = malloc(sizeof(float) * (size_t)(NT * rows));
            fill_gauss(x, NT * cols, 1.0f);
            for (int isa = ZL_ISA_SCALAR; isa <= top; isa++) {
                const zl_kernels *ks = zl_kernels_for((zl_isa)isa);
                for (int tok = 0; tok < NT; tok++)
                    zl_matmul(ks, &m.W, x + tok * cols, cols, 1, y1 + tok * rows, rows, pool, &work);
                for (int nt = 2; nt <= NT; nt += nt < 13 ? 1 : nt < 21 ? 3 : 7) { /* 2..13, 16, 19, 22, 29 */
                    zl_matmul(ks, &m.W, x, cols, nt, y, rows, pool, &work);
                    for (int tok = 0; tok < nt; tok++)
                        for (int64_t r = 0; r < rows; r++)
                            REQUIRE(memcmp(&y[tok * rows + r], &y1[tok * rows + r], sizeof(float)) == 0,
                                    "%s %s %ldx%ld n_tok=%d tok %d row %ld: %.9g vs alone %.9g", zl_isa_name(isa),
                                    tname(t), (long)rows, (long)cols, nt, tok, (long)r, y[tok * rows + r],
                                    y1[tok * rows + r]);
                }
            }
            free(x);
            free(y);
            free(y1);
            free_mat(&m);
        }
    zl_work_free(&work);
    zl_pool_free(pool);
}

Test(matmul, null_work_and_unsupported_type) {
    test_mat m = make_mat(ZL_TYPE_Q4_K, 8, 256);
    float x[2 * 256], y[2 * 8], want[2 * 8];
    fill_gauss(x, 2 * 256, 1.0f);
    zl_work work = {0};
    const zl_kernels *ks = zl_kernels_for(zl_cpu_max_isa());
    zl_matmul(ks, &m.W, x, 256, 2, want, 8, NULL, &work);
    zl_matmul(ks, &m.W, x, 256, 2, y, 8, NULL, NULL);
    for (int i = 0; i < 16; i++) cr_expect_eq(y[i], want[i]);
    uint8_t blocks[8 * 84] = {0};
    zl_mat q2 = {ZL_TYPE_Q2_K, 8, 256, blocks, 84};
    zl_matmul(ks, &q2, x, 256, 2, y, 8, NULL, &work);
    for (int i = 0; i < 16; i++) cr_expect(isnan(y[i]));
    cr_expect(isnan(zl_vec_dot(ZL_TYPE_Q2_K, blocks, x, 256)));
    zl_work_free(&work);
    free_mat(&m);
}

/* ---- real llama.cpp-quantised tensors ---------------------------------- */

static zl_gguf *open_fixture(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/logits/synth-small-%s.gguf", ZL_ROOT, name);
    zl_gguf *g = NULL;
    zl_err err = {0};
    if (zl_gguf_open(&g, path, NULL, &err) != 0) return NULL;
    return g;
}

/* Every supported 2-D tensor of each fixture: SIMD dot == scalar dot on
 * real blocks, and the dequantised tensor agrees with the same tensor of
 * the F16 file to within that type's quantisation error. */
Test(fixtures, real_tensors) {
    static const char *files[] = {"F16", "Q8_0", "Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K", "Q4_K_S"};
    zl_gguf *ref = open_fixture("F16");
    if (!ref) cr_skip_test("fixtures or GGUF reader unavailable");
    int top = max_isa();
    int seen[ZL_TYPE_COUNT] = {0};
    for (size_t fi = 0; fi < sizeof files / sizeof files[0]; fi++) {
        zl_gguf *g = open_fixture(files[fi]);
        cr_assert(g, "open %s", files[fi]);
        for (uint64_t i = 0; i < g->n_tensors; i++) {
            const zl_gguf_tensor *tt = &g->tensors[i];
            zl_type t = (zl_type)tt->type;
            if (tt->n_dims != 2 || !zl_type_traits_of(t)->supported || t == ZL_TYPE_F32) continue;
            seen[t]++;
            int64_t cols = tt->ne[0], rows = tt->ne[1];
            size_t rb = zl_row_size(t, cols);
            zl_type p = zl_dot_partner(t);
            float *xf = malloc(sizeof(float) * (size_t)cols), *wd = malloc(sizeof(float) * (size_t)cols);
            float *rd = malloc(sizeof(float) * (size_t)cols);
            void *xq = malloc(zl_row_size(p, cols));
            fill_gauss(xf, cols, 1.0f);
            zl_quantize_row(p, xf, xq, cols);
            char name[256];
            zl_str_copy(tt->name, name, sizeof name);
            const zl_gguf_tensor *rt = zl_gguf_find_tensor(ref, name);
            cr_assert(rt && rt->ne[0] == cols && rt->ne[1] == rows, "%s missing from F16 file", name);
            size_t rrb = zl_row_size((zl_type)rt->type, cols);
            double se = 0, ss = 0;
            for (int64_t r = 0; r < rows; r += (rows > 64 ? 7 : 1)) {
                const uint8_t *wr = (const uint8_t *)tt->data + (size_t)r * rb;
                zl_dequant_row(t, wr, wd, cols);
                zl_dequant_row((zl_type)rt->type, (const uint8_t *)rt->data + (size_t)r * rrb, rd, cols);
                for (int64_t c = 0; c < cols; c++) {
                    REQUIRE(isfinite(wd[c]), "%s %s: non-finite weight", files[fi], name);
                    se += (double)(wd[c] - rd[c]) * (wd[c] - rd[c]);
                    ss += (double)rd[c] * rd[c];
                }
                double scale = abs_dot(t, wr, p, xq, cols, NULL);
                float want = zl_vec_dot_isa(ZL_ISA_SCALAR, t, wr, xq, cols);
                for (int isa = ZL_ISA_AVX2; isa <= top; isa++) {
                    float got = zl_vec_dot_isa(isa, t, wr, xq, cols);
                    REQUIRE(fabs((double)got - want) <= 1e-5 * scale, "%s %s row %ld %s: %.9g vs %.9g", files[fi],
                              name, (long)r, zl_isa_name(isa), got, want);
                }
            }
            /* the whole tensor through zl_matmul (prepared and four-token kernels
             * included) for five tokens, against the scalar reference */
            {
                const int nt = 5;
                float *xs = malloc(sizeof(float) * (size_t)(cols * nt)), *ys = malloc(sizeof(float) * (size_t)(rows * nt));
                void *xq5 = malloc(zl_row_size(p, cols));
                fill_gauss(xs, cols * nt, 1.0f);
                zl_mat W = {t, rows, cols, tt->data, rb};
                zl_work work = {0};
                zl_matmul(zl_kernels_for(zl_cpu_max_isa()), &W, xs, cols, nt, ys, rows, NULL, &work);
                for (int k = 0; k < nt; k++) {
                    zl_quantize_row(p, xs + k * cols, xq5, cols);
                    for (int64_t r = 0; r < rows; r += 5) {
                        const uint8_t *wr = (const uint8_t *)tt->data + (size_t)r * rb;
                        double scale = abs_dot(t, wr, p, xq5, cols, NULL);
                        float want = zl_vec_dot_isa(ZL_ISA_SCALAR, t, wr, xq5, cols), got = ys[k * rows + r];
                        REQUIRE(fabs((double)got - want) <= 1e-5 * scale, "%s %s matmul tok %d row %ld: %.9g vs %.9g",
                                files[fi], name, k, (long)r, got, want);
                    }
                }
                zl_work_free(&work);
                free(xs);
                free(ys);
                free(xq5);
            }
            /* the synthetic model's random weights quantise about like Gaussians */
            /* llama.cpp's files measure 0.0054 / 0.018 / 0.036 / 0.071 / 0.086: a layout
             * mistake gives errors of order 1 */
            double bound = t == ZL_TYPE_F16 ? 1e-6 : t == ZL_TYPE_Q8_0 ? 7e-3 : t == ZL_TYPE_Q6_K ? 2.2e-2
                         : t == ZL_TYPE_Q5_K ? 4.5e-2 : t == ZL_TYPE_Q4_K ? 8.5e-2 : 1.0e-1;
            cr_expect(sqrt(se / ss) <= bound, "%s %s (%s): relative rmse vs F16 %.4g > %.4g", files[fi], name,
                      tname(t), sqrt(se / ss), bound);
            free(xf);
            free(wd);
            free(rd);
            free(xq);
        }
        zl_gguf_close(g);
    }
    zl_gguf_close(ref);
    const zl_type must[] = {ZL_TYPE_F16, ZL_TYPE_Q8_0, ZL_TYPE_Q4_0, ZL_TYPE_Q4_K, ZL_TYPE_Q5_K, ZL_TYPE_Q6_K};
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++)
        cr_expect(seen[must[i]] > 0, "no %s tensor in the fixtures", tname(must[i]));
}

/* ---- the ISA level ------------------------------------------------------ */

/* The level names of this architecture round-trip; with ZL_EXPECT_ISA set
 * (make test-aarch64 sets it beside ZL_ISA or a QEMU_CPU model) the level
 * this process runs is exactly that one. */
Test(cpu, level_names_and_cap) {
    for (int i = ZL_ISA_SCALAR; i <= max_isa(); i++) {
        zl_isa back;
        cr_assert_eq(zl_isa_from_name(zl_isa_name((zl_isa)i), &back), 0, "%s", zl_isa_name((zl_isa)i));
        cr_assert_eq((int)back, i);
    }
    zl_isa dummy;
    cr_assert_eq(zl_isa_from_name("sse9", &dummy), -1);
    const char *want = getenv("ZL_EXPECT_ISA");
    if (want) cr_assert_str_eq(zl_isa_name(zl_cpu_max_isa()), want, "running at %s", zl_isa_name(zl_cpu_max_isa()));
}

/* ---- AArch64 NEON levels ---------------------------------------------- */
#if defined(__aarch64__)
static int is_float_type(zl_type t) { return t == ZL_TYPE_F32 || t == ZL_TYPE_F16 || t == ZL_TYPE_BF16; }

/* Every NEON level's one-token, 2..8-token and (i8mm) two-row kernels:
 * quantised types give the scalar reference's bits exactly (integer sums are
 * exact and the float steps are the reference's); float types are within the
 * rounding bound; each (row, token) of a multi-token kernel is bit-identical
 * to the one-token kernel. */
Test(neon, every_level_every_width) {
    const int64_t sizes[] = {7, 32, 96, 256, 512, 1280, 4352, 11008};
    const int top = max_isa();
    cr_assert(top >= ZL_ISA_NEON, "no NEON level on an AArch64 CPU");
    for (int level = ZL_ISA_NEON; level <= top; level++)
        for (int ti = 0; ti < N_WEIGHT_TYPES; ti++) {
            zl_type t = k_weight_types[ti], p = zl_dot_partner(t);
            zl_dot_fn one = zl_dot_fn_neon(level, t);
            cr_assert(one, "%s: no %s kernel", zl_isa_name(level), tname(t));
            for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
                int64_t n = sizes[si];
                if (n % zl_type_traits_of(t)->blck) continue;
                size_t xs = zl_row_size(p, n) + 20; /* rows apart by a stride that is not the row size */
                size_t ws = zl_row_size(t, n) + 12; /* two weight rows, for the two-row kernels */
                uint8_t *w = malloc(2 * ws), *x = malloc(8 * xs);
                random_weight_row(t, w, n);
                random_weight_row(t, w + ws, n);
                for (int k = 0; k < 8; k++) random_partner_row(p, x + k * xs, n);
                float ones[8], ones2[8];
                for (int k = 0; k < 8; k++) {
                    const uint8_t *xk = x + k * xs;
                    float ref = zl_vec_dot_isa(ZL_ISA_SCALAR, t, w, xk, n);
                    ones[k] = one(w, xk, n);
                    ones2[k] = one(w + ws, xk, n);
                    if (is_float_type(t)) {
                        double sc = abs_dot(t, w, p, xk, n, NULL);
                        REQUIRE(fabs((double)ones[k] - ref) <= 1e-5 * sc, "%s %s n=%ld: %.9g vs ref %.9g",
                                zl_isa_name(level), tname(t), (long)n, ones[k], ref);
                    } else {
                        float ref2 = zl_vec_dot_isa(ZL_ISA_SCALAR, t, w + ws, xk, n);
                        REQUIRE(memcmp(&ones[k], &ref, sizeof ref) == 0 && memcmp(&ones2[k], &ref2, sizeof ref) == 0,
                                "%s %s n=%ld: %.9g vs ref %.9g (not bit-identical)", zl_isa_name(level), tname(t),
                                (long)n, ones[k], ref);
                    }
                }
                for (int T = 2; T <= 8; T++) {
                    zl_dot2r_fn f2 = zl_dot2r_fn_neon(level, t, T);
                    int want2 = level >= ZL_ISA_NEON_I8MM && !is_float_type(t) && T % 2 == 0;
                    REQUIRE(!f2 == !want2, "%s %s: two-row %d-token kernel %s", zl_isa_name(level), tname(t), T,
                            f2 ? "where none belongs" : "missing");
                    if (!f2) continue;
                    float two[16];
                    f2(w, ws, x, xs, n, two);
                    for (int k = 0; k < T; k++)
                        REQUIRE(memcmp(&two[k], &ones[k], sizeof(float)) == 0 &&
                                    memcmp(&two[T + k], &ones2[k], sizeof(float)) == 0,
                                "%s %s two rows x %d tokens n=%ld tok %d: %.9g %.9g vs one-token %.9g %.9g",
                                zl_isa_name(level), tname(t), T, (long)n, k, two[k], two[T + k], ones[k], ones2[k]);
                }
                for (int T = 2; T <= 8; T++) {
                    zl_dot_multi_fn f = zl_dotT_fn_neon(level, t, T);
                    if (!f) {
                        REQUIRE(is_float_type(t) && T > 4, "%s %s: no %d-token kernel", zl_isa_name(level), tname(t), T);
                        continue;
                    }
                    float many[8];
                    for (int k = 0; k < 8; k++) many[k] = -1234.5f;
                    f(w, x, xs, n, many);
                    for (int k = 0; k < 8; k++) {
                        if (k >= T) {
                            REQUIRE(many[k] == -1234.5f, "%s %s dot%d wrote out[%d]", zl_isa_name(level), tname(t), T, k);
                            continue;
                        }
                        REQUIRE(memcmp(&many[k], &ones[k], sizeof(float)) == 0,
                                "%s %s dot%d n=%ld tok %d: %.9g vs one-token %.9g", zl_isa_name(level), tname(t), T,
                                (long)n, k, many[k], ones[k]);
                    }
                }
                free(w);
                free(x);
            }
        }
}

/* The activation quantisers give zl_quantize_row's bytes. */
Test(neon, quantisers_bit_identical) {
    const zl_type ps[] = {ZL_TYPE_Q8_0, ZL_TYPE_Q8_1, ZL_TYPE_Q8_K};
    const int64_t n = 4096;
    float *f = malloc(n * sizeof(float));
    uint8_t *a = malloc(zl_row_size(ZL_TYPE_Q8_K, n) + zl_row_size(ZL_TYPE_Q8_1, n)), *b = malloc(zl_row_size(ZL_TYPE_Q8_K, n) + zl_row_size(ZL_TYPE_Q8_1, n));
    for (int rep = 0; rep < 4; rep++) {
        fill_gauss(f, n, rep == 3 ? 1e-3f : 1.0f);
        for (int64_t i = 0; i < n; i += 29) f[i] *= 7;
        if (rep == 2) memset(f, 0, 64 * sizeof(float)); /* an all-zero block */
        for (size_t pi = 0; pi < 3; pi++) {
            zl_quant_fn q = zl_quant_fn_neon(ps[pi]);
            cr_assert(q, "no NEON quantiser for %s", tname(ps[pi]));
            size_t bytes = zl_row_size(ps[pi], n);
            memset(a, 0xAB, bytes);
            memset(b, 0xCD, bytes);
            q(f, a, n);
            zl_quantize_row(ps[pi], f, b, n);
            REQUIRE(memcmp(a, b, bytes) == 0, "%s rep %d: NEON quantiser differs from the reference", tname(ps[pi]), rep);
        }
    }
    free(f);
    free(a);
    free(b);
}
#endif
