/* kernels_neon_dotprod.c — the quantised kernels of kernels_neon.inc built
 * for ARMv8.2-A + dotprod (SDOT): compiled with -march=armv8.2-a+dotprod and
 * only reached through zl_dot_fn_neon after run-time detection.  Owns no
 * dispatch; never runs on a CPU without FEAT_DotProd. */
#if defined(__aarch64__)
#define ZL_NEON_LEVEL 2
#include "kernels_neon.inc"

int zl_neon_dotprod_kernels(zl_type t, zl_dot_fn *one, const zl_dot_multi_fn **many) {
    return level_kernels(t, one, many);
}
#else
typedef int zl_kernels_neon_dotprod_empty; /* nothing to build off AArch64 */
#endif
