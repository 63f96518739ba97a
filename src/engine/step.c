/* step.c — one engine step over the running jobs (see sched.h), four stages
 * with one contract each:
 *   plan     which jobs take part, with how many tokens; the ring's drafts
 *   forward  one batched forward (engine/batch.c) + the solo prompt chunks
 *   sample   every token chosen: plain, or the ring's verification
 *   commit   under s->mu: tokens published, finish checks, errors
 * Every buffer is made by zl_sched_buf_new when the scheduler starts.  The
 * job's life around the step (queue, admission, start, retire, the thread)
 * is sched.c's; this file never takes a job in or out of a slot. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/assert.h"
#include "../base/err.h"
#include "../base/fault.h"
#include "engine_internal.h"
#include "sched_internal.h"

/* Under s->mu: append one output token.  Returns 0, or ZL_ENOMEM after
 * failing the job (the token is not pushed). */
static int job_push(zl_sched *s, zl_job *j, const zl_job_tok *t) {
    ZL_ASSERT(!j->finish && j->n_fed >= j->n_prompt); /* a token only after the prompt, never after the end */
    if (j->n_toks == j->cap_toks) {
        int nc = j->cap_toks ? j->cap_toks * 2 : 64;
        zl_job_tok *nt = ZL_FAULT(ZL_FAULT_JOB_PUSH) ? NULL : realloc(j->toks, (size_t)nc * sizeof *nt);
        if (!nt) {
            zl_sched_job_fail(s, j, ZL_ENOMEM, "out of memory");
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
    if (zl_llm_is_eog(s->llm, id)) zl_sched_job_finish(s, j, ZL_FINISH_EOG);
    else if (j->max_tokens > 0 && j->n_toks >= j->max_tokens) zl_sched_job_finish(s, j, ZL_FINISH_LENGTH);
    else if (zl_seq_room(j->seq) + ahead < 1) zl_sched_job_finish(s, j, ZL_FINISH_CTX);
}


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
        if (!zl_job_live(j) || j->pending < 0) continue;
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
        prefilling = zl_job_live(j) && j->n_fed < j->n_prompt;
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
        if (!zl_job_live(j) || j->n_fed >= j->n_prompt) continue;
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

/* The plain, unconstrained entries of a step (w->par), shared out over the
 * kernel pool by rank: their samplers, sequences and jobs are disjoint, and
 * the pool is idle between two forwards of the engine thread. */
typedef struct { zl_sched *s; } par_sample;

static void par_sample_worker(void *ctx, int ith, int nth) {
    zl_sched *s = ((par_sample *)ctx)->s;
    for (int k = 0, rank = 0; k < s->st.n_work; k++) {
        step_work *w = &s->st.work[k];
        if (!w->par) continue;
        if (rank++ % nth == ith) job_sample(s, w->job, &w->tok);
    }
}

/* ---- stage 3: sample ----
 * The one place tokens are chosen: for every entry fed without error, the
 * next token of a decoding job, the verification of a ring job, the first
 * token of a job whose prompt completed (none for prefill-only jobs).
 * Ring verifications and constrained draws run here on the engine thread;
 * the plain unconstrained draws (each a pass over the vocabulary) run on
 * the kernel pool, one job per thread at a time.
 * A constraint that broke down while choosing (a grammar over its work
 * bound) turns the entry into a failed one, as a failed forward is.
 * Engine thread, no lock; nothing is published yet. */
static void sched_sample(zl_sched *s) {
    sched_step_buf *st = &s->st;
    /* the step time measures decode speed only when no prompt chunk rode along */
    double step_ms = st->n_items == st->n_decode ? st->batch_ms : 0, t0 = zl_now_ms();
    int n_par = 0;
    for (int k = 0; k < st->n_work; k++) {
        step_work *w = &st->work[k];
        zl_job *j = w->job;
        w->n_out = w->n_acc = w->par = 0;
        if (w->rc) continue;
        if (w->kind == WORK_RING) {
            w->n_out = job_ring_verify(j, step_ms, w->ring, &w->n_acc);
            continue;
        }
        if ((w->kind == WORK_PROMPT || w->kind == WORK_SOLO) && (j->n_fed < j->n_prompt || j->prefill_only)) continue;
        w->n_out = 1;
        if (!j->con.mask) {
            w->par = 1;
            n_par++;
            continue;
        }
        job_sample(s, j, &w->tok);
        const char *why = NULL;
        int code = j->con.error ? j->con.error(j->con.ud, &why) : 0;
        if (code) { /* the constraint broke down: the token is its fallback, and the job ends with the error */
            w->rc = code;
            w->msg = why;
            w->n_out = 0;
        }
    }
    par_sample ps = {s};
    if (n_par) zl_pool_run(n_par > 1 ? s->llm->pool : NULL, par_sample_worker, &ps);
    st->sample_ms = zl_now_ms() - t0;
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
            zl_sched_job_fail(s, j, w->rc, w->msg && *w->msg ? w->msg : "evaluation failed");
            continue;
        }
        if (!w->n_out) {
            if (j->prefill_only && j->n_fed >= j->n_prompt) zl_sched_job_finish(s, j, ZL_FINISH_LENGTH);
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
    s->sample_ms += st->sample_ms; /* engine thread time; a job's report has its own draws' time */
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
        if (!zl_job_live(j)) continue;
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
int zl_sched_step(zl_sched *s) {
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

void zl_sched_buf_free(sched_step_buf *st) {
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
int zl_sched_buf_new(sched_step_buf *st, int n_parallel, int step_tokens, int n_vocab) {
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
