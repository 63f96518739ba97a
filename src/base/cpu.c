/* cpu.c — CPUID-based feature detection; see cpu.h.
 * The detected level is process-wide state written once (or by tests through
 * zl_cpu_set_isa); kernels read it through the dispatch table in tensor/. */
#include "cpu.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
static unsigned long long xgetbv0(void) {
    unsigned eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((unsigned long long)edx << 32) | eax;
}
#endif

static zl_cpu g_cpu;
static int g_detected;
static zl_isa g_isa;

static void detect(void) {
    if (g_detected) return;
    memset(&g_cpu, 0, sizeof g_cpu);
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (__get_cpuid(1, &a, &b, &c, &d)) {
        int osxsave = (c >> 27) & 1;
        unsigned long long xcr0 = osxsave ? xgetbv0() : 0;
        int ymm_ok = (xcr0 & 6) == 6;
        int zmm_ok = (xcr0 & 0xe6) == 0xe6;
        g_cpu.fma = ymm_ok && ((c >> 12) & 1);
        g_cpu.f16c = ymm_ok && ((c >> 29) & 1);
        if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
            g_cpu.avx2 = ymm_ok && ((b >> 5) & 1);
            g_cpu.avx512f = zmm_ok && ((b >> 16) & 1);
            g_cpu.avx512dq = zmm_ok && ((b >> 17) & 1);
            g_cpu.avx512bw = zmm_ok && ((b >> 30) & 1);
            g_cpu.avx512vl = zmm_ok && ((b >> 31) & 1);
            g_cpu.avx512vnni = zmm_ok && ((c >> 11) & 1);
        }
        if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) g_cpu.avx512bf16 = zmm_ok && ((a >> 5) & 1);
    }
#endif
    zl_isa isa = ZL_ISA_SCALAR;
    if (g_cpu.avx2 && g_cpu.fma && g_cpu.f16c) isa = ZL_ISA_AVX2;
    if (isa == ZL_ISA_AVX2 && g_cpu.avx512f && g_cpu.avx512bw && g_cpu.avx512vl && g_cpu.avx512dq)
        isa = ZL_ISA_AVX512;
    const char *env = getenv("ZL_ISA");
    if (env) {
        zl_isa cap = isa;
        if (!strcmp(env, "scalar")) cap = ZL_ISA_SCALAR;
        else if (!strcmp(env, "avx2")) cap = ZL_ISA_AVX2;
        else if (!strcmp(env, "avx512")) cap = ZL_ISA_AVX512;
        if (cap < isa) isa = cap;
    }
    g_isa = isa;
    g_detected = 1;
}

const zl_cpu *zl_cpu_get(void) { detect(); return &g_cpu; }
zl_isa zl_cpu_isa(void) { detect(); return g_isa; }

zl_isa zl_cpu_set_isa(zl_isa want) {
    detect();
    zl_isa max = ZL_ISA_SCALAR;
    if (g_cpu.avx2 && g_cpu.fma && g_cpu.f16c) max = ZL_ISA_AVX2;
    if (max == ZL_ISA_AVX2 && g_cpu.avx512f && g_cpu.avx512bw && g_cpu.avx512vl && g_cpu.avx512dq)
        max = ZL_ISA_AVX512;
    g_isa = want < max ? want : max;
    return g_isa;
}

const char *zl_isa_name(zl_isa isa) {
    switch (isa) {
    case ZL_ISA_AVX512: return "avx512";
    case ZL_ISA_AVX2: return "avx2";
    default: return "scalar";
    }
}
