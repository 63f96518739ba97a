/* cmd_bench.c — `zerolayer bench`, in the spirit of llama-bench: prompt
 * processing (pp) and token generation (tg) speed as mean ± sd over -r
 * repetitions, for every combination of the comma-separated lists, plus the
 * machine's measured read bandwidth and tg as a share of the bandwidth
 * ceiling (bandwidth / weight bytes read per token). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "../base/clock.h"
#include "cli.h"
#include "zerolayer.h"
#include "zerolayer_sched.h"

static const char *k_usage =
    "usage: zerolayer bench [-m MODEL] [-p 128,512] [-n 64] [-t 1,2] [-r 3] [--ctx 0,1024,4096] [--json]\n"
    "                       [--prefetch-layers N] [--no-mmap] [--preheat] [--verify-curve] [--batch 1,4,8,16]\n"
    "                       [--kv-policy full|window|anchor] [--kv-budget N|F] [--kv-layer-max N] [--kv-type f16|q8_0]\n"
    "  -p LIST    prompt lengths to time (pp); 0 skips\n"
    "  -n LIST    generated tokens to time (tg); 0 skips\n"
    "  -t LIST    thread counts\n"
    "  -r N       repetitions (mean ± sd reported)\n"
    "  --ctx LIST tokens already in the KV cache before a tg run (tg at depth)\n"
    "  --json     JSON instead of a markdown table\n"
    "  --kv-policy P, --kv-budget B (fraction of the tg depth), --kv-layer-max N, --kv-type T: KV slicing\n"
    "             during tg at depth;\n"
    "             the table then shows KV bytes read per generated token\n"
    "  --spec MODE  tg with the verification ring (lookup|off): greedy generation after a prompt\n"
    "             that repeats itself (grounded text); reports acceptance and tokens per step\n"
    "  --verify-curve  time of one forward over k tokens / over 1 token, k = 1..16, at depth 128\n"
    "                  (the cost of verifying k-1 drafted tokens in the verification ring)\n"
    "  --batch LIST    continuous-batching scaling without HTTP: for S concurrent sequences (S in LIST)\n"
    "             generating -n tokens each (first -t value, best of -r), the aggregate generated\n"
    "             tokens/s of (a) engine: one zl_llm_eval_batch per step over S one-token items +\n"
    "             sampling, prompts already evaluated, and (b) sched: S jobs submitted at once to\n"
    "             the server's scheduler, prefill included, with p50/p99 time to first token and\n"
    "             inter-token gap as a reader of the jobs sees them.  Prompts and sampling\n"
    "             (temperature 0.8, no top-k/top-p) are those of bench/serve_load.mjs\n";

#define MAXL 16

static int parse_list(const char *flag, const char *s, long *out, int *n, long lo, long hi) {
    *n = 0;
    if (!s) return cli_fail("%s needs a value", flag);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (*n == MAXL) return cli_fail("%s: at most %d values", flag, MAXL);
        if (cli_int(flag, tok, lo, hi, &out[(*n)++])) return 1;
    }
    return *n ? 0 : cli_fail("%s: empty list", flag);
}

/* Read bandwidth: `threads` threads sum disjoint halves of a 512 MiB buffer
 * (larger than any cache); best of 3 passes. */
typedef struct { const unsigned long long *b; size_t n; unsigned long long sum; } bw_part;

static void *bw_sum(void *arg) {
    bw_part *p = arg;
    unsigned long long s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i + 3 < p->n; i += 4) { s0 += p->b[i]; s1 += p->b[i + 1]; s2 += p->b[i + 2]; s3 += p->b[i + 3]; }
    p->sum = s0 + s1 + s2 + s3;
    return NULL;
}

static double measure_bandwidth(int threads) {
    size_t n = ((size_t)512 << 20) / sizeof(unsigned long long);
    unsigned long long *b = malloc(n * sizeof *b);
    if (!b) return 0;
    for (size_t i = 0; i < n; i++) b[i] = i;
    if (threads < 1) threads = 1;
    if (threads > 64) threads = 64;
    double best = 0;
    for (int r = 0; r < 3; r++) {
        pthread_t th[64];
        bw_part parts[64];
        double t = zl_now_s();
        for (int k = 0; k < threads; k++) {
            parts[k] = (bw_part){b + n / threads * k, n / threads, 0};
            if (k) pthread_create(&th[k], NULL, bw_sum, &parts[k]);
        }
        bw_sum(&parts[0]);
        for (int k = 1; k < threads; k++) pthread_join(th[k], NULL);
        double gbs = (double)(n / threads * threads) * sizeof *b / (zl_now_s() - t) / 1e9;
        if (gbs > best) best = gbs;
    }
    free(b);
    return best;
}

typedef struct { const char *test; long n, threads, depth; double mean, sd, accept, per_step, kv_bytes; } result;

static void stats(const double *v, int n, double *mean, double *sd) {
    double s = 0, q = 0;
    for (int i = 0; i < n; i++) s += v[i];
    *mean = s / n;
    for (int i = 0; i < n; i++) q += (v[i] - *mean) * (v[i] - *mean);
    *sd = n > 1 ? sqrt(q / (n - 1)) : 0;
}

/* Forward over k tokens at depth 128, k = 1..16: best of reps, ratio to k = 1. */
static int verify_curve(const char *model, int threads, int reps) {
    zl_err err = {0};
    zl_llm_opts lo = {threads, 0, 0, 0, 0, 0, NULL};
    zl_llm *llm;
    if (zl_llm_open(&llm, model, &lo, &err)) return cli_fail("%s", err.msg);
    zl_seq_opts so = {256, ZL_KV_F16, zl_sampling_defaults()};
    zl_seq *seq;
    if (zl_seq_new(&seq, llm, &so, &err)) { zl_llm_close(llm); return cli_fail("%s", err.msg); }
    int nv = zl_llm_n_vocab(llm);
    int32_t ids[160];
    for (int i = 0; i < 160; i++) ids[i] = 1 + (i * 7919) % (nv - 1);
    if (zl_seq_eval(seq, ids, 128, 64, NULL, &err)) { zl_seq_free(seq); zl_llm_close(llm); return cli_fail("%s", err.msg); }
    double t1 = 0;
    printf("model: %s\n%s, %d threads\n\n| k | ms per forward | ratio to k=1 |\n|---|---|---|\n", model, zl_llm_desc(llm),
           zl_llm_n_threads(llm));
    for (int k = 1; k <= 16; k++) {
        double best = 1e30;
        for (int r = 0; r < (reps < 3 ? 3 : reps); r++) {
            zl_seq_truncate(seq, 128);
            double t = zl_now_s();
            if (zl_seq_eval(seq, ids + 128, k, k, NULL, &err)) { zl_seq_free(seq); zl_llm_close(llm); return cli_fail("%s", err.msg); }
            t = zl_now_s() - t;
            if (t < best) best = t;
        }
        if (k == 1) t1 = best;
        printf("| %d | %.2f | %.2f |\n", k, best * 1e3, best / t1);
    }
    zl_seq_free(seq);
    zl_llm_close(llm);
    return 0;
}

/* ---- --batch: continuous batching without HTTP ---- */

static const char *const k_batch_prompts[] = {
    "Once upon a time", "The little dog", "Lily wanted", "One day, Tom", "The sun was", "A big red ball",
    "Mom said", "The bird flew", "Sam and Sue", "In the park", "The cat was sad", "Ben had a toy",
    "It was a cold day", "The fish", "Anna liked to", "The tree"};
#define N_BATCH_PROMPTS ((int)(sizeof k_batch_prompts / sizeof *k_batch_prompts))

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p) {
    if (n <= 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_dbl);
    int i = (int)(p / 100 * n);
    return v[i < n ? i : n - 1];
}

/* What bench/serve_load.mjs asks the server for: an OpenAI request with
 * temperature 0.8 and nothing else (top_k off, top_p 1, min_p 0). */
static zl_sampling batch_sampling(uint64_t seed) {
    zl_sampling sp = zl_sampling_defaults();
    sp.temp = 0.8f;
    sp.top_k = 0;
    sp.top_p = 1.0f;
    sp.min_p = 0.0f;
    sp.repeat_penalty = 1.0f;
    sp.seed = seed;
    return sp;
}

/* (a) engine: S sequences, prompt evaluated, then n steps of one batched
 * forward over S one-token items + sampling.  Returns tokens/s (best of reps). */
static int batch_engine(zl_llm *llm, int S, int n, int reps, double *tps, double *step_ms) {
    zl_err err = {0};
    zl_seq **seqs = calloc((size_t)S, sizeof *seqs);
    zl_batch_item *items = calloc((size_t)S, sizeof *items);
    int32_t *next = calloc((size_t)S, sizeof *next);
    int rc = 0;
    *tps = 0;
    if (!seqs || !items || !next) { rc = cli_fail("out of memory"); goto out; }
    for (int i = 0; i < S; i++) {
        zl_seq_opts so = {64 + n + 1, ZL_KV_F16, batch_sampling((uint64_t)i)};
        if (zl_seq_new(&seqs[i], llm, &so, &err)) { rc = cli_fail("%s", err.msg); goto out; }
    }
    for (int r = 0; r < reps; r++) {
        for (int i = 0; i < S; i++) {
            const char *p = k_batch_prompts[i % N_BATCH_PROMPTS];
            int32_t *ids = NULL;
            size_t nid = 0;
            zl_seq_truncate(seqs[i], 0);
            if (zl_llm_tokenize(llm, p, strlen(p), 1, 0, &ids, &nid, &err) ||
                zl_seq_eval(seqs[i], ids, (int)nid, 0, NULL, &err)) {
                free(ids);
                rc = cli_fail("%s", err.msg);
                goto out;
            }
            free(ids);
            next[i] = zl_seq_sample(seqs[i]);
        }
        double t = zl_now_s();
        for (int k = 0; k < n; k++) {
            for (int i = 0; i < S; i++) items[i] = (zl_batch_item){seqs[i], &next[i], 1};
            if (zl_llm_eval_batch(llm, items, S, &err)) { rc = cli_fail("%s", err.msg); goto out; }
            for (int i = 0; i < S; i++) next[i] = zl_seq_sample(seqs[i]);
        }
        t = zl_now_s() - t;
        double v = (double)S * n / t;
        if (v > *tps) { *tps = v; *step_ms = t * 1e3 / n; }
    }
out:
    for (int i = 0; seqs && i < S; i++) zl_seq_free(seqs[i]);
    free(seqs);
    free(items);
    free(next);
    return rc;
}

/* (b) sched: S jobs submitted together to a scheduler like `serve`'s; the
 * wall time runs from the submit to the last token read, as a client's wave. */
typedef struct { double tps, ttft50, ttft99, itl50, itl99, steps; } batch_sched_res;

static int batch_sched(zl_llm *llm, int S, int n, int reps, batch_sched_res *best) {
    zl_err err = {0};
    zl_sched_opts o = {0};
    o.n_parallel = S < 16 ? 16 : S;
    o.max_queue = 64;
    o.n_ctx = 64 + n + 1;
    o.step_tokens = 256;
    zl_sched *sc;
    if (zl_sched_new(&sc, llm, &o, &err)) return cli_fail("%s", err.msg);
    zl_job **jobs = calloc((size_t)S, sizeof *jobs);
    int *nread = calloc((size_t)S, sizeof *nread);
    double *last = calloc((size_t)S, sizeof *last);
    double *ttft = calloc((size_t)S, sizeof *ttft);
    double *gaps = malloc((size_t)S * (size_t)(n + 1) * sizeof *gaps);
    int rc = 0;
    memset(best, 0, sizeof *best);
    if (!jobs || !nread || !last || !ttft || !gaps) { rc = cli_fail("out of memory"); goto out; }
    for (int r = 0; r < reps + 1; r++) { /* the first wave warms up */
        zl_sched_stats st0;
        zl_sched_get_stats(sc, &st0);
        double t0 = zl_now_ms();
        for (int i = 0; i < S; i++) {
            const char *p = k_batch_prompts[(r * S + i) % N_BATCH_PROMPTS];
            int32_t *ids = NULL;
            size_t nid = 0;
            if (zl_llm_tokenize(llm, p, strlen(p), 1, 0, &ids, &nid, &err)) { rc = cli_fail("%s", err.msg); goto out; }
            zl_sampling sp = batch_sampling((uint64_t)(r * S + i));
            jobs[i] = zl_job_new(ids, (int)nid, &sp, n, -1);
            free(ids);
            if (!jobs[i] || zl_sched_submit(sc, jobs[i])) { rc = cli_fail("cannot submit a job"); goto out; }
            nread[i] = 0;
        }
        int done = 0, ngaps = 0;
        long long total = 0;
        while (done < S) {
            unsigned long long seen = zl_sched_progress(sc);
            done = 0;
            for (int i = 0; i < S; i++) {
                zl_job_tok tk[64];
                zl_finish fin = ZL_FINISH_NONE;
                int k = zl_job_read(sc, jobs[i], nread[i], tk, 64, &fin);
                double now = zl_now_ms();
                if (k > 0) {
                    if (!nread[i]) ttft[i] = now - t0;
                    else gaps[ngaps++] = now - last[i];
                    for (int m = 1; m < k; m++) gaps[ngaps++] = 0; /* read together */
                    last[i] = now;
                    nread[i] += k;
                }
                done += fin != ZL_FINISH_NONE;
            }
            if (done < S) zl_sched_wait_since(sc, seen, 100);
        }
        double wall = zl_now_ms() - t0;
        zl_sched_stats st1;
        zl_sched_get_stats(sc, &st1);
        for (int i = 0; i < S; i++) {
            total += nread[i];
            zl_job_release(jobs[i]);
            jobs[i] = NULL;
        }
        double tps = (double)total * 1e3 / wall;
        if (r > 0 && tps > best->tps) {
            best->tps = tps;
            best->ttft50 = pct(ttft, S, 50);
            best->ttft99 = pct(ttft, S, 99);
            best->itl50 = pct(gaps, ngaps, 50);
            best->itl99 = pct(gaps, ngaps, 99);
            best->steps = (double)(st1.steps - st0.steps);
        }
    }
out:
    for (int i = 0; jobs && i < S; i++) zl_job_release(jobs[i]);
    zl_sched_free(sc);
    free(jobs);
    free(nread);
    free(last);
    free(ttft);
    free(gaps);
    return rc;
}

static int batch_bench(const char *model, const long *sizes, int n_sizes, int threads, int n, int reps, int prefetch) {
    zl_err err = {0};
    zl_llm_opts lo = {threads, 0, 0, 0, prefetch ? prefetch : -1, 0, NULL};
    zl_llm *llm;
    if (zl_llm_open(&llm, model, &lo, &err)) return cli_fail("%s", err.msg);
    if (n <= 0) n = 64;
    printf("model: %s\n%s, %d threads, %d generated tokens per sequence, best of %d\n\n", model, zl_llm_desc(llm),
           zl_llm_n_threads(llm), n, reps);
    printf("| streams | engine tok/s | engine ms/step | sched tok/s | sched steps | TTFT p50/p99 ms | "
           "inter-token p50/p99 ms |\n|---|---|---|---|---|---|---|\n");
    double base_e = 0, base_s = 0;
    for (int k = 0; k < n_sizes; k++) {
        int S = (int)sizes[k];
        double tps = 0, ms = 0;
        batch_sched_res bs;
        if (batch_engine(llm, S, n, reps, &tps, &ms) || batch_sched(llm, S, n, reps, &bs)) {
            zl_llm_close(llm);
            return 1;
        }
        if (k == 0) { base_e = tps; base_s = bs.tps; }
        printf("| %d | %.1f (%.2fx) | %.1f | %.1f (%.2fx) | %.0f | %.0f / %.0f | %.1f / %.1f |\n", S, tps,
               tps / base_e, ms, bs.tps, bs.tps / base_s, bs.steps, bs.ttft50, bs.ttft99, bs.itl50, bs.itl99);
        fflush(stdout);
    }
    zl_llm_close(llm);
    return 0;
}

int cmd_bench(int argc, char **argv) {
    const char *model = NULL;
    long pp[MAXL] = {128}, tg[MAXL] = {64}, th[MAXL] = {2}, depth[MAXL] = {0}, reps = 3;
    long bsz[MAXL];
    int nbsz = 0;
    int npp = 1, ntg = 1, nth = 1, ndepth = 1, json = 0, no_mmap = 0, preheat = 0, curve = 0, spec = 0;
    long prefetch = 2, layer_max = 0;
    const char *kv_policy = "full", *kv_budget = NULL;
    zl_kv_type kvt = ZL_KV_F16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (cli_is_help(a)) { fputs(k_usage, stdout); return 0; }
#define VAL (i++, v)
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) { if (!(model = VAL)) return cli_fail("%s needs a value", a); }
        else if (!strcmp(a, "-p")) { if (parse_list(a, VAL, pp, &npp, 0, 1 << 20)) return 1; }
        else if (!strcmp(a, "-n")) { if (parse_list(a, VAL, tg, &ntg, 0, 1 << 20)) return 1; }
        else if (!strcmp(a, "-t")) { if (parse_list(a, VAL, th, &nth, 1, 1024)) return 1; }
        else if (!strcmp(a, "--ctx")) { if (parse_list(a, VAL, depth, &ndepth, 0, 1 << 20)) return 1; }
        else if (!strcmp(a, "-r")) { if (cli_int(a, VAL, 1, 1000, &reps)) return 1; }
        else if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--verify-curve")) curve = 1;
        else if (!strcmp(a, "--batch")) { if (parse_list(a, VAL, bsz, &nbsz, 1, 256)) return 1; }
        else if (!strcmp(a, "--kv-policy")) { if (!(kv_policy = VAL)) return cli_fail("%s needs a value", a); }
        else if (!strcmp(a, "--kv-budget")) { if (!(kv_budget = VAL)) return cli_fail("%s needs a value", a); }
        else if (!strcmp(a, "--kv-layer-max")) { if (cli_int(a, VAL, 1, 1 << 24, &layer_max)) return 1; }
        else if (!strcmp(a, "--kv-type")) {
            const char *t = VAL;
            if (t && !strcmp(t, "f16")) kvt = ZL_KV_F16;
            else if (t && !strcmp(t, "q8_0")) kvt = ZL_KV_Q8_0;
            else return cli_fail("--kv-type must be f16 or q8_0");
        }
        else if (!strcmp(a, "--spec")) {
            const char *m = VAL;
            if (m && !strcmp(m, "lookup")) spec = 1;
            else if (m && !strcmp(m, "off")) spec = 0;
            else return cli_fail("bench --spec must be lookup or off");
        }
        else if (!strcmp(a, "--no-mmap")) no_mmap = 1;
        else if (!strcmp(a, "--preheat")) preheat = 1;
        else if (!strcmp(a, "--prefetch-layers")) { if (cli_int(a, VAL, 0, 1024, &prefetch)) return 1; }
        else return cli_fail("bench: unknown option '%s' (see zerolayer bench --help)", a);
#undef VAL
    }
    if (!model) model = cli_default_model();
    if (curve) return verify_curve(model, (int)th[0], (int)reps);
    if (nbsz) return batch_bench(model, bsz, nbsz, (int)th[0], (int)tg[0], (int)reps, (int)prefetch);
    zl_kv_policy_kind pk;
    if (cli_kv_policy(kv_policy, &pk)) return 1;
    long max_t = 1;
    for (int i = 0; i < nth; i++) if (th[i] > max_t) max_t = th[i];
    double bw = measure_bandwidth((int)max_t);
    result res[MAXL * MAXL * 4];
    int nres = 0;
    double load_ms = 0;
    uint64_t wbytes = 0;
    const char *desc = "";
    char descbuf[256] = "";
    zl_err err = {0};
    for (int ti = 0; ti < nth; ti++) {
        zl_llm_opts lo = {(int)th[ti], no_mmap, 0, 0, prefetch ? (int)prefetch : -1, (int)layer_max, NULL};
        zl_llm *llm;
        double t0 = zl_now_s();
        if (zl_llm_open(&llm, model, &lo, &err)) return cli_fail("%s", err.msg);
        if (preheat) zl_llm_preheat(llm, cli_progress, "preheat");
        if (ti == 0) {
            load_ms = (zl_now_s() - t0) * 1e3;
            wbytes = zl_llm_weight_bytes(llm);
            snprintf(descbuf, sizeof descbuf, "%s", zl_llm_desc(llm));
            desc = descbuf;
        }
        int nv = zl_llm_n_vocab(llm);
        long maxp = 0, maxd = 0, maxg = 0;
        for (int i = 0; i < npp; i++) if (pp[i] > maxp) maxp = pp[i];
        for (int i = 0; i < ndepth; i++) if (depth[i] > maxd) maxd = depth[i];
        for (int i = 0; i < ntg; i++) if (tg[i] > maxg) maxg = tg[i];
        long n_ctx = maxp > maxd + maxg ? maxp : maxd + maxg;
        zl_seq_opts so = {(int)(n_ctx + 1 + (spec ? 64 : 0)), kvt, zl_sampling_defaults()};
        so.sampling.temp = 0;
        zl_seq *seq;
        if (zl_seq_new(&seq, llm, &so, &err)) { zl_llm_close(llm); return cli_fail("%s", err.msg); }
        long maxn = n_ctx + 1;
        int32_t *ids = malloc((size_t)maxn * sizeof *ids);
        uint64_t x = 12345;
        for (long i = 0; i < maxn; i++) { x = x * 6364136223846793005ull + 1442695040888963407ull; ids[i] = (int32_t)((x >> 33) % (uint64_t)nv); }
        double v[1000];
        /* warm-up: page in the weights */
        zl_seq_eval(seq, ids, 1, 0, NULL, &err);
        for (int pi = 0; pi < npp; pi++) {
            if (!pp[pi]) continue;
            for (int r = 0; r < reps; r++) {
                zl_seq_truncate(seq, 0);
                double t = zl_now_s();
                if (zl_seq_eval(seq, ids, (int)pp[pi], 512, NULL, &err)) return cli_fail("%s", err.msg);
                v[r] = pp[pi] / (zl_now_s() - t);
            }
            result *R = &res[nres++];
            *R = (result){"pp", pp[pi], th[ti], 0, 0, 0, 0, 0, 0};
            stats(v, (int)reps, &R->mean, &R->sd);
        }
        for (int di = 0; di < ndepth; di++)
            for (int gi = 0; gi < ntg; gi++) {
                if (!tg[gi]) continue;
                double acc_sum = 0, steps_sum = 0;
                long budget = 0;
                /* the budget is a share of the depth; at depth 0 there is nothing to slice */
                if (depth[di] && kv_budget && cli_budget("--kv-budget", kv_budget, depth[di], &budget)) return 1;
                if (zl_seq_set_kv_policy(seq, depth[di] ? pk : ZL_KV_POLICY_FULL, (int)budget, &err))
                    return cli_fail("%s", err.msg);
                for (int r = 0; r < reps; r++) {
                    zl_seq_truncate(seq, 0);
                    if (depth[di] && zl_seq_eval(seq, ids, (int)depth[di], 512, NULL, &err)) return cli_fail("%s", err.msg);
                    double t = zl_now_s();
                    if (!spec) {
                        for (long k = 0; k < tg[gi]; k++)
                            if (zl_seq_eval(seq, &ids[depth[di] + k], 1, 1, NULL, &err)) return cli_fail("%s", err.msg);
                    } else {
                        /* grounded: a 32-token pattern fed twice, then greedy generation with the ring */
                        int32_t pat[64];
                        for (int k = 0; k < 64; k++) pat[k] = ids[k % 32];
                        zl_spec_opts so_ = {ZL_SPEC_LOOKUP, 5, 16, NULL};
                        if (zl_seq_set_spec(seq, &so_, &err) || zl_seq_eval(seq, pat, 64, 64, NULL, &err))
                            return cli_fail("%s", err.msg);
                        t = zl_now_s();
                        long got = 0;
                        while (got < tg[gi]) {
                            int32_t o[17];
                            int k = zl_seq_step(seq, o, (int)(tg[gi] - got < 17 ? tg[gi] - got : 17), &err);
                            if (k < 0) return cli_fail("%s", err.msg);
                            got += k;
                        }
                        zl_spec_stats st;
                        zl_seq_spec_stats(seq, &st);
                        acc_sum += st.drafted ? (double)st.accepted / st.drafted : 0;
                        steps_sum += st.steps ? (double)got / st.steps : 1;
                    }
                    v[r] = tg[gi] / (zl_now_s() - t);
                }
                result *R = &res[nres++];
                *R = (result){spec ? "tg-ring" : "tg", tg[gi], th[ti], depth[di], 0, 0, acc_sum / reps, steps_sum / reps, 0};
                stats(v, (int)reps, &R->mean, &R->sd);
                zl_kv_stats ks;
                zl_seq_kv_stats(seq, &ks);
                R->kv_bytes = (double)ks.bytes_per_token * ks.cached;
                zl_seq_set_kv_policy(seq, ZL_KV_POLICY_FULL, 0, &err);
            }
        free(ids);
        zl_seq_free(seq);
        zl_llm_close(llm);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double rss_mib = ru.ru_maxrss / 1024.0;
    double ceiling = bw * 1e9 / (double)wbytes;
    if (json) {
        printf("{\"model\":\"%s\",\"weight_bytes\":%llu,\"load_ms\":%.1f,\"peak_rss_mib\":%.1f,\"bandwidth_gbs\":%.2f,"
               "\"tg_ceiling_tps\":%.2f,\"results\":[", model, (unsigned long long)wbytes, load_ms, rss_mib, bw, ceiling);
        for (int i = 0; i < nres; i++)
            printf("%s{\"test\":\"%s%ld\",\"threads\":%ld,\"depth\":%ld,\"tps_mean\":%.3f,\"tps_sd\":%.3f,"
                   "\"ring_accept\":%.3f,\"tokens_per_step\":%.3f}",
                   i ? "," : "", res[i].test, res[i].n, res[i].threads, res[i].depth, res[i].mean, res[i].sd,
                   res[i].accept, res[i].per_step);
        printf("]}\n");
        return 0;
    }
    printf("model: %s\n%s\nweights %.1f MiB, load %.1f ms, peak RSS %.1f MiB, read bandwidth %.1f GB/s -> tg ceiling %.1f tok/s\n\n",
           model, desc, wbytes / 1048576.0, load_ms, rss_mib, bw, ceiling);
    printf("| test | threads | ctx | tokens/s | %% of bandwidth ceiling |\n|---|---|---|---|---|\n");
    for (int i = 0; i < nres; i++) {
        char pct[80] = "";
        if (!strcmp(res[i].test, "tg"))
            snprintf(pct, sizeof pct, "%.0f%%; KV read %.1f MiB/token", 100 * res[i].mean / ceiling, res[i].kv_bytes / 1048576.0);
        if (!strcmp(res[i].test, "tg-ring"))
            snprintf(pct, sizeof pct, "ring: %.0f%% accepted, %.2f tok/step", 100 * res[i].accept, res[i].per_step);
        printf("| %s%ld | %ld | %ld | %.2f ± %.2f | %s |\n", res[i].test, res[i].n, res[i].threads, res[i].depth,
               res[i].mean, res[i].sd, pct);
    }
    return 0;
}
