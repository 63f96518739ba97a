/* cpu.h — run-time CPU feature detection and the ISA level.
 *
 * Kernels are chosen from what the CPU reports, never from compile flags, so
 * one binary runs on scalar-only, AVX2 and AVX-512 machines (x86-64), or on
 * plain NEON, NEON+dotprod and NEON+i8mm machines (AArch64).  A level is a
 * rank within the architecture the binary is built for: 0 is the scalar
 * reference everywhere, and 1.. name that architecture's levels in order
 * (so ZL_ISA_AVX2 and ZL_ISA_NEON are both 1; only one set exists in a
 * build).  The environment variable ZL_ISA caps the level for the whole
 * process (as if the CPU had no more), read once at the first call:
 * scalar|avx2|avx512 on x86-64, scalar|neon|neon-dotprod|neon-i8mm on
 * AArch64; another architecture's name is ignored like any unknown one.  Nothing
 * here picks the level a computation runs at: each model handle holds its own
 * kernel table (tensor/kernels.h), chosen when it is opened.
 *
 * Thread contract: detection runs once (pthread_once) and its results never
 * change after; every function may be called from any thread. */
#ifndef ZL_CPU_H
#define ZL_CPU_H

typedef enum {
    ZL_ISA_SCALAR = 0,
    /* x86-64 */
    ZL_ISA_AVX2 = 1,
    ZL_ISA_AVX512 = 2,
    /* AArch64: ASIMD; + SDOT/UDOT (FEAT_DotProd); + SMMLA (FEAT_I8MM) */
    ZL_ISA_NEON = 1,
    ZL_ISA_NEON_DOTPROD = 2,
    ZL_ISA_NEON_I8MM = 3,
    ZL_ISA_TOP = 3 /* no architecture has a level above this: zl_cpu_cap_isa(ZL_ISA_TOP) = the best */
} zl_isa;

typedef struct zl_cpu {
    int avx2, fma, f16c;              /* AVX2 level needs all three */
    int avx512f, avx512bw, avx512vl, avx512dq; /* AVX-512 level needs all four */
    int avx512vnni, avx512vbmi, avx512bf16;    /* extensions, asked for by kernels */
    int asimd, dotprod, i8mm;         /* AArch64 (HWCAP_ASIMD, HWCAP_ASIMDDP, HWCAP2_I8MM) */
} zl_cpu;

/* The features CPUID reports (not capped by ZL_ISA). */
const zl_cpu *zl_cpu_get(void);
/* The highest level this process may use: the CPU's, capped by ZL_ISA. */
zl_isa zl_cpu_max_isa(void);
/* min(want, zl_cpu_max_isa()): the level a handle asking for want gets. */
zl_isa zl_cpu_cap_isa(zl_isa want);
const char *zl_isa_name(zl_isa isa);
/* This architecture's level names for messages: "scalar, avx2, avx512" or
 * "scalar, neon, neon-dotprod, neon-i8mm". */
const char *zl_isa_names(void);
/* A level name of this build's architecture ("scalar", "avx2", "neon-i8mm", ...)
 * -> level; -1 for anything else. */
int zl_isa_from_name(const char *name, zl_isa *out);

#endif
