/* zerolayer_sched.h — the engine thread: continuous batching over many
 * sequences.  Public, beside zerolayer.h: the server, the CLI's bench and
 * the benches drive the engine through this and nothing else of it.
 *
 * One scheduler owns one zl_llm and one thread that runs every forward pass.
 * Callers (the HTTP server, a bench) create a zl_job with the prompt tokens
 * and sampling options, submit it, and read the generated tokens back as
 * they appear.  Each engine step admits waiting jobs up to n_parallel
 * running sequences and then runs four stages (engine/step.c):
 *   plan     which jobs take part and with how many tokens: one decode token
 *            for every generating sequence (plus up to `ring` drafted tokens
 *            when the verification ring is on, zl_seq_set_spec), then prompt
 *            chunks of the sequences still prefilling, bounded by step_tokens
 *            so a long prompt never stalls the streams already running;
 *   forward  ONE batched forward over all of them (engine/batch.h; anchored or
 *            bounded prompt chunks on forwards of their own);
 *   sample   the next token of every sequence whose prompt is complete, or
 *            the verification of its drafts;
 *   commit   under the lock: publish the tokens, finish jobs, record errors.
 * Every buffer of a step is allocated when the scheduler is created.
 *
 * Cancellation: zl_job_cancel sets a flag the engine reads at the start of
 * each step; the sequence is freed (its KV zeroed) in that step.
 * Knows sequences and tokens; never JSON, HTTP or text. */
#ifndef ZEROLAYER_SCHED_H
#define ZEROLAYER_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "zerolayer.h"

#ifdef __cplusplus
extern "C" {
#ifdef __cplusplus
}
#endif

#endif

#define ZL_JOB_MAX_TOP 20

typedef enum {
    ZL_FINISH_NONE = 0,
    ZL_FINISH_EOG,    /* the model ended its turn */
    ZL_FINISH_LENGTH, /* max_tokens reached */
    ZL_FINISH_CTX,    /* the context is full */
    ZL_FINISH_CANCEL, /* the caller cancelled (stop sequence, disconnect) */
    ZL_FINISH_ERROR,
} zl_finish;

/* One generated token, with its log-probability under the raw model
 * distribution and the n_top most likely alternatives. */
typedef struct zl_job_tok {
    int32_t id;
    float logprob;
    double t_ms; /* when it was sampled (zl_now_ms clock) */
    int n_top;
    int32_t top_id[ZL_JOB_MAX_TOP];
    float top_lp[ZL_JOB_MAX_TOP];
} zl_job_tok;

typedef struct zl_job zl_job;
typedef struct zl_sched zl_sched;

/* Per-job decoding controls: the verification ring (lossless speculative
 * decoding, zl_seq_set_spec) and KV slicing (zl_seq_set_kv_policy).  The
 * all-zero value is today's behaviour: ring off, full KV. */
typedef struct zl_job_ctl {
    zl_spec_mode spec;           /* ZL_SPEC_OFF, or ring on: drafted by the scheduler's draft model if it
                                  * has one (zl_sched_opts.draft), else by n-gram lookup */
    int ring;                    /* initial drafted tokens per step, 1..16 (0: 5); adaptive up to 16 */
    zl_kv_policy_kind kv_policy; /* full | window | anchor */
    int kv_budget;               /* tokens kept under a bounded policy (0: kv_frac of n_ctx, or n_ctx) */
    float kv_frac;               /* budget as a fraction of n_ctx when kv_budget is 0 (0: whole context) */
    int kv_window;               /* anchor policy: recent tokens kept per layer, the rest of the budget going
                                  * to heavy hitters (attention-scored); 0: the whole budget is recent */
} zl_job_ctl;
/* Smallest budget a bounded policy accepts: 4 sinks + 2 x 32 recent tokens. */
#define ZL_KV_BUDGET_MIN 68
/* The budget in tokens that ctl gives a sequence of n_ctx (0 under full); a
 * fraction is clamped up to ZL_KV_BUDGET_MIN, a token count is not. */
int zl_job_ctl_budget(const zl_job_ctl *c, int n_ctx);
/* Compute presets (whole controls):
 *   exact       full KV, ring off
 *   balanced    full KV + lookup ring (ring 5)
 *   aggressive  anchor policy at 25% of the context + lookup ring (ring 5)
 * Returns 0, or ZL_EINVAL for an unknown name. */
int zl_job_ctl_preset(const char *name, zl_job_ctl *out);

typedef struct zl_sched_opts {
    int n_parallel;   /* running sequences at most (>= 1) */
    int max_queue;    /* waiting jobs at most; submit fails beyond */
    int n_ctx;        /* context of each sequence */
    int step_tokens;  /* tokens per batched forward at most (decode + prefill) */
    zl_job_ctl ctl;   /* controls of jobs that do not set their own (server defaults) */
    zl_llm *draft;    /* draft model for ring jobs (NULL: n-gram lookup); vocabulary equal to llm's,
                       * outlives the scheduler */
    const float *ring_cost; /* verify-cost curve for ring jobs (zl_seq_set_ring_cost; NULL: none): */
    int n_ring_cost;        /* ring_cost[i] = forward over i + 1 tokens / over one; outlives the scheduler */
    /* Called by the engine thread after every forward (for metrics). */
    void (*on_step)(void *ud, int n_seqs, int n_tokens, double ms);
    void *on_step_ud;
} zl_sched_opts;

typedef struct zl_sched_stats {
    int running, waiting, n_parallel, n_ctx;
    long long kv_used, kv_capacity; /* positions held / n_parallel * n_ctx */
    long long steps;
    /* verification ring and KV slicing, summed over every job so far */
    unsigned long long ring_drafted, ring_accepted, kv_evicted;
    long long kv_anchor_tokens; /* anchored tokens held by running sequences now */
    /* engine-thread time so far (seconds): working (admission, forwards, sampling, bookkeeping; a
     * test hook's sleep, engine/sched_test.h, included), inside forward passes, choosing tokens (sampling, ring verification) */
    double busy_s, forward_s, sample_s;
} zl_sched_stats;

/* The scheduler's timeline (t_ms, t_submit, ...) is the monotonic clock in ms. */

int zl_sched_new(zl_sched **out, zl_llm *llm, const zl_sched_opts *opts, zl_err *err);
/* Stop the engine thread: jobs still queued or running finish as CANCEL and
 * later submits fail; reading jobs keeps working until zl_sched_free. */
void zl_sched_stop(zl_sched *s);
void zl_sched_free(zl_sched *s);
void zl_sched_get_stats(zl_sched *s, zl_sched_stats *st);
zl_llm *zl_sched_llm(zl_sched *s);
int zl_sched_n_ctx(const zl_sched *s);

/* Work that must run on the engine thread, between its batched steps: a
 * forward pass on the scheduler's model outside the batch (embeddings).
 * step(ud) runs once per engine step, interleaved with the generating
 * sequences, until it returns non-zero (> 0 done, < 0 an error of the
 * caller's choosing); zl_sched_run blocks until then and returns that value,
 * or ZL_SCHED_STOPPED when the scheduler stops first.  Tasks of concurrent
 * callers run one after the other. */
#define ZL_SCHED_STOPPED (-1000)
int zl_sched_run(zl_sched *s, int (*step)(void *ud), void *ud);

/* A job takes a copy of the prompt and of the sampling's logit_bias array.  max_tokens <= 0 means "until the
 * context is full".  n_top_logprobs < 0: no logprobs; 0: only the chosen
 * token's; k: also the top k (at most ZL_JOB_MAX_TOP). */
zl_job *zl_job_new(const int32_t *prompt, int n_prompt, const zl_sampling *sampling, int max_tokens,
                   int n_top_logprobs);
/* Where a job's sequence comes from and goes to (sessions, prefix cache;
 * the server's session leases).  All three run on the engine thread.  acquire hands over a
 * sequence whose first *n_reused tokens (< n_prompt) equal the prompt's, so
 * only the rest is evaluated; it returns 0, or an error code with a message
 * in err.  release takes ownership of the sequence when the job ends.
 * ud_free(ud) runs when the job is freed. */
typedef struct zl_job_hooks {
    int (*acquire)(void *ud, zl_llm *llm, const zl_seq_opts *so, const int32_t *prompt, int n_prompt, zl_seq **seq,
                   int *n_reused, char *err, size_t err_cap);
    void (*release)(void *ud, zl_seq *seq, zl_finish why);
    void (*ud_free)(void *ud);
    void *ud;
} zl_job_hooks;
/* Before submit.  The job takes ownership of h->ud. */
void zl_job_set_hooks(zl_job *j, const zl_job_hooks *h);
/* Before submit: evaluate the prompt and finish (LENGTH) without sampling
 * (typing-ahead prefill). */
void zl_job_set_prefill_only(zl_job *j);
/* Before submit: this job's ring / KV controls (else the scheduler's).  The
 * ring is not used when the job asks for logprobs (n_top_logprobs >= 0): a
 * verify step has no per-token distribution to report.  Under a bounded KV
 * policy the prompt may exceed the context and max_tokens <= 0 means n_ctx
 * tokens (a bounded sequence never fills up). */
void zl_job_set_ctl(zl_job *j, const zl_job_ctl *c);
/* Before submit: per prompt token, 1 = an anchor that is never evicted
 * (n_prompt bytes, copied).  Anchored prompts skip prefix reuse.  Returns 0
 * or ZL_ENOMEM. */
int zl_job_set_anchors(zl_job *j, const uint8_t *mask);
const zl_job_ctl *zl_sched_ctl(const zl_sched *s);
/* Release the caller's reference (cancels the job if it is still going). */
void zl_job_release(zl_job *j);
/* Returns 0; ZL_ERANGE when the queue is full (the job is not taken: retry
 * later); ZL_EINVAL once the scheduler is stopping or stopped (no job will
 * run again).  A submitted job always finishes: the engine thread never
 * exits before zl_sched_stop, and a failure ends only the jobs it affects
 * (finish ERROR, zl_job_report.error). */
int zl_sched_submit(zl_sched *s, zl_job *j);
void zl_job_cancel(zl_job *j);

/* Wait until some job made progress (any job: the signal is shared) or
 * timeout_ms passed.  Then read jobs with zl_job_read under no lock. */
void zl_sched_wait(zl_sched *s, int timeout_ms);
/* The same without a lost wake-up: take the progress counter BEFORE reading
 * the jobs; zl_sched_wait_since returns at once if the engine made progress
 * since (the counter moved), else at the next progress or after timeout_ms. */
unsigned long long zl_sched_progress(zl_sched *s);
void zl_sched_wait_since(zl_sched *s, unsigned long long seen, int timeout_ms);

/* Snapshot of a job's progress: copies tokens [from, n) into *dst (up to
 * cap) and returns how many were copied; *finished gets the finish reason
 * (ZL_FINISH_NONE while running) once every token has been read. */
int zl_job_read(zl_sched *s, zl_job *j, int from, zl_job_tok *dst, int cap, zl_finish *finished);

/* What a job did: its timeline, the counters of its decoding, and how it
 * failed (finish ERROR).  A snapshot, taken under the scheduler's lock. */
typedef struct zl_job_report {
    double t_submit, t_admit, t_first, t_done; /* ms on the zl_now_ms clock; 0 if not reached */
    double kv_ms, sample_ms;                   /* sequence setup, sampling */
    int n_prompt, n_cached, n_generated;
    /* verification ring (ring_on: the job decoded with it) and KV slicing */
    int ring_on, kv_policy, kv_budget, kv_anchors;
    unsigned long long ring_steps, ring_drafted, ring_accepted, kv_evicted;
    double kv_read_bytes; /* summed over decode forwards: cached tokens x K+V bytes per token */
    int kv_read_steps;
    /* finish ERROR: the zl_err code and its one-line message.  retryable: the
     * failure was transient (out of memory) and the job produced no token, so
     * the same request may succeed later (HTTP 503 + Retry-After); any other
     * failure is the server's (500) */
    int error_code, retryable;
    char error[256];
} zl_job_report;
void zl_job_get_report(zl_sched *s, zl_job *j, zl_job_report *r);

#ifdef __cplusplus
}
#endif

#endif
