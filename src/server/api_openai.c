/* api_openai.c — the OpenAI wire format: /v1/chat/completions and
 * /v1/completions bodies into a zl_request (validation names the offending
 * field), results back as OpenAI JSON and `data:` chunks ending in
 * `data: [DONE]` (the emitter), and /v1/models.  Everything between parsing
 * and formatting is pipeline.c's: this file never tokenizes or submits. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pipeline.h"

/* logit_bias: {"<token id>": bias in [-100, 100], ...} (OpenAI's shape);
 * the ids are checked against the model's vocabulary by the pipeline. */
static int parse_logit_bias(json_t *b, zl_request *q, zl_verr *e) {
    json_t *lb = json_object_get(b, "logit_bias");
    if (!lb || json_is_null(lb)) return 0;
    if (!json_is_object(lb))
        return zl_verr_set(e, "logit_bias", "logit_bias: expected an object mapping token ids to biases");
    if (json_object_size(lb) > ZL_REQ_MAX_LOGIT_BIAS)
        return zl_verr_set(e, "logit_bias", "logit_bias: at most %d entries, not %zu", ZL_REQ_MAX_LOGIT_BIAS,
                           json_object_size(lb));
    if (!json_object_size(lb)) return 0;
    if (!(q->bias = calloc(json_object_size(lb), sizeof *q->bias))) return zl_verr_set(e, "", "out of memory");
    const char *k;
    json_t *v;
    int n = 0;
    json_object_foreach(lb, k, v) {
        char *end = NULL;
        long long id = -1;
        if (*k >= '0' && *k <= '9' && strlen(k) <= 10) id = strtoll(k, &end, 10);
        if (id < 0 || id > INT32_MAX || !end || *end)
            return zl_verr_set(e, "logit_bias", "logit_bias: key '%.32s' is not a token id (a non-negative integer)", k);
        if (!json_is_number(v))
            return zl_verr_set(e, "logit_bias", "logit_bias[\"%s\"]: expected a number in [-100, 100]", k);
        double d = json_number_value(v);
        if (!(d >= -100 && d <= 100))
            return zl_verr_set(e, "logit_bias", "logit_bias[\"%s\"]: %g is outside [-100, 100]", k, d);
        q->bias[n++] = (zl_logit_bias){(int32_t)id, (float)d};
    }
    q->sampling.logit_bias = q->bias;
    q->sampling.n_logit_bias = n;
    return 0;
}

zl_sampling zl_oai_sampling_defaults(void) {
    return (zl_sampling){.temp = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .repeat_penalty = 1.0f,
                         .repeat_last_n = 64, .presence_penalty = 0, .frequency_penalty = 0, .seed = 0};
}

/* Sampling and limits common to both endpoints. */
static int parse_common(json_t *b, zl_request *q, zl_verr *e) {
    double d;
    long long v;
    if (zl_jv_str(b, "model", "", 0, &q->model, e) < 0) return -1;
    if (zl_jv_str(b, "user", "", 0, &q->user, e) < 0) return -1;
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
    NUMF("temperature", 0, 2, q->sampling.temp)
    NUMF("top_p", 0, 1, q->sampling.top_p)
    NUMF("min_p", 0, 1, q->sampling.min_p)
    NUMF("frequency_penalty", -2, 2, q->sampling.frequency_penalty)
    NUMF("presence_penalty", -2, 2, q->sampling.presence_penalty)
    NUMF("repeat_penalty", 0, 10, q->sampling.repeat_penalty)
#undef NUMF
    if ((h = zl_jv_int(b, "top_k", "", 0, 0, 1 << 30, &v, e)) < 0) return -1;
    if (h) q->sampling.top_k = (int)v;
    if (parse_logit_bias(b, q, e) < 0) return -1;
    int has = zl_jv_int(b, "seed", "", 0, -(1LL << 62), 1LL << 62, &v, e);
    if (has < 0) return -1;
    q->sampling.seed = has ? (uint64_t)v : zl_rand_seed();
    if ((h = zl_jv_int(b, "n", "", 0, 1, 16, &v, e)) < 0) return -1;
    if (h) q->n = (int)v;
    if (zl_jv_int(b, "max_tokens", "", 0, 1, 1LL << 30, &q->max_tokens, e) < 0) return -1;
    if (q->kind == ZL_REQ_CHAT && zl_jv_int(b, "max_completion_tokens", "", 0, 1, 1LL << 30, &q->max_tokens, e) < 0)
        return -1;
    if ((h = zl_jv_int(b, "stream_buffer", "", 0, 0, 1 << 20, &v, e)) < 0) return -1;
    if (h) q->stream_buffer = (int)v;
    /* stop: string or array of strings */
    json_t *st = json_object_get(b, "stop");
    if (st && json_is_string(st)) {
        if (json_string_length(st)) q->stops[q->n_stops++] = json_string_value(st);
    } else if (st && json_is_array(st)) {
        if (json_array_size(st) > ZL_REQ_MAX_STOPS)
            return zl_verr_set(e, "stop", "stop: at most %d sequences", ZL_REQ_MAX_STOPS);
        size_t i;
        json_t *x;
        json_array_foreach(st, i, x) {
            char f[32];
            snprintf(f, sizeof f, "stop[%zu]", i);
            if (!json_is_string(x)) return zl_verr_set(e, f, "%s: expected a string", f);
            if (json_string_length(x)) q->stops[q->n_stops++] = json_string_value(x);
        }
    } else if (st && !json_is_null(st)) {
        return zl_verr_set(e, "stop", "stop: expected a string or an array of strings");
    }
    return 0;
}

static const char *finish_str(zl_gen_end end) {
    switch (end) {
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

static json_t *piece_bytes(const char *buf, size_t len) {
    json_t *bytes = json_array();
    for (size_t k = 0; k < len; k++) json_array_append_new(bytes, json_integer((unsigned char)buf[k]));
    return bytes;
}

/* Chat-style logprobs: {"content": [{token, logprob, bytes, top_logprobs}]} */
static json_t *chat_logprobs(zl_gen *g, const zl_job_tok *t, int n) {
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        char buf[256];
        size_t len;
        zl_gen_piece(g, t[i].id, buf, sizeof buf, &len);
        json_t *one = json_pack("{s:o, s:f, s:o}", "token", zl_json_lossy_string(buf, len), "logprob",
                                (double)t[i].logprob, "bytes", piece_bytes(buf, len));
        json_t *tops = json_array();
        for (int k = 0; k < t[i].n_top; k++) {
            zl_gen_piece(g, t[i].top_id[k], buf, sizeof buf, &len);
            json_array_append_new(tops, json_pack("{s:o, s:f, s:o}", "token", zl_json_lossy_string(buf, len),
                                                  "logprob", (double)t[i].top_lp[k], "bytes", piece_bytes(buf, len)));
        }
        json_object_set_new(one, "top_logprobs", tops);
        json_array_append_new(arr, one);
    }
    return json_pack("{s:o}", "content", arr);
}

/* Legacy completions logprobs: parallel arrays. */
static json_t *text_logprobs(zl_gen *g, const zl_job_tok *t, int n) {
    json_t *toks = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    size_t off = 0;
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

/* A stream's chunk without new tokens has none; a whole choice always has the list. */
static json_t *logprobs_json(const zl_result *res, const zl_event *ev, int whole) {
    if (!res->logprobs || (!whole && !ev->n_toks)) return json_null();
    return res->kind == ZL_REQ_CHAT ? chat_logprobs(res->g, ev->toks, ev->n_toks)
                                    : text_logprobs(res->g, ev->toks, ev->n_toks);
}

/* One choice: a chunk's delta (stream) or a whole choice (body). */
static json_t *choice_json(const zl_result *res, const zl_event *ev, int whole) {
    json_t *text = zl_json_lossy_string(ev->text, ev->len), *lp = logprobs_json(res, ev, whole), *one;
    if (res->kind == ZL_REQ_CHAT && whole) {
        one = json_pack("{s:i, s:{s:s, s:o}, s:o}", "index", ev->choice, "message", "role", "assistant", "content",
                        text, "logprobs", lp);
    } else if (res->kind == ZL_REQ_CHAT) {
        json_t *delta = ev->len ? json_pack("{s:o}", "content", text) : (json_decref(text), json_object());
        one = json_pack("{s:i, s:o, s:o}", "index", ev->choice, "delta", delta, "logprobs", lp);
    } else {
        one = json_pack("{s:i, s:o, s:o}", "index", ev->choice, "text", text, "logprobs", lp);
    }
    json_object_set_new(one, "finish_reason", ev->end != ZL_GEN_RUNNING ? json_string(finish_str(ev->end)) : json_null());
    return one;
}

/* ---------------- the emitter ---------------- */

static json_t *chunk_base(const zl_result *res) {
    json_t *c = json_pack("{s:s, s:s, s:I, s:s, s:s}", "id", res->id, "object",
                          res->kind == ZL_REQ_CHAT ? "chat.completion.chunk" : "text_completion", "created",
                          (json_int_t)res->created, "model", res->model, "system_fingerprint",
                          "zerolayer-" ZEROLAYER_VERSION);
    if (res->include_usage) json_object_set_new(c, "usage", json_null());
    return c;
}

static void oai_start(zl_sse *s, const zl_result *res) {
    if (res->kind != ZL_REQ_CHAT) return;
    json_t *c = chunk_base(res), *ch = json_array();
    for (int i = 0; i < res->n; i++)
        json_array_append_new(ch, json_pack("{s:i, s:{s:s, s:s}, s:n, s:n}", "index", i, "delta", "role",
                                            "assistant", "content", "", "logprobs", "finish_reason"));
    json_object_set_new(c, "choices", ch);
    zl_sse_event(s, NULL, c);
}

static void oai_delta(zl_sse *s, const zl_result *res, const zl_event *ev) {
    json_t *c = chunk_base(res);
    json_object_set_new(c, "choices", json_pack("[o]", choice_json(res, ev, 0)));
    zl_sse_event(s, NULL, c);
}

static void oai_error(zl_sse *s, const zl_result *res, int choice) {
    (void)res;
    (void)choice;
    zl_sse_event(s, NULL, json_pack("{s:{s:s, s:s}}", "error", "message", "generation failed", "type", "server_error"));
}

static void oai_end(zl_sse *s, const zl_result *res) {
    if (res->include_usage) {
        json_t *c = chunk_base(res);
        json_object_set_new(c, "choices", json_array());
        json_object_set_new(c, "usage", usage_json(&res->timing));
        json_object_set_new(c, "timings", zl_timings_json(&res->timing));
        zl_sse_event(s, NULL, c);
    }
    zl_buf_puts(&s->out, "data: [DONE]\n\n");
}

static json_t *oai_body(const zl_result *res) {
    json_t *choices = json_array();
    for (int i = 0; i < res->n; i++) {
        zl_event ev;
        zl_result_choice(res, i, &ev);
        json_array_append_new(choices, choice_json(res, &ev, 1));
    }
    return json_pack("{s:s, s:s, s:I, s:s, s:s, s:o, s:o, s:o}", "id", res->id, "object",
                     res->kind == ZL_REQ_CHAT ? "chat.completion" : "text_completion", "created",
                     (json_int_t)res->created, "model", res->model, "system_fingerprint",
                     "zerolayer-" ZEROLAYER_VERSION, "choices", choices, "usage", usage_json(&res->timing), "timings",
                     zl_timings_json(&res->timing));
}

static const zl_emitter chat_emitter = {"chatcmpl-", oai_start, oai_delta, oai_error, oai_end, oai_body};
static const zl_emitter text_emitter = {"cmpl-", oai_start, oai_delta, oai_error, oai_end, oai_body};

/* ---------------- chat ---------------- */

static int parse_content(json_t *c, const char *path, zl_buf *out, zl_verr *e) {
    if (json_is_string(c)) { zl_buf_puts(out, json_string_value(c)); return 0; }
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

static int parse_chat(json_t *b, zl_request *q, zl_verr *e) {
    if (parse_common(b, q, e) < 0) return -1;
    int lp = 0;
    long long top = 0;
    if (zl_jv_bool(b, "logprobs", "", &lp, e) < 0 || zl_jv_int(b, "top_logprobs", "", 0, 0, 20, &top, e) < 0)
        return -1;
    if (lp) q->n_logprobs = (int)top;
    else if (json_is_number(json_object_get(b, "top_logprobs")))
        return zl_verr_set(e, "top_logprobs", "top_logprobs: requires logprobs to be true");
    json_t *msgs = json_object_get(b, "messages");
    if (!msgs) return zl_verr_set(e, "messages", "messages: field required");
    if (!json_is_array(msgs) || !json_array_size(msgs))
        return zl_verr_set(e, "messages", "messages: expected a non-empty array");
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        char f[64], cf[80];
        snprintf(f, sizeof f, "messages[%zu]", i);
        snprintf(cf, sizeof cf, "%s.content", f);
        const char *role = NULL;
        if (!json_is_object(m)) return zl_verr_set(e, f, "%s: expected an object", f);
        if (zl_jv_str(m, "role", f, 1, &role, e) < 0) return -1;
        if (strcmp(role, "system") && strcmp(role, "developer") && strcmp(role, "user") && strcmp(role, "assistant") &&
            strcmp(role, "tool"))
            return zl_verr_set(e, f, "%s.role: '%s' is not one of system, developer, user, assistant, tool", f, role);
        json_t *c = json_object_get(m, "content");
        if ((!c || json_is_null(c)) && strcmp(role, "assistant")) /* only an assistant turn may have none */
            return c ? zl_verr_set(e, cf, "%s: must not be null for role '%s'", cf, role)
                     : zl_verr_set(e, cf, "%s: field required", cf);
        zl_buf *text = zl_request_add_msg(q, !strcmp(role, "developer") ? "system" : role);
        if (!text) return zl_verr_set(e, "", "out of memory");
        if (c && !json_is_null(c) && parse_content(c, cf, text, e) < 0) return -1;
        zl_buf_puts(text, "");
        if (text->oom) return zl_verr_set(e, "", "out of memory");
    }
    return 0;
}

enum MHD_Result zl_api_chat(zl_req *r, json_t *b) {
    zl_request q;
    zl_verr e = {{0}, {0}};
    zl_request_init(&q, ZL_REQ_CHAT, b);
    if (parse_chat(b, &q, &e) < 0) return zl_pipeline_reject(r, &q, &e);
    return zl_pipeline_run(r, &q, &chat_emitter);
}

/* ---------------- completions ---------------- */

static int add_prompt(zl_request *q, json_t *x, const char *param, zl_verr *e) {
    zl_request_prompt *pr = &q->prompts[q->n_prompts++];
    snprintf(pr->param, sizeof pr->param, "%s", param);
    if (json_is_string(x)) {
        pr->text = json_string_value(x);
        pr->len = json_string_length(x);
    } else if (json_is_array(x)) {
        pr->ids = x;
    } else {
        return zl_verr_set(e, "prompt", "%s: expected a string or an array of token ids", param);
    }
    return 0;
}

/* prompt: "text" | ["text", ...] | [ids...] | [[ids...], ...] */
static int parse_completion(json_t *b, zl_request *q, zl_verr *e) {
    if (parse_common(b, q, e) < 0) return -1;
    long long lp = 0;
    int has_lp = zl_jv_int(b, "logprobs", "", 0, 0, 20, &lp, e);
    if (has_lp < 0) return -1;
    if (has_lp) q->n_logprobs = (int)lp;
    if (!json_object_get(b, "max_tokens")) q->max_tokens = 16; /* OpenAI's default for completions */
    json_t *p = json_object_get(b, "prompt");
    if (!p) return zl_verr_set(e, "prompt", "prompt: field required");
    if (json_is_string(p) || (json_is_array(p) && json_array_size(p) > 0 && json_is_integer(json_array_get(p, 0))))
        return add_prompt(q, p, "prompt", e);
    if (!json_is_array(p) || !json_array_size(p))
        return zl_verr_set(e, "prompt", "prompt: expected a string, an array of strings, or an array of token ids");
    if (json_array_size(p) > ZL_REQ_MAX_CHOICES)
        return zl_verr_set(e, "prompt", "prompt: at most %d prompts", ZL_REQ_MAX_CHOICES);
    size_t i;
    json_t *x;
    json_array_foreach(p, i, x) {
        char f[32];
        snprintf(f, sizeof f, "prompt[%zu]", i);
        if (add_prompt(q, x, f, e) < 0) return -1;
    }
    return 0;
}

enum MHD_Result zl_api_completions(zl_req *r, json_t *b) {
    zl_request q;
    zl_verr e = {{0}, {0}};
    zl_request_init(&q, ZL_REQ_COMPLETION, b);
    if (parse_completion(b, &q, &e) < 0) return zl_pipeline_reject(r, &q, &e);
    return zl_pipeline_run(r, &q, &text_emitter);
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
