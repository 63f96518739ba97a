/* sampler_bench.c — the cost of one zl_sampler_sample call on a large
 * vocabulary.
 *
 * Sixteen logit vectors are made once: with --model, a real model's logits
 * after each of the first 16 tokens of a short English/code prompt; without
 * it, vectors shaped like a language model's (a normal body, sd 2.5, and a
 * head of 24 tokens 6..14 above it, at random ids).  Each call
 * copies one into the sampler's input (as zl_seq_sample does) and draws.
 * Reports the least, median and mean microseconds per call for each
 * parameter set (on a shared machine the least is the steadiest figure),
 * and a checksum of the chosen ids (equal checksums: the same tokens); for
 * the unfiltered and top-p-only sets, how many decisions the sampler's fast
 * path left to its exact expf path (decode/sampler.c).
 *
 *   build/bin/sampler_bench [--model MODEL.gguf | --vocab N] [--calls N]
 *
 * Timing is the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), so that
 * other work on a shared machine shows less in the figures. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "zerolayer.h"
#include "decode/sampler.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static double uni(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) * (1.0 / 9007199254740992.0);
}
static double normal(void) {
    double u = uni(), v = uni();
    return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

static double cpu_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct { const char *name; zl_sampler_params p; } config;

int main(int argc, char **argv) {
    int nv = 151936, calls = 400;
    const char *model = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--vocab")) nv = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--calls")) calls = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--model")) model = argv[i + 1];
    }
    enum { NVEC = 16 };
    float *vec = NULL;
    if (model) {
        static const char prompt[] = "def fib(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"
                                     "    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n";
        zl_err err = {0};
        zl_llm *llm;
        zl_seq *seq;
        int32_t *ids;
        size_t n;
        zl_llm_opts lo = {.n_threads = 2};
        zl_seq_opts so = {.n_ctx = 64, .sampling = zl_sampling_defaults()};
        if (zl_llm_open(&llm, model, &lo, &err) || zl_seq_new(&seq, llm, &so, &err) ||
            zl_llm_tokenize(llm, prompt, sizeof prompt - 1, 1, 0, &ids, &n, &err)) {
            fprintf(stderr, "sampler_bench: %s\n", err.msg);
            return 1;
        }
        if (n < NVEC) { fprintf(stderr, "sampler_bench: prompt too short\n"); return 1; }
        nv = zl_llm_n_vocab(llm);
        if (!(vec = malloc((size_t)NVEC * nv * sizeof *vec))) return 1;
        if (zl_seq_eval(seq, ids, NVEC, 0, vec, &err)) { fprintf(stderr, "sampler_bench: %s\n", err.msg); return 1; }
        free(ids);
        zl_seq_free(seq);
        zl_llm_close(llm);
    }
    if (nv < 64 || calls < 1) {
        fprintf(stderr, "usage: sampler_bench [--model MODEL.gguf | --vocab N>=64] [--calls N]\n");
        return 2;
    }
    if (!vec) {
        if (!(vec = malloc((size_t)NVEC * nv * sizeof *vec))) return 1;
        for (int v = 0; v < NVEC; v++) {
            float *l = vec + (size_t)v * nv;
            for (int i = 0; i < nv; i++) l[i] = (float)(2.5 * normal());
            for (int h = 0; h < 24; h++) l[(int)(uni() * nv)] = (float)(6.0 + 8.0 * uni()) + 2.5f * (float)normal();
        }
    }
    float *in = malloc((size_t)nv * sizeof *in);
    double *us = malloc((size_t)calls * sizeof *us);
    if (!in || !us) return 1;
    zl_sampler_params d = zl_sampler_defaults();
    config cf[] = {
        {"greedy", d},
        {"server default (temp 1, no filter)", d},
        {"temp 0.8, no filter (serve_load)", d},
        {"temp 0.7 top-k 40 top-p 0.95 min-p 0.05", d},
        {"temp 0.7 top-p 0.9", d},
        {"temp 0.7 min-p 0.05", d},
        {"temp 0.8 repeat 1.1 (64 tokens)", d},
    };
    cf[0].p.temp = 0;
    cf[1].p.temp = 1.0f, cf[1].p.top_k = 0, cf[1].p.top_p = 1.0f, cf[1].p.min_p = 0;
    cf[2].p.temp = 0.8f, cf[2].p.top_k = 0, cf[2].p.top_p = 1.0f, cf[2].p.min_p = 0;
    cf[3].p.temp = 0.7f;
    cf[4].p.temp = 0.7f, cf[4].p.top_k = 0, cf[4].p.top_p = 0.9f, cf[4].p.min_p = 0;
    cf[5].p.temp = 0.7f, cf[5].p.top_k = 0, cf[5].p.top_p = 1.0f, cf[5].p.min_p = 0.05f;
    cf[6].p.temp = 0.8f, cf[6].p.top_k = 0, cf[6].p.top_p = 1.0f, cf[6].p.min_p = 0, cf[6].p.repeat_penalty = 1.1f;
    printf("vocabulary %d (%s), %d calls per set\n", nv, model ? model : "synthetic logits", calls);
    for (size_t c = 0; c < sizeof cf / sizeof *cf; c++) {
        cf[c].p.seed = 42;
        zl_sampler *s = zl_sampler_new(&cf[c].p, nv);
        if (!s) return 1;
        for (int i = 0; i < 64; i++) zl_sampler_accept(s, (int)(uni() * nv));
        uint64_t sum = 0;
        double total = 0;
        for (int k = 0; k < calls; k++) {
            memcpy(in, vec + (size_t)(k % NVEC) * nv, (size_t)nv * sizeof *in);
            double t0 = cpu_us();
            int t = zl_sampler_sample(s, in);
            us[k] = cpu_us() - t0;
            total += us[k];
            sum = sum * 1000003u + (uint64_t)t;
        }
        qsort(us, (size_t)calls, sizeof *us, cmp_d);
        uint64_t n_fast, n_exact;
        zl_sampler_draw_counts(s, &n_fast, &n_exact);
        printf("%-42s min %7.1f  median %7.1f  mean %7.1f us  checksum %016llx", cf[c].name, us[0],
               us[calls / 2], total / calls, (unsigned long long)sum);
        if (n_fast + n_exact) printf("  exact-path draws %llu/%llu", (unsigned long long)n_exact, (unsigned long long)(n_fast + n_exact));
        printf("\n");
        zl_sampler_free(s);
    }
    free(vec);
    free(in);
    free(us);
    return 0;
}
