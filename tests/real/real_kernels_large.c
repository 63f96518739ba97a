/* real_kernels_large.c — the kernels on Qwen2.5-Coder-0.5B's and Gemma 3
 * 270M's blocks (Q5_0 where rows of 896 / 640 do not fit the K formats'
 * 256, Q4_K, Q6_K, Q8_0); see real_kernels.h. */
#include "real/real_kernels.h"

Test(real_kernels, qwen2_5_coder_0_5b) {
    int seen[ZL_TYPE_COUNT] = {0};
    zl_rk_check_model("qwen2.5-coder-0.5b", seen);
    cr_expect(seen[ZL_TYPE_Q5_0] > 0, "no Q5_0 tensor in qwen2.5-coder-0.5b");
}

Test(real_kernels, gemma3_270m) {
    int seen[ZL_TYPE_COUNT] = {0};
    zl_rk_check_model("gemma3-270m", seen);
    cr_expect(seen[ZL_TYPE_Q5_0] > 0, "no Q5_0 tensor in gemma3-270m");
}
