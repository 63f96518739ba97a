/* api_anthropic.c — the Anthropic Messages wire format: /v1/messages and
 * /v1/messages/count_tokens bodies into a zl_request (shared with Message
 * Batches), results back as a Message or the documented event sequence
 * (the emitter).  It never tokenizes or submits: pipeline.c does. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "anthropic.h"

static int ant_text(json_t *c, const char *path, zl_buf *out, zl_verr *e) {
    if (json_is_string(c)) { zl_buf_puts(out, json_string_value(c)); return 0; }
    if (!json_is_array(c)) return zl_verr_set(e, path, "%s: expected a string or an array of content blocks", path);
    size_t i;
    json_t *p;
    json_array_foreach(c, i, p) {
        char f[128];
        snprintf(f, sizeof f, "%s[%zu]", path, i);
        const char *type = NULL, *text = NULL;
        if (!json_is_object(p)) return zl_verr_set(e, f, "%s: expected an object", f);
        if (zl_jv_str(p, "type", f, 1, &type, e) < 0) return -1;
        if (strcmp(type, "text"))
            return zl_verr_set(e, f, "%s.type: '%s' blocks are not supported (only \"text\")", f, type);
        if (zl_jv_str(p, "text", f, 1, &text, e) < 0) return -1;
        zl_buf_puts(out, text);
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
    if (ss && !json_is_null(ss)) {
        if (!json_is_array(ss)) return zl_verr_set(e, "stop_sequences", "stop_sequences: expected an array of strings");
        if (json_array_size(ss) > ZL_REQ_MAX_STOPS)
            return zl_verr_set(e, "stop_sequences", "stop_sequences: at most %d sequences", ZL_REQ_MAX_STOPS);
        size_t i;
        json_t *x;
        json_array_foreach(ss, i, x) {
            char f[40];
            snprintf(f, sizeof f, "stop_sequences[%zu]", i);
            if (!json_is_string(x)) return zl_verr_set(e, f, "%s: expected a string", f);
            if (!json_string_length(x)) return zl_verr_set(e, f, "%s: must not be empty", f);
            q->stops[q->n_stops++] = json_string_value(x);
        }
    }
    return 0;
}

int zl_ant_parse(json_t *b, int count_only, zl_request *q, zl_verr *e) {
    zl_request_init(q, ZL_REQ_MESSAGES, b);
    q->sampling.seed = zl_rand_seed();
    if (zl_jv_str(b, "model", "", 1, &q->model, e) < 0) return -1;
    if (!count_only && parse_generation(b, q, e) < 0) return -1;
    json_t *sys = json_object_get(b, "system");
    if (sys && !json_is_null(sys) && ant_text(sys, "system", &q->system, e) < 0) return -1;
    json_t *msgs = json_object_get(b, "messages");
    if (!msgs) return zl_verr_set(e, "messages", "messages: field required");
    if (!json_is_array(msgs) || !json_array_size(msgs))
        return zl_verr_set(e, "messages", "messages: expected a non-empty array");
    zl_buf *st = q->system.n ? zl_request_add_msg(q, "system") : NULL;
    if (q->system.n && (!st || (zl_buf_put(st, q->system.p, q->system.n), zl_buf_puts(st, ""), st->oom)))
        return zl_verr_set(e, "", "out of memory");
    size_t nm = json_array_size(msgs), i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        char f[64], cf[80];
        snprintf(f, sizeof f, "messages[%zu]", i);
        snprintf(cf, sizeof cf, "%s.content", f);
        const char *role = NULL;
        if (!json_is_object(m)) return zl_verr_set(e, f, "%s: expected an object", f);
        if (zl_jv_str(m, "role", f, 1, &role, e) < 0) return -1;
        if (strcmp(role, "user") && strcmp(role, "assistant"))
            return zl_verr_set(e, f, "%s.role: '%s' is not \"user\" or \"assistant\"", f, role);
        json_t *c = json_object_get(m, "content");
        if (!c || json_is_null(c)) return zl_verr_set(e, cf, "%s: field required", cf);
        zl_buf *text = zl_request_add_msg(q, role);
        if (!text) return zl_verr_set(e, "", "out of memory");
        if (ant_text(c, cf, text, e) < 0) return -1;
        if (json_is_array(c) && !json_array_size(c) && !(i + 1 == nm && !strcmp(role, "assistant")))
            return zl_verr_set(e, cf, "%s: must not be empty (only the final assistant message may be)", cf);
        zl_buf_puts(text, "");
        if (text->oom) return zl_verr_set(e, "", "out of memory");
    }
    return 0;
}

static const char *stop_reason(const zl_event *ev) {
    if (ev->end == ZL_GEN_LENGTH) return "max_tokens";
    if (ev->stop) return "stop_sequence";
    return "end_turn";
}

static json_t *stop_seq_json(const zl_event *ev) { return ev->stop ? json_string(ev->stop) : json_null(); }

/* ---------------- the emitter ---------------- */

static json_t *ant_body(const zl_result *res) {
    zl_event ev;
    zl_result_choice(res, 0, &ev);
    const zl_gen_timing *t = &res->timing;
    return json_pack("{s:s, s:s, s:s, s:s, s:[{s:s, s:o}], s:s, s:o, s:{s:i, s:i, s:i, s:i}, s:o}", "id", res->id,
                     "type", "message", "role", "assistant", "model", res->model, "content", "type", "text", "text",
                     zl_json_lossy_string(ev.text, ev.len), "stop_reason", stop_reason(&ev), "stop_sequence",
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
    zl_sse_event(s, "content_block_start",
                 json_pack("{s:s, s:i, s:{s:s, s:s}}", "type", "content_block_start", "index", 0, "content_block",
                           "type", "text", "text", ""));
    zl_sse_event(s, "ping", json_pack("{s:s}", "type", "ping"));
}

static void ant_delta(zl_sse *s, const zl_result *res, const zl_event *ev) {
    (void)res;
    if (ev->len)
        zl_sse_event(s, "content_block_delta",
                     json_pack("{s:s, s:i, s:{s:s, s:o}}", "type", "content_block_delta", "index", 0, "delta", "type",
                               "text_delta", "text", zl_json_lossy_string(ev->text, ev->len)));
}

static void ant_error(zl_sse *s, const zl_result *res, int choice) {
    (void)res;
    (void)choice;
    zl_sse_event(s, "error",
                 json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "type", "api_error", "message",
                           "generation failed"));
}

static void ant_end(zl_sse *s, const zl_result *res) {
    if (res->failed) return; /* the error event ended the stream */
    zl_event ev;
    zl_result_choice(res, 0, &ev);
    const zl_gen_timing *t = &res->timing;
    zl_sse_event(s, "content_block_stop", json_pack("{s:s, s:i}", "type", "content_block_stop", "index", 0));
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
