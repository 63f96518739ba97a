/* schema_bench.c — many constrained samples at once through the scheduler.
 *
 * Renders PROMPT as one ChatML user turn (the template of SmolLM2 and
 * Qwen2.5), submits N jobs (seeds 1..N, temperature 1, no truncation) under
 * the grammar of a JSON Schema, runs them P at a time in the batched engine
 * and prints each output on its own line (the grammar emits no raw
 * newlines), then one summary line on stderr: jobs that ended at the end
 * token vs at the token limit, tokens, the engine's sampling time per token
 * (the constraint included), and how often a mask was needed.
 *
 *   build/bin/schema_bench MODEL SCHEMA.json PROMPT [N=200] [P=8] [MAX_TOKENS=256]
 *
 * The outputs are meant for an independent validator (tests/real/json_schema_cli.sh). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/constraint.h"
#include "zerolayer_sched.h"
#include "zerolayer.h"

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: schema_bench MODEL SCHEMA.json PROMPT [N] [P] [MAX_TOKENS]\n");
        return 2;
    }
    int n = argc > 4 ? atoi(argv[4]) : 200, par = argc > 5 ? atoi(argv[5]) : 8, max_tok = argc > 6 ? atoi(argv[6]) : 256;
    zl_err err = {0};
    char *schema = slurp(argv[2]), *gtext = NULL;
    if (!schema) {
        fprintf(stderr, "zerolayer: cannot read %s\n", argv[2]);
        return 1;
    }
    if (zl_json_schema_grammar(schema, &gtext, &err)) {
        fprintf(stderr, "zerolayer: %s\n", err.msg);
        return 1;
    }
    zl_llm *llm = NULL;
    zl_llm_opts lo = {0};
    if (zl_llm_open(&llm, argv[1], &lo, &err)) {
        fprintf(stderr, "zerolayer: %s\n", err.msg);
        return 1;
    }
    char prompt[4096];
    snprintf(prompt, sizeof prompt, "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n", argv[3]);
    int32_t *ids = NULL;
    size_t nid = 0;
    if (zl_llm_tokenize(llm, prompt, strlen(prompt), 1, 1, &ids, &nid, &err)) {
        fprintf(stderr, "zerolayer: %s\n", err.msg);
        return 1;
    }
    zl_sched_opts o = {0};
    o.n_parallel = par;
    o.max_queue = n + 1;
    o.n_ctx = (int)nid + max_tok + 8;
    o.step_tokens = 512;
    zl_sched *sc = NULL;
    if (zl_sched_new(&sc, llm, &o, &err)) {
        fprintf(stderr, "zerolayer: %s\n", err.msg);
        return 1;
    }
    zl_job **jobs = calloc((size_t)n, sizeof *jobs);
    for (int i = 0; i < n; i++) {
        zl_sampling sp = zl_sampling_defaults();
        sp.temp = 1.0f;
        sp.top_k = 0;
        sp.top_p = 1.0f;
        sp.min_p = 0.0f;
        sp.seed = (uint64_t)i + 1;
        jobs[i] = zl_job_new(ids, (int)nid, &sp, max_tok, -1);
        zl_grammar *g = NULL;
        if (zl_grammar_parse(&g, gtext, strlen(gtext), NULL, &err) || zl_job_constrain(jobs[i], llm, g, NULL, &err)) {
            fprintf(stderr, "zerolayer: %s\n", err.msg);
            return 1;
        }
        if (zl_sched_submit(sc, jobs[i])) {
            fprintf(stderr, "zerolayer: cannot submit\n");
            return 1;
        }
    }
    int n_eog = 0, n_len = 0;
    long tokens = 0;
    double sample_ms = 0;
    zl_job_tok *buf = malloc((size_t)(max_tok + 1) * sizeof *buf);
    int32_t *out = malloc((size_t)(max_tok + 1) * sizeof *out);
    for (int i = 0; i < n; i++) {
        int got = 0;
        zl_finish fin = ZL_FINISH_NONE;
        while (fin == ZL_FINISH_NONE) {
            unsigned long long seen = zl_sched_progress(sc);
            got += zl_job_read(sc, jobs[i], got, buf + got, max_tok + 1 - got, &fin);
            if (fin == ZL_FINISH_NONE) zl_sched_wait_since(sc, seen, 1000);
        }
        int k = 0;
        for (int t = 0; t < got; t++)
            if (!zl_llm_is_eog(llm, buf[t].id)) out[k++] = buf[t].id;
        char *text = NULL;
        size_t len = 0;
        zl_llm_detokenize(llm, out, (size_t)k, 0, &text, &len, &err);
        printf("%s\n", text ? text : "");
        free(text);
        zl_job_report tm;
        zl_job_get_report(sc, jobs[i], &tm);
        tokens += tm.n_generated;
        sample_ms += tm.sample_ms;
        if (fin == ZL_FINISH_EOG) n_eog++;
        else n_len++;
        zl_job_release(jobs[i]);
    }
    fflush(stdout);
    fprintf(stderr,
            "schema_bench: %d jobs: %d ended at the end token, %d at the token limit; %ld tokens; sampling %.3f ms/token "
            "(the constraint included)\n",
            n, n_eog, n_len, tokens, tokens ? sample_ms / tokens : 0.0);
    zl_sched_free(sc);
    free(buf);
    free(out);
    free(jobs);
    free(ids);
    free(gtext);
    free(schema);
    zl_llm_close(llm);
    return 0;
}
