/* pipeline.c — every generation request's path after its adapter parsed it
 * (pipeline.h): model, controls, session, template, tokens, limits, submit,
 * stream or body, errors.  It owns no wire format: what goes out is written
 * by the request's emitter; errors go out through zl_reply_error in the
 * caller's API shape.  It must never parse an API's body fields. */
#include "pipeline.h"
#include "tools.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PIPE_OOM(e) (zl_verr_set((e), "", "out of memory"), -2)

/* ---------------- requests and results ---------------- */

zl_sampling zl_request_sampling_defaults(void) {
    return (zl_sampling){.temp = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .repeat_penalty = 1.0f,
                         .repeat_last_n = 64, .presence_penalty = 0, .frequency_penalty = 0, .seed = 0};
}

void zl_request_init(zl_request *q, zl_req_kind kind, json_t *body) {
    memset(q, 0, sizeof *q);
    q->kind = kind;
    q->body = body;
    q->n = 1;
    q->n_logprobs = -1;
    q->sampling = zl_request_sampling_defaults();
    q->parallel_tools = 1;
    q->reasoning_budget = -1;
}

void zl_request_free(zl_request *q) {
    zl_request_tools_free(q);
    for (int i = 0; q->msgs && i < q->n_msgs; i++) zl_buf_free(&q->msgs[i].text);
    free(q->msgs);
    free(q->bias);
    zl_buf_free(&q->system);
    memset(q, 0, sizeof *q);
}

zl_buf *zl_request_add_msg(zl_request *q, const char *role) {
    zl_request_msg *m = realloc(q->msgs, (size_t)(q->n_msgs + 1) * sizeof *m);
    if (!m) return NULL;
    q->msgs = m;
    m[q->n_msgs] = (zl_request_msg){role, {0}, NULL, NULL};
    return &m[q->n_msgs++].text;
}

void zl_result_init(zl_result *res, const zl_request *q, const zl_prepared *p, zl_gen *g, const zl_emitter *em,
                    const char *model) {
    memset(res, 0, sizeof *res);
    res->g = g;
    res->kind = q->kind;
    zl_rand_id(res->id, sizeof res->id, em->id_prefix);
    snprintf(res->model, sizeof res->model, "%s", model);
    res->created = (long long)time(NULL);
    res->n = p->n;
    res->n_per_prompt = p->n_per_prompt;
    res->include_usage = q->include_usage;
    res->timings_per_token = q->timings_per_token;
    res->logprobs = q->n_logprobs >= 0;
    res->n_user_stops = p->n_user_stops;
    res->prompt_tokens = p->n_ids[0];
    res->grammar_param = p->plan.grammar ? p->plan.grammar_param : NULL;
    zl_tools_split_init(res, &p->plan); /* out of memory: the text stays whole */
}

void zl_result_timing_now(const zl_result *res, zl_gen_timing *t) {
    zl_gen_timing_get(res->g, t);
    /* the same prompt sampled n times is one prompt for billing purposes */
    t->prompt_tokens /= res->n_per_prompt > 0 ? res->n_per_prompt : 1;
}

void zl_result_finish(zl_result *res) {
    zl_result_timing_now(res, &res->timing);
    for (int i = 0; i < res->n; i++) res->failed |= res->g->ch[i].end == ZL_GEN_ERROR;
}

static const char *user_stop(const zl_result *res, const zl_gen_choice *c) {
    if (c->end == ZL_GEN_STOP && c->stop_index >= 0 && c->stop_index < res->n_user_stops)
        return res->g->stops[c->stop_index]; /* the gen's copy: the body is gone while a stream runs */
    return NULL;
}

void zl_result_choice(const zl_result *res, int i, zl_event *ev) {
    const zl_gen_choice *c = &res->g->ch[i];
    *ev = (zl_event){.choice = i, .text = c->text.p ? c->text.p : "", .len = c->text.n, .toks = c->toks,
                     .n_toks = c->n_toks, .end = c->end, .stop = user_stop(res, c)};
    if (res->split) zl_tools_event(res, i, 1, 1, ev);
}

/* The result's timings for both APIs' bodies, and as a Server-Timing value. */
json_t *zl_timings_json(const zl_gen_timing *t) {
    double pps = t->prefill_ms > 0 ? t->prompt_tokens * 1e3 / t->prefill_ms : 0;
    double tps = t->decode_ms > 0 && t->generated_tokens > 1 ? (t->generated_tokens - 1) * 1e3 / t->decode_ms : 0;
    json_t *j = json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:i, s:i, s:i, s:f, s:f}", "prep_ms", t->prep_ms,
                          "queue_ms", t->queue_ms, "prefill_ms", t->prefill_ms, "decode_ms", t->decode_ms, "kv_ms",
                          t->kv_ms, "sample_ms", t->sample_ms, "prompt_tokens", t->prompt_tokens, "generated_tokens",
                          t->generated_tokens, "cached_tokens", t->cached_tokens, "prompt_tokens_per_second", pps,
                          "tokens_per_second", tps);
    if (!j) return j;
    json_object_set_new(j, "ring", json_boolean(t->ring_on));
    if (t->ring_on) {
        json_object_set_new(j, "ring_steps", json_integer((json_int_t)t->ring_steps));
        json_object_set_new(j, "ring_drafted_tokens", json_integer((json_int_t)t->ring_drafted));
        json_object_set_new(j, "ring_accepted_tokens", json_integer((json_int_t)t->ring_accepted));
        json_object_set_new(j, "ring_acceptance",
                            json_real(t->ring_drafted ? (double)t->ring_accepted / (double)t->ring_drafted : 0.0));
    }
    json_object_set_new(j, "kv_policy", json_string(zl_kv_policy_name(t->kv_policy)));
    if (t->kv_policy) {
        json_object_set_new(j, "kv_budget", json_integer(t->kv_budget));
        json_object_set_new(j, "kv_evicted_tokens", json_integer((json_int_t)t->kv_evicted));
        json_object_set_new(j, "kv_anchor_tokens", json_integer(t->kv_anchors));
    }
    if (t->kv_read_steps > 0)
        json_object_set_new(j, "kv_bytes_per_token", json_real(t->kv_read_bytes / t->kv_read_steps));
    const zl_gen_state *st = &t->state;
    if (st->from) { /* the session's state was rebuilt for this request */
        static const char *const from[] = {"memory", "code", "spill"};
        json_object_set_new(j, "state",
                            json_pack("{s:s, s:b, s:i, s:I, s:I, s:f, s:f, s:f}", "from", from[st->from > 2 ? 0 : st->from],
                                      "rebuilt", st->ok, "tokens", st->tokens, "bytes", (json_int_t)st->bytes,
                                      "exact_bytes", (json_int_t)st->exact_bytes, "ratio", st->exact_bytes > 0 ? st->bytes / st->exact_bytes : 0.0,
                                      "encode_ms", st->store_ms, "decode_ms", st->load_ms));
    }
    return j;
}

void zl_server_timing(const zl_gen_timing *t, char *buf, size_t cap) {
    snprintf(buf, cap, "prep;dur=%.3f, queue;dur=%.3f, prefill;dur=%.3f, decode;dur=%.3f, kv;dur=%.3f, sample;dur=%.3f",
             t->prep_ms, t->queue_ms, t->prefill_ms, t->decode_ms, t->kv_ms, t->sample_ms);
}

/* ---------------- tokens and limits ---------------- */

int zl_prompt_fits(int n_ctx, size_t n, int room) { return (long long)n + room <= n_ctx; }

int zl_pipeline_prompt_limit(zl_srv *srv, int bounded, size_t n, const char *param, zl_verr *e) {
    int n_ctx = zl_sched_n_ctx(srv->sched);
    if (n == 0) return zl_verr_set(e, param, "%s: the prompt is empty (0 tokens)", param);
    if (!bounded && !zl_prompt_fits(n_ctx, n, 1))
        return zl_verr_set(e, param, "%s: prompt is too long: %zu tokens, but the context holds %d (at most %d prompt tokens)",
                           param, n, n_ctx, n_ctx - 1);
    return 0;
}

/* Under a bounded policy with anchors: every occurrence of every anchor
 * string wrapped in <|anchor_start|>...<|anchor_end|>, tokenized with one
 * anchor flag per token. */
static int tokenize_anchored(zl_srv *srv, json_t *anchors, const char *text, size_t len, int parse_special,
                             const char *param, int32_t **ids, uint8_t **mask, size_t *n, zl_verr *e) {
    uint8_t *m = calloc(len + 1, 1);
    zl_buf b = {0};
    if (!m) return PIPE_OOM(e);
    size_t i;
    json_t *a;
    json_array_foreach(anchors, i, a) {
        const char *s = json_string_value(a);
        size_t sl = json_string_length(a);
        int found = 0;
        for (const char *p = text; (p = memmem(p, len - (size_t)(p - text), s, sl)); p += sl) {
            memset(m + (p - text), 1, sl);
            found = 1;
        }
        if (!found) {
            free(m);
            return zl_verr_set(e, "zerolayer.anchors", "zerolayer.anchors[%zu]: not found in the prompt", i);
        }
    }
    for (size_t k = 0; k < len; k++) {
        if (m[k] && (k == 0 || !m[k - 1])) zl_buf_puts(&b, "<|anchor_start|>");
        zl_buf_put(&b, text + k, 1);
        if (m[k] && !m[k + 1]) zl_buf_puts(&b, "<|anchor_end|>");
    }
    zl_buf_put(&b, "", 0);
    free(m);
    zl_err err = {0};
    if (b.oom || !b.p) {
        zl_buf_free(&b);
        return PIPE_OOM(e);
    }
    int rc = zl_llm_tokenize_anchored(srv->llm, b.p, b.n, 1, parse_special, ids, mask, n, &err);
    zl_buf_free(&b);
    if (rc) return zl_verr_set(e, param, "%s: %s", param, err.msg);
    return 0;
}

/* Text to prompt tokens (BOS added) under the request's controls. */
static int tokenize_text(zl_srv *srv, const zl_req_ctl *ctl, const char *text, size_t len, int parse_special,
                         const char *param, int32_t **ids, uint8_t **mask, size_t *n, zl_verr *e) {
    *mask = NULL;
    if (ctl && ctl->bounded && ctl->anchors)
        return tokenize_anchored(srv, ctl->anchors, text, len, parse_special, param, ids, mask, n, e);
    zl_err err = {0};
    if (zl_llm_tokenize(srv->llm, text, len, 1, parse_special, ids, n, &err)) {
        if (err.code == ZL_ENOMEM) return PIPE_OOM(e);
        return zl_verr_set(e, param, "%s: %s", param, err.msg);
    }
    return 0;
}

int zl_pipeline_chat_tokens(zl_srv *srv, const zl_req_ctl *ctl, const zl_chat_msg *msgs, int n, int32_t **ids,
                            uint8_t **mask, size_t *n_ids, zl_verr *e) {
    zl_err err = {0};
    char *text = zl_chat_fmt_render(&srv->tpl, msgs, n, &err);
    if (!text && err.code == ZL_ENOMEM) return PIPE_OOM(e);
    if (!text) return zl_verr_set(e, "messages", "messages: chat template: %s", err.msg);
    uint8_t *m = NULL;
    int rc = tokenize_text(srv, ctl, text, strlen(text), zl_chat_fmt_parse_special(&srv->tpl), "messages", ids, &m,
                           n_ids, e);
    free(text);
    if (mask) *mask = m;
    else free(m);
    return rc;
}

int zl_pipeline_prompt_tokens(zl_srv *srv, const zl_req_ctl *ctl, const zl_request_prompt *pr, int32_t **ids,
                              uint8_t **mask, size_t *n, zl_verr *e) {
    int bounded = ctl && ctl->bounded, rc;
    *mask = NULL;
    if (pr->text)
        rc = tokenize_text(srv, ctl, pr->text, pr->len, 0, pr->param, ids, mask, n, e);
    else if (bounded && ctl->anchors)
        rc = zl_verr_set(e, "zerolayer.anchors", "zerolayer.anchors: needs a text prompt (%s is token ids)", pr->param);
    else
        rc = zl_jv_token_ids(pr->ids, pr->param, zl_llm_n_vocab(srv->llm), ids, n, e);
    return rc ? rc : zl_pipeline_prompt_limit(srv, bounded, *n, pr->param, e);
}

/* q's messages as the template reads them (strings borrowed from q). */
static zl_chat_msg *request_chat(const zl_request *q) {
    zl_chat_msg *m = calloc((size_t)q->n_msgs + 1, sizeof *m);
    for (int i = 0; m && i < q->n_msgs; i++) m[i] = (zl_chat_msg){q->msgs[i].role, q->msgs[i].text.p};
    return m;
}

int zl_pipeline_count(zl_srv *srv, const zl_request *q, zl_prepared *p, zl_verr *e) {
    memset(p, 0, sizeof *p);
    zl_chat_msg *m = request_chat(q);
    if (!m) return PIPE_OOM(e);
    size_t n = 0;
    int rc = zl_pipeline_chat_tokens(srv, NULL, m, q->n_msgs, &p->ids[0], NULL, &n, e);
    free(m);
    p->n_sets = 1;
    p->n_ids[0] = (int)n;
    return rc;
}

static int check_vocab(zl_srv *srv, const zl_sampling *s, zl_verr *e) {
    int nv = zl_llm_n_vocab(srv->llm);
    for (int i = 0; i < s->n_logit_bias; i++)
        if (s->logit_bias[i].token >= nv)
            return zl_verr_set(e, "logit_bias",
                               "logit_bias: token id %d is out of the vocabulary of %d tokens (ids 0..%d)",
                               (int)s->logit_bias[i].token, nv, nv - 1);
    return 0;
}

int zl_pipeline_prepare(zl_srv *srv, const zl_req_ctl *ctl, const zl_request *q, const zl_chat_msg *msgs, int n_msgs,
                        zl_prepared *p, zl_verr *e) {
    memset(p, 0, sizeof *p);
    int bounded = ctl && ctl->bounded, rc;
    if ((rc = check_vocab(srv, &q->sampling, e))) return rc;
    p->gp.sampling = q->sampling;
    p->gp.n_logprobs = q->n_logprobs;
    /* max_tokens beyond the context is not rejected (OpenAI would): the
     * generation stops at the context with finish "length"; under a bounded
     * KV policy a generation may run past the context */
    long long cap = bounded ? ZL_MAX_TOKENS_BOUNDED : zl_sched_n_ctx(srv->sched);
    p->gp.max_tokens = (int)(q->max_tokens > cap ? cap : q->max_tokens);
    p->gp.stream_buffer = q->stream_buffer;
    p->gp.strip_leading_space = q->kind != ZL_REQ_COMPLETION;
    if (ctl) {
        p->gp.ctl = ctl->ctl;
        p->gp.has_ctl = 1;
    }
    for (int i = 0; i < q->n_stops; i++) p->stops[p->gp.n_stops++] = q->stops[i];
    p->n_user_stops = p->gp.n_stops;
    const char *extra = q->kind != ZL_REQ_COMPLETION ? zl_chat_fmt_extra_stop(&srv->tpl) : NULL;
    if (extra) p->stops[p->gp.n_stops++] = extra;
    p->gp.stops = p->stops;
    p->n_per_prompt = q->n;
    size_t n = 0;
    if (q->kind != ZL_REQ_COMPLETION) {
        zl_chat_msg *own = NULL;
        if (!msgs) { /* the request's own conversation */
            if (!(own = request_chat(q))) return PIPE_OOM(e);
            msgs = own;
            n_msgs = q->n_msgs;
        }
        if (zl_tools_renders(q) || srv->tpl.thinks) {
            /* tools, calls, tool turns or a thinking template: the JSON render, its text kept for the plan */
            zl_err err = {0};
            char *text = zl_tools_renders(q) ? zl_tools_render(&srv->tpl, q, &err)
                                             : zl_chat_fmt_render(&srv->tpl, msgs, n_msgs, &err);
            free(own);
            if (!text && err.code == ZL_ENOMEM) return PIPE_OOM(e);
            if (!text) return zl_verr_set(e, "messages", "messages: chat template: %s", err.msg);
            rc = tokenize_text(srv, ctl, text, strlen(text), zl_chat_fmt_parse_special(&srv->tpl), "messages",
                               &p->ids[0], &p->mask[0], &n, e);
            if (!rc) rc = zl_tools_plan_make(&srv->tpl, q, text, &p->plan, e);
            free(text);
        } else {
            rc = zl_pipeline_chat_tokens(srv, ctl, msgs, n_msgs, &p->ids[0], &p->mask[0], &n, e);
            free(own);
            if (!rc) rc = zl_tools_plan_make(&srv->tpl, q, NULL, &p->plan, e);
        }
        if (rc) return rc;
        p->n_ids[0] = (int)n;
        p->n_sets = 1;
        if ((rc = zl_pipeline_prompt_limit(srv, bounded, n, "messages", e))) return rc;
    } else {
        for (int i = 0; i < q->n_prompts; i++) {
            rc = zl_pipeline_prompt_tokens(srv, ctl, &q->prompts[i], &p->ids[i], &p->mask[i], &n, e);
            p->n_sets = i + 1;
            if (rc) return rc;
            p->n_ids[i] = (int)n;
        }
    }
    if (q->kind == ZL_REQ_COMPLETION && (rc = zl_tools_plan_make(&srv->tpl, q, NULL, &p->plan, e))) return rc;
    p->gp.grammar = p->plan.grammar;
    p->gp.grammar_trigger = p->plan.trigger;
    p->gp.think_budget = p->plan.think && q->reasoning_budget > 0 ? q->reasoning_budget : 0;
    p->gp.think_inside = p->plan.think_inside;
    p->n = p->n_sets * q->n;
    if (p->n > ZL_REQ_MAX_CHOICES)
        return zl_verr_set(e, "n", "n: at most %d choices per request (%d prompts x n = %d)", ZL_REQ_MAX_CHOICES,
                           p->n_sets, p->n);
    return 0;
}

void zl_prepared_free(zl_prepared *p) {
    zl_tools_plan_free(&p->plan);
    for (int i = 0; i < ZL_REQ_MAX_CHOICES; i++) { /* a failed step may leave its slot filled past n_sets */
        free(p->ids[i]);
        free(p->mask[i]);
    }
    memset(p, 0, sizeof *p);
}

zl_gen *zl_pipeline_submit(zl_sched *s, zl_prepared *p, double t_start, int *busy) {
    int32_t *pp[ZL_REQ_MAX_CHOICES];
    int np[ZL_REQ_MAX_CHOICES];
    uint8_t *pm[ZL_REQ_MAX_CHOICES];
    int any_mask = 0, per = p->n_per_prompt > 0 ? p->n_per_prompt : 1;
    for (int i = 0; i < p->n; i++) {
        pp[i] = p->ids[i / per];
        np[i] = p->n_ids[i / per];
        pm[i] = p->mask[i / per];
        any_mask |= pm[i] != NULL;
    }
    p->gp.anchors = any_mask ? pm : NULL;
    zl_gen *g = zl_gen_start(s, pp, np, p->n, &p->gp, t_start, busy);
    p->gp.anchors = NULL;
    return g;
}

/* ---------------- replies ---------------- */

enum MHD_Result zl_reply_verr(zl_req *r, int rc, const zl_verr *e) {
    if (rc == -2) return zl_reply_error(r, ZL_E_INTERNAL, NULL, "out of memory");
    return zl_reply_error(r, ZL_E_INVALID, e->param, "%s", e->msg);
}

enum MHD_Result zl_pipeline_reject(zl_req *r, zl_request *q, const zl_verr *e) {
    zl_request_free(q);
    return zl_reply_verr(r, -1, e);
}

typedef struct pipe_stream {
    zl_result res;
    const zl_emitter *em;
    int started;
    int *reported; /* per choice: its end was emitted */
} pipe_stream;

static void pipe_produce(zl_sse *s, int timeout_ms) {
    pipe_stream *ps = s->ud;
    zl_result *res = &ps->res;
    zl_gen *g = res->g;
    if (!ps->started) {
        ps->started = 1;
        ps->em->start(s, res);
        return;
    }
    int done = zl_gen_poll(g, timeout_ms);
    for (int i = 0; i < g->n; i++) {
        const zl_gen_choice *c = &g->ch[i];
        size_t len;
        const char *t = zl_gen_take(g, i, &len);
        int nt = 0;
        const zl_job_tok *toks = zl_gen_take_toks(g, i, &nt);
        if (!res->logprobs) toks = NULL, nt = 0;
        int ended = c->end != ZL_GEN_RUNNING && !ps->reported[i];
        if (ended) ps->reported[i] = 1;
        if (ended && c->end == ZL_GEN_ERROR) {
            res->failed = 1;
            ps->em->error(s, res, i);
            continue;
        }
        zl_event ev = {.choice = i, .text = t, .len = len, .toks = toks, .n_toks = nt,
                       .end = ended ? c->end : ZL_GEN_RUNNING, .stop = ended ? user_stop(res, c) : NULL};
        if (res->split) {
            zl_tools_event(res, i, ended, 0, &ev);
            if (!ev.len && !ev.reasoning_len && !ev.n_cd && !ended && !nt) continue;
        } else if (!len && !ended && !nt) {
            continue;
        }
        ps->em->delta(s, res, &ev);
    }
    if (!done) return;
    zl_result_finish(res);
    ps->em->end(s, res);
    if (s->diag_full) zl_server_timing(&res->timing, s->server_timing, sizeof s->server_timing);
    s->finished = 1;
}

static void pipe_destroy(zl_sse *s) {
    pipe_stream *ps = s->ud;
    if (!ps) return;
    zl_tools_split_free(&ps->res);
    zl_gen_free(ps->res.g);
    free(ps->reported);
    free(ps);
}

static enum MHD_Result reply_stream(zl_req *r, zl_result *res, const zl_emitter *em) {
    zl_sse *s = calloc(1, sizeof *s);
    pipe_stream *ps = calloc(1, sizeof *ps);
    if (!s || !ps || !(ps->reported = calloc((size_t)res->n, sizeof(int)))) {
        free(s);
        if (ps) free(ps->reported);
        free(ps);
        zl_tools_split_free(res);
        zl_gen_free(res->g);
        return zl_reply_error(r, ZL_E_INTERNAL, NULL, "out of memory");
    }
    ps->res = *res;
    ps->em = em;
    s->ud = ps;
    s->produce = pipe_produce;
    s->destroy = pipe_destroy;
    return zl_reply_sse(r, s);
}

int zl_result_error(const zl_result *res, int i, const char **param, char *msg, size_t cap) {
    const zl_gen *g = res->g;
    *param = NULL;
    snprintf(msg, cap, "generation failed");
    if (i < 0 || i >= g->n || g->ch[i].end != ZL_GEN_ERROR || !g->ch[i].job) return ZL_E_INTERNAL;
    zl_job_report rep;
    zl_job_get_report(g->sched, g->ch[i].job, &rep);
    if (rep.error[0]) snprintf(msg, cap, "generation failed: %s", rep.error);
    /* the one failure the request itself causes after it was accepted: its grammar is too
     * ambiguous for the matcher's work bound on some byte (grammar.h) */
    if (rep.error_code == ZL_ERANGE && res->grammar_param && !strncmp(rep.error, "grammar: ", 9)) {
        *param = res->grammar_param;
        return ZL_E_INVALID;
    }
    return rep.retryable ? ZL_E_UNAVAILABLE : ZL_E_INTERNAL;
}

/* A failed generation: the first failed choice's report (zl_result_error);
 * 503 (Retry-After) only when every failure was transient. */
static enum MHD_Result reply_failed(zl_req *r, const zl_result *res) {
    const zl_gen *g = res->g;
    int kind = -1;
    const char *param = NULL;
    char why[320] = "generation failed";
    for (int i = 0; i < g->n; i++) {
        if (g->ch[i].end != ZL_GEN_ERROR) continue;
        const char *p = NULL;
        char m[320];
        int k = zl_result_error(res, i, &p, m, sizeof m);
        if (kind < 0 || (kind == ZL_E_UNAVAILABLE && k != ZL_E_UNAVAILABLE)) {
            kind = k;
            param = p;
            snprintf(why, sizeof why, "%s", m);
        }
    }
    return zl_reply_error(r, kind < 0 ? ZL_E_INTERNAL : (zl_ekind)kind, param, "%s", why);
}

static enum MHD_Result reply_whole_split(zl_req *r, zl_result *res, const zl_emitter *em);
static enum MHD_Result reply_whole(zl_req *r, zl_result *res, const zl_emitter *em) {
    enum MHD_Result ret = reply_whole_split(r, res, em);
    zl_tools_split_free(res);
    return ret;
}

static enum MHD_Result reply_whole_split(zl_req *r, zl_result *res, const zl_emitter *em) {
    zl_gen *g = res->g;
    if (zl_gen_wait_all(r, g)) {
        zl_gen_free(g);
        return MHD_NO;
    }
    zl_result_finish(res);
    if (res->failed) {
        enum MHD_Result ret = reply_failed(r, res);
        zl_gen_free(g);
        return ret;
    }
    json_t *body = em->body(res);
    char st[256] = "";
    if (r->diag_full) zl_server_timing(&res->timing, st, sizeof st);
    zl_gen_free(g);
    if (!body) return zl_reply_error(r, ZL_E_INTERNAL, NULL, "out of memory");
    return zl_reply_json(r, 200, body, st);
}

/* The conversation of a chat kind as the template reads it, the session's
 * stored turns first in append mode (*all: malloc'd; its strings live as
 * long as q and sr).  Returns -1 after replying. */
static int pipe_conversation(zl_req *r, const zl_request *q, zl_sess_req *sr, zl_chat_msg **all, int *n_all) {
    zl_chat_msg *cm = request_chat(q);
    if (!cm) {
        zl_reply_error(r, ZL_E_INTERNAL, NULL, "out of memory");
        return -1;
    }
    int rc = zl_sess_merge(sr, r, cm, q->n_msgs, all, n_all);
    free(cm);
    return rc;
}

/* What a request on a session (r->sess_id) may not carry. */
static int session_rules(const zl_request *q, zl_verr *e) {
    if (q->n > 1 || q->n_prompts > 1)
        return zl_verr_set(e, "n", "n: a session request has one prompt and one choice");
    if (zl_tools_renders(q))
        return zl_verr_set(e, "tools", "tools: a session request cannot carry tools or tool turns");
    return 0;
}

int zl_pipeline_ready(zl_req *r, const zl_request *q, zl_sess_req *sr, const zl_req_ctl *ctl, zl_prepared *p) {
    zl_verr e = {{0}, {0}};
    zl_chat_msg *all = NULL;
    int n_all = 0, rc;
    memset(p, 0, sizeof *p);
    if (r->sess_id[0] && session_rules(q, &e)) {
        zl_reply_verr(r, -1, &e);
        return -1;
    }
    if (q->kind != ZL_REQ_COMPLETION && pipe_conversation(r, q, sr, &all, &n_all)) return -1;
    rc = zl_pipeline_prepare(r->srv, ctl, q, all, n_all, p, &e);
    free(all);
    if (rc) zl_reply_verr(r, rc, &e);
    return rc ? -1 : 0;
}

zl_gen *zl_pipeline_start(zl_req *r, zl_prepared *p) {
    int busy = 0;
    zl_gen *g = zl_pipeline_submit(r->srv->sched, p, r->t_start, &busy);
    if (!g && busy) zl_reply_error(r, ZL_E_BUSY, NULL, "the server is at capacity; retry shortly");
    else if (!g) zl_reply_error(r, ZL_E_INTERNAL, NULL, "out of memory");
    return g;
}

enum MHD_Result zl_pipeline_run(zl_req *r, zl_request *q, const zl_emitter *em) {
    enum MHD_Result ret = MHD_YES;
    zl_verr e = {{0}, {0}};
    zl_prepared p;
    memset(&p, 0, sizeof p);
    zl_sess_req *sr = NULL;
    int rc;
    if (zl_models_select(r, q->body, &ret)) goto out;
    if ((rc = zl_ctl_parse(zl_sched_ctl(r->srv->sched), zl_sched_n_ctx(r->srv->sched), zl_req_header, r->conn, q->body,
                           &r->ctl, &e))) {
        ret = zl_reply_verr(r, rc, &e);
        goto out;
    }
    if (!q->stream_buffer) q->stream_buffer = r->ctl.stream_buffer;
    if (zl_sess_open(r, q->body, q->user, &sr)) goto out; /* replied */
    if (zl_pipeline_ready(r, q, sr, &r->ctl, &p)) goto out;
    zl_sess_params(sr, &p.gp);
    sr = NULL; /* the generation ends it */
    zl_gen *g = zl_pipeline_start(r, &p);
    if (!g) goto out;
    zl_result res;
    zl_result_init(&res, q, &p, g, em, q->model ? q->model : r->srv->model_id);
    ret = q->stream ? reply_stream(r, &res, em) : reply_whole(r, &res, em);
out:
    zl_sess_close(sr);
    zl_prepared_free(&p);
    zl_request_free(q);
    return ret;
}
