/* test_isa_handles.c — the ISA level belongs to a handle, not to the process.
 *
 * Two handles on the same file, one opened at "scalar" and one at the best
 * level this CPU has, decode greedily in one process: first the scalar one
 * alone (the reference), then both step by step in turn, then both at once
 * on two threads.  The scalar handle's logits must equal the reference bit
 * for bit however the other handle runs beside it (no level leaks between
 * handles), the other handle's logits must be the same each time it runs,
 * and both must pick the same greedy tokens.  The levels' logits are only
 * compared within rounding (the SIMD kernels sum in another order).
 *
 * A level this CPU lacks is reported with cr_skip. */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "zerolayer.h"

#define FIX ZL_ROOT "/tests/fixtures/"

enum { P = 6, N = 24 };
/* How far two levels' logits may part.  F32 weights: rounding only.  Weights
 * whose dot products quantise the activations to 8 bits: an activation that
 * lands on a rounding tie of that quantiser (x/d = k + 0.5 exactly in one
 * summation order, a few ulp off in the other) goes to the neighbouring step,
 * and one such flip moves this model's logits by up to about 0.06.  The same
 * tolerance decides the near ties: a step whose top two logits are closer
 * than twice it ends the comparison, since either pick is right there. */
#define ZL_TOL_F32 0.05f
#define ZL_TOL_QUANT 0.1f

typedef struct {
    zl_llm *llm;
    int32_t toks[N];
    float *logits; /* N * n_vocab: the logits each token was chosen from */
    int rc;
} run;

static zl_llm *open_at(const char *path, const char *isa) {
    zl_err err = {0};
    zl_llm_opts lo = {.n_threads = 2, .prefetch_layers = -1, .isa = isa};
    zl_llm *llm = NULL;
    cr_assert_eq(zl_llm_open(&llm, path, &lo, &err), 0, "%s: %s", path, err.msg);
    return llm;
}

static zl_seq *start(zl_llm *llm) {
    zl_err err = {0};
    zl_seq_opts so = {128, ZL_KV_F16, zl_sampling_defaults()};
    so.sampling.temp = 0;
    zl_seq *s = NULL;
    cr_assert_eq(zl_seq_new(&s, llm, &so, &err), 0, "%s", err.msg);
    int nv = zl_llm_n_vocab(llm);
    int32_t prompt[P];
    for (int i = 0; i < P; i++) prompt[i] = 1 + (i * 37 + 5) % (nv - 1);
    cr_assert_eq(zl_seq_eval(s, prompt, P, 0, NULL, &err), 0, "%s", err.msg);
    return s;
}

/* One greedy step of r on s: keep the logits, pick, feed. */
static int step(run *r, zl_seq *s, int i) {
    zl_err err = {0};
    size_t nv = (size_t)zl_llm_n_vocab(r->llm);
    memcpy(r->logits + (size_t)i * nv, zl_seq_logits(s), sizeof(float) * nv);
    r->toks[i] = zl_seq_sample(s);
    return zl_seq_eval(s, &r->toks[i], 1, 1, NULL, &err);
}

static void *decode_all(void *arg) {
    run *r = arg;
    zl_seq *s = start(r->llm);
    for (int i = 0; i < N && !r->rc; i++) r->rc = step(r, s, i);
    zl_seq_free(s);
    return NULL;
}

static run run_new(zl_llm *llm) {
    run r = {llm, {0}, calloc((size_t)N * (size_t)zl_llm_n_vocab(llm), sizeof(float)), 0};
    cr_assert(r.logits);
    return r;
}

static void same_bits(const run *a, const run *b, const char *what) {
    size_t nv = (size_t)zl_llm_n_vocab(a->llm);
    cr_assert_eq(a->rc, 0, "%s: decoding failed", what);
    cr_assert_eq(b->rc, 0, "%s: decoding failed", what);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(a->toks[i], b->toks[i], "%s: token %d: %d vs %d", what, i, a->toks[i], b->toks[i]);
        cr_assert(memcmp(a->logits + i * nv, b->logits + i * nv, sizeof(float) * nv) == 0,
                  "%s: logits of step %d differ", what, i);
    }
}

static void check(const char *path, zl_isa level, int min_steps, float tol) {
    if (level > zl_cpu_max_isa()) cr_skip_test("ISA level %s is not available on this CPU", zl_isa_name(level));
    zl_llm *a = open_at(path, "scalar"), *b = open_at(path, zl_isa_name(level));
    cr_assert_str_eq(zl_llm_isa(a), "scalar");
    cr_assert_str_eq(zl_llm_isa(b), zl_isa_name(level));
    /* the scalar handle alone, then the other alone */
    run ref_a = run_new(a), ref_b = run_new(b);
    decode_all(&ref_a);
    decode_all(&ref_b);
    /* both in turn, one step each */
    run ia = run_new(a), ib = run_new(b);
    zl_seq *sa = start(a), *sb = start(b);
    for (int i = 0; i < N && !ia.rc && !ib.rc; i++) {
        ia.rc = step(&ia, sa, i);
        ib.rc = step(&ib, sb, i);
    }
    zl_seq_free(sa);
    zl_seq_free(sb);
    /* both at once */
    run ta = run_new(a), tb = run_new(b);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, decode_all, &tb), 0);
    decode_all(&ta);
    pthread_join(th, NULL);

    same_bits(&ref_a, &ia, "scalar handle beside the other, in turn");
    same_bits(&ref_a, &ta, "scalar handle beside the other, on two threads");
    same_bits(&ref_b, &ib, "the other handle beside the scalar one, in turn");
    same_bits(&ref_b, &tb, "the other handle beside the scalar one, on two threads");
    /* the levels pick the same greedy tokens and agree on the logits within
     * tol, up to the first near tie of the scalar handle (top two within
     * 2 tol: either pick is right there, and the sequences part after it) */
    size_t nv = (size_t)zl_llm_n_vocab(a);
    double worst = 0;
    int compared = 0;
    for (int i = 0; i < N; i++) {
        const float *la = ref_a.logits + i * nv, *lb = ref_b.logits + i * nv;
        float top = -INFINITY, second = -INFINITY;
        for (size_t v = 0; v < nv; v++) {
            if (la[v] > top) { second = top; top = la[v]; }
            else if (la[v] > second) second = la[v];
        }
        if (top - second < 2 * tol) break;
        for (size_t v = 0; v < nv; v++) {
            double d = fabs((double)la[v] - lb[v]);
            if (d > worst) worst = d;
        }
        cr_assert_eq(ref_a.toks[i], ref_b.toks[i], "%s: token %d: scalar %d, %s %d", path, i, ref_a.toks[i],
                     zl_isa_name(level), ref_b.toks[i]);
        compared++;
    }
    cr_expect(worst < tol, "%s: scalar vs %s logits differ by up to %g", path, zl_isa_name(level), worst);
    cr_expect_geq(compared, min_steps, "%s: only %d greedy steps before a near tie", path, compared);
    /* and they are two levels: their kernels sum in different orders */
    cr_expect(worst > 0, "%s: scalar and %s logits are bit-identical: one kernel table for both?", path,
              zl_isa_name(level));
    run *all[] = {&ref_a, &ref_b, &ia, &ib, &ta, &tb};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) free(all[i]->logits);
    zl_llm_close(a);
    zl_llm_close(b);
}

Test(isa_handles, bad_level_is_an_error) {
    zl_err err = {0};
    zl_llm_opts lo = {.n_threads = 1, .isa = "sse9"};
    zl_llm *llm = NULL;
    cr_assert_neq(zl_llm_open(&llm, ZL_ROOT "/models/stories260K.gguf", &lo, &err), 0);
    cr_assert_null(llm);
    cr_expect(strstr(err.msg, "unknown ISA level 'sse9'") != NULL, "%s", err.msg);
    /* a level above the CPU's is capped, not refused */
#if defined(__aarch64__)
    lo.isa = "neon-i8mm";
#else
    lo.isa = "avx512";
#endif
    cr_assert_eq(zl_llm_open(&llm, ZL_ROOT "/models/stories260K.gguf", &lo, &err), 0, "%s", err.msg);
    cr_expect_str_eq(zl_llm_isa(llm), zl_isa_name(zl_cpu_max_isa()));
    zl_llm_close(llm);
}

#if defined(__aarch64__)
/* F32 weights only: the quantised NEON kernels return the reference's bits,
 * so a quantised model cannot tell a NEON table from the scalar one */
Test(isa_handles, neon_beside_scalar_f32) { check(ZL_ROOT "/models/stories260K.gguf", ZL_ISA_NEON, N, ZL_TOL_F32); }
Test(isa_handles, neon_i8mm_beside_scalar_f32) { check(ZL_ROOT "/models/stories260K.gguf", ZL_ISA_NEON_I8MM, N, ZL_TOL_F32); }
#else
Test(isa_handles, avx2_beside_scalar_f32) { check(ZL_ROOT "/models/stories260K.gguf", ZL_ISA_AVX2, N, ZL_TOL_F32); }
Test(isa_handles, avx2_beside_scalar_q4_0) { check(FIX "logits/synth-small-Q4_0.gguf", ZL_ISA_AVX2, 1, ZL_TOL_QUANT); }
Test(isa_handles, avx512_beside_scalar_f32) { check(ZL_ROOT "/models/stories260K.gguf", ZL_ISA_AVX512, N, ZL_TOL_F32); }
Test(isa_handles, avx512_beside_scalar_q4_0) { check(FIX "logits/synth-small-Q4_0.gguf", ZL_ISA_AVX512, 1, ZL_TOL_QUANT); }
Test(isa_handles, avx512_beside_scalar_q4_k_m) { check(FIX "logits/synth-small-Q4_K_M.gguf", ZL_ISA_AVX512, 1, ZL_TOL_QUANT); }
#endif
