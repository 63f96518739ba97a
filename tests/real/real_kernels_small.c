/* real_kernels_small.c — the kernels on SmolLM2-135M's blocks (Q4_1 and
 * Q8_0, as llama.cpp quantised them); see real_kernels.h. */
#include "real/real_kernels.h"

Test(real_kernels, smollm2_135m) {
    int seen[ZL_TYPE_COUNT] = {0};
    zl_rk_check_model("smollm2-135m", seen);
    cr_expect(seen[ZL_TYPE_Q4_1] >= 100, "only %d Q4_1 tensors in smollm2-135m", seen[ZL_TYPE_Q4_1]);
}
