/* api_openai.c — OpenAI-compatible /v1/chat/completions, /v1/completions
 * and /v1/models.  Validation names the offending field; generation goes
 * through gen.h; streaming sends `data:` chunks and `data: [DONE]`. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http.h"

#define MAX_STOPS 16
#define MAX_CHOICES 64
#define MAX_LOGIT_BIAS 1024

typedef struct oai_req {
    int chat, stream, include_usage, logprobs, n;
    zl_gen_params gp;
    const char *stops[MAX_STOPS + 1];
    const char *model;
    long long max_tokens;
    int has_seed;
    zl_logit_bias bias[MAX_LOGIT_BIAS];
} oai_req;

/* logit_bias: {"<token id>": bias in [-100, 100], ...} (OpenAI's shape). */
static int parse_logit_bias(json_t *b, int n_vocab, oai_req *q, zl_verr *e) {
    json_t *lb = json_object_get(b, "logit_bias");
    if (!lb || json_is_null(lb)) return 0;
    if (!json_is_object(lb))
        return zl_verr_set(e, "logit_bias", "logit_bias: expected an object mapping token ids to biases");
    if (json_object_size(lb) > MAX_LOGIT_BIAS)
        return zl_verr_set(e, "logit_bias", "logit_bias: at most %d entries, not %zu", MAX_LOGIT_BIAS,
                           json_object_size(lb));
    const char *k;
    json_t *v;
    int n = 0;
    json_object_foreach(lb, k, v) {
        char *end = NULL;
        long long id = -1;
        if (*k >= '0' && *k <= '9' && strlen(k) <= 10) id = strtoll(k, &end, 10);
        if (id < 0 || !end || *end)
            return zl_verr_set(e, "logit_bias", "logit_bias: key '%.32s' is not a token id (a non-negative integer)", k);
        if (id >= n_vocab)
            return zl_verr_set(e, "logit_bias",
                               "logit_bias: token id %lld is out of the vocabulary of %d tokens (ids 0..%d)", id,
                               n_vocab, n_vocab - 1);
        if (!json_is_number(v))
            return zl_verr_set(e, "logit_bias", "logit_bias[\"%s\"]: expected a number in [-100, 100]", k);
        double d = json_number_value(v);
        if (!(d >= -100 && d <= 100))
            return zl_verr_set(e, "logit_bias", "logit_bias[\"%s\"]: %g is outside [-100, 100]", k, d);
        q->bias[n++] = (zl_logit_bias){(int32_t)id, (float)d};
    }
    q->gp.sampling.logit_bias = n ? q->bias : NULL;
    q->gp.sampling.n_logit_bias = n;
    return 0;
}

zl_sampling zl_oai_sampling_defaults(void) {
    return (zl_sampling){.temp = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .repeat_penalty = 1.0f,
                         .repeat_last_n = 64, .presence_penalty = 0, .frequency_penalty = 0, .seed = 0};
}

/* Sampling and limits common to both endpoints. */
static int parse_common(zl_req *r, json_t *b, oai_req *q, zl_verr *e) {
    double d;
    long long v;
    q->gp.sampling = zl_oai_sampling_defaults();
    q->gp.n_logprobs = -1;
    q->model = r->srv->model_id;
    q->n = 1;
    if (zl_ctl_parse(r, b, e) < 0) return -1;
    q->gp.ctl = r->ctl.ctl;
    q->gp.has_ctl = 1;
    if (zl_jv_str(b, "model", "", 0, &q->model, e) < 0) return -1;
    if (zl_jv_bool(b, "stream", "", &q->stream, e) < 0) return -1;
    json_t *so = json_object_get(b, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so)) return zl_verr_set(e, "stream_options", "stream_options: expected an object");
        if (zl_jv_bool(so, "include_usage", "stream_options", &q->include_usage, e) < 0) return -1;
    }
    int h;
#define NUMF(key, lo, hi, dst)                                        \
    if ((h = zl_jv_num(b, key, "", lo, hi, &d, e)) < 0) return -1;    \
    if (h) dst = (float)d;
    NUMF("temperature", 0, 2, q->gp.sampling.temp)
    NUMF("top_p", 0, 1, q->gp.sampling.top_p)
    NUMF("min_p", 0, 1, q->gp.sampling.min_p)
    NUMF("frequency_penalty", -2, 2, q->gp.sampling.frequency_penalty)
    NUMF("presence_penalty", -2, 2, q->gp.sampling.presence_penalty)
    NUMF("repeat_penalty", 0, 10, q->gp.sampling.repeat_penalty)
#undef NUMF
    if ((h = zl_jv_int(b, "top_k", "", 0, 0, 1 << 30, &v, e)) < 0) return -1;
    if (h) q->gp.sampling.top_k = (int)v;
    if (parse_logit_bias(b, zl_llm_n_vocab(r->srv->llm), q, e) < 0) return -1;
    int has = zl_jv_int(b, "seed", "", 0, -(1LL << 62), 1LL << 62, &v, e);
    if (has < 0) return -1;
    q->gp.sampling.seed = has ? (uint64_t)v : zl_rand_seed();
    if ((h = zl_jv_int(b, "n", "", 0, 1, 16, &v, e)) < 0) return -1;
    if (h) q->n = (int)v;
    q->max_tokens = 0;
    int n_ctx = zl_sched_n_ctx(r->srv->sched);
    if (zl_jv_int(b, "max_tokens", "", 0, 1, 1LL << 30, &q->max_tokens, e) < 0) return -1;
    if (q->chat && zl_jv_int(b, "max_completion_tokens", "", 0, 1, 1LL << 30, &q->max_tokens, e) < 0) return -1;
    /* under a bounded KV policy a generation may run past the context */
    long long cap = r->ctl.bounded ? ZL_MAX_TOKENS_BOUNDED : n_ctx;
    q->gp.max_tokens = q->max_tokens > cap ? (int)cap : (int)q->max_tokens;
    if ((h = zl_jv_int(b, "stream_buffer", "", 0, 0, 1 << 20, &v, e)) < 0) return -1;
    if (h) q->gp.stream_buffer = (int)v;
    if (!q->gp.stream_buffer) q->gp.stream_buffer = r->stream_buffer;
    /* stop: string or array of strings */
    json_t *st = json_object_get(b, "stop");
    if (st && json_is_string(st)) {
        if (json_string_length(st)) q->stops[q->gp.n_stops++] = json_string_value(st);
    } else if (st && json_is_array(st)) {
        if (json_array_size(st) > MAX_STOPS) return zl_verr_set(e, "stop", "stop: at most %d sequences", MAX_STOPS);
        size_t i;
        json_t *x;
        json_array_foreach(st, i, x) {
            char f[32];
            snprintf(f, sizeof f, "stop[%zu]", i);
            if (!json_is_string(x)) return zl_verr_set(e, f, "%s: expected a string", f);
            if (json_string_length(x)) q->stops[q->gp.n_stops++] = json_string_value(x);
        }
    } else if (st && !json_is_null(st)) {
        return zl_verr_set(e, "stop", "stop: expected a string or an array of strings");
    }
    q->gp.stops = q->stops;
    return 0;
}

static const char *finish_str(const zl_gen_choice *c) {
    switch (c->end) {
    case ZL_GEN_LENGTH: return "length";
    case ZL_GEN_ERROR: return "error";
    default: return "stop";
    }
}

static json_t *usage_json(const zl_gen_timing *t) {
    return json_pack("{s:i, s:i, s:i, s:{s:i}}", "prompt_tokens", t->prompt_tokens, "completion_tokens",
                     t->generated_tokens, "total_tokens", t->prompt_tokens + t->generated_tokens,
                     "prompt_tokens_details", "cached_tokens", t->cached_tokens);
}

/* Chat-style logprobs: {"content": [{token, logprob, bytes, top_logprobs}]} */
static json_t *chat_logprobs(zl_gen *g, const zl_job_tok *t, int n) {
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        char buf[256];
        size_t len;
        json_t *one = json_object();
        zl_gen_piece(g, t[i].id, buf, sizeof buf, &len);
        json_t *bytes = json_array();
        for (size_t k = 0; k < len; k++) json_array_append_new(bytes, json_integer((unsigned char)buf[k]));
        json_object_set_new(one, "token", zl_json_lossy_string(buf, len));
        json_object_set_new(one, "logprob", json_real(t[i].logprob));
        json_object_set_new(one, "bytes", bytes);
        json_t *tops = json_array();
        for (int k = 0; k < t[i].n_top; k++) {
            zl_gen_piece(g, t[i].top_id[k], buf, sizeof buf, &len);
            json_t *b2 = json_array();
            for (size_t m = 0; m < len; m++) json_array_append_new(b2, json_integer((unsigned char)buf[m]));
            json_array_append_new(tops, json_pack("{s:o, s:f, s:o}", "token", zl_json_lossy_string(buf, len),
                                                  "logprob", (double)t[i].top_lp[k], "bytes", b2));
        }
        json_object_set_new(one, "top_logprobs", tops);
        json_array_append_new(arr, one);
    }
    return json_pack("{s:o}", "content", arr);
}

/* Legacy completions logprobs: parallel arrays. */
static json_t *text_logprobs(zl_gen *g, const zl_job_tok *t, int n, size_t offset0) {
    json_t *toks = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    size_t off = offset0;
    for (int i = 0; i < n; i++) {
        char buf[256];
        size_t len;
        zl_gen_piece(g, t[i].id, buf, sizeof buf, &len);
        json_array_append_new(toks, zl_json_lossy_string(buf, len));
        json_array_append_new(lps, json_real(t[i].logprob));
        json_array_append_new(offs, json_integer((json_int_t)off));
        off += len;
        json_t *m = json_object();
        for (int k = 0; k < t[i].n_top; k++) {
            char b2[256];
            size_t l2;
            zl_gen_piece(g, t[i].top_id[k], b2, sizeof b2, &l2);
            json_t *key = zl_json_lossy_string(b2, l2);
            json_object_set_new(m, json_string_value(key), json_real(t[i].top_lp[k]));
            json_decref(key);
        }
        json_array_append_new(tops, m);
    }
    return json_pack("{s:o, s:o, s:o, s:o}", "tokens", toks, "token_logprobs", lps, "top_logprobs", tops,
                     "text_offset", offs);
}

/* ---------------- streaming ---------------- */

typedef struct oai_stream {
    zl_gen *g;
    int chat, include_usage, logprobs, phase;
    int *reported;
    char id[64], model[256];
    long long created;
} oai_stream;

static json_t *chunk_base(oai_stream *o) {
    json_t *c = json_pack("{s:s, s:s, s:I, s:s, s:s}", "id", o->id, "object",
                          o->chat ? "chat.completion.chunk" : "text_completion", "created", (json_int_t)o->created,
                          "model", o->model, "system_fingerprint", "zerolayer-" ZEROLAYER_VERSION);
    if (o->include_usage) json_object_set_new(c, "usage", json_null());
    return c;
}

static void oai_produce(zl_sse *s, int timeout_ms) {
    oai_stream *o = s->ud;
    zl_gen *g = o->g;
    if (o->phase == 0 && o->chat) {
        json_t *c = chunk_base(o), *ch = json_array();
        for (int i = 0; i < g->n; i++)
            json_array_append_new(ch, json_pack("{s:i, s:{s:s, s:s}, s:n, s:n}", "index", i, "delta", "role",
                                                "assistant", "content", "", "logprobs", "finish_reason"));
        json_object_set_new(c, "choices", ch);
        zl_sse_event(s, NULL, c);
    }
    o->phase = 1;
    int done = zl_gen_poll(g, timeout_ms);
    for (int i = 0; i < g->n; i++) {
        size_t len;
        const char *t = zl_gen_take(g, i, &len);
        int nt = 0;
        const zl_job_tok *toks = o->logprobs ? zl_gen_take_toks(g, i, &nt) : NULL;
        if (!o->logprobs) zl_gen_take_toks(g, i, &nt);
        int ended = g->ch[i].end != ZL_GEN_RUNNING && !o->reported[i];
        if (!len && !ended && !(o->logprobs && nt)) continue;
        json_t *c = chunk_base(o), *one;
        json_t *lp = o->logprobs && nt ? (o->chat ? chat_logprobs(g, toks, nt) : text_logprobs(g, toks, nt, 0))
                                       : json_null();
        if (g->ch[i].end == ZL_GEN_ERROR && ended) {
            json_decref(c);
            json_decref(lp);
            zl_sse_event(s, NULL, json_pack("{s:{s:s, s:s}}", "error", "message", "generation failed", "type",
                                            "server_error"));
            o->reported[i] = 1;
            continue;
        }
        if (o->chat) {
            json_t *delta = len ? json_pack("{s:o}", "content", zl_json_lossy_string(t, len)) : json_object();
            one = json_pack("{s:i, s:o, s:o}", "index", i, "delta", delta, "logprobs", lp);
        } else {
            one = json_pack("{s:i, s:o, s:o}", "index", i, "text", zl_json_lossy_string(t, len), "logprobs", lp);
        }
        json_object_set_new(one, "finish_reason", ended ? json_string(finish_str(&g->ch[i])) : json_null());
        if (ended) o->reported[i] = 1;
        json_object_set_new(c, "choices", json_pack("[o]", one));
        zl_sse_event(s, NULL, c);
    }
    if (!done) return;
    zl_gen_timing t;
    zl_gen_timing_get(g, &t);
    if (o->include_usage) {
        json_t *c = chunk_base(o);
        json_object_set_new(c, "choices", json_array());
        json_object_set_new(c, "usage", usage_json(&t));
        json_object_set_new(c, "timings", zl_timings_json(&t));
        zl_sse_event(s, NULL, c);
    }
    zl_buf_puts(&s->out, "data: [DONE]\n\n");
    if (s->diag_full) zl_server_timing(&t, s->server_timing, sizeof s->server_timing);
    s->finished = 1;
}

static void oai_destroy(zl_sse *s) {
    oai_stream *o = s->ud;
    if (!o) return;
    zl_gen_free(o->g);
    free(o->reported);
    free(o);
}

/* ---------------- common run ---------------- */

static enum MHD_Result oai_run(zl_req *r, oai_req *q, int32_t **prompts, int *n_prompts, uint8_t **masks,
                               int n_prompt_sets) {
    int n = n_prompt_sets * q->n;
    int32_t *pp[MAX_CHOICES];
    int np[MAX_CHOICES];
    uint8_t *pm[MAX_CHOICES];
    if (n > MAX_CHOICES) {
        if (q->gp.on_end) q->gp.on_end(NULL, q->gp.end_ud);
        return zl_reply_error(r, ZL_E_INVALID, "n", "at most %d choices per request", MAX_CHOICES);
    }
    for (int i = 0; i < n; i++) {
        pp[i] = prompts[i / q->n];
        np[i] = n_prompts[i / q->n];
        pm[i] = masks ? masks[i / q->n] : NULL;
    }
    q->gp.anchors = masks ? pm : NULL;
    /* max_tokens beyond the context is not rejected (OpenAI would): the
     * generation stops at the context with finish_reason "length" */
    int busy = 0;
    zl_gen *g = zl_gen_start(r->srv->sched, pp, np, n, &q->gp, r->t_start, &busy);
    if (!g) {
        if (busy) return zl_reply_error(r, ZL_E_BUSY, NULL, "the server is at capacity; retry shortly");
        return zl_reply_error(r, ZL_E_INTERNAL, NULL, "out of memory");
    }
    char id[64];
    zl_rand_id(id, sizeof id, q->chat ? "chatcmpl-" : "cmpl-");
    if (q->stream) {
        zl_sse *s = calloc(1, sizeof *s);
        oai_stream *o = calloc(1, sizeof *o);
        if (!s || !o || !(o->reported = calloc((size_t)n, sizeof(int)))) {
            free(s);
            if (o) free(o->reported);
            free(o);
            zl_gen_free(g);
            return zl_reply_error(r, ZL_E_INTERNAL, NULL, "out of memory");
        }
        o->g = g;
        o->chat = q->chat;
        o->include_usage = q->include_usage;
        o->logprobs = q->gp.n_logprobs >= 0;
        o->created = (long long)time(NULL);
        snprintf(o->id, sizeof o->id, "%s", id);
        snprintf(o->model, sizeof o->model, "%s", q->model);
        s->ud = o;
        s->produce = oai_produce;
        s->destroy = oai_destroy;
        return zl_reply_sse(r, s);
    }
    if (zl_gen_wait_all(r, g)) {
        zl_gen_free(g);
        r->status = 499;
        return MHD_NO;
    }
    json_t *choices = json_array();
    for (int i = 0; i < n; i++) {
        zl_gen_choice *c = &g->ch[i];
        if (c->end == ZL_GEN_ERROR) {
            json_decref(choices);
            zl_gen_free(g);
            return zl_reply_error(r, ZL_E_INTERNAL, NULL, "generation failed");
        }
        json_t *text = zl_json_lossy_string(c->text.p ? c->text.p : "", c->text.n);
        json_t *lp = q->gp.n_logprobs >= 0
                         ? (q->chat ? chat_logprobs(g, c->toks, c->n_toks) : text_logprobs(g, c->toks, c->n_toks, 0))
                         : json_null();
        json_t *one;
        if (q->chat)
            one = json_pack("{s:i, s:{s:s, s:o}, s:o, s:s}", "index", i, "message", "role", "assistant", "content",
                            text, "logprobs", lp, "finish_reason", finish_str(c));
        else
            one = json_pack("{s:i, s:o, s:o, s:s}", "index", i, "text", text, "logprobs", lp, "finish_reason",
                            finish_str(c));
        json_array_append_new(choices, one);
    }
    zl_gen_timing t;
    zl_gen_timing_get(g, &t);
    /* the same prompt sampled n times is one prompt for billing purposes */
    t.prompt_tokens /= q->n;
    json_t *resp = json_pack("{s:s, s:s, s:I, s:s, s:s, s:o, s:o, s:o}", "id", id, "object",
                             q->chat ? "chat.completion" : "text_completion", "created", (json_int_t)time(NULL),
                             "model", q->model, "system_fingerprint", "zerolayer-" ZEROLAYER_VERSION, "choices",
                             choices, "usage", usage_json(&t), "timings", zl_timings_json(&t));
    char st[256] = "";
    if (r->diag_full) zl_server_timing(&t, st, sizeof st);
    zl_gen_free(g);
    return zl_reply_json(r, 200, resp, st);
}

/* ---------------- chat ---------------- */

static int parse_content(json_t *c, const char *path, zl_buf *out, zl_verr *e) {
    if (json_is_string(c)) { zl_buf_puts(out, json_string_value(c)); return 0; }
    if (json_is_null(c)) return 0;
    if (!json_is_array(c)) return zl_verr_set(e, path, "%s: expected a string or an array of content parts", path);
    size_t i;
    json_t *p;
    json_array_foreach(c, i, p) {
        char f[128];
        snprintf(f, sizeof f, "%s[%zu]", path, i);
        const char *type = NULL, *text = NULL;
        if (!json_is_object(p)) return zl_verr_set(e, f, "%s: expected an object", f);
        if (zl_jv_str(p, "type", f, 1, &type, e) < 0) return -1;
        if (strcmp(type, "text")) return zl_verr_set(e, f, "%s.type: '%s' is not supported (only \"text\")", f, type);
        if (zl_jv_str(p, "text", f, 1, &text, e) < 0) return -1;
        zl_buf_puts(out, text);
    }
    return 0;
}

enum MHD_Result zl_api_chat(zl_req *r, json_t *b) {
    oai_req q = {0};
    q.chat = 1;
    zl_verr e = {{0}, {0}};
    if (parse_common(r, b, &q, &e) < 0) return zl_reply_error(r, ZL_E_INVALID, e.param, "%s", e.msg);
    int lp = 0;
    long long top = 0;
    if (zl_jv_bool(b, "logprobs", "", &lp, &e) < 0 || zl_jv_int(b, "top_logprobs", "", 0, 0, 20, &top, &e) < 0)
        return zl_reply_error(r, ZL_E_INVALID, e.param, "%s", e.msg);
    if (lp) q.gp.n_logprobs = (int)top;
    else if (json_is_number(json_object_get(b, "top_logprobs")))
        return zl_reply_error(r, ZL_E_INVALID, "top_logprobs", "top_logprobs: requires logprobs to be true");
    json_t *msgs = json_object_get(b, "messages");
    if (!msgs) return zl_reply_error(r, ZL_E_INVALID, "messages", "messages: field required");
    if (!json_is_array(msgs) || !json_array_size(msgs))
        return zl_reply_error(r, ZL_E_INVALID, "messages", "messages: expected a non-empty array");
    size_t nm = json_array_size(msgs);
    zl_chat_msg *cm = calloc(nm, sizeof *cm);
    zl_buf *texts = calloc(nm, sizeof *texts);
    enum MHD_Result ret = MHD_NO;
    int32_t *ids = NULL;
    uint8_t *mask = NULL;
    size_t n_ids = 0;
    zl_sess_req *sr = NULL;
    zl_chat_msg *all = NULL;
    int n_all = 0;
    if (!cm || !texts) { ret = zl_reply_error(r, ZL_E_INTERNAL, NULL, "out of memory"); goto out; }
    for (size_t i = 0; i < nm; i++) {
        json_t *m = json_array_get(msgs, i);
        char f[64];
        snprintf(f, sizeof f, "messages[%zu]", i);
        const char *role = NULL;
        if (!json_is_object(m)) { ret = zl_reply_error(r, ZL_E_INVALID, f, "%s: expected an object", f); goto out; }
        if (zl_jv_str(m, "role", f, 1, &role, &e) < 0) { ret = zl_reply_error(r, ZL_E_INVALID, e.param, "%s", e.msg); goto out; }
        if (strcmp(role, "system") && strcmp(role, "developer") && strcmp(role, "user") && strcmp(role, "assistant") &&
            strcmp(role, "tool")) {
            ret = zl_reply_error(r, ZL_E_INVALID, f, "%s.role: '%s' is not one of system, developer, user, assistant, tool",
                                 f, role);
            goto out;
        }
        char cf[80];
        snprintf(cf, sizeof cf, "%s.content", f);
        json_t *c = json_object_get(m, "content");
        if ((!c || json_is_null(c)) && strcmp(role, "assistant")) { /* only an assistant turn may have none */
            ret = zl_reply_error(r, ZL_E_INVALID, cf, c ? "%s: must not be null for role '%s'" : "%s: field required%.0s",
                                 cf, role);
            goto out;
        }
        if (c && parse_content(c, cf, &texts[i], &e) < 0) { ret = zl_reply_error(r, ZL_E_INVALID, e.param, "%s", e.msg); goto out; }
        zl_buf_puts(&texts[i], "");
        cm[i].role = !strcmp(role, "developer") ? "system" : role;
        cm[i].content = texts[i].p;
    }
    if (zl_sess_open(r, b, json_string_value(json_object_get(b, "user")), &sr)) { ret = MHD_YES; goto out; }
    if (r->sess_id[0] && q.n > 1) { ret = zl_reply_error(r, ZL_E_INVALID, "n", "n: a session request has one choice"); goto out; }
    if (zl_sess_merge(sr, r, cm, (int)nm, &all, &n_all)) { ret = MHD_YES; goto out; }
    if (zl_chat_tokens_ctl(r, all, n_all, &ids, &mask, &n_ids)) { ret = MHD_YES; goto out; }
    if (zl_prompt_check(r, ids, n_ids, (int)q.max_tokens, "messages")) { ret = MHD_YES; goto out; }
    const char *extra = zl_chat_fmt_extra_stop(&r->srv->tpl);
    if (extra && q.gp.n_stops < MAX_STOPS + 1) q.stops[q.gp.n_stops++] = extra;
    q.gp.strip_leading_space = 1;
    {
        int np = (int)n_ids;
        zl_sess_params(sr, &q.gp);
        sr = NULL; /* the generation owns it now */
        ret = oai_run(r, &q, &ids, &np, mask ? &mask : NULL, 1);
    }
out:
    zl_sess_close(sr);
    free(all);
    free(ids);
    free(mask);
    for (size_t i = 0; texts && i < nm; i++) zl_buf_free(&texts[i]);
    free(texts);
    free(cm);
    return ret;
}

/* ---------------- completions ---------------- */

enum MHD_Result zl_api_completions(zl_req *r, json_t *b) {
    oai_req q = {0};
    zl_verr e = {{0}, {0}};
    if (parse_common(r, b, &q, &e) < 0) return zl_reply_error(r, ZL_E_INVALID, e.param, "%s", e.msg);
    long long lp = 0;
    int has_lp = zl_jv_int(b, "logprobs", "", 0, 0, 20, &lp, &e);
    if (has_lp < 0) return zl_reply_error(r, ZL_E_INVALID, e.param, "%s", e.msg);
    if (has_lp) q.gp.n_logprobs = (int)lp;
    if (!json_object_get(b, "max_tokens")) q.gp.max_tokens = 16; /* OpenAI's default for completions */
    json_t *p = json_object_get(b, "prompt");
    if (!p) return zl_reply_error(r, ZL_E_INVALID, "prompt", "prompt: field required");
    int nv = zl_llm_n_vocab(r->srv->llm);
    int32_t *prompts[MAX_CHOICES] = {0};
    uint8_t *masks[MAX_CHOICES] = {0};
    int np[MAX_CHOICES] = {0};
    int n_sets = 0;
    enum MHD_Result ret = MHD_YES;
    /* shapes: "text" | ["text", ...] | [ids...] | [[ids...], ...] */
    json_t *items[MAX_CHOICES];
    int token_form[MAX_CHOICES];
    if (json_is_string(p)) {
        items[n_sets] = p;
        token_form[n_sets++] = 0;
    } else if (json_is_array(p) && json_array_size(p) > 0 && json_is_integer(json_array_get(p, 0))) {
        items[n_sets] = p;
        token_form[n_sets++] = 1;
    } else if (json_is_array(p) && json_array_size(p) > 0) {
        if (json_array_size(p) > MAX_CHOICES)
            return zl_reply_error(r, ZL_E_INVALID, "prompt", "prompt: at most %d prompts", MAX_CHOICES);
        size_t i;
        json_t *x;
        json_array_foreach(p, i, x) {
            if (json_is_string(x)) token_form[n_sets] = 0;
            else if (json_is_array(x)) token_form[n_sets] = 1;
            else return zl_reply_error(r, ZL_E_INVALID, "prompt", "prompt[%zu]: expected a string or an array of token ids", i);
            items[n_sets++] = x;
        }
    } else {
        return zl_reply_error(r, ZL_E_INVALID, "prompt",
                              "prompt: expected a string, an array of strings, or an array of token ids");
    }
    for (int i = 0; i < n_sets; i++) {
        char f[32];
        snprintf(f, sizeof f, n_sets > 1 || json_is_array(p) ? "prompt[%d]" : "prompt", i);
        if (!token_form[i] && r->ctl.bounded) {
            size_t n = 0;
            if (zl_ctl_tokenize(r, json_string_value(items[i]), 0, f, &prompts[i], &masks[i], &n)) goto out;
            np[i] = (int)n;
        } else if (!token_form[i]) {
            size_t n = 0;
            zl_err err = {0};
            if (zl_llm_tokenize(r->srv->llm, json_string_value(items[i]), json_string_length(items[i]), 1, 0,
                                &prompts[i], &n, &err)) {
                ret = zl_reply_error(r, ZL_E_INVALID, "prompt", "%s: %s", f, err.msg);
                goto out;
            }
            np[i] = (int)n;
        } else if (r->ctl.bounded && r->ctl.anchors) {
            ret = zl_reply_error(r, ZL_E_INVALID, "zerolayer.anchors",
                                 "zerolayer.anchors: needs a text prompt (%s is token ids)", f);
            goto out;
        } else {
            size_t n = json_array_size(items[i]);
            prompts[i] = malloc((n ? n : 1) * sizeof(int32_t));
            if (!prompts[i]) { ret = zl_reply_error(r, ZL_E_INTERNAL, NULL, "out of memory"); goto out; }
            for (size_t k = 0; k < n; k++) {
                json_t *t = json_array_get(items[i], k);
                if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) >= nv) {
                    ret = zl_reply_error(r, ZL_E_INVALID, "prompt", "%s[%zu]: expected a token id in [0, %d)",
                                         token_form[i] && items[i] == p ? "prompt" : f, k, nv);
                    goto out;
                }
                prompts[i][k] = (int32_t)json_integer_value(t);
            }
            np[i] = (int)n;
        }
        if (zl_prompt_check(r, prompts[i], (size_t)np[i], q.gp.max_tokens, f)) goto out;
    }
    {
        zl_sess_req *sr = NULL;
        if (zl_sess_open(r, b, json_string_value(json_object_get(b, "user")), &sr)) goto out;
        if (r->sess_id[0] && (n_sets > 1 || q.n > 1)) {
            zl_sess_close(sr);
            ret = zl_reply_error(r, ZL_E_INVALID, "n", "a session request has one prompt and one choice");
            goto out;
        }
        zl_sess_params(sr, &q.gp);
    }
    ret = oai_run(r, &q, prompts, np, masks, n_sets);
out:
    for (int i = 0; i < n_sets; i++) free(prompts[i]), free(masks[i]);
    return ret;
}

enum MHD_Result zl_api_models(zl_req *r) {
    zl_srv *s = r->srv;
    json_t *j;
    if (s->models) {
        j = zl_models_list(s, r->api == ZL_API_ANTHROPIC);
    } else if (r->api == ZL_API_ANTHROPIC) {
        char created[32];
        time_t t = (time_t)s->started;
        strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
        j = json_pack("{s:[{s:s, s:s, s:s, s:s}], s:b, s:s, s:s}", "data", "type", "model", "id", s->model_id,
                      "display_name", s->model_id, "created_at", created, "has_more", 0, "first_id", s->model_id,
                      "last_id", s->model_id);
    } else {
        j = json_pack("{s:s, s:[{s:s, s:s, s:I, s:s, s:{s:s, s:i, s:i}}]}", "object", "list", "data", "id",
                      s->model_id, "object", "model", "created", (json_int_t)s->started, "owned_by", "zerolayer",
                      "meta", "description", zl_llm_desc(s->llm), "n_ctx", zl_sched_n_ctx(s->sched), "n_vocab",
                      zl_llm_n_vocab(s->llm));
    }
    return zl_reply_json(r, 200, j, NULL);
}
