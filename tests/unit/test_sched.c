/* test_sched.c — the engine step's error paths and controls (src/engine/sched.c).
 *  - an allocation failure injected (base/fault.h) at each of the scheduler's
 *    allocation sites ends exactly the jobs it affects with finish ERROR,
 *    "out of memory" and ZL_ENOMEM (retryable when no token was produced),
 *    the tokens delivered before it equal an undisturbed run's, and the next
 *    job on the same scheduler produces exactly the undisturbed tokens;
 *  - a stopped scheduler refuses submits with ZL_EINVAL (never queues);
 *  - zl_job_ctl.kv_window reaches the sequence's anchor policy (heavy
 *    hitters) and the job decodes as a sequence driven by hand with the same
 *    policy does;
 *  - the batch evaluator's buffers belong to their handle (a truncated view
 *    made after a batch has its own).
 * References are runs of the same model through zl_seq_* (no scheduler) or
 * through the scheduler without a fault. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "base/fault.h"
#include "engine/engine_internal.h"
#include "engine/sched.h"
#include "kv/kv.h"
#include "zerolayer.h"

#define STORIES ZL_ROOT "/tests/fixtures/models/stories260K.gguf"
#define MAXT 160

static zl_llm *g_llm;

static void setup(void) {
    zl_llm_opts lo = {.n_threads = 1};
    zl_err err = {0};
    cr_assert_eq(zl_llm_open(&g_llm, STORIES, &lo, &err), 0, "%s", err.msg);
}
static void teardown(void) {
#if ZL_FAULTS
    for (int i = 0; i < ZL_FAULT_COUNT; i++) zl_fault_arm((zl_fault_site)i, 0, 0);
#endif
    zl_llm_close(g_llm);
}

static zl_sched *sched_make(int n_parallel) {
    zl_sched_opts so = {.n_parallel = n_parallel, .max_queue = 16, .n_ctx = 256, .step_tokens = 64};
    zl_sched *s;
    zl_err err = {0};
    cr_assert_eq(zl_sched_new(&s, g_llm, &so, &err), 0, "%s", err.msg);
    return s;
}

static zl_job *job_make(const char *prompt, int max_tokens, const zl_job_ctl *ctl) {
    int32_t *ids;
    size_t n;
    zl_err err = {0};
    cr_assert_eq(zl_llm_tokenize(g_llm, prompt, strlen(prompt), 1, 0, &ids, &n, &err), 0, "%s", err.msg);
    zl_sampling sp = zl_sampling_defaults();
    sp.temp = 0;
    zl_job *j = zl_job_new(ids, (int)n, &sp, max_tokens, -1);
    free(ids);
    cr_assert_not_null(j);
    if (ctl) zl_job_set_ctl(j, ctl);
    return j;
}

typedef struct {
    int32_t tok[MAXT];
    int n;
    zl_finish fin;
    zl_job_report rep;
} run_out;

/* Wait for j (already submitted) to finish; collect its tokens and report. */
static void job_wait(zl_sched *s, zl_job *j, run_out *o) {
    o->n = 0;
    for (int spins = 0;; spins++) {
        cr_assert_lt(spins, 20000, "the job never finished");
        zl_job_tok t[32];
        zl_finish f;
        int k = zl_job_read(s, j, o->n, t, 32, &f);
        for (int i = 0; i < k; i++) {
            cr_assert_lt(o->n, MAXT);
            o->tok[o->n++] = t[i].id;
        }
        if (f) { o->fin = f; break; }
        if (!k) zl_sched_wait(s, 20);
    }
    zl_job_get_report(s, j, &o->rep);
}

static void run_one(zl_sched *s, const char *prompt, int max_tokens, const zl_job_ctl *ctl, run_out *o) {
    zl_job *j = job_make(prompt, max_tokens, ctl);
    cr_assert_eq(zl_sched_submit(s, j), 0);
    job_wait(s, j, o);
    zl_job_release(j);
}

static const char *k_prompt = "Once upon a time, there was a little girl named Lily.";

/* The first n tokens of o equal ref's. */
static void same_prefix(const run_out *o, const run_out *ref, int n) {
    cr_assert_leq(n, ref->n);
    for (int i = 0; i < n; i++) cr_assert_eq(o->tok[i], ref->tok[i], "token %d: %d, undisturbed %d", i, o->tok[i], ref->tok[i]);
}

static void expect_oom(const run_out *o, int retryable) {
    cr_assert_eq(o->fin, ZL_FINISH_ERROR, "finish %d, not ERROR", (int)o->fin);
    cr_assert_str_eq(o->rep.error, "out of memory");
    cr_assert_eq(o->rep.error_code, ZL_ENOMEM);
    cr_assert_eq(o->rep.retryable, retryable);
}

#if ZL_FAULTS
#define NEED_FAULTS() (void)0
#else
#define NEED_FAULTS() cr_skip("built without fault sites (ZL_FAULTS: a build without the test suite)")
#endif

/* The reference: the prompt alone, greedy, on a fresh scheduler. */
static void reference(int max_tokens, run_out *ref) {
    zl_sched *s = sched_make(2);
    run_one(s, k_prompt, max_tokens, NULL, ref);
    zl_sched_free(s);
    cr_assert_eq(ref->fin, ZL_FINISH_LENGTH);
    cr_assert_eq(ref->n, max_tokens);
}

#if ZL_FAULTS
/* Arm site (skip passes succeed, the next fails), run the prompt: it must end
 * with ENOMEM after delivering `delivered` tokens, those of the undisturbed
 * run; then the next job on the same scheduler must decode that run exactly. */
static void fault_then_recover(zl_fault_site site, int skip, int max_tokens, int delivered, int retryable) {
    run_out ref, o;
    reference(max_tokens, &ref);
    zl_sched *s = sched_make(2);
    zl_fault_arm(site, skip, 1);
    run_one(s, k_prompt, max_tokens, NULL, &o);
    cr_assert_eq(zl_fault_fired(site), 1);
    expect_oom(&o, retryable);
    cr_assert_eq(o.n, delivered);
    same_prefix(&o, &ref, delivered);
    if (!delivered) cr_assert_eq(o.rep.t_first, 0);
    run_one(s, k_prompt, max_tokens, NULL, &o);
    cr_assert_eq(o.fin, ZL_FINISH_LENGTH, "the next job: finish %d (%s)", (int)o.fin, o.rep.error);
    cr_assert_eq(o.n, max_tokens);
    same_prefix(&o, &ref, max_tokens);
    zl_sched_free(s);
}
#define FAULT_THEN_RECOVER(...) fault_then_recover(__VA_ARGS__)
#else
#define FAULT_THEN_RECOVER(...) (void)0
#endif

/* nothing produced: the request may be retried */
Test(sched_fault, first_push_fails_the_job_then_the_next_succeeds, .init = setup, .fini = teardown) {
    NEED_FAULTS();
    FAULT_THEN_RECOVER(ZL_FAULT_JOB_PUSH, 0, 40, 0, 1);
}

/* the array's first growth succeeds (64 tokens), the second fails; tokens
 * were streamed: not retryable */
Test(sched_fault, push_failing_mid_stream_keeps_what_was_sent, .init = setup, .fini = teardown) {
    NEED_FAULTS();
    FAULT_THEN_RECOVER(ZL_FAULT_JOB_PUSH, 1, 100, 64, 0);
}

Test(sched_fault, sequence_allocation_fails_before_start, .init = setup, .fini = teardown) {
    NEED_FAULTS();
    FAULT_THEN_RECOVER(ZL_FAULT_SEQ_NEW, 0, 24, 0, 1);
}

/* A batch whose evaluator cannot allocate fails the jobs in it, and only
 * them: the jobs that were not in that batch, and every job after it,
 * produce the undisturbed tokens.  One scheduler step in the middle of the
 * run fails (the fault skips the first passes). */
Test(sched_fault, batch_allocation_fails_the_jobs_of_that_batch, .init = setup, .fini = teardown) {
    NEED_FAULTS();
#if ZL_FAULTS
    enum { N = 3, T = 30 };
    run_out ref, o[N];
    reference(T, &ref);
    zl_sched *s = sched_make(N);
    zl_fault_arm(ZL_FAULT_BATCH_BUF, 12, 1);
    zl_job *jobs[N];
    for (int i = 0; i < N; i++) {
        jobs[i] = job_make(k_prompt, T, NULL);
        cr_assert_eq(zl_sched_submit(s, jobs[i]), 0);
    }
    int failed = 0;
    for (int i = 0; i < N; i++) {
        job_wait(s, jobs[i], &o[i]);
        zl_job_release(jobs[i]);
        if (o[i].fin == ZL_FINISH_ERROR) {
            expect_oom(&o[i], o[i].n == 0);
            same_prefix(&o[i], &ref, o[i].n);
            failed++;
        } else {
            cr_assert_eq(o[i].fin, ZL_FINISH_LENGTH);
            same_prefix(&o[i], &ref, T);
        }
    }
    cr_assert_eq(zl_fault_fired(ZL_FAULT_BATCH_BUF), 1);
    cr_assert_geq(failed, 1, "the failed batch ended no job");
    run_out next;
    run_one(s, k_prompt, T, NULL, &next);
    cr_assert_eq(next.fin, ZL_FINISH_LENGTH, "%s", next.rep.error);
    same_prefix(&next, &ref, T);
    zl_sched_free(s);
#endif
}

Test(sched, submit_after_stop_is_refused, .init = setup, .fini = teardown) {
    zl_sched *s = sched_make(1);
    zl_sched_stop(s);
    zl_job *j = job_make(k_prompt, 4, NULL);
    cr_assert_eq(zl_sched_submit(s, j), ZL_EINVAL);
    zl_job_release(j);
    zl_sched_free(s);
}

static int g_window_seen = -1;
static void window_release(void *ud, zl_seq *seq, zl_finish why) {
    (void)ud;
    (void)why;
    g_window_seen = seq->kv->policy.window;
    zl_seq_free(seq);
}

/* kv_window reaches the KV policy: the job's sequence runs the anchor policy
 * with that recent window (heavy hitters fill the rest of the budget), evicts,
 * and decodes the tokens a hand-driven sequence with that policy decodes. */
Test(sched, kv_window_control_reaches_the_policy, .init = setup, .fini = teardown) {
    enum { BUDGET = 96, WINDOW = 40, T = 120 };
    zl_err err = {0};
    int32_t *ids;
    size_t n;
    cr_assert_eq(zl_llm_tokenize(g_llm, k_prompt, strlen(k_prompt), 1, 0, &ids, &n, &err), 0);
    /* reference: by hand */
    zl_seq_opts so = {.n_ctx = 256, .kv_type = ZL_KV_F16, .sampling = zl_sampling_defaults()};
    so.sampling.temp = 0;
    zl_seq *q;
    cr_assert_eq(zl_seq_new(&q, g_llm, &so, &err), 0, "%s", err.msg);
    cr_assert_eq(zl_seq_set_kv_slicing(q, ZL_KV_POLICY_ANCHOR, BUDGET, WINDOW, &err), 0, "%s", err.msg);
    cr_assert_eq(zl_seq_eval(q, ids, (int)n, 0, NULL, &err), 0, "%s", err.msg);
    int32_t want[T];
    for (int i = 0; i < T; i++) {
        want[i] = zl_seq_sample(q);
        if (i + 1 < T) cr_assert_eq(zl_seq_eval(q, &want[i], 1, 1, NULL, &err), 0, "%s", err.msg);
    }
    zl_kv_stats ks;
    zl_seq_kv_stats(q, &ks);
    cr_assert_gt(ks.evicted, 0, "the reference never evicted: the test does not reach the policy");
    zl_seq_free(q);
    free(ids);
    /* the same through the scheduler's controls */
    zl_sched *s = sched_make(1);
    zl_job_ctl c = {.kv_policy = ZL_KV_POLICY_ANCHOR, .kv_budget = BUDGET, .kv_window = WINDOW};
    zl_job *j = job_make(k_prompt, T, &c);
    zl_job_hooks hk = {NULL, window_release, NULL, NULL};
    zl_job_set_hooks(j, &hk);
    cr_assert_eq(zl_sched_submit(s, j), 0);
    run_out o;
    job_wait(s, j, &o);
    zl_job_release(j);
    zl_sched_free(s); /* the release hook has run */
    cr_assert_eq(o.fin, ZL_FINISH_LENGTH, "%s", o.rep.error);
    cr_assert_eq(o.n, T);
    cr_assert_eq(g_window_seen, WINDOW);
    cr_assert_gt(o.rep.kv_evicted, 0);
    for (int i = 0; i < T; i++) cr_assert_eq(o.tok[i], want[i], "token %d: %d, by hand %d", i, o.tok[i], want[i]);
}

/* A window without the anchor policy is refused when the job starts. */
Test(sched, kv_window_needs_the_anchor_policy, .init = setup, .fini = teardown) {
    zl_sched *s = sched_make(1);
    zl_job_ctl c = {.kv_policy = ZL_KV_POLICY_WINDOW, .kv_budget = 96, .kv_window = 40};
    run_out o;
    run_one(s, k_prompt, 8, &c, &o);
    cr_assert_eq(o.fin, ZL_FINISH_ERROR);
    cr_assert(strstr(o.rep.error, "anchor policy"), "%s", o.rep.error);
    cr_assert_eq(o.rep.retryable, 0);
    zl_sched_free(s);
}

/* The batch evaluator's buffers belong to the handle that grew them: a
 * truncated view made after zl_llm_eval_batch ran has its own (closing both
 * frees each once; a shared buffer would be freed twice). */
Test(batch, truncated_view_owns_its_buffers, .init = setup, .fini = teardown) {
    zl_err err = {0};
    zl_seq *a, *b;
    cr_assert_eq(zl_seq_new(&a, g_llm, NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(zl_seq_new(&b, g_llm, NULL, &err), 0, "%s", err.msg);
    int32_t ids[] = {1, 400, 401};
    zl_batch_item it[2] = {{a, ids, 3}, {b, ids, 2}};
    cr_assert_eq(zl_llm_eval_batch(g_llm, it, 2, &err), 0, "%s", err.msg);
    zl_llm *view;
    cr_assert_eq(zl_llm_open_truncated(&view, g_llm, 2, &err), 0, "%s", err.msg);
    zl_seq *c;
    cr_assert_eq(zl_seq_new(&c, view, NULL, &err), 0, "%s", err.msg);
    zl_batch_item one = {c, ids, 3};
    cr_assert_eq(zl_llm_eval_batch(view, &one, 1, &err), 0, "%s", err.msg);
    zl_seq_free(c);
    zl_llm_close(view);
    /* the target's buffers still work after the view is gone */
    zl_batch_item again[2] = {{a, ids, 1}, {b, ids, 1}};
    cr_assert_eq(zl_llm_eval_batch(g_llm, again, 2, &err), 0, "%s", err.msg);
    cr_assert_eq(zl_seq_n_past(a), 4);
    zl_seq_free(a);
    zl_seq_free(b);
}
