/* cpu.c — CPUID-based feature detection; see cpu.h.
 * Owns the only computation of the ISA level (level_of) and the one place
 * AVX-512 extensions are read.  Detection runs once per process under
 * pthread_once and is immutable after.  Holds no dispatch state: which
 * kernel runs is decided per handle (tensor/kernels.h). */
#include "cpu.h"

#include <pthread.h>
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

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static zl_cpu g_cpu;          /* written once, in detect */
static zl_isa g_max;          /* what the CPU supports, after the ZL_ISA cap */

/* The level a feature set supports: AVX2 needs FMA and F16C; AVX-512 needs
 * AVX2 and F/BW/VL/DQ (VNNI, VBMI, BF16 are extensions kernels ask for). */
static zl_isa level_of(const zl_cpu *c) {
    if (!(c->avx2 && c->fma && c->f16c)) return ZL_ISA_SCALAR;
    if (!(c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq)) return ZL_ISA_AVX2;
    return ZL_ISA_AVX512;
}

static void detect(void) {
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
            g_cpu.avx512vbmi = zmm_ok && ((c >> 1) & 1);
            g_cpu.avx512vnni = zmm_ok && ((c >> 11) & 1);
        }
        if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) g_cpu.avx512bf16 = zmm_ok && ((a >> 5) & 1);
    }
#endif
    zl_isa isa = level_of(&g_cpu), cap = isa;
    const char *env = getenv("ZL_ISA");
    if (env && zl_isa_from_name(env, &cap) == 0 && cap < isa) isa = cap;
    g_max = isa;
}

static void ensure(void) { pthread_once(&g_once, detect); }

const zl_cpu *zl_cpu_get(void) { ensure(); return &g_cpu; }
zl_isa zl_cpu_max_isa(void) { ensure(); return g_max; }

zl_isa zl_cpu_cap_isa(zl_isa want) {
    ensure();
    return want < ZL_ISA_SCALAR ? ZL_ISA_SCALAR : want < g_max ? want : g_max;
}

const char *zl_isa_name(zl_isa isa) {
    switch (isa) {
    case ZL_ISA_AVX512: return "avx512";
    case ZL_ISA_AVX2: return "avx2";
    default: return "scalar";
    }
}

int zl_isa_from_name(const char *name, zl_isa *out) {
    for (int i = ZL_ISA_SCALAR; i <= ZL_ISA_AVX512; i++)
        if (!strcmp(name, zl_isa_name((zl_isa)i))) { *out = (zl_isa)i; return 0; }
    return -1;
}
