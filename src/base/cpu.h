/* cpu.h — run-time CPU feature detection.
 *
 * Kernels are chosen from what the CPU reports, never from compile flags, so
 * one binary runs on scalar-only, AVX2 and AVX-512 machines.  The environment
 * variable ZL_ISA=scalar|avx2|avx512 caps the level (tests use it to exercise
 * every path on one machine). */
#ifndef ZL_CPU_H
#define ZL_CPU_H

typedef enum { ZL_ISA_SCALAR = 0, ZL_ISA_AVX2 = 1, ZL_ISA_AVX512 = 2 } zl_isa;

typedef struct zl_cpu {
    int avx2, fma, f16c;              /* AVX2 level needs all three */
    int avx512f, avx512bw, avx512vl, avx512dq, avx512vnni, avx512bf16;
} zl_cpu;

const zl_cpu *zl_cpu_get(void);
/* Highest usable ISA level, after the ZL_ISA cap. */
zl_isa zl_cpu_isa(void);
/* Force a level (clamped to what the CPU supports); returns the level set. */
zl_isa zl_cpu_set_isa(zl_isa want);
const char *zl_isa_name(zl_isa isa);

#endif
