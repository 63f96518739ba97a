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
 * slot, its sequence released). */
#include "sched.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../base/assert.h"
#include "../base/err.h"
#include "engine_internal.h"
#include "spec.h"

#define ZL_JOB_RING_OUT (ZL_RING_MAX + 1) /* tokens one ring step may emit: the accepted drafts + the next */
#define ZL_SCHED_MAX_SOLO 64 /* own-forward prompt chunks per engine step */

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
    zl_job_times times;
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
    unsigned long long seen_drafted, seen_accepted, seen_evicted;
    /* engine-side tallies, copied into times under s->mu (job_flush) */
    unsigned long long ev_new, dr_new, ac_new;
    double kv_read, sample_new;
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
    float *lp_scratch;
    zl_task *t_head, *t_tail; /* zl_sched_run work, under mu */
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
    j->times.n_prompt = n_prompt;
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
    if (s->n_waiting >= s->o.max_queue || s->stop) {
        pthread_mutex_unlock(&s->mu);
        return ZL_ERANGE;
    }
    atomic_fetch_add(&j->refs, 1);
    j->times.t_submit = zl_now_ms();
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

void zl_job_get_times(zl_sched *s, zl_job *j, zl_job_times *t) {
    pthread_mutex_lock(&s->mu);
    *t = j->times;
    t->n_generated = j->n_toks;
    pthread_mutex_unlock(&s->mu);
}

/* Under s->mu. */
static void job_finish(zl_sched *s, zl_job *j, zl_finish why) {
    ZL_ASSERT(why != ZL_FINISH_NONE);
    if (j->finish) return; /* the first reason stands */
    j->finish = why;
    j->times.t_done = zl_now_ms();
    (void)s;
}

/* Under s->mu. */
static int job_push(zl_job *j, const zl_job_tok *t) {
    ZL_ASSERT(!j->finish && j->n_fed >= j->n_prompt); /* a token only after the prompt, never after the end */
    if (j->n_toks == j->cap_toks) {
        int nc = j->cap_toks ? j->cap_toks * 2 : 64;
        zl_job_tok *nt = realloc(j->toks, (size_t)nc * sizeof *nt);
        if (!nt) return ZL_ENOMEM;
        j->toks = nt;
        j->cap_toks = nc;
    }
    j->toks[j->n_toks++] = *t;
    return 0;
}

/* log-softmax of the raw logits: the chosen token's value and the top k. */
static void job_logprobs(zl_sched *s, const float *logits, int nv, zl_job_tok *t, int k) {
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
    (void)s;
}

/* Admit queued jobs into free slots and drop cancelled ones.  Under s->mu. */
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
        j->times.t_admit = zl_now_ms();
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
 * moves the tallies into the job's times and the scheduler's totals. */
static void job_kv_note(zl_job *j, int decode) {
    zl_kv_stats ks;
    zl_seq_kv_stats(j->seq, &ks);
    if (decode) {
        j->kv_read += (double)ks.cached * (double)ks.bytes_per_token;
        j->kv_steps++;
    }
    j->anchors_now = ks.anchors;
    j->ev_new += ks.evicted >= j->seen_evicted ? ks.evicted - j->seen_evicted : 0;
    j->seen_evicted = ks.evicted;
}

/* Under s->mu. */
static void job_flush(zl_sched *s, zl_job *j) {
    s->kv_evicted += j->ev_new;
    s->ring_drafted += j->dr_new;
    s->ring_accepted += j->ac_new;
    j->times.kv_evicted += j->ev_new;
    j->times.ring_drafted += j->dr_new;
    j->times.ring_accepted += j->ac_new;
    j->ev_new = j->dr_new = j->ac_new = 0;
    j->times.sample_ms += j->sample_new;
    s->sample_ms += j->sample_new;
    j->sample_new = 0;
    j->times.kv_read_bytes = j->kv_read;
    j->times.kv_read_steps = j->kv_steps;
    j->times.kv_anchors = j->anchors_now;
    j->times.ring_steps = (unsigned long long)j->ring_steps;
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

/* Prompt chunk of a job with anchors or a bounded KV policy: its own forward
 * (zl_llm_eval_batch has no anchor mask, and a bounded cache evicts in chunks
 * that leave room).  Returns the tokens fed, or -1 after finishing the job
 * with an error. */
static int job_prefill_solo(zl_sched *s, zl_job *j, int n) {
    zl_err err = {0};
    const uint8_t *mask = j->anchors ? j->anchors + j->n_fed : NULL;
    double t0 = zl_now_ms();
    int rc = zl_seq_eval_anchored(j->seq, j->prompt + j->n_fed, mask, n, 0, NULL, &err);
    double fwd = zl_now_ms() - t0;
    if (s->o.on_step) s->o.on_step(s->o.on_step_ud, 1, n, fwd);
    if (!rc) job_kv_note(j, 0);
    pthread_mutex_lock(&s->mu);
    s->forward_ms += fwd;
    job_flush(s, j);
    if (rc) {
        snprintf(j->times.error, sizeof j->times.error, "%s", err.msg);
        job_finish(s, j, ZL_FINISH_ERROR);
    }
    pthread_mutex_unlock(&s->mu);
    if (rc) return -1;
    j->n_fed += n;
    ZL_ASSERT(j->n_fed <= j->n_prompt);
    if (j->prefill_only && j->n_fed >= j->n_prompt) {
        pthread_mutex_lock(&s->mu);
        job_finish(s, j, ZL_FINISH_LENGTH);
        pthread_mutex_unlock(&s->mu);
    }
    return n;
}

/* The first token of a job whose prompt just completed (sampled like every
 * later one, ring or not).  Engine thread, no lock. */
static zl_job_tok job_sample(zl_sched *s, zl_job *j, int nv) {
    double ts = zl_now_ms();
    const float *lg = zl_seq_logits(j->seq);
    zl_job_tok t = {0};
    t.id = zl_seq_sample(j->seq);
    if (j->n_top >= 0 && lg) job_logprobs(s, lg, nv, &t, j->n_top);
    t.t_ms = zl_now_ms();
    j->sample_new += t.t_ms - ts;
    return t;
}

/* After the forward, a ring job's verification: accept / roll back its
 * drafts and choose the next token (the residual draw of a rejection, or a
 * sample after the last accepted position).  Writes the tokens to emit to
 * out and returns how many (accepted drafts + the next).  Engine thread, no
 * lock.  step_ms: the forward's wall time, 0 when it is not a fair measure
 * of this job's decode speed (prompt chunks rode along). */
static int job_ring_verify(zl_job *j, double step_ms, int32_t *out, int *acc_out) {
    double ts = zl_now_ms();
    int32_t next;
    double secs = step_ms > 0 ? (step_ms + j->draft_ms) / 1e3 : 0;
    int acc = zl_spec_accept(j->seq, &j->ver, secs, out, &next);
    if (next < 0) next = zl_seq_sample(j->seq);
    out[acc] = next;
    j->sample_new += zl_now_ms() - ts;
    j->ring_steps++;
    zl_spec_stats st;
    zl_seq_spec_stats(j->seq, &st);
    j->dr_new += st.drafted >= j->seen_drafted ? st.drafted - j->seen_drafted : 0;
    j->ac_new += st.accepted >= j->seen_accepted ? st.accepted - j->seen_accepted : 0;
    j->seen_drafted = st.drafted;
    j->seen_accepted = st.accepted;
    *acc_out = acc;
    return acc + 1;
}

static void sched_step(zl_sched *s, zl_batch_item *items, zl_verify **vers, zl_job **owners, int *n_need) {
    zl_llm *llm = s->llm;
    int nv = zl_llm_n_vocab(llm);
    int n_items = 0, budget = s->o.step_tokens, n_work = 0, n_ring = 0;
    /* decode tokens first: every generating sequence advances each step */
    for (int i = 0; i < s->o.n_parallel; i++) {
        zl_job *j = s->running[i];
        if (!j || j->finish || !j->seq || j->pending < 0) continue;
        items[n_items] = (zl_batch_item){j->seq, &j->pending, 1};
        vers[n_items] = NULL;
        owners[n_items++] = j;
        budget--;
    }
    int n_decode = n_items;
    /* ring sequences draft after their pending token; the drafts ride in the
     * same forward and are verified per sequence after it.  While a prompt
     * waits, drafts take at most half of the budget left, so prefill always
     * advances. */
    int prefilling = 0;
    for (int i = 0; i < s->o.n_parallel && !prefilling; i++) {
        zl_job *j = s->running[i];
        prefilling = j && !j->finish && j->seq && j->n_fed < j->n_prompt;
    }
    int draft_budget = prefilling ? budget / 2 : budget;
    for (int i = 0; i < n_decode; i++) {
        zl_job *j = owners[i];
        if (!j->ring_on) continue;
        int max = draft_budget;
        if (j->max_tokens > 0 && j->max_tokens - j->n_toks - 1 < max) max = j->max_tokens - j->n_toks - 1;
        double t0 = zl_now_ms();
        int nd = zl_spec_draft(j->seq, j->pending, max, &j->ver);
        j->draft_ms = zl_now_ms() - t0;
        items[i].ids = j->ver.ids;
        items[i].n = j->ver.n;
        vers[i] = &j->ver;
        budget -= nd;
        draft_budget -= nd;
        n_ring++;
    }
    /* then prompt chunks, oldest admission first, within the budget; anchored
     * or bounded prompts run on their own forward after the batch */
    zl_job *solo[ZL_SCHED_MAX_SOLO];
    int solo_n[ZL_SCHED_MAX_SOLO], n_solo = 0;
    for (int i = 0; i < s->o.n_parallel; i++) {
        zl_job *j = s->running[i];
        if (!j || j->finish || !j->seq || j->n_fed >= j->n_prompt) continue;
        if (budget <= 0) break;
        int n = j->n_prompt - j->n_fed;
        if (n > budget) n = budget;
        if (j->anchors || j->bounded) {
            if (n_solo == ZL_SCHED_MAX_SOLO) continue;
            solo[n_solo] = j;
            solo_n[n_solo++] = n;
        } else {
            items[n_items] = (zl_batch_item){j->seq, j->prompt + j->n_fed, n};
            vers[n_items] = NULL;
            owners[n_items++] = j;
        }
        budget -= n;
    }
    n_work = n_items + n_solo;
    if (n_items) {
        double t0 = zl_now_ms();
        zl_err err = {0};
        int rc = n_ring ? zl_spec_eval_batch(llm, items, vers, n_items, &err) : zl_llm_eval_batch(llm, items, n_items, &err);
        double t1 = zl_now_ms();
        int n_tok = 0;
        for (int i = 0; i < n_items; i++) n_tok += items[i].n;
        if (s->o.on_step) s->o.on_step(s->o.on_step_ud, n_items, n_tok, t1 - t0);
        /* the step time measures decode speed only when no prompt chunk rode along */
        double step_ms = n_items == n_decode ? t1 - t0 : 0;

        /* sample / verify outside the lock: only this thread touches the sequences */
        zl_job_tok *outs = malloc((size_t)n_items * sizeof *outs);
        int *n_out = calloc((size_t)n_items, sizeof *n_out);
        int *n_acc = calloc((size_t)n_items, sizeof *n_acc);
        int32_t (*ring_out)[ZL_JOB_RING_OUT] = n_ring ? malloc((size_t)n_items * sizeof *ring_out) : NULL;
        int oom = !outs || !n_out || !n_acc || (n_ring && !ring_out);
        for (int i = 0; !rc && !oom && i < n_items; i++) {
            zl_job *j = owners[i];
            if (i >= n_decode) {
                j->n_fed += items[i].n;
                ZL_ASSERT(j->n_fed <= j->n_prompt);
                if (j->n_fed < j->n_prompt || j->prefill_only) continue;
                outs[i] = job_sample(s, j, nv);
                n_out[i] = 1;
                continue;
            }
            job_kv_note(j, 1);
            if (vers[i]) {
                n_out[i] = job_ring_verify(j, step_ms, ring_out[i], &n_acc[i]);
                continue;
            }
            outs[i] = job_sample(s, j, nv);
            n_out[i] = 1;
        }
        int *trim = NULL; /* per item: tokens to keep after a finish inside a ring step, 0 = none */
        if (n_ring && !rc && !oom) trim = calloc((size_t)n_items, sizeof *trim);
        pthread_mutex_lock(&s->mu);
        for (int i = 0; i < n_items; i++) {
            zl_job *j = owners[i];
            if (rc || oom) {
                snprintf(j->times.error, sizeof j->times.error, "%s", rc ? err.msg : "out of memory");
                job_finish(s, j, ZL_FINISH_ERROR);
                continue;
            }
            job_flush(s, j);
            if (!n_out[i]) {
                if (j->prefill_only && j->n_fed >= j->n_prompt) job_finish(s, j, ZL_FINISH_LENGTH);
                continue;
            }
            if (!vers[i]) {
                if (!j->times.t_first) j->times.t_first = outs[i].t_ms;
                job_push(j, &outs[i]);
                j->pending = outs[i].id;
                job_check_end(s, j, outs[i].id, 0);
                continue;
            }
            /* ring: the accepted drafts (already fed), then the next token (pending) */
            double now = zl_now_ms();
            int acc = n_acc[i], f = 0;
            for (; f < n_out[i] && !j->finish; f++) {
                zl_job_tok t = {0};
                t.id = ring_out[i][f];
                t.t_ms = now;
                if (!j->times.t_first) j->times.t_first = now;
                job_push(j, &t);
                job_check_end(s, j, t.id, f < acc ? acc - f : 0);
            }
            j->pending = ring_out[i][acc];
            /* finished on an accepted draft: keep what plain decoding would have fed */
            if (j->finish && f <= acc && trim) trim[i] = j->ver.tok0 + f;
        }
        s->steps++;
        s->forward_ms += t1 - t0;
        pthread_mutex_unlock(&s->mu);
        for (int i = 0; trim && i < n_items; i++)
            if (trim[i]) zl_seq_truncate(owners[i]->seq, trim[i]);
        free(trim);
        free(outs);
        free(n_out);
        free(n_acc);
        free(ring_out);
    }
    /* anchored / bounded prompt chunks; a job whose prompt completes here
     * samples its first token like the batch path */
    for (int k = 0; k < n_solo; k++) {
        zl_job *j = solo[k];
        if (job_prefill_solo(s, j, solo_n[k]) < 0 || j->n_fed < j->n_prompt || j->prefill_only) continue;
        zl_job_tok t = job_sample(s, j, nv);
        pthread_mutex_lock(&s->mu);
        if (!j->times.t_first) j->times.t_first = t.t_ms;
        job_flush(s, j);
        job_push(j, &t);
        j->pending = t.id;
        job_check_end(s, j, t.id, 0);
        pthread_mutex_unlock(&s->mu);
    }
    if (!n_items && n_work) {
        pthread_mutex_lock(&s->mu);
        s->steps++;
        pthread_mutex_unlock(&s->mu);
    }
    *n_need = n_work;
}

/* Apply the job's ring and KV controls to its fresh (or reused) sequence.
 * Engine thread, no lock.  Returns 0 or an error code with err set. */
static int job_arm(zl_sched *s, zl_job *j, zl_err *err) {
    const zl_job_ctl *c = j->has_ctl ? &j->ctl : &s->o.ctl;
    int n_ctx = zl_seq_n_ctx(j->seq);
    if (j->anchors && j->n_fed > 0) {
        /* reused KV carries no anchor marks: evaluate the whole prompt */
        zl_seq_truncate(j->seq, 0);
        j->n_fed = 0;
        j->times.n_cached = 0;
    }
    int budget = zl_job_ctl_budget(c, n_ctx);
    int rc = zl_seq_set_kv_policy(j->seq, c->kv_policy, budget, err);
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
    j->times.ring_on = j->ring_on;
    j->times.kv_policy = (int)c->kv_policy;
    j->times.kv_budget = j->bounded ? ks.budget : 0;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

static void *sched_main(void *arg) {
    zl_sched *s = arg;
    int np = s->o.n_parallel;
    zl_job **admitted = calloc((size_t)np, sizeof *admitted);
    zl_job **dead = calloc((size_t)np, sizeof *dead);
    zl_job **owners = calloc((size_t)np, sizeof *owners);
    zl_batch_item *items = calloc((size_t)np, sizeof *items);
    zl_verify **vers = calloc((size_t)np, sizeof *vers);
    if (!admitted || !dead || !owners || !items || !vers) {
        fprintf(stderr, "zerolayer: engine thread: out of memory\n");
        return NULL;
    }
    pthread_mutex_lock(&s->mu);
    for (;;) {
        int n_adm = 0;
        sched_admit(s, admitted, &n_adm);
        int n_dead = sched_reap(s, dead);
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
        for (int i = 0; i < n_dead; i++) {
            if (dead[i]->seq) zl_sampler_set_constraint(dead[i]->seq->sampler, NULL);
            if (dead[i]->hooks.release && dead[i]->seq) dead[i]->hooks.release(dead[i]->hooks.ud, dead[i]->seq, dead[i]->finish);
            else zl_seq_free(dead[i]->seq);
            dead[i]->seq = NULL;
            job_unref(dead[i]);
        }
        for (int i = 0; i < n_adm; i++) {
            zl_job *j = admitted[i];
            double t0 = zl_now_ms();
            zl_seq_opts so = {.n_ctx = s->o.n_ctx, .kv_type = ZL_KV_F16, .sampling = j->sampling};
            zl_err err = {0};
            int rc, reused = 0;
            if (j->hooks.acquire) {
                rc = j->hooks.acquire(j->hooks.ud, s->llm, &so, j->prompt, j->n_prompt, &j->seq, &reused, err.msg,
                                      sizeof err.msg);
                if (!rc && (reused < 0 || reused >= j->n_prompt)) reused = 0;
                j->n_fed = reused;
                j->times.n_cached = reused;
            } else {
                rc = zl_seq_new(&j->seq, s->llm, &so, &err);
            }
            if (!rc) rc = job_arm(s, j, &err);
            /* token ownership: the sequence holds exactly the prompt tokens counted as fed */
            ZL_ASSERT(rc || zl_seq_n_past(j->seq) == j->n_fed);
            j->times.kv_ms += zl_now_ms() - t0;
            if (rc || j->n_prompt <= 0 || (!j->bounded && j->n_prompt >= s->o.n_ctx)) {
                pthread_mutex_lock(&s->mu);
                snprintf(j->times.error, sizeof j->times.error, "%s",
                         rc ? err.msg : "prompt does not fit in the context");
                job_finish(s, j, ZL_FINISH_ERROR);
                pthread_mutex_unlock(&s->mu);
            }
        }
        int n_need = 0;
        sched_step(s, items, vers, owners, &n_need);
        if (n_need && s->o.debug_step_ms > 0) usleep((useconds_t)s->o.debug_step_ms * 1000);
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
    free(admitted);
    free(dead);
    free(owners);
    free(items);
    free(vers);
    return NULL;
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
    if (!s->running) { free(s); return zl_errf(err, ZL_ENOMEM, "out of memory"); }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->work_cv, NULL);
    pthread_cond_init(&s->out_cv, NULL);
    if (pthread_create(&s->thread, NULL, sched_main, s) != 0) {
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
    free(s->lp_scratch);
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
