/* sched.c — the engine thread (see sched.h): the job's life (submit,
 * admission, start, retire), the queue, the caller tasks and the thread's
 * loop.  One step over the running jobs is step.c's.
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
 * step.c's sched_check_invariants verifies the counters, sequence and token
 * ownership and the KV bounds.
 *
 * Errors: every failure ends exactly the jobs it affects with finish ERROR
 * and a message (a job that cannot start, the jobs of a batch whose forward
 * failed, a job whose output cannot grow); the engine thread itself holds
 * only buffers made by zl_sched_new and never exits before zl_sched_stop. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../base/assert.h"
#include "../base/err.h"
#include "engine_internal.h"
#include "sched_internal.h"
#include "sched_test.h"

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
void zl_sched_job_finish(zl_sched *s, zl_job *j, zl_finish why) {
    ZL_ASSERT(why != ZL_FINISH_NONE);
    if (j->finish) return; /* the first reason stands */
    j->finish = why;
    j->report.t_done = zl_now_ms();
    (void)s;
}

/* Under s->mu: j ends with an error (code: a zl_err code; msg: one line). */
void zl_sched_job_fail(zl_sched *s, zl_job *j, int code, const char *msg) {
    if (j->finish) return;
    snprintf(j->report.error, sizeof j->report.error, "%s", msg);
    j->report.error_code = code ? code : ZL_EINVAL;
    zl_sched_job_finish(s, j, ZL_FINISH_ERROR);
}



static void sched_admit(zl_sched *s, zl_job **admitted, int *n_admitted) {
    *n_admitted = 0;
    for (int i = 0; i < s->o.n_parallel; i++) {
        zl_job *j = s->running[i];
        if (j && atomic_load(&j->cancel)) zl_sched_job_finish(s, j, ZL_FINISH_CANCEL);
    }
    /* cancelled jobs still in the queue leave it without a slot */
    for (zl_job **pp = &s->q_head; *pp;) {
        zl_job *j = *pp;
        if (!atomic_load(&j->cancel)) { pp = &j->next; continue; }
        *pp = j->next;
        if (s->q_tail == j) s->q_tail = NULL;
        s->n_waiting--;
        ZL_ASSERT(s->n_waiting >= 0);
        zl_sched_job_finish(s, j, ZL_FINISH_CANCEL);
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
    zl_sched_job_fail(s, j, rc ? rc : ZL_ERANGE, why);
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
        int n_stepped = zl_sched_step(s);
        if (n_stepped && s->test_step_ms > 0) usleep((useconds_t)s->test_step_ms * 1000);
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
                if (s->running[i]) zl_sched_job_finish(s, s->running[i], ZL_FINISH_CANCEL);
        }
    }
    /* drain the queue */
    while (s->t_head) task_pop(s, ZL_SCHED_STOPPED);
    while (s->q_head) {
        zl_job *j = s->q_head;
        s->q_head = j->next;
        zl_sched_job_finish(s, j, ZL_FINISH_CANCEL);
        job_unref(j);
    }
    s->q_tail = NULL;
    s->n_waiting = 0;
    sched_notify(s);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static atomic_int g_test_step_ms; /* sched_test.h */

void zl_sched_test_step_ms(int ms) { atomic_store(&g_test_step_ms, ms > 0 ? ms : 0); }

int zl_sched_new(zl_sched **out, zl_llm *llm, const zl_sched_opts *opts, zl_err *err) {
    *out = NULL;
    zl_sched *s = calloc(1, sizeof *s);
    if (!s) return zl_errf(err, ZL_ENOMEM, "out of memory");
    s->llm = llm;
    s->o = *opts;
    s->test_step_ms = atomic_load(&g_test_step_ms);
    if (s->o.n_parallel < 1) s->o.n_parallel = 1;
    if (s->o.max_queue < 0) s->o.max_queue = 0;
    if (s->o.n_ctx <= 0) s->o.n_ctx = zl_llm_n_ctx_train(llm);
    if (s->o.step_tokens < s->o.n_parallel) s->o.step_tokens = s->o.n_parallel + 256;
    s->running = calloc((size_t)s->o.n_parallel, sizeof *s->running);
    if (!s->running || zl_sched_buf_new(&s->st, s->o.n_parallel, s->o.step_tokens, zl_llm_n_vocab(llm))) {
        zl_sched_buf_free(&s->st);
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
        zl_sched_buf_free(&s->st);
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
    zl_sched_buf_free(&s->st);
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
