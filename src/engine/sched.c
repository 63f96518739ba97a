/* sched.c — the engine thread (see sched.h).
 *
 * Locking: one mutex guards the queue, the running list and every job's
 * output; the forward pass and sampling run without it, on data only the
 * engine thread touches (the zl_seq of each running job).  Consumers sleep on
 * one shared condition variable that is broadcast after each step: with tens
 * of streams that is cheaper and simpler than a condition per job.
 *
 * A job is reference counted: the creator holds one reference, the scheduler
 * one from submit until the job finishes.  Whoever drops the last frees it.
 *
 * A job's states only move forward, and ZL_ASSERT checks each transition:
 * queued (in the queue, finish NONE) -> running (in a slot, finish NONE;
 * n_fed rises to n_prompt, then tokens are pushed) -> finished (finish set
 * once, still in its slot; nothing more is pushed) -> reaped (out of the
 * slot, its sequence released).  After every commit, in checked builds,
 * sched_check_invariants verifies the counters, sequence and token
 * ownership and the KV bounds.
 *
 * Errors: every failure ends exactly the jobs it affects with finish ERROR
 * and a message (a job that cannot start, the jobs of a batch whose forward
 * failed, a job whose output cannot grow); the engine thread itself holds
 * only buffers made by zl_sched_new and never exits before zl_sched_stop. */
#include "sched.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../base/assert.h"
#include "../base/err.h"
#include "../base/fault.h"
#include "batch.h"
#include "engine_internal.h"
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
    const char *msg;     /* forward: the error's message (the batch's or err's) */
    zl_err err;          /* forward: a solo forward's error */
    int n_out, n_acc;    /* sample: tokens chosen; ring: the accepted drafts among them */
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
    zl_job **admitted, **dead; /* n_parallel: jobs admitted / reaped this iteration */
} sched_step_buf;

struct zl_sched {
    zl_llm *llm;
    zl_sched_opts o;
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

zl_job *zl_job_new(const int32_t *prompt, int n_prompt, const zl_sampling *sampling, int max_tokens,
                   int n_top_logprobs) {
    zl_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->prompt = malloc((size_t)(n_prompt > 0 ? n_prompt : 1) * sizeof *j->prompt);
    if (!j->prompt) { free(j); return NULL; }
    if (n_prompt > 0) memcpy(j->prompt, prompt, (size_t)n_prompt * sizeof *prompt);
    j->n_prompt = n_prompt;
    j->sampling = *sampling;
    j->sampling.logit_bias = NULL;
    j->sampling.n_logit_bias = 0;
    if (sampling->logit_bias && sampling->n_logit_bias > 0) {
        if (!(j->bias = malloc((size_t)sampling->n_logit_bias * sizeof *j->bias))) {
            free(j->prompt);
            free(j);
            return NULL;
        }
        memcpy(j->bias, sampling->logit_bias, (size_t)sampling->n_logit_bias * sizeof *j->bias);
        j->sampling.logit_bias = j->bias;
        j->sampling.n_logit_bias = sampling->n_logit_bias;
    }
    j->max_tokens = max_tokens;
    j->n_top = n_top_logprobs > ZL_JOB_MAX_TOP ? ZL_JOB_MAX_TOP : n_top_logprobs;
    j->pending = -1;
    j->report.n_prompt = n_prompt;
    atomic_init(&j->cancel, 0);
    atomic_init(&j->refs, 1);
    return j;
}

static void job_unref(zl_job *j) {
    if (atomic_fetch_sub(&j->refs, 1) != 1) return;
    zl_seq_free(j->seq);
    if (j->hooks.ud_free) j->hooks.ud_free(j->hooks.ud);
    if (j->con_free) j->con_free(j->con.ud);
    free(j->anchors);
    free(j->bias);
    free(j->prompt);
    free(j->toks);
    free(j);
}

void zl_job_set_hooks(zl_job *j, const zl_job_hooks *h) { j->hooks = *h; }
void zl_job_set_prefill_only(zl_job *j) { j->prefill_only = 1; }

void zl_job_set_ctl(zl_job *j, const zl_job_ctl *c) {
    j->ctl = *c;
    j->has_ctl = 1;
}

int zl_job_set_anchors(zl_job *j, const uint8_t *mask) {
    free(j->anchors);
    j->anchors = NULL;
    if (!mask || j->n_prompt <= 0) return 0;
    if (!(j->anchors = malloc((size_t)j->n_prompt))) return ZL_ENOMEM;
    memcpy(j->anchors, mask, (size_t)j->n_prompt);
    return 0;
}

int zl_job_ctl_budget(const zl_job_ctl *c, int n_ctx) {
    if (c->kv_policy == ZL_KV_POLICY_FULL) return 0;
    long b = c->kv_budget > 0 ? c->kv_budget : c->kv_frac > 0 ? (long)((double)c->kv_frac * n_ctx) : n_ctx;
    if (c->kv_budget <= 0 && b < ZL_KV_BUDGET_MIN) b = ZL_KV_BUDGET_MIN; /* a fraction is clamped up to the minimum */
    return b > n_ctx ? n_ctx : (int)b;
}

void zl_job_set_constraint(zl_job *j, const zl_sampler_constraint *c, void (*free_ud)(void *)) {
    if (j->con_free) j->con_free(j->con.ud);
    j->con = *c;
    j->con_free = free_ud;
}

const zl_job_ctl *zl_sched_ctl(const zl_sched *s) { return &s->o.ctl; }

int zl_job_ctl_preset(const char *name, zl_job_ctl *out) {
    zl_job_ctl c = {0};
    if (!name) return ZL_EINVAL;
    if (!strcmp(name, "exact")) {
    } else if (!strcmp(name, "balanced")) {
        c.spec = ZL_SPEC_LOOKUP;
        c.ring = 5;
    } else if (!strcmp(name, "aggressive")) {
        c.spec = ZL_SPEC_LOOKUP;
        c.ring = 5;
        c.kv_policy = ZL_KV_POLICY_ANCHOR;
        c.kv_frac = 0.25f;
    } else {
        return ZL_EINVAL;
    }
    *out = c;
    return 0;
}

void zl_job_cancel(zl_job *j) { atomic_store(&j->cancel, 1); }

void zl_job_release(zl_job *j) {
    if (!j) return;
    zl_job_cancel(j);
    job_unref(j);
}

int zl_sched_submit(zl_sched *s, zl_job *j) {
    pthread_mutex_lock(&s->mu);
    if (s->stop || s->n_waiting >= s->o.max_queue) {
        int rc = s->stop ? ZL_EINVAL : ZL_ERANGE;
        pthread_mutex_unlock(&s->mu);
        return rc;
    }
    atomic_fetch_add(&j->refs, 1);
    j->report.t_submit = zl_now_ms();
    j->next = NULL;
    if (s->q_tail) s->q_tail->next = j;
    else s->q_head = j;
    s->q_tail = j;
    s->n_waiting++;
    pthread_cond_signal(&s->work_cv);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* Under s->mu: wake every reader. */
static void sched_notify(zl_sched *s) {
    s->progress++;
    pthread_cond_broadcast(&s->out_cv);
}

int zl_sched_run(zl_sched *s, int (*step)(void *ud), void *ud) {
    zl_task t = {step, ud, 0, 0, NULL};
    pthread_mutex_lock(&s->mu);
    if (s->stop) {
        pthread_mutex_unlock(&s->mu);
        return ZL_SCHED_STOPPED;
    }
    if (s->t_tail) s->t_tail->next = &t;
    else s->t_head = &t;
    s->t_tail = &t;
    pthread_cond_signal(&s->work_cv);
    while (!t.done) pthread_cond_wait(&s->out_cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    return t.result;
}

/* Under s->mu: the head task ends with result. */
static void task_pop(zl_sched *s, int result) {
    zl_task *t = s->t_head;
    s->t_head = t->next;
    if (!s->t_head) s->t_tail = NULL;
    t->result = result;
    t->done = 1;
    sched_notify(s);
}

void zl_sched_wait(zl_sched *s, int timeout_ms) {
    struct timespec ts = zl_deadline_ms(timeout_ms);
    pthread_mutex_lock(&s->mu);
    pthread_cond_timedwait(&s->out_cv, &s->mu, &ts);
    pthread_mutex_unlock(&s->mu);
}

unsigned long long zl_sched_progress(zl_sched *s) {
    pthread_mutex_lock(&s->mu);
    unsigned long long p = s->progress;
    pthread_mutex_unlock(&s->mu);
    return p;
}

void zl_sched_wait_since(zl_sched *s, unsigned long long seen, int timeout_ms) {
    struct timespec ts = zl_deadline_ms(timeout_ms);
    pthread_mutex_lock(&s->mu);
    while (s->progress == seen)
        if (pthread_cond_timedwait(&s->out_cv, &s->mu, &ts)) break;
    pthread_mutex_unlock(&s->mu);
}

int zl_job_read(zl_sched *s, zl_job *j, int from, zl_job_tok *dst, int cap, zl_finish *finished) {
    pthread_mutex_lock(&s->mu);
    int n = j->n_toks - from;
    if (n < 0) n = 0;
    if (n > cap) n = cap;
    if (n > 0) memcpy(dst, j->toks + from, (size_t)n * sizeof *dst);
    *finished = from + n == j->n_toks ? j->finish : ZL_FINISH_NONE;
    pthread_mutex_unlock(&s->mu);
    return n;
}


void zl_job_get_report(zl_sched *s, zl_job *j, zl_job_report *r) {
    pthread_mutex_lock(&s->mu);
    *r = j->report;
    r->n_generated = j->n_toks;
    r->retryable = j->finish == ZL_FINISH_ERROR && r->error_code == ZL_ENOMEM && j->n_toks == 0;
    pthread_mutex_unlock(&s->mu);
}

/* Under s->mu. */
static void job_finish(zl_sched *s, zl_job *j, zl_finish why) {
    ZL_ASSERT(why != ZL_FINISH_NONE);
    if (j->finish) return; /* the first reason stands */
    j->finish = why;
    j->report.t_done = zl_now_ms();
    (void)s;
}

/* Under s->mu: j ends with an error (code: a zl_err code; msg: one line). */
static void job_fail(zl_sched *s, zl_job *j, int code, const char *msg) {
    if (j->finish) return;
    snprintf(j->report.error, sizeof j->report.error, "%s", msg);
    j->report.error_code = code ? code : ZL_EINVAL;
    job_finish(s, j, ZL_FINISH_ERROR);
}

/* Under s->mu: append one output token.  Returns 0, or ZL_ENOMEM after
 * failing the job (the token is not pushed). */
static int job_push(zl_sched *s, zl_job *j, const zl_job_tok *t) {
    ZL_ASSERT(!j->finish && j->n_fed >= j->n_prompt); /* a token only after the prompt, never after the end */
    if (j->n_toks == j->cap_toks) {
        int nc = j->cap_toks ? j->cap_toks * 2 : 64;
        zl_job_tok *nt = ZL_FAULT(ZL_FAULT_JOB_PUSH) ? NULL : realloc(j->toks, (size_t)nc * sizeof *nt);
        if (!nt) {
            job_fail(s, j, ZL_ENOMEM, "out of memory");
            return ZL_ENOMEM;
        }
        j->toks = nt;
        j->cap_toks = nc;
    }
    j->toks[j->n_toks++] = *t;
    if (!j->report.t_first) j->report.t_first = t->t_ms;
    return 0;
}

static void job_logprobs(const float *logits, int nv, zl_job_tok *t, int k) {
    float mx = logits[0];
    for (int i = 1; i < nv; i++) mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0;
    for (int i = 0; i < nv; i++) sum += exp((double)(logits[i] - mx));
    float lse = mx + (float)log(sum);
    t->logprob = logits[t->id] - lse;
    t->n_top = 0;
    for (int i = 0; i < nv && k > 0; i++) {
        float v = logits[i];
        int n = t->n_top;
        if (n == k && v <= t->top_lp[n - 1]) continue;
        int p = n < k ? n : k - 1;
        while (p > 0 && t->top_lp[p - 1] < v) {
            t->top_lp[p] = t->top_lp[p - 1];
            t->top_id[p] = t->top_id[p - 1];
            p--;
        }
        t->top_lp[p] = v;
        t->top_id[p] = i;
        if (n < k) t->n_top++;
    }
    for (int i = 0; i < t->n_top; i++) t->top_lp[i] -= lse;
}


static void sched_admit(zl_sched *s, zl_job **admitted, int *n_admitted) {
    *n_admitted = 0;
    for (int i = 0; i < s->o.n_parallel; i++) {
        zl_job *j = s->running[i];
        if (j && atomic_load(&j->cancel)) job_finish(s, j, ZL_FINISH_CANCEL);
    }
    /* cancelled jobs still in the queue leave it without a slot */
    for (zl_job **pp = &s->q_head; *pp;) {
        zl_job *j = *pp;
        if (!atomic_load(&j->cancel)) { pp = &j->next; continue; }
        *pp = j->next;
        if (s->q_tail == j) s->q_tail = NULL;
        s->n_waiting--;
        ZL_ASSERT(s->n_waiting >= 0);
        job_finish(s, j, ZL_FINISH_CANCEL);
        job_unref(j);
    }
    if (!s->q_head) s->q_tail = NULL;
    else {
        zl_job *t = s->q_head;
        while (t->next) t = t->next;
        s->q_tail = t;
    }
    for (int i = 0; i < s->o.n_parallel && s->q_head; i++) {
        if (s->running[i]) continue;
        zl_job *j = s->q_head;
        s->q_head = j->next;
        if (!s->q_head) s->q_tail = NULL;
        s->n_waiting--;
        ZL_ASSERT(s->n_waiting >= 0 && !j->finish && !j->seq && j->n_fed == 0 && j->n_toks == 0); /* queued -> running */
        j->next = NULL;
        j->report.t_admit = zl_now_ms();
        s->running[i] = j;
        s->n_running++;
        admitted[(*n_admitted)++] = j;
    }
}

/* Remove finished jobs from their slots.  Under s->mu; returns how many. */
static int sched_reap(zl_sched *s, zl_job **dead) {
    int n = 0;
    for (int i = 0; i < s->o.n_parallel; i++) {
        zl_job *j = s->running[i];
        if (!j || !j->finish) continue;
        s->running[i] = NULL;
        s->n_running--;
        ZL_ASSERT(s->n_running >= 0); /* finished -> reaped */
        dead[n++] = j;
    }
    return n;
}

/* KV bookkeeping after a forward of j's sequence (engine thread, no lock):
 * the bytes its attention read and what the policy evicted; job_flush
 * moves the tallies into the job's report and the scheduler's totals. */
static void job_kv_note(zl_job *j, int decode) {
    zl_kv_stats ks;
    zl_seq_kv_stats(j->seq, &ks);
    if (decode) {
        j->kv_read += (double)ks.cached * (double)ks.bytes_per_token;
        j->kv_steps++;
    }
    j->anchors_now = ks.anchors;
    j->unflushed_evicted += ks.evicted >= j->seen_evicted ? ks.evicted - j->seen_evicted : 0;
    j->seen_evicted = ks.evicted;
}

/* Under s->mu. */
static void job_flush(zl_sched *s, zl_job *j) {
    s->kv_evicted += j->unflushed_evicted;
    s->ring_drafted += j->unflushed_drafted;
    s->ring_accepted += j->unflushed_accepted;
    j->report.kv_evicted += j->unflushed_evicted;
    j->report.ring_drafted += j->unflushed_drafted;
    j->report.ring_accepted += j->unflushed_accepted;
    j->unflushed_evicted = j->unflushed_drafted = j->unflushed_accepted = 0;
    j->report.sample_ms += j->unflushed_sample_ms;
    s->sample_ms += j->unflushed_sample_ms;
    j->unflushed_sample_ms = 0;
    j->report.kv_read_bytes = j->kv_read;
    j->report.kv_read_steps = j->kv_steps;
    j->report.kv_anchors = j->anchors_now;
    j->report.ring_steps = (unsigned long long)j->ring_steps;
}

/* Finish checks after a token was pushed.  ahead: tokens the sequence has
 * already fed beyond this one's plain-decoding state (accepted drafts that
 * follow it in the same ring step), so the context check sees the room plain
 * decoding would have at this token.  Under s->mu. */
static void job_check_end(zl_sched *s, zl_job *j, int32_t id, int ahead) {
    if (zl_llm_is_eog(s->llm, id)) job_finish(s, j, ZL_FINISH_EOG);
    else if (j->max_tokens > 0 && j->n_toks >= j->max_tokens) job_finish(s, j, ZL_FINISH_LENGTH);
    else if (zl_seq_room(j->seq) + ahead < 1) job_finish(s, j, ZL_FINISH_CTX);
}

/* Whether j is in a state to take part in a step. */
static int job_live(const zl_job *j) { return j && !j->finish && j->seq; }

/* ---- stage 1: plan ----
 * Which running jobs take part in this step, with how many tokens each, and
 * the drafts of the ring jobs; fills s->st.work (at most one entry per job)
 * and the batch items.  Every generating job decodes (its pending token);
 * ring jobs draft after it; then prompt chunks, oldest slot first, fill what
 * is left of step_tokens (while a prompt waits, drafts take at most half of
 * the budget left, so prefill always advances).  Anchored or bounded prompts
 * go on a forward of their own (WORK_SOLO): the batch has no anchor mask,
 * and a bounded cache evicts in chunks that leave room.  Engine thread, no
 * lock (the running slots change only on this thread).  Never fails: it
 * allocates nothing. */
static void sched_plan(zl_sched *s) {
    sched_step_buf *st = &s->st;
    int budget = s->o.step_tokens;
    st->n_work = st->n_items = st->n_ring = 0;
    for (int i = 0; i < s->o.n_parallel; i++) {
        zl_job *j = s->running[i];
        if (!job_live(j) || j->pending < 0) continue;
        step_work *w = &st->work[st->n_work++];
        *w = (step_work){.job = j, .kind = WORK_DECODE, .n = 1, .item = st->n_items};
        st->items[st->n_items] = (zl_batch_item){j->seq, &j->pending, 1};
        st->vers[st->n_items++] = NULL;
        budget--;
    }
    st->n_decode = st->n_items;
    int prefilling = 0;
    for (int i = 0; i < s->o.n_parallel && !prefilling; i++) {
        zl_job *j = s->running[i];
        prefilling = job_live(j) && j->n_fed < j->n_prompt;
    }
    int draft_budget = prefilling ? budget / 2 : budget;
    for (int i = 0; i < st->n_decode; i++) {
        step_work *w = &st->work[i];
        zl_job *j = w->job;
        if (!j->ring_on) continue;
        int max = draft_budget;
        if (j->max_tokens > 0 && j->max_tokens - j->n_toks - 1 < max) max = j->max_tokens - j->n_toks - 1;
        double t0 = zl_now_ms();
        int nd = zl_spec_draft(j->seq, j->pending, max, &j->ver);
        j->draft_ms = zl_now_ms() - t0;
        w->kind = WORK_RING;
        w->n = j->ver.n;
        st->items[i].ids = j->ver.ids;
        st->items[i].n = j->ver.n;
        st->vers[i] = &j->ver;
        budget -= nd;
        draft_budget -= nd;
        st->n_ring++;
    }
    for (int i = 0; i < s->o.n_parallel && budget > 0; i++) {
        zl_job *j = s->running[i];
        if (!job_live(j) || j->n_fed >= j->n_prompt) continue;
        int n = j->n_prompt - j->n_fed;
        if (n > budget) n = budget;
        step_work *w = &st->work[st->n_work++];
        if (j->anchors || j->bounded) {
            *w = (step_work){.job = j, .kind = WORK_SOLO, .n = n, .item = -1};
        } else {
            *w = (step_work){.job = j, .kind = WORK_PROMPT, .n = n, .item = st->n_items};
            st->items[st->n_items] = (zl_batch_item){j->seq, j->prompt + j->n_fed, n};
            st->vers[st->n_items++] = NULL;
        }
        budget -= n;
    }
    ZL_ASSERT(st->n_work <= s->o.n_parallel && budget >= 0);
}

/* ---- stage 2: forward ----
 * One zl_batch_eval over the batch items, then each solo chunk on its own
 * forward.  Sets every entry's rc (a batch error is every batch entry's) and
 * advances n_fed by the prompt tokens fed.  Engine thread, no lock. */
static void sched_forward(zl_sched *s) {
    sched_step_buf *st = &s->st;
    st->batch_ms = st->solo_ms = 0;
    if (st->n_items) {
        double t0 = zl_now_ms();
        st->err.msg[0] = 0;
        int rc = zl_batch_eval(s->llm, st->items, st->n_ring ? st->vers : NULL, st->n_items, &st->batch, &st->err);
        st->batch_ms = zl_now_ms() - t0;
        int n_tok = 0;
        for (int i = 0; i < st->n_items; i++) n_tok += st->items[i].n;
        if (s->o.on_step) s->o.on_step(s->o.on_step_ud, st->n_items, n_tok, st->batch_ms);
        for (int k = 0; k < st->n_work; k++) {
            step_work *w = &st->work[k];
            if (w->kind == WORK_SOLO) continue;
            w->rc = rc;
            w->msg = st->err.msg;
            if (rc) continue;
            if (w->kind == WORK_PROMPT) w->job->n_fed += w->n;
            else job_kv_note(w->job, 1);
        }
    }
    for (int k = 0; k < st->n_work; k++) {
        step_work *w = &st->work[k];
        if (w->kind != WORK_SOLO) continue;
        zl_job *j = w->job;
        const uint8_t *mask = j->anchors ? j->anchors + j->n_fed : NULL;
        double t0 = zl_now_ms();
        w->rc = zl_seq_eval_anchored(j->seq, j->prompt + j->n_fed, mask, w->n, 0, NULL, &w->err);
        double ms = zl_now_ms() - t0;
        st->solo_ms += ms;
        if (s->o.on_step) s->o.on_step(s->o.on_step_ud, 1, w->n, ms);
        w->msg = w->err.msg;
        if (w->rc) continue;
        j->n_fed += w->n;
        job_kv_note(j, 0);
    }
}

/* The token after j's logits (plain decoding, or the first of a job whose
 * prompt just completed), with its logprobs when the job asked. */
static void job_sample(zl_sched *s, zl_job *j, zl_job_tok *t) {
    double ts = zl_now_ms();
    const float *lg = zl_seq_logits(j->seq);
    *t = (zl_job_tok){0};
    t->id = zl_seq_sample(j->seq);
    if (j->n_top >= 0 && lg) job_logprobs(lg, zl_llm_n_vocab(s->llm), t, j->n_top);
    t->t_ms = zl_now_ms();
    j->unflushed_sample_ms += t->t_ms - ts;
}

/* A ring job's verification: accept / roll back its drafts and choose the
 * next token (the residual draw of a rejection, or a sample after the last
 * accepted position).  Writes the tokens to emit to out and returns how many
 * (accepted drafts + the next).  step_ms: the forward's wall time, 0 when it
 * is not a fair measure of this job's decode speed (prompt chunks rode
 * along). */
static int job_ring_verify(zl_job *j, double step_ms, int32_t *out, int *acc_out) {
    double ts = zl_now_ms();
    int32_t next;
    double secs = step_ms > 0 ? (step_ms + j->draft_ms) / 1e3 : 0;
    int acc = zl_spec_accept(j->seq, &j->ver, secs, out, &next);
    if (next < 0) next = zl_seq_sample(j->seq);
    out[acc] = next;
    j->unflushed_sample_ms += zl_now_ms() - ts;
    j->ring_steps++;
    zl_spec_stats ss;
    zl_seq_spec_stats(j->seq, &ss);
    j->unflushed_drafted += ss.drafted >= j->seen_drafted ? ss.drafted - j->seen_drafted : 0;
    j->unflushed_accepted += ss.accepted >= j->seen_accepted ? ss.accepted - j->seen_accepted : 0;
    j->seen_drafted = ss.drafted;
    j->seen_accepted = ss.accepted;
    *acc_out = acc;
    return acc + 1;
}

/* ---- stage 3: sample ----
 * The one place tokens are chosen: for every entry fed without error, the
 * next token of a decoding job, the verification of a ring job, the first
 * token of a job whose prompt completed (none for prefill-only jobs).
 * Engine thread, no lock; nothing is published yet. */
static void sched_sample(zl_sched *s) {
    sched_step_buf *st = &s->st;
    /* the step time measures decode speed only when no prompt chunk rode along */
    double step_ms = st->n_items == st->n_decode ? st->batch_ms : 0;
    for (int k = 0; k < st->n_work; k++) {
        step_work *w = &st->work[k];
        zl_job *j = w->job;
        w->n_out = w->n_acc = 0;
        if (w->rc) continue;
        if (w->kind == WORK_RING) {
            w->n_out = job_ring_verify(j, step_ms, w->ring, &w->n_acc);
            continue;
        }
        if ((w->kind == WORK_PROMPT || w->kind == WORK_SOLO) && (j->n_fed < j->n_prompt || j->prefill_only)) continue;
        job_sample(s, j, &w->tok);
        w->n_out = 1;
    }
}

/* ---- stage 4: commit ----
 * Under s->mu: publish the step.  An entry whose forward failed ends its job
 * with the error; the others flush their tallies, push their tokens (a push
 * that cannot grow the job's array ends the job with ENOMEM) and run the
 * finish checks.  A job that finished inside a ring step on an accepted
 * draft records how many tokens its sequence keeps (w->trim), applied by
 * sched_trim after the lock: what plain decoding would have fed. */
static void sched_commit(zl_sched *s) {
    sched_step_buf *st = &s->st;
    for (int k = 0; k < st->n_work; k++) {
        step_work *w = &st->work[k];
        zl_job *j = w->job;
        w->trim = 0;
        job_flush(s, j);
        if (w->rc) {
            job_fail(s, j, w->rc, w->msg && *w->msg ? w->msg : "evaluation failed");
            continue;
        }
        if (!w->n_out) {
            if (j->prefill_only && j->n_fed >= j->n_prompt) job_finish(s, j, ZL_FINISH_LENGTH);
            continue;
        }
        if (w->kind != WORK_RING) {
            if (job_push(s, j, &w->tok)) continue;
            j->pending = w->tok.id;
            job_check_end(s, j, w->tok.id, 0);
            continue;
        }
        /* ring: the accepted drafts (already fed), then the next token (pending) */
        double now = zl_now_ms();
        int acc = w->n_acc, pushed = 0;
        for (; pushed < w->n_out && !j->finish; pushed++) {
            zl_job_tok t = {.id = w->ring[pushed], .t_ms = now};
            if (job_push(s, j, &t)) break;
            job_check_end(s, j, t.id, pushed < acc ? acc - pushed : 0);
        }
        j->pending = w->ring[acc];
        if (j->finish && pushed <= acc) w->trim = j->ver.tok0 + pushed;
    }
    if (st->n_work) s->steps++;
    s->forward_ms += st->batch_ms + st->solo_ms;
}

/* After sched_commit, without the lock: cut the sequences of jobs that
 * finished inside a ring step back to what they emitted. */
static void sched_trim(zl_sched *s) {
    for (int k = 0; k < s->st.n_work; k++)
        if (s->st.work[k].trim) zl_seq_truncate(s->st.work[k].job->seq, s->st.work[k].trim);
}

#if ZL_ASSERTS
/* Under s->mu, after each commit: what must hold between steps.
 *  - the counters match the lists; a queued job has no sequence and no end;
 *  - a job holds one slot, a sequence belongs to one job (sequence ownership);
 *  - a live job's sequence holds exactly its fed prompt tokens and every
 *    token it emitted but the pending one (token ownership), within its
 *    context (KV bounds). */
static void sched_check_invariants(const zl_sched *s) {
    int running = 0, queued = 0;
    for (int i = 0; i < s->o.n_parallel; i++) {
        const zl_job *j = s->running[i];
        if (!j) continue;
        running++;
        for (int k = 0; k < i; k++)
            ZL_ASSERT(s->running[k] != j && (!j->seq || !s->running[k] || s->running[k]->seq != j->seq));
        ZL_ASSERT(j->n_fed >= 0 && j->n_fed <= j->n_prompt);
        if (!job_live(j)) continue;
        ZL_ASSERT(zl_seq_n_cached(j->seq) <= zl_seq_n_ctx(j->seq));
        ZL_ASSERT(j->n_toks == 0 || (j->n_fed == j->n_prompt && j->pending >= 0));
        ZL_ASSERT(zl_seq_n_past(j->seq) == j->n_fed + (j->n_toks ? j->n_toks - 1 : 0));
    }
    ZL_ASSERT(running == s->n_running);
    for (const zl_job *j = s->q_head; j; j = j->next) {
        queued++;
        ZL_ASSERT(!j->finish && !j->seq && j->n_fed == 0);
        ZL_ASSERT(j->next || s->q_tail == j);
    }
    ZL_ASSERT(queued == s->n_waiting);
}
#else
#define sched_check_invariants(s) ((void)0)
#endif

/* One engine step over the running jobs: plan -> forward -> sample ->
 * commit.  Returns how many jobs took part (0: nothing to do). */
static int sched_step(zl_sched *s) {
    sched_plan(s);
    if (!s->st.n_work) return 0;
    sched_forward(s);
    sched_sample(s);
    pthread_mutex_lock(&s->mu);
    sched_commit(s);
    sched_check_invariants(s);
    pthread_mutex_unlock(&s->mu);
    sched_trim(s);
    return s->st.n_work;
}

static int job_arm(zl_sched *s, zl_job *j, zl_err *err) {
    const zl_job_ctl *c = j->has_ctl ? &j->ctl : &s->o.ctl;
    int n_ctx = zl_seq_n_ctx(j->seq);
    if (j->anchors && j->n_fed > 0) {
        /* reused KV carries no anchor marks: evaluate the whole prompt */
        zl_seq_truncate(j->seq, 0);
        j->n_fed = 0;
        j->report.n_cached = 0;
    }
    int budget = zl_job_ctl_budget(c, n_ctx);
    int rc = zl_seq_set_kv_slicing(j->seq, c->kv_policy, budget, c->kv_window, err);
    if (rc) return rc;
    j->bounded = c->kv_policy != ZL_KV_POLICY_FULL;
    j->ring_on = c->spec != ZL_SPEC_OFF && j->n_top < 0 && !j->prefill_only && !j->con.mask;
    zl_sampler_set_constraint(j->seq->sampler, j->con.mask ? &j->con : NULL);
    /* the server's draft model, when it has one, drafts for every ring job */
    zl_spec_opts so = {!j->ring_on ? ZL_SPEC_OFF : s->o.draft ? ZL_SPEC_DRAFT : ZL_SPEC_LOOKUP, c->ring, 0, s->o.draft};
    if ((rc = zl_seq_set_spec(j->seq, &so, err))) return rc;
    if (j->ring_on && s->o.ring_cost && s->o.n_ring_cost > 0) zl_seq_set_ring_cost(j->seq, s->o.ring_cost, s->o.n_ring_cost);
    zl_kv_stats ks;
    zl_seq_kv_stats(j->seq, &ks);
    j->seen_evicted = ks.evicted;
    j->anchors_now = ks.anchors;
    zl_spec_stats st;
    zl_seq_spec_stats(j->seq, &st);
    j->seen_drafted = st.drafted;
    j->seen_accepted = st.accepted;
    if (j->bounded && j->max_tokens <= 0) j->max_tokens = n_ctx; /* a bounded sequence never fills up */
    pthread_mutex_lock(&s->mu);
    j->report.ring_on = j->ring_on;
    j->report.kv_policy = (int)c->kv_policy;
    j->report.kv_budget = j->bounded ? ks.budget : 0;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* Give an admitted job its sequence (from its acquire hook or new) and arm
 * its controls.  A job that cannot start ends with the error (a failure to
 * allocate is ZL_ENOMEM: zl_job_report.retryable).  Engine thread, no lock. */
static void job_start(zl_sched *s, zl_job *j) {
    double t0 = zl_now_ms();
    zl_seq_opts so = {.n_ctx = s->o.n_ctx, .kv_type = ZL_KV_F16, .sampling = j->sampling};
    zl_err err = {0};
    int rc, reused = 0;
    ZL_ASSERT(!j->seq); /* a sequence belongs to one job: this one gets its own */
    if (j->hooks.acquire) {
        rc = j->hooks.acquire(j->hooks.ud, s->llm, &so, j->prompt, j->n_prompt, &j->seq, &reused, err.msg,
                              sizeof err.msg);
        if (!rc && (reused < 0 || reused >= j->n_prompt)) reused = 0;
        j->n_fed = reused;
        j->report.n_cached = reused;
    } else {
        rc = zl_seq_new(&j->seq, s->llm, &so, &err);
    }
    if (!rc && !j->seq) rc = zl_errf(&err, ZL_EINVAL, "no sequence for the job");
    if (!rc) rc = job_arm(s, j, &err);
    /* token ownership: the sequence holds exactly the prompt tokens counted as fed */
    ZL_ASSERT(rc || zl_seq_n_past(j->seq) == j->n_fed);
    j->report.kv_ms += zl_now_ms() - t0;
    const char *why = rc                                                  ? (*err.msg ? err.msg : "cannot start the job")
                      : j->n_prompt <= 0                                  ? "empty prompt"
                      : !j->bounded && j->n_prompt >= s->o.n_ctx          ? "prompt does not fit in the context"
                                                                          : NULL;
    if (!why) return;
    pthread_mutex_lock(&s->mu);
    job_fail(s, j, rc ? rc : ZL_ERANGE, why);
    pthread_mutex_unlock(&s->mu);
}

/* Hand a reaped job's sequence back (its release hook, or freed: the KV is
 * zeroed) and drop the scheduler's reference.  Engine thread, no lock. */
static void job_retire(zl_job *j) {
    ZL_ASSERT(j->finish); /* finished -> reaped */
    if (j->seq) zl_sampler_set_constraint(j->seq->sampler, NULL); /* the sequence may serve another job */
    if (j->hooks.release && j->seq) j->hooks.release(j->hooks.ud, j->seq, j->finish);
    else zl_seq_free(j->seq);
    j->seq = NULL;
    job_unref(j);
}

static void *sched_main(void *arg) {
    zl_sched *s = arg;
    int np = s->o.n_parallel;
    sched_step_buf *st = &s->st;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        int n_adm = 0;
        sched_admit(s, st->admitted, &n_adm);
        int n_dead = sched_reap(s, st->dead);
        if (s->stop && !s->n_running && !n_dead) break;
        zl_task *task = s->t_head;
        if (!s->n_running && !n_adm && !n_dead && !task) {
            pthread_cond_wait(&s->work_cv, &s->mu);
            continue;
        }
        if (n_dead) sched_notify(s);
        pthread_mutex_unlock(&s->mu);
        double t_work = zl_now_ms();
        /* free the KV now: a finished job may still be read for a while */
        for (int i = 0; i < n_dead; i++) job_retire(st->dead[i]);
        for (int i = 0; i < n_adm; i++) job_start(s, st->admitted[i]);
        int n_stepped = sched_step(s);
        if (n_stepped && s->o.debug_step_ms > 0) usleep((useconds_t)s->o.debug_step_ms * 1000);
        /* one step of the oldest caller's task, between two batched steps */
        int task_rc = task ? task->step(task->ud) : 0;
        pthread_mutex_lock(&s->mu);
        if (task && task_rc) task_pop(s, task_rc);
        long long used = 0, anchors = 0;
        for (int i = 0; i < np; i++)
            if (s->running[i] && s->running[i]->seq) {
                used += zl_seq_n_cached(s->running[i]->seq);
                anchors += s->running[i]->anchors_now;
            }
        s->kv_used = used;
        s->kv_anchor_tokens = anchors;
        s->busy_ms += zl_now_ms() - t_work;
        sched_notify(s);
        if (s->stop) {
            for (int i = 0; i < np; i++)
                if (s->running[i]) job_finish(s, s->running[i], ZL_FINISH_CANCEL);
        }
    }
    /* drain the queue */
    while (s->t_head) task_pop(s, ZL_SCHED_STOPPED);
    while (s->q_head) {
        zl_job *j = s->q_head;
        s->q_head = j->next;
        job_finish(s, j, ZL_FINISH_CANCEL);
        job_unref(j);
    }
    s->q_tail = NULL;
    s->n_waiting = 0;
    sched_notify(s);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static void sched_buf_free(sched_step_buf *st) {
    free(st->work);
    free(st->items);
    free(st->vers);
    free(st->admitted);
    free(st->dead);
    zl_batch_buf_free(&st->batch);
}

/* Every buffer the engine thread needs, for n_parallel jobs and step_tokens
 * tokens: a step never allocates (but for more verify rows than any step
 * before, in zl_batch_eval).  Returns 0 or ZL_ENOMEM. */
static int sched_buf_new(sched_step_buf *st, int n_parallel, int step_tokens, int n_vocab) {
    size_t np = (size_t)n_parallel;
    st->work = calloc(np, sizeof *st->work);
    st->items = calloc(np, sizeof *st->items);
    st->vers = calloc(np, sizeof *st->vers);
    st->admitted = calloc(np, sizeof *st->admitted);
    st->dead = calloc(np, sizeof *st->dead);
    if (!st->work || !st->items || !st->vers || !st->admitted || !st->dead ||
        zl_batch_buf_reserve(&st->batch, n_vocab, step_tokens, n_parallel, n_parallel))
        return ZL_ENOMEM;
    return 0;
}

int zl_sched_new(zl_sched **out, zl_llm *llm, const zl_sched_opts *opts, zl_err *err) {
    *out = NULL;
    zl_sched *s = calloc(1, sizeof *s);
    if (!s) return zl_errf(err, ZL_ENOMEM, "out of memory");
    s->llm = llm;
    s->o = *opts;
    if (s->o.n_parallel < 1) s->o.n_parallel = 1;
    if (s->o.max_queue < 0) s->o.max_queue = 0;
    if (s->o.n_ctx <= 0) s->o.n_ctx = zl_llm_n_ctx_train(llm);
    if (s->o.step_tokens < s->o.n_parallel) s->o.step_tokens = s->o.n_parallel + 256;
    s->running = calloc((size_t)s->o.n_parallel, sizeof *s->running);
    if (!s->running || sched_buf_new(&s->st, s->o.n_parallel, s->o.step_tokens, zl_llm_n_vocab(llm))) {
        sched_buf_free(&s->st);
        free(s->running);
        free(s);
        return zl_errf(err, ZL_ENOMEM, "out of memory for a scheduler of %d sequences", opts->n_parallel);
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->work_cv, NULL);
    pthread_cond_init(&s->out_cv, NULL);
    if (pthread_create(&s->thread, NULL, sched_main, s) != 0) {
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->work_cv);
        pthread_cond_destroy(&s->out_cv);
        sched_buf_free(&s->st);
        free(s->running);
        free(s);
        return zl_errf(err, ZL_ENOMEM, "cannot start the engine thread");
    }
    *out = s;
    return 0;
}

void zl_sched_stop(zl_sched *s) {
    pthread_mutex_lock(&s->mu);
    int was = s->stop;
    s->stop = 1;
    pthread_cond_signal(&s->work_cv);
    pthread_mutex_unlock(&s->mu);
    if (!was) pthread_join(s->thread, NULL);
}

void zl_sched_free(zl_sched *s) {
    if (!s) return;
    zl_sched_stop(s);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->work_cv);
    pthread_cond_destroy(&s->out_cv);
    free(s->running);
    sched_buf_free(&s->st);
    free(s);
}

void zl_sched_get_stats(zl_sched *s, zl_sched_stats *st) {
    pthread_mutex_lock(&s->mu);
    st->running = s->n_running;
    st->waiting = s->n_waiting;
    st->n_parallel = s->o.n_parallel;
    st->n_ctx = s->o.n_ctx;
    st->kv_used = s->kv_used;
    st->kv_capacity = (long long)s->o.n_parallel * s->o.n_ctx;
    st->steps = s->steps;
    st->ring_drafted = s->ring_drafted;
    st->ring_accepted = s->ring_accepted;
    st->kv_evicted = s->kv_evicted;
    st->kv_anchor_tokens = s->kv_anchor_tokens;
    st->busy_s = s->busy_ms / 1e3;
    st->forward_s = s->forward_ms / 1e3;
    st->sample_s = s->sample_ms / 1e3;
    pthread_mutex_unlock(&s->mu);
}

zl_llm *zl_sched_llm(zl_sched *s) { return s->llm; }
int zl_sched_n_ctx(const zl_sched *s) { return s->o.n_ctx; }
