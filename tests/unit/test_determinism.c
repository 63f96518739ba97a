/* test_determinism.c — "same model, prompt and options -> same tokens,
 * whether the request ran alone or batched" (docs/DESIGN.md, Bit identity).  Six greedy
 * sequences decode token by token alone and, in parallel copies, together in
 * one zl_llm_eval_batch per step; the logits must be bit-identical at every
 * step, for every weight type and ISA level.  This pins the kernels: the
 * multi-token (prefill/batch/verify) paths must accumulate exactly like the
 * one-token path.
 *
 * One suite per ISA level (scalar/…, avx2/…, avx512/…; on AArch64 neon/…,
 * neon_dotprod/…, neon_i8mm/…); ctest runs each as its
 * own test (--filter).  A level this CPU lacks is reported with cr_skip, and a
 * run in which every test was skipped exits 77, which ctest shows as skipped:
 * on an AVX2 machine test_determinism_avx512 is SKIPPED, never passed. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "zerolayer.h"

#define FIX ZL_ROOT "/tests/fixtures/"

static void check(const char *path, zl_isa isa) {
    if (isa > zl_cpu_max_isa()) cr_skip_test("ISA level %s is not available on this CPU", zl_isa_name(isa));
    zl_err err = {0};
    zl_llm_opts lo = {2, 0, 0, 0, -1, 0, zl_isa_name(isa)};
    zl_llm *llm;
    cr_assert_eq(zl_llm_open(&llm, path, &lo, &err), 0, "%s", err.msg);
    cr_assert_str_eq(zl_llm_isa(llm), zl_isa_name(isa));
    int nv = zl_llm_n_vocab(llm);
    enum { S = 6, N = 16, P = 8 };
    zl_seq *alone[S], *bat[S];
    zl_seq_opts so = {128, ZL_KV_F16, zl_sampling_defaults()};
    so.sampling.temp = 0;
    for (int s = 0; s < S; s++) {
        int32_t prompt[P];
        for (int i = 0; i < P; i++) prompt[i] = 1 + (s * 131 + i * 17) % (nv - 1);
        cr_assert_eq(zl_seq_new(&alone[s], llm, &so, &err), 0);
        cr_assert_eq(zl_seq_new(&bat[s], llm, &so, &err), 0);
        /* alone: the prompt one token at a time; batched copy: the prompt in one prefill */
        for (int i = 0; i < P; i++) cr_assert_eq(zl_seq_eval(alone[s], &prompt[i], 1, 1, NULL, &err), 0);
        cr_assert_eq(zl_seq_eval(bat[s], prompt, P, 0, NULL, &err), 0);
    }
    for (int step = 0; step < N; step++) {
        int32_t ta[S], tb[S];
        zl_batch_item it[S];
        for (int s = 0; s < S; s++) {
            cr_assert(memcmp(zl_seq_logits(alone[s]), zl_seq_logits(bat[s]), sizeof(float) * nv) == 0,
                      "%s isa %s: sequence %d step %d logits differ alone vs batched", path, zl_isa_name(isa), s, step);
            ta[s] = zl_seq_sample(alone[s]);
            tb[s] = zl_seq_sample(bat[s]);
            cr_assert_eq(zl_seq_eval(alone[s], &ta[s], 1, 1, NULL, &err), 0);
            it[s] = (zl_batch_item){bat[s], &tb[s], 1};
        }
        cr_assert_eq(zl_llm_eval_batch(llm, it, S, &err), 0, "%s", err.msg);
    }
    for (int s = 0; s < S; s++) {
        zl_seq_free(alone[s]);
        zl_seq_free(bat[s]);
    }
    zl_llm_close(llm);
}

/* ctest reports exit 77 as skipped: every test of the run skipped (the level
 * is missing) is not a pass. */
static size_t n_skipped, n_run;
ReportHook(POST_ALL)(struct criterion_global_stats *st) {
    n_skipped = st->tests_skipped;
    n_run = st->nb_tests;
}

int main(int argc, char *argv[]) {
    struct criterion_test_set *tests = criterion_initialize();
    int rc = 0;
    if (criterion_handle_args(argc, argv, true)) rc = !criterion_run_all_tests(tests);
    criterion_finalize(tests);
    if (rc == 0 && n_run > 0 && n_skipped == n_run) {
        fprintf(stderr, "SKIPPED: all %zu tests skipped (ISA level not available on this CPU)\n", n_run);
        return 77;
    }
    return rc;
}

#define ZL_DET_TESTS(suite, level)                                                         \
    Test(suite, stories260K_f32) { check(FIX "models/stories260K.gguf", level); }          \
    Test(suite, f16) { check(FIX "logits/synth-small-F16.gguf", level); }                  \
    Test(suite, q8_0) { check(FIX "logits/synth-small-Q8_0.gguf", level); }                \
    Test(suite, q4_0) { check(FIX "logits/synth-small-Q4_0.gguf", level); }                \
    Test(suite, q4_k_m) { check(FIX "logits/synth-small-Q4_K_M.gguf", level); }            \
    Test(suite, q5_k_m) { check(FIX "logits/synth-small-Q5_K_M.gguf", level); }            \
    Test(suite, q6_k) { check(FIX "logits/synth-small-Q6_K.gguf", level); }

ZL_DET_TESTS(scalar, ZL_ISA_SCALAR)
#if defined(__aarch64__)
ZL_DET_TESTS(neon, ZL_ISA_NEON)
ZL_DET_TESTS(neon_dotprod, ZL_ISA_NEON_DOTPROD)
ZL_DET_TESTS(neon_i8mm, ZL_ISA_NEON_I8MM)
#else
ZL_DET_TESTS(avx2, ZL_ISA_AVX2)
ZL_DET_TESTS(avx512, ZL_ISA_AVX512)
#endif
