/* api_anthropic.c — Anthropic Messages: POST /v1/messages (streaming with
 * the documented event sequence) and /v1/messages/count_tokens.  The
 * request parser is shared with Message Batches (batches.c). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "anthropic.h"

#define MAX_STOPS 16

void zl_ant_free(zl_ant_req *q) {
    if (!q) return;
    free(q->ids);
    for (int i = 0; q->texts && i < q->n_msgs; i++) zl_buf_free(&q->texts[i]);
    free(q->texts);
    free(q->msgs);
    zl_buf_free(&q->system);
    free(q->stops);
    memset(q, 0, sizeof *q);
}

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

int zl_ant_parse(zl_srv *srv, json_t *b, int count_only, zl_ant_req *q, zl_verr *e) {
    memset(q, 0, sizeof *q);
    double d;
    long long v;
    int h;
    q->gp.sampling = (zl_sampling){.temp = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .repeat_penalty = 1.0f,
                                   .repeat_last_n = 64, .seed = zl_rand_seed()};
    q->gp.n_logprobs = -1;
    q->gp.strip_leading_space = 1;
    if (zl_jv_str(b, "model", "", 1, &q->model, e) < 0) return -1;
    if (!count_only) {
        if (zl_jv_int(b, "max_tokens", "", 1, 1, 1LL << 30, &v, e) < 0) return -1;
        int n_ctx = zl_sched_n_ctx(srv->sched);
        q->gp.max_tokens = v > n_ctx ? n_ctx : (int)v;
        if (zl_jv_bool(b, "stream", "", &q->stream, e) < 0) return -1;
        if ((h = zl_jv_num(b, "temperature", "", 0, 1, &d, e)) < 0) return -1;
        if (h) q->gp.sampling.temp = (float)d;
        if ((h = zl_jv_num(b, "top_p", "", 0, 1, &d, e)) < 0) return -1;
        if (h) q->gp.sampling.top_p = (float)d;
        if ((h = zl_jv_int(b, "top_k", "", 0, 0, 1 << 30, &v, e)) < 0) return -1;
        if (h) q->gp.sampling.top_k = (int)v;
        if ((h = zl_jv_int(b, "stream_buffer", "", 0, 0, 1 << 20, &v, e)) < 0) return -1;
        if (h) q->gp.stream_buffer = (int)v;
        json_t *md = json_object_get(b, "metadata");
        if (md && !json_is_null(md)) {
            if (!json_is_object(md)) return zl_verr_set(e, "metadata", "metadata: expected an object");
            if (zl_jv_str(md, "user_id", "metadata", 0, &q->user_id, e) < 0) return -1;
        }
        json_t *ss = json_object_get(b, "stop_sequences");
        q->stops = calloc(MAX_STOPS + 1, sizeof *q->stops);
        if (!q->stops) return zl_verr_set(e, "", "out of memory");
        if (ss && !json_is_null(ss)) {
            if (!json_is_array(ss)) return zl_verr_set(e, "stop_sequences", "stop_sequences: expected an array of strings");
            if (json_array_size(ss) > MAX_STOPS)
                return zl_verr_set(e, "stop_sequences", "stop_sequences: at most %d sequences", MAX_STOPS);
            size_t i;
            json_t *x;
            json_array_foreach(ss, i, x) {
                char f[40];
                snprintf(f, sizeof f, "stop_sequences[%zu]", i);
                if (!json_is_string(x)) return zl_verr_set(e, f, "%s: expected a string", f);
                if (!json_string_length(x)) return zl_verr_set(e, f, "%s: must not be empty", f);
                q->stops[q->gp.n_stops++] = json_string_value(x);
            }
        }
        q->n_user_stops = q->gp.n_stops;
        const char *extra = zl_chat_fmt_extra_stop(&srv->tpl);
        if (extra) q->stops[q->gp.n_stops++] = extra;
        q->gp.stops = q->stops;
    }
    json_t *sys = json_object_get(b, "system");
    if (sys && !json_is_null(sys) && ant_text(sys, "system", &q->system, e) < 0) return -1;
    json_t *msgs = json_object_get(b, "messages");
    if (!msgs) return zl_verr_set(e, "messages", "messages: field required");
    if (!json_is_array(msgs) || !json_array_size(msgs))
        return zl_verr_set(e, "messages", "messages: expected a non-empty array");
    size_t nm = json_array_size(msgs);
    q->msgs = calloc(nm + 1, sizeof *q->msgs);
    q->texts = calloc(nm, sizeof *q->texts);
    if (!q->msgs || !q->texts) return zl_verr_set(e, "", "out of memory");
    q->n_msgs = (int)nm;
    int k = 0;
    if (q->system.n) q->msgs[k++] = (zl_chat_msg){"system", q->system.p};
    for (size_t i = 0; i < nm; i++) {
        json_t *m = json_array_get(msgs, i);
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
        if (ant_text(c, cf, &q->texts[i], e) < 0) return -1;
        if (json_is_array(c) && !json_array_size(c) && !(i + 1 == nm && !strcmp(role, "assistant")))
            return zl_verr_set(e, cf, "%s: must not be empty (only the final assistant message may be)", cf);
        zl_buf_puts(&q->texts[i], "");
        q->msgs[k++] = (zl_chat_msg){role, q->texts[i].p};
    }
    q->n_chat = k;
    return 0;
}

static const char *stop_reason(const zl_ant_req *q, const zl_gen_choice *c) {
    if (c->end == ZL_GEN_LENGTH) return "max_tokens";
    if (c->end == ZL_GEN_STOP && c->stop_index < q->n_user_stops) return "stop_sequence";
    return "end_turn";
}

/* The gen's own copy of the stop strings: q's point into the request JSON,
 * which a stream outlives. */
static json_t *stop_seq_json(const zl_ant_req *q, const zl_gen *g, const zl_gen_choice *c) {
    if (c->end == ZL_GEN_STOP && c->stop_index >= 0 && c->stop_index < q->n_user_stops)
        return json_string(g->stops[c->stop_index]);
    return json_null();
}

json_t *zl_ant_message_json(const zl_ant_req *q, zl_gen *g, const char *id, const zl_gen_timing *t) {
    const zl_gen_choice *c = &g->ch[0];
    json_t *text = zl_json_lossy_string(c->text.p ? c->text.p : "", c->text.n);
    return json_pack("{s:s, s:s, s:s, s:s, s:[{s:s, s:o}], s:s, s:o, s:{s:i, s:i, s:i, s:i}, s:o}", "id", id, "type",
                     "message", "role", "assistant", "model", q->model, "content", "type", "text", "text", text,
                     "stop_reason", stop_reason(q, c), "stop_sequence", stop_seq_json(q, g, c), "usage", "input_tokens",
                     t->prompt_tokens - t->cached_tokens, "output_tokens", t->generated_tokens, "cache_creation_input_tokens", 0,
                     "cache_read_input_tokens", t->cached_tokens, "timings", zl_timings_json(t));
}

/* ---------------- streaming ---------------- */

typedef struct ant_stream {
    zl_ant_req q;
    zl_gen *g;
    int phase;
    int n_prompt;
    char id[64], model[256];
} ant_stream;

static void ant_produce(zl_sse *s, int timeout_ms) {
    ant_stream *a = s->ud;
    zl_gen *g = a->g;
    if (a->phase == 0) {
        zl_sse_event(s, "message_start",
                     json_pack("{s:s, s:{s:s, s:s, s:s, s:[], s:s, s:n, s:n, s:{s:i, s:i, s:i, s:i}}}", "type",
                               "message_start", "message", "id", a->id, "type", "message", "role", "assistant",
                               "content", "model", a->model, "stop_reason", "stop_sequence", "usage",
                               "input_tokens", a->n_prompt, "output_tokens", 1, "cache_creation_input_tokens", 0,
                               "cache_read_input_tokens", 0));
        zl_sse_event(s, "content_block_start",
                     json_pack("{s:s, s:i, s:{s:s, s:s}}", "type", "content_block_start", "index", 0,
                               "content_block", "type", "text", "text", ""));
        zl_sse_event(s, "ping", json_pack("{s:s}", "type", "ping"));
        a->phase = 1;
        return;
    }
    int done = zl_gen_poll(g, timeout_ms);
    size_t len;
    const char *t = zl_gen_take(g, 0, &len);
    int nt;
    zl_gen_take_toks(g, 0, &nt);
    if (len)
        zl_sse_event(s, "content_block_delta",
                     json_pack("{s:s, s:i, s:{s:s, s:o}}", "type", "content_block_delta", "index", 0, "delta", "type",
                               "text_delta", "text", zl_json_lossy_string(t, len)));
    if (!done) return;
    zl_gen_timing tm;
    zl_gen_timing_get(g, &tm);
    if (g->ch[0].end == ZL_GEN_ERROR) {
        zl_sse_event(s, "error", json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "type", "api_error",
                                           "message", "generation failed"));
        s->finished = 1;
        return;
    }
    zl_sse_event(s, "content_block_stop", json_pack("{s:s, s:i}", "type", "content_block_stop", "index", 0));
    zl_sse_event(s, "message_delta",
                 json_pack("{s:s, s:{s:s, s:o}, s:{s:i, s:i, s:i}, s:o}", "type", "message_delta", "delta",
                           "stop_reason", stop_reason(&a->q, &g->ch[0]), "stop_sequence",
                           stop_seq_json(&a->q, g, &g->ch[0]), "usage", "output_tokens", tm.generated_tokens,
                           "input_tokens", tm.prompt_tokens - tm.cached_tokens, "cache_read_input_tokens",
                           tm.cached_tokens, "timings", zl_timings_json(&tm)));
    zl_sse_event(s, "message_stop", json_pack("{s:s}", "type", "message_stop"));
    if (s->diag_full) zl_server_timing(&tm, s->server_timing, sizeof s->server_timing);
    s->finished = 1;
}

static void ant_destroy(zl_sse *s) {
    ant_stream *a = s->ud;
    if (!a) return;
    zl_gen_free(a->g);
    zl_ant_free(&a->q);
    free(a);
}

int zl_ant_tokens(zl_srv *srv, zl_ant_req *q, zl_verr *e) {
    zl_err err = {0};
    char *text = zl_chat_fmt_render(&srv->tpl, q->msgs, q->n_chat, &err);
    if (!text && err.code == ZL_ENOMEM) return zl_verr_set(e, "", "out of memory");
    if (!text) return zl_verr_set(e, "messages", "messages: chat template: %s", err.msg);
    size_t n = 0;
    int rc = zl_llm_tokenize(srv->llm, text, strlen(text), 1, zl_chat_fmt_parse_special(&srv->tpl), &q->ids, &n, &err);
    free(text);
    if (rc) return zl_verr_set(e, "messages", "messages: %s", err.msg);
    q->n_ids = (int)n;
    int n_ctx = zl_sched_n_ctx(srv->sched);
    if (n + 1 > (size_t)n_ctx)
        return zl_verr_set(e, "messages", "prompt is too long: %zu tokens > %d maximum (the context holds %d)", n,
                           n_ctx - 1, n_ctx);
    return 0;
}

enum MHD_Result zl_api_messages(zl_req *r, json_t *b) {
    zl_ant_req q;
    zl_verr e = {{0}, {0}};
    if (zl_ant_parse(r->srv, b, 0, &q, &e) < 0 || zl_ctl_parse(r, b, &e) < 0) {
        zl_ant_free(&q);
        return zl_reply_error(r, ZL_E_INVALID, e.param, "%s", e.msg);
    }
    q.gp.ctl = r->ctl.ctl;
    q.gp.has_ctl = 1;
    if (r->ctl.bounded) { /* a bounded KV policy may generate past the context */
        json_int_t mt = json_integer_value(json_object_get(b, "max_tokens"));
        q.gp.max_tokens = mt > ZL_MAX_TOKENS_BOUNDED ? ZL_MAX_TOKENS_BOUNDED : (int)mt;
    }
    zl_sess_req *sr = NULL;
    zl_chat_msg *all = NULL;
    int n_all = 0;
    if (zl_sess_open(r, b, q.user_id, &sr)) { zl_ant_free(&q); return MHD_YES; }
    if (zl_sess_merge(sr, r, q.msgs, q.n_chat, &all, &n_all)) {
        zl_sess_close(sr);
        zl_ant_free(&q);
        return MHD_YES;
    }
    free(q.msgs);
    q.msgs = all; /* strings stay valid while sr lives: until the generation ends */
    q.n_chat = n_all;
    uint8_t *mask = NULL;
    if (r->ctl.bounded) {
        size_t n = 0;
        if (zl_chat_tokens_ctl(r, q.msgs, q.n_chat, &q.ids, &mask, &n)) {
            zl_sess_close(sr);
            zl_ant_free(&q);
            return MHD_YES;
        }
        q.n_ids = (int)n;
    } else if (zl_ant_tokens(r->srv, &q, &e) < 0) {
        zl_sess_close(sr);
        zl_ant_free(&q);
        return zl_reply_error(r, ZL_E_INVALID, e.param, "%s", e.msg);
    }
    q.gp.anchors = mask ? &mask : NULL;
    zl_sess_params(sr, &q.gp);
    if (!q.gp.stream_buffer) q.gp.stream_buffer = r->stream_buffer;
    int busy = 0;
    int32_t *pp = q.ids;
    zl_gen *g = zl_gen_start(r->srv->sched, &pp, &q.n_ids, 1, &q.gp, r->t_start, &busy);
    free(mask);
    q.gp.anchors = NULL;
    if (!g) {
        zl_ant_free(&q);
        if (busy) return zl_reply_error(r, ZL_E_BUSY, NULL, "Overloaded");
        return zl_reply_error(r, ZL_E_INTERNAL, NULL, "out of memory");
    }
    char id[64];
    zl_rand_id(id, sizeof id, "msg_");
    if (q.stream) {
        zl_sse *s = calloc(1, sizeof *s);
        ant_stream *a = calloc(1, sizeof *a);
        if (!s || !a) {
            free(s);
            free(a);
            zl_gen_free(g);
            zl_ant_free(&q);
            return zl_reply_error(r, ZL_E_INTERNAL, NULL, "out of memory");
        }
        a->q = q;
        a->g = g;
        a->n_prompt = q.n_ids;
        snprintf(a->id, sizeof a->id, "%s", id);
        snprintf(a->model, sizeof a->model, "%s", q.model);
        a->q.model = a->model;
        a->q.user_id = NULL;
        a->q.stops = NULL; /* the gen holds copies */
        free(q.stops);
        s->ud = a;
        s->produce = ant_produce;
        s->destroy = ant_destroy;
        return zl_reply_sse(r, s);
    }
    enum MHD_Result ret;
    if (zl_gen_wait_all(r, g)) {
        r->status = 499;
        ret = MHD_NO;
    } else if (g->ch[0].end == ZL_GEN_ERROR) {
        ret = zl_reply_error(r, ZL_E_INTERNAL, NULL, "generation failed");
    } else {
        zl_gen_timing t;
        zl_gen_timing_get(g, &t);
        char st[256] = "";
        if (r->diag_full) zl_server_timing(&t, st, sizeof st);
        ret = zl_reply_json(r, 200, zl_ant_message_json(&q, g, id, &t), st);
    }
    zl_gen_free(g);
    zl_ant_free(&q);
    return ret;
}

enum MHD_Result zl_api_count_tokens(zl_req *r, json_t *b) {
    zl_ant_req q;
    zl_verr e = {{0}, {0}};
    enum MHD_Result ret;
    if (zl_ant_parse(r->srv, b, 1, &q, &e) < 0) {
        ret = zl_reply_error(r, ZL_E_INVALID, e.param, "%s", e.msg);
    } else {
        zl_err err = {0};
        char *text = zl_chat_fmt_render(&r->srv->tpl, q.msgs, q.n_chat, &err);
        int32_t *ids = NULL;
        size_t n = 0;
        if (!text) ret = zl_reply_tpl_error(r, &err);
        else if (zl_llm_tokenize(r->srv->llm, text, strlen(text), 1, zl_chat_fmt_parse_special(&r->srv->tpl), &ids, &n, &err))
            ret = zl_reply_error(r, ZL_E_INVALID, "messages", "messages: %s", err.msg);
        else ret = zl_reply_json(r, 200, json_pack("{s:i}", "input_tokens", (int)n), NULL);
        free(ids);
        free(text);
    }
    zl_ant_free(&q);
    return ret;
}
