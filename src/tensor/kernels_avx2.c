/* kernels_avx2.c — placeholder until the SIMD kernels land. */
#include "kernels_isa.h"

zl_dot_fn zl_dot_fn_avx2(zl_type t) { (void)t; return NULL; }
zl_quant_fn zl_quant_fn_avx2(zl_type partner) { (void)partner; return NULL; }
