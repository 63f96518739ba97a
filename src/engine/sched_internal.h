/* sched_internal.h — what the engine thread's two files share: the job and
 * scheduler structs, the buffers of one step, and the two calls between them.
 * sched.c owns the job's life (submit, admission, start, retire, the queue and
 * the thread); step.c owns one step over the running jobs (plan -> forward ->
 * sample -> commit).  Engine-private: nothing outside engine/sched.c and
 * engine/step.c includes this. */
#ifndef ZL_SCHED_INTERNAL_H
#define ZL_SCHED_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "sched.h"
#include "batch.h"
#include "spec.h"

#define ZL_JOB_RING_OUT (ZL_RING_MAX + 1) /* tokens one ring step may emit: the accepted drafts + the next */

struct zl_job {
    /* input, immutable after submit */
    int32_t *prompt;
    int n_prompt, max_tokens, n_top;
    zl_sampling sampling; /* its logit_bias points at bias */
    zl_logit_bias *bias;
    /* output, under sched->mu */
    zl_job_tok *toks;
    int n_toks, cap_toks;
    zl_finish finish;
    zl_job_report report;
    /* control */
    atomic_int cancel;
    atomic_int refs;
    /* engine-private */
    zl_seq *seq;
    int n_fed;        /* prompt tokens already evaluated */
    int32_t pending;  /* sampled token to feed next step, -1 if none */
    zl_job_hooks hooks;
    int prefill_only;
    /* ring / KV controls (input) and their engine-side state */
    zl_job_ctl ctl;
    int has_ctl;
    uint8_t *anchors; /* n_prompt bytes or NULL */
    int ring_on;      /* its decode item carries pending + drafts (verified in the batched forward) */
    zl_verify ver;    /* this step's ring item (ids = pending + drafts) */
    double draft_ms;  /* time this step's drafting took */
    int bounded;      /* a bounded KV policy: no context limit */
    /* the sequence's cumulative counters as last read, and what they grew by since the last job_flush */
    unsigned long long seen_drafted, seen_accepted, seen_evicted;
    unsigned long long unflushed_evicted, unflushed_drafted, unflushed_accepted;
    double kv_read, unflushed_sample_ms;
    int kv_steps, anchors_now, ring_steps;
    zl_sampler_constraint con; /* con.mask NULL: unconstrained */
    void (*con_free)(void *);
    zl_job *next;     /* queue / running list link */
};

/* A caller's work on the engine thread (zl_sched_run), FIFO. */
typedef struct zl_task {
    int (*step)(void *ud);
    void *ud;
    int result, done;
    struct zl_task *next;
} zl_task;

/* How a running job takes part in one engine step. */
typedef enum {
    WORK_DECODE, /* its pending token, in the batch */
    WORK_RING,   /* its pending token + drafts, in the batch, verified after it */
    WORK_PROMPT, /* a prompt chunk, in the batch */
    WORK_SOLO,   /* a prompt chunk on a forward of its own (anchors or a bounded KV policy) */
} work_kind;

/* One job's part in one step: filled by the plan, then by each stage in turn. */
typedef struct step_work {
    zl_job *job;
    work_kind kind;
    int n;               /* tokens fed this step */
    int item;            /* its index in the batch, -1 for WORK_SOLO */
    int rc;              /* forward: 0 = fed, else the error that ends the job */
    const char *msg;     /* forward or sample: the error's message (the batch's, err's, the constraint's) */
    zl_err err;          /* forward: a solo forward's error */
    int n_out, n_acc;    /* sample: tokens chosen; ring: the accepted drafts among them */
    int par;             /* sample: its token is chosen on the pool, beside the other unconstrained ones */
    zl_job_tok tok;      /* sample: the plain token (with its logprobs) */
    int32_t ring[ZL_JOB_RING_OUT]; /* sample: a ring step's accepted drafts, then the next token */
    int trim;            /* commit: tokens the sequence keeps after finishing inside a ring step, 0 = all */
} step_work;

/* The buffers of one engine step, allocated by zl_sched_new for n_parallel
 * jobs and step_tokens tokens; only the batch's logit rows grow, when a step
 * carries more verify rows than any before. */
typedef struct sched_step_buf {
    step_work *work; /* n_parallel */
    int n_work;
    zl_batch_item *items; /* n_parallel */
    zl_verify **vers;     /* n_parallel */
    int n_items, n_decode, n_ring;
    zl_batch_buf batch;
    zl_err err;         /* the batch forward's error */
    double batch_ms;    /* the batch forward's wall time */
    double solo_ms;     /* the solo forwards' wall time */
    double sample_ms;   /* the sample stage's wall time (its draws run on several threads) */
    zl_job **admitted, **dead; /* n_parallel: jobs admitted / reaped this iteration */
} sched_step_buf;

struct zl_sched {
    zl_llm *llm;
    zl_sched_opts o;
    int test_step_ms; /* sleep after each step that ran (sched_test.h; 0 outside tests) */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, out_cv;
    int stop;
    zl_job *q_head, *q_tail;
    int n_waiting;
    zl_job **running; /* n_parallel slots, NULL = free */
    int n_running;
    long long steps;
    unsigned long long progress; /* bumped with every broadcast of out_cv (zl_sched_wait_since) */
    double busy_ms, forward_ms, sample_ms; /* engine time: working, in forward passes, sampling */
    long long kv_used;
    unsigned long long ring_drafted, ring_accepted, kv_evicted;
    long long kv_anchor_tokens;
    zl_task *t_head, *t_tail; /* zl_sched_run work, under mu */
    sched_step_buf st;        /* engine thread only */
};

/* Whether j is in a state to take part in a step. */
static inline int zl_job_live(const zl_job *j) { return j && !j->finish && j->seq; }

/* sched.c, under s->mu: j ends with why (the first reason stands) / with an
 * error (code: a zl_err code; msg: one line). */
void zl_sched_job_finish(zl_sched *s, zl_job *j, zl_finish why);
void zl_sched_job_fail(zl_sched *s, zl_job *j, int code, const char *msg);

/* step.c: one engine step over the running jobs (plan -> forward -> sample ->
 * commit; takes s->mu for the commit only).  Returns how many jobs took part
 * (0: nothing to do).  Engine thread. */
int zl_sched_step(zl_sched *s);
/* step.c: the step buffers for n_parallel jobs and step_tokens tokens
 * (0 or ZL_ENOMEM; free after a failure too). */
int zl_sched_buf_new(sched_step_buf *st, int n_parallel, int step_tokens, int n_vocab);
void zl_sched_buf_free(sched_step_buf *st);

#endif
