/* cpu.c — CPU feature detection (CPUID on x86-64, the auxiliary vector's
 * HWCAP/HWCAP2 on AArch64 Linux); see cpu.h.
 * Owns the only computation of the ISA level (level_of) and the one place
 * AVX-512 and AArch64 extensions are read.  Detection runs once per process
 * under pthread_once and is immutable after.  Holds no dispatch state: which
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
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static zl_cpu g_cpu;          /* written once, in detect */
static zl_isa g_max;          /* what the CPU supports, after the ZL_ISA cap */

/* The level a feature set supports: AVX2 needs FMA and F16C; AVX-512 needs
 * AVX2 and F/BW/VL/DQ (VNNI, VBMI, BF16 are extensions kernels ask for).
 * AArch64: ASIMD, then dotprod, then i8mm on top of dotprod. */
static zl_isa level_of(const zl_cpu *c) {
#if defined(__aarch64__)
    /* NEON; dotprod on top; i8mm only with dotprod (every CPU with one has both) */
    if (!c->asimd) return ZL_ISA_SCALAR;
    if (!c->dotprod) return ZL_ISA_NEON;
    return c->i8mm ? ZL_ISA_NEON_I8MM : ZL_ISA_NEON_DOTPROD;
#else
    if (!(c->avx2 && c->fma && c->f16c)) return ZL_ISA_SCALAR;
    if (!(c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq)) return ZL_ISA_AVX2;
    return ZL_ISA_AVX512;
#endif
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
#elif defined(__aarch64__) && defined(__linux__)
    /* bit numbers of the Linux arm64 uapi (asm/hwcap.h) */
    unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    g_cpu.asimd = (hw >> 1) & 1;   /* HWCAP_ASIMD */
    g_cpu.dotprod = (hw >> 20) & 1; /* HWCAP_ASIMDDP */
    g_cpu.i8mm = (hw2 >> 13) & 1;   /* HWCAP2_I8MM */
#elif defined(__aarch64__)
    g_cpu.asimd = 1; /* ASIMD is part of the AArch64 base; extensions unknown */
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

#if defined(__aarch64__)
static const char *const k_names[] = {"scalar", "neon", "neon-dotprod", "neon-i8mm"};
static const char k_list[] = "scalar, neon, neon-dotprod, neon-i8mm";
#else
static const char *const k_names[] = {"scalar", "avx2", "avx512"};
static const char k_list[] = "scalar, avx2, avx512";
#endif
#define N_LEVELS (int)(sizeof k_names / sizeof k_names[0])

const char *zl_isa_name(zl_isa isa) { return (int)isa > 0 && (int)isa < N_LEVELS ? k_names[isa] : k_names[0]; }

const char *zl_isa_names(void) { return k_list; }

int zl_isa_from_name(const char *name, zl_isa *out) {
    for (int i = ZL_ISA_SCALAR; i < N_LEVELS; i++)
        if (!strcmp(name, zl_isa_name((zl_isa)i))) { *out = (zl_isa)i; return 0; }
    return -1;
}
