/* api_openai.c — the OpenAI wire format: /v1/chat/completions and
 * /v1/completions bodies into a zl_request (validation names the offending
 * field), results back as OpenAI JSON and `data:` chunks ending in
 * `data: [DONE]` (the emitter), and /v1/models.  Everything between parsing
 * and formatting is pipeline.c's: this file never tokenizes or submits. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "openai.h"
#include "tools.h"

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
    if (zl_jv_bool(b, "timings_per_token", "", &q->timings_per_token, e) < 0) return -1;
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
        if (zl_jv_strings(st, "stop", ZL_REQ_MAX_STOPS, 1, q->stops, &q->n_stops, e) < 0) return -1;
    } else if (st && !json_is_null(st)) {
        return zl_verr_set(e, "stop", "stop: expected a string or an array of strings");
    }
    return 0;
}

/* response_format (text | json_object | json_schema) and grammar: one
 * grammar for the generation (tools.h); a schema outside the subset is a
 * 400 naming its keyword. */
static int parse_structured(json_t *b, zl_request *q, zl_verr *e) {
    json_t *rf = json_object_get(b, "response_format"), *gr = json_object_get(b, "grammar");
    if (gr && !json_is_null(gr)) {
        if (!json_is_string(gr)) return zl_verr_set(e, "grammar", "grammar: expected a string (GBNF-style grammar text)");
        if (rf && !json_is_null(rf)) return zl_verr_set(e, "grammar", "grammar: excludes response_format");
        return zl_tools_grammar_text(q, json_string_value(gr), "grammar", e);
    }
    if (!rf || json_is_null(rf)) return 0;
    const char *type = NULL;
    if (!json_is_object(rf)) return zl_verr_set(e, "response_format", "response_format: expected an object");
    if (zl_jv_str(rf, "type", "response_format", 1, &type, e) < 0) return -1;
    if (!strcmp(type, "text")) return 0;
    if (!strcmp(type, "json_object")) return zl_tools_json_object(q, "response_format", e);
    if (strcmp(type, "json_schema"))
        return zl_verr_set(e, "response_format", "response_format.type: '%s' is not text, json_object or json_schema", type);
    json_t *js = json_object_get(rf, "json_schema");
    if (!json_is_object(js))
        return zl_verr_set(e, "response_format.json_schema", "response_format.json_schema: expected an object");
    json_t *schema = json_object_get(js, "schema");
    if (!schema) return zl_verr_set(e, "response_format.json_schema.schema", "response_format.json_schema.schema: field required");
    return zl_tools_schema(q, schema, "response_format.json_schema.schema", e);
}

/* One tool: {type: function, function: {name, description?, parameters?}}. */
static int oai_tool(json_t *t, const char *f, zl_request *q, zl_verr *e) {
    const char *type = NULL, *name = NULL, *desc = NULL;
    if (zl_jv_str(t, "type", f, 1, &type, e) < 0) return -1;
    if (strcmp(type, "function")) return zl_verr_set(e, f, "%s.type: '%s' is not supported (only \"function\")", f, type);
    json_t *fn = json_object_get(t, "function");
    char ff[64];
    snprintf(ff, sizeof ff, "%s.function", f);
    if (!json_is_object(fn)) return zl_verr_set(e, ff, "%s: expected an object", ff);
    if (zl_jv_str(fn, "name", ff, 1, &name, e) < 0 || zl_jv_str(fn, "description", ff, 0, &desc, e) < 0) return -1;
    snprintf(ff, sizeof ff, "%s.function.parameters", f);
    return zl_tools_add(q, name, desc, json_object_get(fn, "parameters"), ff, e);
}

/* tools, tool_choice, parallel_tool_calls, reasoning_effort */
static int parse_tools(json_t *b, zl_request *q, zl_verr *e) {
    if (zl_tools_each(b, q, oai_tool, e) < 0) return -1;
    json_t *tc = json_object_get(b, "tool_choice");
    if (tc && json_is_string(tc)) {
        const char *c = json_string_value(tc);
        if (!strcmp(c, "auto")) q->tool_choice = ZL_TOOLS_AUTO;
        else if (!strcmp(c, "none")) q->tool_choice = ZL_TOOLS_NONE;
        else if (!strcmp(c, "required")) q->tool_choice = ZL_TOOLS_REQUIRED;
        else return zl_verr_set(e, "tool_choice", "tool_choice: '%s' is not auto, none, required or a function", c);
    } else if (tc && json_is_object(tc)) {
        json_t *fn = json_object_get(tc, "function");
        if (!json_is_object(fn) || zl_jv_str(fn, "name", "tool_choice.function", 1, &q->tool_name, e) < 0)
            return e->msg[0] ? -1 : zl_verr_set(e, "tool_choice", "tool_choice: expected {\"type\": \"function\", \"function\": {\"name\": ...}}");
        q->tool_choice = ZL_TOOLS_NAMED;
    } else if (tc && !json_is_null(tc)) {
        return zl_verr_set(e, "tool_choice", "tool_choice: expected a string or an object");
    }
    if (zl_tools_check_choice(q, e) < 0) return -1;
    if (zl_jv_bool(b, "parallel_tool_calls", "", &q->parallel_tools, e) < 0) return -1;
    if (!json_object_get(b, "parallel_tool_calls")) q->parallel_tools = 1;
    const char *effort = NULL;
    if (zl_jv_str(b, "reasoning_effort", "", 0, &effort, e) < 0) return -1;
    if (effort && (q->reasoning_budget = zl_think_effort_budget(effort)) < 0)
        return zl_verr_set(e, "reasoning_effort", "reasoning_effort: '%s' is not low, medium or high", effort);
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

/* The calls of ev: whole ({id, type, function: {name, arguments}}) or as
 * stream deltas: {index, id, type, function: {name, arguments: ""...}} the
 * first time, then {index, function: {arguments: the next fragment}}. */
static json_t *calls_json(const zl_result *res, const zl_event *ev, int stream) {
    json_t *arr = json_array();
    for (int i = 0; i < ev->n_cd; i++) {
        const zl_call_delta *d = &ev->cd[i];
        json_t *fn = json_pack("{s:o}", "arguments", zl_json_lossy_string(d->args, d->args_len)), *one = json_object();
        if (stream) json_object_set_new(one, "index", json_integer(d->k));
        if (d->head) {
            char id[96];
            zl_tools_call_id(res, ev->choice, d->k, "call_", id, sizeof id);
            json_object_set_new(one, "id", json_string(id));
            json_object_set_new(one, "type", json_string("function"));
            json_object_set_new(fn, "name", json_string(zl_tc_get(ev->calls, d->k)->name));
        }
        json_object_set_new(one, "function", fn);
        json_array_append_new(arr, one);
    }
    return arr;
}

/* One choice: a chunk's delta (stream) or a whole choice (body). */
static json_t *choice_json(const zl_result *res, const zl_event *ev, int whole) {
    json_t *text = zl_json_lossy_string(ev->text, ev->len), *lp = logprobs_json(res, ev, whole), *one;
    if (res->kind == ZL_REQ_CHAT && whole) {
        int called = ev->n_cd > 0;
        json_t *msg = json_pack("{s:s, s:o}", "role", "assistant", "content",
                                called && !ev->len ? (json_decref(text), json_null()) : text);
        if (ev->reasoning_len) json_object_set_new(msg, "reasoning_content", zl_json_lossy_string(ev->reasoning, ev->reasoning_len));
        if (called) json_object_set_new(msg, "tool_calls", calls_json(res, ev, 0));
        one = json_pack("{s:i, s:o, s:o}", "index", ev->choice, "message", msg, "logprobs", lp);
    } else if (res->kind == ZL_REQ_CHAT) {
        json_t *delta = ev->len ? json_pack("{s:o}", "content", text) : (json_decref(text), json_object());
        if (ev->reasoning_len)
            json_object_set_new(delta, "reasoning_content", zl_json_lossy_string(ev->reasoning, ev->reasoning_len));
        if (ev->n_cd) json_object_set_new(delta, "tool_calls", calls_json(res, ev, 1));
        one = json_pack("{s:i, s:o, s:o}", "index", ev->choice, "delta", delta, "logprobs", lp);
    } else {
        one = json_pack("{s:i, s:o, s:o}", "index", ev->choice, "text", text, "logprobs", lp);
    }
    const char *fin = ev->end == ZL_GEN_EOG && zl_tools_called(ev) ? "tool_calls" : finish_str(ev->end);
    json_object_set_new(one, "finish_reason", ev->end != ZL_GEN_RUNNING ? json_string(fin) : json_null());
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
    if (res->timings_per_token) {
        zl_gen_timing t;
        zl_result_timing_now(res, &t);
        json_object_set_new(c, "timings", zl_timings_json(&t));
    }
    zl_sse_event(s, NULL, c);
}

static void oai_error(zl_sse *s, const zl_result *res, int choice) {
    const char *param = NULL;
    char msg[320];
    int status, kind = zl_result_error(res, choice, &param, msg, sizeof msg);
    zl_sse_event(s, NULL, zl_error_json(ZL_API_OPENAI, (zl_ekind)kind, param, msg, &status));
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

/* An assistant turn's tool_calls, a tool turn's tool_call_id. */
static int parse_msg_tools(json_t *m, const char *role, const char *f, zl_request_msg *out, zl_verr *e) {
    char p[96];
    if (!strcmp(role, "tool")) {
        snprintf(p, sizeof p, "%s", f);
        return zl_jv_str(m, "tool_call_id", p, 1, &out->tool_call_id, e) < 0 ? -1 : 0;
    }
    json_t *tc = json_object_get(m, "tool_calls");
    if (!tc || json_is_null(tc)) return 0;
    snprintf(p, sizeof p, "%s.tool_calls", f);
    if (strcmp(role, "assistant")) return zl_verr_set(e, p, "%s: only an assistant turn makes calls", p);
    if (!json_is_array(tc)) return zl_verr_set(e, p, "%s: expected an array", p);
    size_t i;
    json_t *c;
    json_array_foreach(tc, i, c) {
        char cp[128];
        snprintf(cp, sizeof cp, "%s[%zu]", p, i);
        const char *id = NULL, *name = NULL;
        json_t *fn = json_object_get(c, "function");
        if (!json_is_object(c) || !json_is_object(fn))
            return zl_verr_set(e, cp, "%s: expected {id, type: function, function: {name, arguments}}", cp);
        if (zl_jv_str(c, "id", cp, 0, &id, e) < 0 || zl_jv_str(fn, "name", cp, 1, &name, e) < 0) return -1;
        json_t *args = zl_tools_args_object(json_object_get(fn, "arguments"));
        if (!args) return zl_verr_set(e, cp, "%s.function.arguments: expected a JSON object (or its text)", cp);
        int rc = zl_tools_add_call(&out->tool_calls, id, name, args);
        json_decref(args);
        if (rc) return zl_verr_set(e, "", "out of memory");
    }
    return 0;
}

static int parse_chat(json_t *b, zl_request *q, zl_verr *e) {
    if (parse_common(b, q, e) < 0 || parse_structured(b, q, e) < 0 || parse_tools(b, q, e) < 0) return -1;
    int lp = 0;
    long long top = 0;
    if (zl_jv_bool(b, "logprobs", "", &lp, e) < 0 || zl_jv_int(b, "top_logprobs", "", 0, 0, 20, &top, e) < 0)
        return -1;
    if (lp) q->n_logprobs = (int)top;
    else if (json_is_number(json_object_get(b, "top_logprobs")))
        return zl_verr_set(e, "top_logprobs", "top_logprobs: requires logprobs to be true");
    json_t *msgs = zl_jv_messages(b, e);
    return msgs ? zl_oai_parse_messages(msgs, q, e) : -1;
}

int zl_oai_parse_messages(json_t *msgs, zl_request *q, zl_verr *e) {
    static const char *const roles[] = {"system", "developer", "user", "assistant", "tool", NULL};
    json_t *m;
    size_t i;
    json_array_foreach(msgs, i, m) {
        char f[64], cf[80];
        snprintf(f, sizeof f, "messages[%zu]", i);
        snprintf(cf, sizeof cf, "%s.content", f);
        const char *role = NULL;
        if (zl_jv_role(m, f, roles, "one of system, developer, user, assistant, tool", &role, e) < 0) return -1;
        json_t *c = json_object_get(m, "content");
        if ((!c || json_is_null(c)) && strcmp(role, "assistant")) /* only an assistant turn may have none */
            return c ? zl_verr_set(e, cf, "%s: must not be null for role '%s'", cf, role)
                     : zl_verr_set(e, cf, "%s: field required", cf);
        zl_buf *text = zl_request_add_msg(q, !strcmp(role, "developer") ? "system" : role);
        if (!text) return zl_verr_set(e, "", "out of memory");
        if (c && !json_is_null(c) && zl_jv_text_parts(c, cf, "content parts", text, e) < 0) return -1;
        zl_buf_puts(text, "");
        if (text->oom) return zl_verr_set(e, "", "out of memory");
        if (parse_msg_tools(m, role, f, &q->msgs[q->n_msgs - 1], e) < 0) return -1;
    }
    return 0;
}

/* ---------------- completions ---------------- */

int zl_oai_parse_prompt(json_t *x, const char *param, zl_request *q, zl_verr *e) {
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
    if (parse_common(b, q, e) < 0 || parse_structured(b, q, e) < 0) return -1;
    long long lp = 0;
    int has_lp = zl_jv_int(b, "logprobs", "", 0, 0, 20, &lp, e);
    if (has_lp < 0) return -1;
    if (has_lp) q->n_logprobs = (int)lp;
    if (!json_object_get(b, "max_tokens")) q->max_tokens = 16; /* OpenAI's default for completions */
    json_t *p = json_object_get(b, "prompt");
    if (!p) return zl_verr_set(e, "prompt", "prompt: field required");
    if (json_is_string(p) || (json_is_array(p) && json_array_size(p) > 0 && json_is_integer(json_array_get(p, 0))))
        return zl_oai_parse_prompt(p, "prompt", q, e);
    if (!json_is_array(p) || !json_array_size(p))
        return zl_verr_set(e, "prompt", "prompt: expected a string, an array of strings, or an array of token ids");
    if (json_array_size(p) > ZL_REQ_MAX_CHOICES)
        return zl_verr_set(e, "prompt", "prompt: at most %d prompts", ZL_REQ_MAX_CHOICES);
    size_t i;
    json_t *x;
    json_array_foreach(p, i, x) {
        char f[32];
        snprintf(f, sizeof f, "prompt[%zu]", i);
        if (zl_oai_parse_prompt(x, f, q, e) < 0) return -1;
    }
    return 0;
}

int zl_oai_parse(json_t *b, zl_req_kind kind, zl_request *q, zl_verr *e) {
    zl_request_init(q, kind, b);
    return kind == ZL_REQ_CHAT ? parse_chat(b, q, e) : parse_completion(b, q, e);
}

/* Both endpoints: parse into a request, then the pipeline. */
static enum MHD_Result oai_run(zl_req *r, json_t *b, zl_req_kind kind) {
    zl_request q;
    zl_verr e = {{0}, {0}};
    if (zl_oai_parse(b, kind, &q, &e) < 0) return zl_pipeline_reject(r, &q, &e);
    return zl_pipeline_run(r, &q, kind == ZL_REQ_CHAT ? &chat_emitter : &text_emitter);
}

enum MHD_Result zl_api_chat(zl_req *r, json_t *b) { return oai_run(r, b, ZL_REQ_CHAT); }
enum MHD_Result zl_api_completions(zl_req *r, json_t *b) { return oai_run(r, b, ZL_REQ_COMPLETION); }

enum MHD_Result zl_api_models(zl_req *r, json_t *body) {
    (void)body;
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
