/* sched.h — the engine thread: continuous batching over many sequences.
 *
 * One scheduler owns one zl_llm and one thread that runs every forward pass.
 * Callers (the HTTP server, a bench) create a zl_job with the prompt tokens
 * and sampling options, submit it, and read the generated tokens back as
 * they appear.  Each engine step admits waiting jobs up to n_parallel
 * running sequences, then runs ONE zl_llm_eval_batch holding one decode token
 * for every generating sequence plus prompt chunks of the sequences still
 * prefilling (bounded by step_tokens, so a long prompt never stalls the
 * streams that are already running), then samples one token for every
 * sequence whose prompt is complete.
 *
 * Cancellation: zl_job_cancel sets a flag the engine reads at the start of
 * each step; the sequence is freed (its KV zeroed) in that step.
 * Knows sequences and tokens; never JSON, HTTP or text. */
#ifndef ZL_SCHED_H
#define ZL_SCHED_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "zerolayer.h"

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

typedef struct zl_sched_opts {
    int n_parallel;   /* running sequences at most (>= 1) */
    int max_queue;    /* waiting jobs at most; submit fails beyond */
    int n_ctx;        /* context of each sequence */
    int step_tokens;  /* tokens per batched forward at most (decode + prefill) */
    int debug_step_ms;/* sleep this long after each step (tests only) */
    /* Called by the engine thread after every forward (for metrics). */
    void (*on_step)(void *ud, int n_seqs, int n_tokens, double ms);
    void *on_step_ud;
} zl_sched_opts;

typedef struct zl_sched_stats {
    int running, waiting, n_parallel, n_ctx;
    long long kv_used, kv_capacity; /* positions held / n_parallel * n_ctx */
    long long steps;
} zl_sched_stats;

double zl_now_ms(void);

int zl_sched_new(zl_sched **out, zl_llm *llm, const zl_sched_opts *opts, zl_err *err);
/* Stop the engine thread: jobs still queued or running finish as CANCEL and
 * later submits fail; reading jobs keeps working until zl_sched_free. */
void zl_sched_stop(zl_sched *s);
void zl_sched_free(zl_sched *s);
void zl_sched_get_stats(zl_sched *s, zl_sched_stats *st);
zl_llm *zl_sched_llm(zl_sched *s);
int zl_sched_n_ctx(const zl_sched *s);

/* A job takes a copy of the prompt.  max_tokens <= 0 means "until the
 * context is full".  n_top_logprobs < 0: no logprobs; 0: only the chosen
 * token's; k: also the top k (at most ZL_JOB_MAX_TOP). */
zl_job *zl_job_new(const int32_t *prompt, int n_prompt, const zl_sampling *sampling, int max_tokens,
                   int n_top_logprobs);
/* Where a job's sequence comes from and goes to (sessions, prefix cache;
 * see session.h).  All three run on the engine thread.  acquire hands over a
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
/* Release the caller's reference (cancels the job if it is still going). */
void zl_job_release(zl_job *j);
/* Returns 0, or ZL_ERANGE when the queue is full (the job is not taken). */
int zl_sched_submit(zl_sched *s, zl_job *j);
void zl_job_cancel(zl_job *j);

/* Wait until some job made progress (any job: the signal is shared) or
 * timeout_ms passed.  Then read jobs with zl_job_read under no lock. */
void zl_sched_wait(zl_sched *s, int timeout_ms);

/* Snapshot of a job's progress: copies tokens [from, n) into *dst (up to
 * cap) and returns how many were copied; *finished gets the finish reason
 * (ZL_FINISH_NONE while running) once every token has been read. */
int zl_job_read(zl_sched *s, zl_job *j, int from, zl_job_tok *dst, int cap, zl_finish *finished);

typedef struct zl_job_times {
    double t_submit, t_admit, t_first, t_done; /* ms on the zl_now_ms clock; 0 if not reached */
    double kv_ms, sample_ms;                   /* sequence setup, sampling */
    int n_prompt, n_cached, n_generated;
    char error[256];
} zl_job_times;
void zl_job_get_times(zl_sched *s, zl_job *j, zl_job_times *t);

#endif
