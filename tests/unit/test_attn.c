/* test_attn.c — SIMD attention loops against the scalar reference, at every
 * ISA level this CPU has, for head sizes that exercise the vector tails. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "base/cpu.h"
#include "tensor/attn.h"
#include "tensor/kernels.h"

static void check_type(zl_type t) {
    int sizes[] = {1, 7, 8, 15, 16, 17, 33, 64, 80, 128, 256};
    zl_attn_kernels ref = zl_attn_kernels_ref(t);
    for (int isa = ZL_ISA_SCALAR; isa <= ZL_ISA_AVX512; isa++) {
        if (zl_cpu_set_isa((zl_isa)isa) != (zl_isa)isa) continue;
        zl_attn_kernels k = zl_attn_kernels_for(t, isa);
        for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
            int n = sizes[si];
            float q[256], o1[256], o2[256], rowf[256];
            zl_f16 rowh[256];
            for (int i = 0; i < n; i++) {
                q[i] = sinf(i * 0.37f);
                rowf[i] = cosf(i * 0.11f) * 2;
                rowh[i] = zl_f32_to_f16(rowf[i]);
                o1[i] = o2[i] = 0.5f * i;
            }
            zl_block_q8_0 rowq[8];
            if (t == ZL_TYPE_Q8_0) {
                if (n % 32) continue;
                zl_quantize_row(ZL_TYPE_Q8_0, rowf, rowq, n);
            }
            const void *row = t == ZL_TYPE_F16 ? (const void *)rowh : t == ZL_TYPE_Q8_0 ? (const void *)rowq : (const void *)rowf;
            float a = ref.kdot(row, q, n), b = k.kdot(row, q, n);
            cr_assert(fabsf(a - b) <= 1e-4f * (1 + fabsf(a)), "kdot isa %d n %d: %g vs %g", isa, n, a, b);
            ref.vaxpy(0.3f, row, o1, n);
            k.vaxpy(0.3f, row, o2, n);
            for (int i = 0; i < n; i++) cr_assert(fabsf(o1[i] - o2[i]) <= 1e-5f, "vaxpy isa %d n %d i %d", isa, n, i);
        }
    }
    zl_cpu_set_isa(ZL_ISA_AVX512);
}

Test(attn, f16_all_isas) { check_type(ZL_TYPE_F16); }
Test(attn, f32_all_isas) { check_type(ZL_TYPE_F32); }
Test(attn, q8_0_all_isas) { check_type(ZL_TYPE_Q8_0); }
