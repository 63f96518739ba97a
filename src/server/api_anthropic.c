/* api_anthropic.c — the Anthropic Messages wire format: /v1/messages and
 * /v1/messages/count_tokens bodies into a zl_request (shared with Message
 * Batches), results back as a Message or the documented event sequence
 * (the emitter).  It never tokenizes or submits: pipeline.c does. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "anthropic.h"
#include "tools.h"

/* A message's blocks: text, tool_use (assistant), tool_result (user: each
 * becomes a tool turn), thinking (dropped: the model's own past reasoning). */
static int ant_blocks(json_t *c, const char *role, const char *path, zl_request *q, zl_verr *e) {
    zl_buf *text = zl_request_add_msg(q, role);
    if (!text) return zl_verr_set(e, "", "out of memory");
    int mi = q->n_msgs - 1;
    if (json_is_string(c)) {
        zl_buf_puts(text, json_string_value(c));
        zl_buf_puts(text, "");
        return text->oom ? zl_verr_set(e, "", "out of memory") : 0;
    }
    if (!json_is_array(c)) return zl_verr_set(e, path, "%s: expected a string or an array of content blocks", path);
    size_t i;
    json_t *p;
    json_array_foreach(c, i, p) {
        char f[128];
        snprintf(f, sizeof f, "%s[%zu]", path, i);
        const char *type = NULL, *s = NULL;
        if (!json_is_object(p)) return zl_verr_set(e, f, "%s: expected an object", f);
        if (zl_jv_str(p, "type", f, 1, &type, e) < 0) return -1;
        if (!strcmp(type, "text")) {
            if (zl_jv_str(p, "text", f, 1, &s, e) < 0) return -1;
            zl_buf_puts(&q->msgs[mi].text, s);
        } else if (!strcmp(type, "thinking") || !strcmp(type, "redacted_thinking")) {
            continue;
        } else if (!strcmp(type, "tool_use") && !strcmp(role, "assistant")) {
            const char *id = NULL, *name = NULL;
            if (zl_jv_str(p, "id", f, 1, &id, e) < 0 || zl_jv_str(p, "name", f, 1, &name, e) < 0) return -1;
            json_t *in = json_object_get(p, "input");
            if (!json_is_object(in)) return zl_verr_set(e, f, "%s.input: expected an object", f);
            if (zl_tools_add_call(&q->msgs[mi].tool_calls, id, name, in)) return zl_verr_set(e, "", "out of memory");
        } else if (!strcmp(type, "tool_result") && !strcmp(role, "user")) {
            const char *id = NULL;
            if (zl_jv_str(p, "tool_use_id", f, 1, &id, e) < 0) return -1;
            /* the result turn goes before this message's own text */
            zl_buf *rt = zl_request_add_msg(q, "tool");
            if (!rt) return zl_verr_set(e, "", "out of memory");
            zl_request_msg tmp = q->msgs[q->n_msgs - 1];
            memmove(&q->msgs[mi + 1], &q->msgs[mi], (size_t)(q->n_msgs - 1 - mi) * sizeof *q->msgs);
            q->msgs[mi] = tmp;
            q->msgs[mi].tool_call_id = id;
            json_t *rc = json_object_get(p, "content");
            char cf[160];
            snprintf(cf, sizeof cf, "%s.content", f);
            if (rc && !json_is_null(rc) && zl_jv_text_parts(rc, cf, "content blocks", &q->msgs[mi].text, e) < 0) return -1;
            zl_buf_puts(&q->msgs[mi].text, "");
            mi++;
        } else {
            return zl_verr_set(e, f, "%s.type: '%s' blocks are not supported in a%s %s turn", f, type,
                               !strcmp(role, "assistant") ? "n" : "", role);
        }
    }
    zl_buf_puts(&q->msgs[mi].text, "");
    if (q->msgs[mi].text.oom) return zl_verr_set(e, "", "out of memory");
    /* a user message of tool results only: no empty user turn after them */
    if (!q->msgs[mi].text.n && !strcmp(role, "user") && mi > 0 && !strcmp(q->msgs[mi - 1].role, "tool")) {
        zl_buf_free(&q->msgs[mi].text);
        q->n_msgs--;
    }
    return 0;
}

/* One client tool: {type?: custom, name, description?, input_schema}. */
static int ant_tool(json_t *t, const char *f, zl_request *q, zl_verr *e) {
    const char *type = NULL, *name = NULL, *desc = NULL;
    if (zl_jv_str(t, "type", f, 0, &type, e) < 0) return -1;
    if (type && strcmp(type, "custom"))
        return zl_verr_set(e, f, "%s.type: '%s' tools are not supported (only client tools with input_schema)", f, type);
    if (zl_jv_str(t, "name", f, 1, &name, e) < 0 || zl_jv_str(t, "description", f, 0, &desc, e) < 0) return -1;
    json_t *schema = json_object_get(t, "input_schema");
    char sf[64];
    snprintf(sf, sizeof sf, "%s.input_schema", f);
    if (!schema) return zl_verr_set(e, sf, "%s: field required", sf);
    return zl_tools_add(q, name, desc, schema, sf, e);
}

/* tools, tool_choice, thinking */
static int ant_tools(json_t *b, zl_request *q, zl_verr *e) {
    if (zl_tools_each(b, q, ant_tool, e) < 0) return -1;
    json_t *tc = json_object_get(b, "tool_choice");
    if (tc && !json_is_null(tc)) {
        const char *type = NULL;
        if (!json_is_object(tc) || zl_jv_str(tc, "type", "tool_choice", 1, &type, e) < 0)
            return e->msg[0] ? -1 : zl_verr_set(e, "tool_choice", "tool_choice: expected an object");
        if (!strcmp(type, "auto")) q->tool_choice = ZL_TOOLS_AUTO;
        else if (!strcmp(type, "none")) q->tool_choice = ZL_TOOLS_NONE;
        else if (!strcmp(type, "any")) q->tool_choice = ZL_TOOLS_REQUIRED;
        else if (!strcmp(type, "tool")) {
            if (zl_jv_str(tc, "name", "tool_choice", 1, &q->tool_name, e) < 0) return -1;
            q->tool_choice = ZL_TOOLS_NAMED;
        } else {
            return zl_verr_set(e, "tool_choice", "tool_choice.type: '%s' is not auto, any, tool or none", type);
        }
        int dis = 0;
        if (zl_jv_bool(tc, "disable_parallel_tool_use", "tool_choice", &dis, e) < 0) return -1;
        q->parallel_tools = !dis;
        if (zl_tools_check_choice(q, e) < 0) return -1;
    }
    json_t *th = json_object_get(b, "thinking");
    if (th && !json_is_null(th)) {
        const char *type = NULL;
        if (!json_is_object(th) || zl_jv_str(th, "type", "thinking", 1, &type, e) < 0)
            return e->msg[0] ? -1 : zl_verr_set(e, "thinking", "thinking: expected an object");
        if (!strcmp(type, "enabled")) {
            long long bt = 0;
            if (zl_jv_int(th, "budget_tokens", "thinking", 1, 1, 1 << 30, &bt, e) < 0) return -1;
            q->reasoning_budget = (int)bt;
        } else if (strcmp(type, "disabled")) {
            return zl_verr_set(e, "thinking", "thinking.type: '%s' is not enabled or disabled", type);
        }
    }
    return 0;
}

static int parse_generation(json_t *b, zl_request *q, zl_verr *e) {
    double d;
    long long v;
    int h;
    if (zl_jv_int(b, "max_tokens", "", 1, 1, 1LL << 30, &q->max_tokens, e) < 0) return -1;
    if (zl_jv_bool(b, "stream", "", &q->stream, e) < 0) return -1;
    if ((h = zl_jv_num(b, "temperature", "", 0, 1, &d, e)) < 0) return -1;
    if (h) q->sampling.temp = (float)d;
    if ((h = zl_jv_num(b, "top_p", "", 0, 1, &d, e)) < 0) return -1;
    if (h) q->sampling.top_p = (float)d;
    if ((h = zl_jv_int(b, "top_k", "", 0, 0, 1 << 30, &v, e)) < 0) return -1;
    if (h) q->sampling.top_k = (int)v;
    if ((h = zl_jv_int(b, "stream_buffer", "", 0, 0, 1 << 20, &v, e)) < 0) return -1;
    if (h) q->stream_buffer = (int)v;
    json_t *md = json_object_get(b, "metadata");
    if (md && !json_is_null(md)) {
        if (!json_is_object(md)) return zl_verr_set(e, "metadata", "metadata: expected an object");
        if (zl_jv_str(md, "user_id", "metadata", 0, &q->user, e) < 0) return -1;
    }
    json_t *ss = json_object_get(b, "stop_sequences");
    if (ss && !json_is_null(ss) && zl_jv_strings(ss, "stop_sequences", ZL_REQ_MAX_STOPS, 0, q->stops, &q->n_stops, e) < 0)
        return -1;
    return 0;
}

int zl_ant_parse(json_t *b, int count_only, zl_request *q, zl_verr *e) {
    zl_request_init(q, ZL_REQ_MESSAGES, b);
    q->sampling.seed = zl_rand_seed();
    if (zl_jv_str(b, "model", "", 1, &q->model, e) < 0) return -1;
    if (!count_only && parse_generation(b, q, e) < 0) return -1;
    json_t *sys = json_object_get(b, "system");
    if (sys && !json_is_null(sys) && zl_jv_text_parts(sys, "system", "content blocks", &q->system, e) < 0) return -1;
    json_t *msgs = zl_jv_messages(b, e);
    if (!msgs) return -1;
    zl_buf *st = q->system.n ? zl_request_add_msg(q, "system") : NULL;
    if (q->system.n && (!st || (zl_buf_put(st, q->system.p, q->system.n), zl_buf_puts(st, ""), st->oom)))
        return zl_verr_set(e, "", "out of memory");
    size_t nm = json_array_size(msgs), i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        char f[64], cf[80];
        snprintf(f, sizeof f, "messages[%zu]", i);
        snprintf(cf, sizeof cf, "%s.content", f);
        static const char *const roles[] = {"user", "assistant", NULL};
        const char *role = NULL;
        if (zl_jv_role(m, f, roles, "\"user\" or \"assistant\"", &role, e) < 0) return -1;
        json_t *c = json_object_get(m, "content");
        if (!c || json_is_null(c)) return zl_verr_set(e, cf, "%s: field required", cf);
        if (json_is_array(c) && !json_array_size(c) && !(i + 1 == nm && !strcmp(role, "assistant")))
            return zl_verr_set(e, cf, "%s: must not be empty (only the final assistant message may be)", cf);
        if (ant_blocks(c, role, cf, q, e) < 0) return -1;
    }
    return ant_tools(b, q, e);
}

static const char *stop_reason(const zl_event *ev) {
    if (ev->end == ZL_GEN_LENGTH) return "max_tokens";
    if (ev->stop) return "stop_sequence";
    if (zl_tools_called(ev)) return "tool_use";
    return "end_turn";
}

/* The content blocks of a whole reply: thinking, text, tool_use. */
static json_t *ant_content(const zl_result *res, const zl_event *ev) {
    json_t *arr = json_array();
    if (ev->reasoning_len)
        json_array_append_new(arr, json_pack("{s:s, s:o, s:s}", "type", "thinking", "thinking",
                                             zl_json_lossy_string(ev->reasoning, ev->reasoning_len), "signature", ""));
    if (ev->len || !ev->n_cd)
        json_array_append_new(arr, json_pack("{s:s, s:o}", "type", "text", "text", zl_json_lossy_string(ev->text, ev->len)));
    for (int i = 0; i < ev->n_cd; i++) {
        const zl_tc_call *c = zl_tc_get(ev->calls, ev->cd[i].k);
        char id[96];
        zl_tools_call_id(res, 0, ev->cd[i].k, "toolu_", id, sizeof id);
        json_t *in = json_loads(c->args, 0, NULL);
        json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:o}", "type", "tool_use", "id", id, "name", c->name,
                                             "input", in ? in : json_object()));
    }
    return arr;
}

enum { BLK_NONE = 0, BLK_THINKING, BLK_TEXT, BLK_TOOL };

static void blk_close(zl_sse *s, int *b) {
    if (!b[1]) return;
    zl_sse_event(s, "content_block_stop", json_pack("{s:s, s:i}", "type", "content_block_stop", "index", b[0]));
    b[0]++;
    b[1] = BLK_NONE;
}

static void blk_open(zl_sse *s, int *b, int kind) {
    if (b[1] == kind) return;
    blk_close(s, b);
    json_t *cb = kind == BLK_THINKING ? json_pack("{s:s, s:s, s:s}", "type", "thinking", "thinking", "", "signature", "")
                                      : json_pack("{s:s, s:s}", "type", "text", "text", "");
    zl_sse_event(s, "content_block_start",
                 json_pack("{s:s, s:i, s:o}", "type", "content_block_start", "index", b[0], "content_block", cb));
    b[1] = kind;
}

/* The next fragment of the open tool_use block's arguments. */
static void tool_fragment(zl_sse *s, const int *b, const zl_call_delta *d) {
    if (!d->args_len) return;
    zl_sse_event(s, "content_block_delta",
                 json_pack("{s:s, s:i, s:{s:s, s:o}}", "type", "content_block_delta", "index", b[0], "delta", "type",
                           "input_json_delta", "partial_json", zl_json_lossy_string(d->args, d->args_len)));
}

/* A streamed event with reasoning / tools: blocks opened and closed as the
 * parts arrive, in the order the model wrote them: the rest of the open
 * call's arguments, then thinking and text, then the calls begun (each a
 * tool_use block whose input_json_delta fragments follow as it is written). */
static void ant_split_delta(zl_sse *s, const zl_result *res, const zl_event *ev, int *b) {
    for (int i = 0; i < ev->n_cd; i++)
        if (!ev->cd[i].head && b[1] == BLK_TOOL && b[2] == ev->cd[i].k) tool_fragment(s, b, &ev->cd[i]);
    if (ev->reasoning_len) {
        blk_open(s, b, BLK_THINKING);
        zl_sse_event(s, "content_block_delta",
                     json_pack("{s:s, s:i, s:{s:s, s:o}}", "type", "content_block_delta", "index", b[0], "delta", "type",
                               "thinking_delta", "thinking", zl_json_lossy_string(ev->reasoning, ev->reasoning_len)));
    }
    if (ev->len) {
        blk_open(s, b, BLK_TEXT);
        zl_sse_event(s, "content_block_delta",
                     json_pack("{s:s, s:i, s:{s:s, s:o}}", "type", "content_block_delta", "index", b[0], "delta", "type",
                               "text_delta", "text", zl_json_lossy_string(ev->text, ev->len)));
    }
    for (int i = 0; i < ev->n_cd; i++) {
        const zl_call_delta *d = &ev->cd[i];
        if (!d->head) continue;
        char id[96];
        zl_tools_call_id(res, 0, d->k, "toolu_", id, sizeof id);
        blk_close(s, b);
        zl_sse_event(s, "content_block_start",
                     json_pack("{s:s, s:i, s:{s:s, s:s, s:s, s:{}}}", "type", "content_block_start", "index", b[0],
                               "content_block", "type", "tool_use", "id", id, "name", zl_tc_get(ev->calls, d->k)->name,
                               "input"));
        b[1] = BLK_TOOL;
        b[2] = d->k;
        tool_fragment(s, b, d);
    }
}

static json_t *stop_seq_json(const zl_event *ev) { return ev->stop ? json_string(ev->stop) : json_null(); }

/* ---------------- the emitter ---------------- */

static json_t *ant_body(const zl_result *res) {
    zl_event ev;
    zl_result_choice(res, 0, &ev);
    const zl_gen_timing *t = &res->timing;
    return json_pack("{s:s, s:s, s:s, s:s, s:o, s:s, s:o, s:{s:i, s:i, s:i, s:i}, s:o}", "id", res->id,
                     "type", "message", "role", "assistant", "model", res->model, "content", ant_content(res, &ev),
                     "stop_reason", stop_reason(&ev), "stop_sequence",
                     stop_seq_json(&ev), "usage", "input_tokens", t->prompt_tokens - t->cached_tokens,
                     "output_tokens", t->generated_tokens, "cache_creation_input_tokens", 0,
                     "cache_read_input_tokens", t->cached_tokens, "timings", zl_timings_json(t));
}

static void ant_start(zl_sse *s, const zl_result *res) {
    zl_sse_event(s, "message_start",
                 json_pack("{s:s, s:{s:s, s:s, s:s, s:[], s:s, s:n, s:n, s:{s:i, s:i, s:i, s:i}}}", "type",
                           "message_start", "message", "id", res->id, "type", "message", "role", "assistant",
                           "content", "model", res->model, "stop_reason", "stop_sequence", "usage", "input_tokens",
                           res->prompt_tokens, "output_tokens", 1, "cache_creation_input_tokens", 0,
                           "cache_read_input_tokens", 0));
    if (!res->split)
        zl_sse_event(s, "content_block_start",
                     json_pack("{s:s, s:i, s:{s:s, s:s}}", "type", "content_block_start", "index", 0, "content_block",
                               "type", "text", "text", ""));
    zl_sse_event(s, "ping", json_pack("{s:s}", "type", "ping"));
}

static void ant_delta(zl_sse *s, const zl_result *res, const zl_event *ev) {
    int *b = zl_tools_blocks(res, ev->choice);
    if (b) {
        ant_split_delta(s, res, ev, b);
        return;
    }
    if (ev->len)
        zl_sse_event(s, "content_block_delta",
                     json_pack("{s:s, s:i, s:{s:s, s:o}}", "type", "content_block_delta", "index", 0, "delta", "type",
                               "text_delta", "text", zl_json_lossy_string(ev->text, ev->len)));
}

static void ant_error(zl_sse *s, const zl_result *res, int choice) {
    const char *param = NULL;
    char msg[320];
    int status, kind = zl_result_error(res, choice, &param, msg, sizeof msg);
    if (param) { /* Anthropic's errors have no param field: the message names it */
        char m[400];
        snprintf(m, sizeof m, "%s: %s", param, msg);
        zl_sse_event(s, "error", zl_error_json(ZL_API_ANTHROPIC, (zl_ekind)kind, NULL, m, &status));
        return;
    }
    zl_sse_event(s, "error", zl_error_json(ZL_API_ANTHROPIC, (zl_ekind)kind, NULL, msg, &status));
}

static void ant_end(zl_sse *s, const zl_result *res) {
    if (res->failed) return; /* the error event ended the stream */
    zl_event ev;
    zl_result_choice(res, 0, &ev);
    const zl_gen_timing *t = &res->timing;
    int *b = zl_tools_blocks(res, 0);
    if (b && !b[0] && !b[1]) blk_open(s, b, BLK_TEXT); /* at least one block */
    if (b) blk_close(s, b);
    else zl_sse_event(s, "content_block_stop", json_pack("{s:s, s:i}", "type", "content_block_stop", "index", 0));
    zl_sse_event(s, "message_delta",
                 json_pack("{s:s, s:{s:s, s:o}, s:{s:i, s:i, s:i}, s:o}", "type", "message_delta", "delta",
                           "stop_reason", stop_reason(&ev), "stop_sequence", stop_seq_json(&ev), "usage",
                           "output_tokens", t->generated_tokens, "input_tokens", t->prompt_tokens - t->cached_tokens,
                           "cache_read_input_tokens", t->cached_tokens, "timings", zl_timings_json(t)));
    zl_sse_event(s, "message_stop", json_pack("{s:s}", "type", "message_stop"));
}

const zl_emitter zl_ant_emitter = {"msg_", ant_start, ant_delta, ant_error, ant_end, ant_body};

/* ---------------- routes ---------------- */

enum MHD_Result zl_api_messages(zl_req *r, json_t *b) {
    zl_request q;
    zl_verr e = {{0}, {0}};
    if (zl_ant_parse(b, 0, &q, &e) < 0) return zl_pipeline_reject(r, &q, &e);
    return zl_pipeline_run(r, &q, &zl_ant_emitter);
}

enum MHD_Result zl_api_count_tokens(zl_req *r, json_t *b) {
    zl_request q;
    zl_verr e = {{0}, {0}};
    if (zl_ant_parse(b, 1, &q, &e) < 0) return zl_pipeline_reject(r, &q, &e);
    zl_prepared p;
    int rc = zl_pipeline_count(r->srv, &q, &p, &e);
    enum MHD_Result ret = rc ? zl_reply_verr(r, rc, &e)
                             : zl_reply_json(r, 200, json_pack("{s:i}", "input_tokens", p.n_ids[0]), NULL);
    zl_prepared_free(&p);
    zl_request_free(&q);
    return ret;
}
