/* test_greedy.c — the engine API reproduces llama.cpp's greedy text: 200
 * greedy tokens from BOS on stories260K (F32 and F16 files) equal the ids of
 * tests/fixtures/models/stories260K.greedy200.ids (the tokens of llama.cpp's
 * greedy text, greedy200.txt) at every ISA level this CPU has, fed token by
 * token and with half of them fed back as one prefill, and with 2 threads at
 * the best level.
 * tests/e2e/cli_run.sh checks the same text through the CLI; this test needs
 * only the engine library, so the AArch64 cross build runs it too. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "zerolayer.h"

#define FIX ZL_ROOT "/tests/fixtures/models/"
#define N_GREEDY 200

static int load_ids(int32_t *ids) {
    FILE *f = fopen(FIX "stories260K.greedy200.ids", "r");
    cr_assert(f, "missing the fixture ids");
    int n = 0;
    long v;
    while (n < N_GREEDY + 1 && fscanf(f, "%ld", &v) == 1) ids[n++] = (int32_t)v;
    fclose(f);
    return n;
}

/* 200 greedy ids from BOS; with `prefill` the first half of want is fed back
 * as one batch after BOS and only the rest is generated */
static void greedy(const char *path, zl_isa isa, int threads, int prefill, const int32_t *want) {
    zl_err err = {0};
    zl_llm_opts lo = {threads, 0, 0, 0, -1, 0, zl_isa_name(isa)};
    zl_llm *llm;
    cr_assert_eq(zl_llm_open(&llm, path, &lo, &err), 0, "%s", err.msg);
    cr_assert_str_eq(zl_llm_isa(llm), zl_isa_name(isa));
    zl_seq_opts so = {256, ZL_KV_F16, zl_sampling_defaults()};
    so.sampling.temp = 0;
    zl_seq *s;
    cr_assert_eq(zl_seq_new(&s, llm, &so, &err), 0, "%s", err.msg);
    int32_t tok = zl_llm_bos(llm);
    cr_assert_eq(zl_seq_eval(s, &tok, 1, 1, NULL, &err), 0, "%s", err.msg);
    int i = 0;
    if (prefill) {
        i = N_GREEDY / 2;
        cr_assert_eq(zl_seq_eval(s, want, i, i, NULL, &err), 0, "%s", err.msg);
    }
    for (; i < N_GREEDY; i++) {
        tok = zl_seq_sample(s);
        cr_assert_eq(tok, want[i], "%s isa %s threads %d prefill %d: token %d is %d, llama.cpp's is %d", path,
                     zl_isa_name(isa), threads, prefill, i, (int)tok, (int)want[i]);
        cr_assert_eq(zl_seq_eval(s, &tok, 1, 1, NULL, &err), 0, "%s", err.msg);
    }
    zl_seq_free(s);
    zl_llm_close(llm);
}

static void every_level(const char *path) {
    int32_t want[N_GREEDY + 1];
    cr_assert_eq(load_ids(want), N_GREEDY);
    const zl_isa top = zl_cpu_max_isa();
    for (int isa = ZL_ISA_SCALAR; isa <= (int)top; isa++)
        for (int prefill = 0; prefill <= 1; prefill++) greedy(path, (zl_isa)isa, 1, prefill, want);
    greedy(path, top, 2, 1, want); /* rows split over two threads: the same tokens */
}

Test(greedy, stories260K_f32) { every_level(FIX "stories260K.gguf"); }
Test(greedy, stories260K_f16) { every_level(FIX "stories260K-F16.gguf"); }
