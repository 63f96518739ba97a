/* gen.c — jobs to text: detokenize, hold back, match stop sequences (gen.h). */
#include "gen.h"

#include "../engine/constraint.h"

#include <stdlib.h>
#include <string.h>

#include "metrics.h"

static void gen_release(zl_gen_choice *c, size_t n) {
    zl_buf_put(&c->text, c->held.p, n);
    memmove(c->held.p, c->held.p + n, c->held.n - n);
    c->held.n -= n;
    if (c->held.p) c->held.p[c->held.n] = 0;
    if (!c->held.n) {
        c->held_tokens = 0;
        c->toks_released = c->n_toks;
    }
}

/* Longest suffix of h that is a proper prefix of some stop string. */
static size_t stop_prefix_suffix(const zl_gen *g, const char *h, size_t n) {
    size_t best = 0;
    for (int i = 0; i < g->p.n_stops; i++) {
        size_t sl = strlen(g->stops[i]);
        if (!sl) continue;
        size_t k = sl - 1 < n ? sl - 1 : n;
        for (; k > best; k--)
            if (!memcmp(h + n - k, g->stops[i], k)) { best = k; break; }
    }
    return best;
}

/* Append a token's text to the held-back text and release what can no
 * longer be part of a stop sequence.  Matching runs over the held text
 * preceded by the last (longest stop - 1) released bytes: text released in
 * the normal way can never start a match, but text the stream_buffer bound
 * forced out can, and a stop that completes there still ends the generation
 * (the part already released stays sent, the rest is dropped). */
static void gen_absorb(zl_gen *g, zl_gen_choice *c, const char *text, size_t len) {
    if (c->end) return;
    zl_buf_put(&c->held, text, len);
    if (!c->held.n) return;
    if (!g->p.n_stops) {
        gen_release(c, c->held.n);
        return;
    }
    size_t lmax = 0;
    for (int i = 0; i < g->p.n_stops; i++) {
        size_t l = strlen(g->stops[i]);
        lmax = l > lmax ? l : lmax;
    }
    size_t tail = lmax > 1 && c->text.n ? (lmax - 1 < c->text.n ? lmax - 1 : c->text.n) : 0;
    char stackbuf[512], *win = stackbuf;
    size_t wn = tail + c->held.n;
    if (wn > sizeof stackbuf && !(win = malloc(wn))) {
        win = c->held.p; /* out of memory: match in the held text only */
        tail = 0;
        wn = c->held.n;
    } else {
        if (tail) memcpy(win, c->text.p + c->text.n - tail, tail); /* text.p may be NULL while empty */
        if (c->held.n) memcpy(win + tail, c->held.p, c->held.n);
    }
    /* earliest complete stop match that ends in the held text */
    const char *hit = NULL;
    int which = -1;
    for (int i = 0; i < g->p.n_stops; i++) {
        size_t sl = strlen(g->stops[i]);
        if (!sl) continue;
        const char *f = memmem(win, wn, g->stops[i], sl);
        while (f && (size_t)(f - win) + sl <= tail) /* ends in released text: not new */
            f = memmem(f + 1, wn - (size_t)(f + 1 - win), g->stops[i], sl);
        if (f && (!hit || f < hit)) { hit = f; which = i; }
    }
    size_t keep = hit ? 0 : stop_prefix_suffix(g, win, wn);
    size_t pos = hit ? (size_t)(hit - win) : 0;
    if (win != stackbuf && win != c->held.p) free(win);
    if (hit) {
        if (pos > tail) zl_buf_put(&c->text, c->held.p, pos - tail);
        c->held.n = 0;
        c->held_tokens = 0;
        c->toks_released = c->n_toks;
        c->end = ZL_GEN_STOP;
        c->stop_index = which;
        zl_job_cancel(c->job);
        return;
    }
    if (keep > c->held.n) keep = c->held.n; /* a stop may have begun in released text: hold everything */
    if (g->p.stream_buffer > 0 && c->held_tokens > g->p.stream_buffer) keep = 0;
    gen_release(c, c->held.n - keep);
}

static void gen_push_tok(zl_gen_choice *c, const zl_job_tok *t) {
    if (c->n_toks == c->cap_toks) {
        int nc = c->cap_toks ? c->cap_toks * 2 : 64;
        zl_job_tok *nt = realloc(c->toks, (size_t)nc * sizeof *nt);
        if (!nt) return;
        c->toks = nt;
        c->cap_toks = nc;
    }
    c->toks[c->n_toks++] = *t;
}

static void gen_pump(zl_gen *g, int i) {
    zl_gen_choice *c = &g->ch[i];
    zl_job_tok buf[32];
    for (;;) {
        zl_finish fin = ZL_FINISH_NONE;
        int n = zl_job_read(g->sched, c->job, c->n_read, buf, 32, &fin);
        for (int k = 0; k < n && !c->end; k++) {
            const zl_job_tok *t = &buf[k];
            if (c->n_read + k == 0) zl_metrics_ttft((t->t_ms - g->t_start) / 1e3);
            else if (c->t_last > 0) zl_metrics_inter_token((t->t_ms - c->t_last) / 1e3);
            c->t_last = t->t_ms;
            c->n_tokens++;
            gen_push_tok(c, t);
            c->held_tokens++;
            if (zl_llm_is_eog(g->llm, t->id)) continue;
            size_t len = 0;
            const char *s = zl_stream_feed(c->st, t->id, &len);
            gen_absorb(g, c, s, len);
            if (c->held_tokens > c->held_peak) c->held_peak = c->held_tokens;
        }
        c->n_read += n;
        if (c->end) return;
        if (fin) {
            /* what the flush holds is a character the last token left
             * unfinished (a max_tokens cut inside an emoji): not text, so it
             * is dropped rather than sent as U+FFFD */
            size_t len = 0;
            const char *s = zl_stream_flush(c->st, &len);
            len = zl_utf8_valid_prefix(s, len);
            gen_absorb(g, c, s, len);
            if (c->end) return;
            gen_release(c, c->held.n);
            c->toks_released = c->n_toks;
            c->end = fin == ZL_FINISH_EOG      ? ZL_GEN_EOG
                     : fin == ZL_FINISH_CANCEL ? ZL_GEN_CANCEL
                     : fin == ZL_FINISH_ERROR  ? ZL_GEN_ERROR
                                               : ZL_GEN_LENGTH;
            return;
        }
        if (n < 32) return;
    }
}

/* The job's grammar or thinking budget (engine/constraint.h); non-zero on failure. */
static int gen_constrain(zl_llm *llm, zl_job *j, const zl_gen_params *p) {
    if (p->grammar) {
        zl_grammar *gr = NULL;
        if (zl_grammar_parse(&gr, p->grammar, strlen(p->grammar), NULL, NULL)) return -1;
        return zl_job_constrain(j, llm, gr, p->grammar_trigger, NULL);
    }
    if (p->think_budget > 0) return zl_job_think_budget(j, llm, p->think_budget, p->think_inside, NULL);
    return 0;
}

zl_gen *zl_gen_start(zl_sched *s, int32_t *const *prompts, const int *n_prompts, int n, const zl_gen_params *p,
                     double t_start, int *busy) {
    *busy = 0;
    zl_gen *g = calloc(1, sizeof *g);
    if (!g) {
        if (p->on_end) p->on_end(NULL, p->end_ud);
        return NULL;
    }
    g->sched = s;
    g->llm = zl_sched_llm(s);
    g->p = *p;
    g->n = n;
    g->t_start = t_start;
    g->metrics_done = 1; /* counted only once every job is submitted */
    g->ch = calloc((size_t)n, sizeof *g->ch);
    g->n_prompt = calloc((size_t)n, sizeof *g->n_prompt);
    g->stops = calloc((size_t)(p->n_stops ? p->n_stops : 1), sizeof *g->stops);
    if (!g->ch || !g->n_prompt || !g->stops) { zl_gen_free(g); return NULL; }
    for (int i = 0; i < p->n_stops; i++)
        if (!(g->stops[i] = strdup(p->stops[i]))) { zl_gen_free(g); return NULL; }
    g->p.stops = NULL;
    g->p.anchors = NULL;
    g->p.sampling.logit_bias = NULL; /* borrowed from the request; each job keeps its own copy */
    g->p.sampling.n_logit_bias = 0;
    for (int i = 0; i < n; i++) {
        zl_gen_choice *c = &g->ch[i];
        c->stop_index = -1;
        zl_sampling smp = p->sampling;
        smp.seed += (uint64_t)i;
        g->n_prompt[i] = n_prompts[i];
        c->job = zl_job_new(prompts[i], n_prompts[i], &smp, p->max_tokens, p->n_logprobs);
        if (c->job && p->has_ctl) zl_job_set_ctl(c->job, &p->ctl);
        if (!c->job || (p->anchors && zl_job_set_anchors(c->job, p->anchors[i])) ||
            zl_stream_new(&c->st, g->llm, p->strip_leading_space, NULL) ||
            (p->hook_job && p->hook_job(p->hook_ud, c->job, i)) || gen_constrain(g->llm, c->job, p)) {
            zl_gen_free(g);
            return NULL;
        }
    }
    for (int i = 0; i < n; i++) {
        if (zl_sched_submit(s, g->ch[i].job)) {
            *busy = 1;
            zl_gen_free(g);
            return NULL;
        }
    }
    g->metrics_done = 0;
    return g;
}

/* Once per generation: its tokens, and each choice stopped early (a stop
 * sequence, a cancel, or freed before it ended: the client went away). */
static void gen_metrics(zl_gen *g) {
    if (g->metrics_done) return;
    g->metrics_done = 1;
    long long pt = 0, gt = 0;
    for (int i = 0; i < g->n; i++) {
        pt += g->n_prompt[i];
        gt += g->ch[i].n_read;
        zl_gen_end e = g->ch[i].end;
        if (e == ZL_GEN_STOP || e == ZL_GEN_CANCEL || e == ZL_GEN_RUNNING) zl_metrics_cancelled();
    }
    zl_metrics_tokens(pt, gt);
}

int zl_gen_poll(zl_gen *g, int timeout_ms) {
    int done = 1;
    for (int i = 0; i < g->n; i++) done &= g->ch[i].end != ZL_GEN_RUNNING;
    if (done) return 1;
    int progressed = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        /* taken before reading, so a step that ends in between is not missed */
        unsigned long long seen = zl_sched_progress(g->sched);
        done = 1;
        for (int i = 0; i < g->n; i++) {
            int before = g->ch[i].n_read;
            gen_pump(g, i);
            progressed |= g->ch[i].n_read != before || g->ch[i].end;
            done &= g->ch[i].end != ZL_GEN_RUNNING;
        }
        if (done || progressed || attempt) break;
        zl_sched_wait_since(g->sched, seen, timeout_ms);
    }
    if (done) gen_metrics(g);
    if (done && !g->end_called) {
        g->end_called = 1;
        if (g->p.on_end) g->p.on_end(g, g->p.end_ud);
    }
    return done;
}

const char *zl_gen_take(zl_gen *g, int i, size_t *len) {
    zl_gen_choice *c = &g->ch[i];
    *len = c->text.n - c->taken;
    const char *p = c->text.p ? c->text.p + c->taken : "";
    c->taken = c->text.n;
    return p;
}

const zl_job_tok *zl_gen_take_toks(zl_gen *g, int i, int *n) {
    zl_gen_choice *c = &g->ch[i];
    *n = c->toks_released - c->toks_taken;
    const zl_job_tok *p = c->toks ? c->toks + c->toks_taken : NULL;
    c->toks_taken = c->toks_released;
    return p;
}

void zl_gen_cancel(zl_gen *g) {
    for (int i = 0; i < g->n; i++)
        if (g->ch[i].job) zl_job_cancel(g->ch[i].job);
}

void zl_gen_free(zl_gen *g) {
    if (!g) return;
    if (!g->end_called) {
        g->end_called = 1;
        if (g->ch) {
            zl_gen_cancel(g);
            gen_metrics(g);
        }
        if (g->p.on_end) g->p.on_end(g, g->p.end_ud);
    }
    for (int i = 0; g->ch && i < g->n; i++) {
        zl_job_release(g->ch[i].job);
        zl_stream_free(g->ch[i].st);
        zl_buf_free(&g->ch[i].text);
        zl_buf_free(&g->ch[i].held);
        free(g->ch[i].toks);
    }
    for (int i = 0; g->stops && i < g->p.n_stops; i++) free(g->stops[i]);
    free(g->stops);
    free(g->ch);
    free(g->n_prompt);
    free(g);
}

void zl_gen_timing_get(zl_gen *g, zl_gen_timing *t) {
    memset(t, 0, sizeof *t);
    t->state = g->state;
    for (int i = 0; i < g->n; i++) {
        zl_job_report jt;
        zl_job_get_report(g->sched, g->ch[i].job, &jt);
        double prep = jt.t_submit > g->t_start ? jt.t_submit - g->t_start : 0;
        if (prep > t->prep_ms) t->prep_ms = prep;
        double q = jt.t_admit ? jt.t_admit - jt.t_submit : 0;
        double pf = jt.t_first && jt.t_admit ? jt.t_first - jt.t_admit : 0;
        double last = g->ch[i].t_last;
        double dc = jt.t_first && last > jt.t_first ? last - jt.t_first : 0;
        if (q > t->queue_ms) t->queue_ms = q;
        if (pf > t->prefill_ms) t->prefill_ms = pf;
        if (dc > t->decode_ms) t->decode_ms = dc;
        t->kv_ms += jt.kv_ms;
        t->sample_ms += jt.sample_ms;
        t->prompt_tokens += g->n_prompt[i];
        t->generated_tokens += g->ch[i].n_tokens;
        t->cached_tokens += jt.n_cached;
        t->ring_on |= jt.ring_on;
        t->ring_steps += jt.ring_steps;
        t->ring_drafted += jt.ring_drafted;
        t->ring_accepted += jt.ring_accepted;
        t->kv_policy = jt.kv_policy;
        t->kv_budget = jt.kv_budget;
        t->kv_anchors += jt.kv_anchors;
        t->kv_evicted += jt.kv_evicted;
        t->kv_read_bytes += jt.kv_read_bytes;
        t->kv_read_steps += jt.kv_read_steps;
    }
}

const char *zl_gen_piece(zl_gen *g, int32_t id, char *buf, size_t cap, size_t *len) {
    char *s = NULL;
    size_t n = 0;
    *len = 0;
    buf[0] = 0;
    if (zl_llm_detokenize(g->llm, &id, 1, 0, &s, &n, NULL)) return buf;
    if (n >= cap) n = cap - 1;
    memcpy(buf, s, n);
    buf[n] = 0;
    *len = n;
    free(s);
    return buf;
}
