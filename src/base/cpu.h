/* cpu.h — run-time CPU feature detection and the ISA level.
 *
 * Kernels are chosen from what the CPU reports, never from compile flags, so
 * one binary runs on scalar-only, AVX2 and AVX-512 machines.  The environment
 * variable ZL_ISA=scalar|avx2|avx512 caps the level for the whole process (as
 * if the CPU had no more), read once at the first call.  Nothing here picks
 * the level a computation runs at: each model handle holds its own kernel
 * table (tensor/kernels.h), chosen when it is opened.
 *
 * Thread contract: detection runs once (pthread_once) and its results never
 * change after; every function may be called from any thread. */
#ifndef ZL_CPU_H
#define ZL_CPU_H

typedef enum { ZL_ISA_SCALAR = 0, ZL_ISA_AVX2 = 1, ZL_ISA_AVX512 = 2 } zl_isa;

typedef struct zl_cpu {
    int avx2, fma, f16c;              /* AVX2 level needs all three */
    int avx512f, avx512bw, avx512vl, avx512dq; /* AVX-512 level needs all four */
    int avx512vnni, avx512vbmi, avx512bf16;    /* extensions, asked for by kernels */
} zl_cpu;

/* The features CPUID reports (not capped by ZL_ISA). */
const zl_cpu *zl_cpu_get(void);
/* The highest level this process may use: the CPU's, capped by ZL_ISA. */
zl_isa zl_cpu_max_isa(void);
/* min(want, zl_cpu_max_isa()): the level a handle asking for want gets. */
zl_isa zl_cpu_cap_isa(zl_isa want);
const char *zl_isa_name(zl_isa isa);
/* "scalar" | "avx2" | "avx512" -> level; -1 for anything else. */
int zl_isa_from_name(const char *name, zl_isa *out);

#endif
