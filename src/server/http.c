/* http.c — libmicrohttpd glue: body collection with a size limit, API-key
 * checks, the route table, JSON/error/SSE replies, metrics per request.
 *
 * Threading: MHD runs one thread per connection, so handlers may block while
 * the engine works; they poll the socket meanwhile so a client that goes
 * away cancels its generation within one engine step (zl_conn_alive).
 * A streamed response is produced by MHD's content-reader callback, which
 * waits on the scheduler and checks the socket between waits.  Every engine
 * step wakes the waiters (zl_sched_wait_since, no lost wake-up), so the
 * timeout (ZL_WAIT_MS) only bounds how long a socket goes unchecked during
 * one long step; short slices would only wake every connection thread many
 * times per step on cores the forward pass needs. */
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../base/err.h"
#include "metrics.h"

#define ZL_WAIT_MS 100

/* ---------------- replies ---------------- */

static void add_common_headers(zl_req *r, struct MHD_Response *resp) {
    (void)r;
    MHD_add_response_header(resp, "Server", "zerolayer/" ZEROLAYER_VERSION);
}

enum MHD_Result zl_reply_raw(zl_req *r, int status, const char *ctype, const char *body, size_t len) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", ctype);
    add_common_headers(r, resp);
    if (status == 429 || status == 529 || status == 503) MHD_add_response_header(resp, "Retry-After", "1");
    r->status = status;
    enum MHD_Result ret = MHD_queue_response(r->conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return ret;
}

enum MHD_Result zl_reply_json(zl_req *r, int status, json_t *j, const char *server_timing) {
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!s) return zl_reply_raw(r, 500, "application/json", "{}", 2);
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(s), s, MHD_RESPMEM_MUST_FREE);
    if (!resp) { free(s); return MHD_NO; }
    MHD_add_response_header(resp, "Content-Type", "application/json");
    add_common_headers(r, resp);
    if (server_timing && *server_timing) MHD_add_response_header(resp, "Server-Timing", server_timing);
    if (status == 429 || status == 529) MHD_add_response_header(resp, "Retry-After", "1");
    r->status = status;
    enum MHD_Result ret = MHD_queue_response(r->conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* The error body in the caller's API shape, and its status. */
static json_t *error_json(const zl_req *r, zl_ekind kind, const char *param, const char *msg, int *status_out) {
    static const int st_oai[] = {400, 401, 404, 405, 413, 429, 500, 404};
    static const int st_ant[] = {400, 401, 404, 405, 413, 529, 500, 404};
    static const char *const t_oai[] = {"invalid_request_error", "authentication_error", "invalid_request_error",
                                        "invalid_request_error", "invalid_request_error", "rate_limit_error",
                                        "server_error", "invalid_request_error"};
    static const char *const c_oai[] = {NULL, "invalid_api_key", "unknown_url", "method_not_allowed",
                                        "request_too_large", "rate_limit_exceeded", NULL, "model_not_found"};
    static const char *const t_ant[] = {"invalid_request_error", "authentication_error", "not_found_error",
                                        "invalid_request_error", "request_too_large", "overloaded_error",
                                        "api_error", "not_found_error"};
    json_t *j;
    int status;
    if (r->api == ZL_API_ANTHROPIC) {
        status = st_ant[kind];
        j = json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "type", t_ant[kind], "message", msg);
    } else {
        status = st_oai[kind];
        j = json_pack("{s:{s:s, s:s, s:o, s:o}}", "error", "message", msg, "type", t_oai[kind], "param",
                      param && *param ? json_string(param) : json_null(), "code",
                      c_oai[kind] ? json_string(c_oai[kind]) : json_null());
    }
    *status_out = status;
    return j;
}

enum MHD_Result zl_reply_error(zl_req *r, zl_ekind kind, const char *param, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int status;
    json_t *j = error_json(r, kind, param, msg, &status);
    return zl_reply_json(r, status, j, NULL);
}

/* A body that passes the limit while it is being read (chunked): MHD queues
 * responses only before the body or after all of it, so the 413 is written
 * to the socket here and the connection is then closed (MHD_NO).  What the
 * client still sends is drained for a short, bounded while first, so the
 * close does not reset the connection before the client read the reply. */
static enum MHD_Result reply_too_large_mid_body(zl_req *r) {
    char msg[128];
    snprintf(msg, sizeof msg, "request body exceeds the limit of %zu bytes", r->srv->o.max_body);
    int status;
    json_t *j = error_json(r, ZL_E_TOO_LARGE, NULL, msg, &status);
    char *body = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    r->status = status;
    if (r->fd < 0 || !body) { free(body); return MHD_NO; }
    char head[256];
    int hn = snprintf(head, sizeof head,
                      "HTTP/1.1 %d Content Too Large\r\nServer: zerolayer/" ZEROLAYER_VERSION
                      "\r\nContent-Type: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                      status, strlen(body));
    zl_buf out = {0};
    zl_buf_put(&out, head, (size_t)hn);
    zl_buf_puts(&out, body);
    free(body);
    for (size_t off = 0; !out.oom && off < out.n;) {
        ssize_t w = send(r->fd, out.p + off, out.n - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno == EAGAIN) {
            struct pollfd p = {r->fd, POLLOUT, 0};
            if (poll(&p, 1, 1000) <= 0) break;
            continue;
        }
        if (w <= 0) break;
        off += (size_t)w;
    }
    zl_buf_free(&out);
    shutdown(r->fd, SHUT_WR);
    char sink[16384];
    size_t drained = 0;
    double t0 = zl_now_ms();
    while (drained < ((size_t)1 << 20) && zl_now_ms() - t0 < 500) {
        struct pollfd p = {r->fd, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0) continue;
        ssize_t n = recv(r->fd, sink, sizeof sink, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) break;
        if (n > 0) drained += (size_t)n;
    }
    return MHD_NO;
}

int zl_conn_alive(int fd) {
    if (fd < 0) return 1;
    struct pollfd p = {fd, POLLRDHUP, 0};
    if (poll(&p, 1, 0) <= 0) return 1;
    return !(p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

int zl_gen_wait_all(zl_req *r, zl_gen *g) {
    while (!zl_gen_poll(g, ZL_WAIT_MS)) {
        if (!zl_conn_alive(r->fd)) {
            zl_gen_cancel(g);
            return -1;
        }
    }
    return 0;
}

/* ---------------- SSE ---------------- */

void zl_sse_event(zl_sse *s, const char *event, json_t *data) {
    char *d = data ? json_dumps(data, JSON_COMPACT) : NULL;
    json_decref(data);
    if (event) zl_buf_printf(&s->out, "event: %s\n", event);
    zl_buf_puts(&s->out, "data: ");
    zl_buf_puts(&s->out, d ? d : "{}");
    zl_buf_puts(&s->out, "\n\n");
    free(d);
}

/* Restart the connection's idle clock (MHD restarts it when the timeout goes
 * from 0 to a value): called when the handler is done and whenever a stream
 * has produced bytes, so time spent waiting for the engine never counts as
 * idle, while a client that stops reading still is. */
static void idle_clock_restart(struct MHD_Connection *conn, unsigned idle_s) {
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, idle_s);
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max) {
    zl_sse *s = cls;
    (void)pos;
    for (;;) {
        if (s->pos < s->out.n) {
            idle_clock_restart(s->conn, s->idle_s);
            size_t n = s->out.n - s->pos;
            if (n > max) n = max;
            memcpy(buf, s->out.p + s->pos, n);
            s->pos += n;
            if (s->pos == s->out.n) s->pos = s->out.n = 0;
            return (ssize_t)n;
        }
        if (s->finished) {
            if (*s->server_timing) MHD_add_response_footer(s->resp, "Server-Timing", s->server_timing);
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        if (!zl_conn_alive(s->fd)) return MHD_CONTENT_READER_END_WITH_ERROR;
        zl_sess_status st = s->sess_id[0] ? zl_sessions_check(s->sess_store, s->sess_id) : ZL_SESS_OK;
        if (st != ZL_SESS_OK) {
            /* the generation is cancelled when the stream is freed */
            zl_sse_event(s, "session_expired",
                         json_pack("{s:s, s:s, s:s}", "type", "session_expired", "session", s->sess_id, "reason",
                                   zl_sess_status_name(st)));
            s->finished = 1;
            continue;
        }
        s->produce(s, ZL_WAIT_MS);
        if (s->out.oom) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
}

static void sse_free(void *cls) {
    zl_sse *s = cls;
    if (s->destroy) s->destroy(s);
    zl_models_release(s->model_slot);
    zl_buf_free(&s->out);
    free(s);
}

enum MHD_Result zl_reply_sse(zl_req *r, zl_sse *s) {
    s->fd = r->fd;
    s->conn = r->conn;
    s->idle_s = r->srv->idle_timeout_s;
    s->diag_full = r->diag_full;
    if (r->sess_id[0]) {
        s->sess_store = r->srv->sessions;
        snprintf(s->sess_id, sizeof s->sess_id, "%s", r->sess_id);
    }
    if (r->model_slot) { /* the stream holds the model until its last byte */
        s->model_slot = r->model_slot;
        r->model_slot = NULL;
    }
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, sse_read, s, sse_free);
    if (!resp) { sse_free(s); return MHD_NO; }
    s->resp = resp;
    MHD_add_response_header(resp, "Content-Type", "text/event-stream");
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    add_common_headers(r, resp);
    if (r->diag_full) MHD_add_response_header(resp, "Trailer", "Server-Timing");
    r->status = 200;
    enum MHD_Result ret = MHD_queue_response(r->conn, 200, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* ---------------- helpers ---------------- */

void zl_rand_id(char *out, size_t cap, const char *prefix) {
    unsigned char b[12];
    if (RAND_bytes(b, sizeof b) != 1) {
        static atomic_ullong ctr;
        unsigned long long c = atomic_fetch_add(&ctr, 1) ^ (unsigned long long)time(NULL);
        memcpy(b, &c, sizeof c);
        memset(b + 8, 0, 4);
    }
    int n = snprintf(out, cap, "%s", prefix);
    for (size_t i = 0; i < sizeof b && (size_t)n + 2 < cap; i++) n += snprintf(out + n, cap - (size_t)n, "%02x", b[i]);
}

uint64_t zl_rand_seed(void) {
    uint64_t s = 0;
    if (RAND_bytes((unsigned char *)&s, sizeof s) != 1) s = (uint64_t)time(NULL) ^ (uint64_t)clock();
    return s;
}

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
    return j;
}

void zl_server_timing(const zl_gen_timing *t, char *buf, size_t cap) {
    snprintf(buf, cap, "prep;dur=%.3f, queue;dur=%.3f, prefill;dur=%.3f, decode;dur=%.3f, kv;dur=%.3f, sample;dur=%.3f",
             t->prep_ms, t->queue_ms, t->prefill_ms, t->decode_ms, t->kv_ms, t->sample_ms);
}

/* ---------------- ring / KV controls ---------------- */

static int ctl_onoff(const char *v, int *on) {
    if (!strcasecmp(v, "on") || !strcasecmp(v, "true") || !strcmp(v, "1")) *on = 1;
    else if (!strcasecmp(v, "off") || !strcasecmp(v, "false") || !strcmp(v, "0")) *on = 0;
    else return -1;
    return 0;
}

static int ctl_int(const char *v, long lo, long hi, long *out) {
    char *end = NULL;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi) return -1;
    *out = x;
    return 0;
}

/* "256" (tokens) or "0.25" (fraction of the context, 0 < f <= 1). */
static int ctl_budget(const char *v, zl_job_ctl *c) {
    if (strchr(v, '.') || strchr(v, 'e') || strchr(v, 'E')) {
        char *end = NULL;
        double f = strtod(v, &end);
        if (end == v || *end || !(f > 0 && f <= 1)) return -1;
        c->kv_frac = (float)f;
        c->kv_budget = 0;
        return 0;
    }
    long x;
    if (ctl_int(v, 1, 1L << 30, &x)) return -1;
    c->kv_budget = (int)x;
    c->kv_frac = 0;
    return 0;
}

int zl_ctl_parse(zl_req *r, json_t *b, zl_verr *e) {
    zl_req_ctl *rc = &r->ctl;
    memset(rc, 0, sizeof *rc);
    zl_job_ctl c = *zl_sched_ctl(r->srv->sched);
    const char *budget_src = "--kv-budget";
    json_t *z = b ? json_object_get(b, "zerolayer") : NULL;
    if (z && json_is_null(z)) z = NULL;
    if (z && !json_is_object(z)) return zl_verr_set(e, "zerolayer", "zerolayer: expected an object");
    if (z) {
        const char *k;
        json_t *v;
        json_object_foreach(z, k, v) {
            if (strcmp(k, "validation") && strcmp(k, "ring") && strcmp(k, "kv_policy") && strcmp(k, "kv_budget") &&
                strcmp(k, "anchors") && strcmp(k, "compute"))
                return zl_verr_set(e, "zerolayer",
                                   "zerolayer.%.64s: unknown field (expected validation, ring, kv_policy, kv_budget, "
                                   "anchors, compute)", k);
        }
    }
#define HDR(name) MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name)
    /* 1. a compute preset replaces the server defaults (the header wins) */
    const char *comp = HDR("X-Zerolayer-Compute"), *comp_src = "X-Zerolayer-Compute";
    if (!comp && z) {
        comp_src = "zerolayer.compute";
        if (zl_jv_str(z, "compute", "zerolayer", 0, &comp, e) < 0) return -1;
    }
    if (comp) {
        if (zl_job_ctl_preset(comp, &c))
            return zl_verr_set(e, comp_src, "%s: expected exact, balanced or aggressive, got '%.64s'", comp_src, comp);
        budget_src = comp_src;
    }
    /* 2. body fields */
    if (z) {
        json_t *v = json_object_get(z, "validation");
        if (v && !json_is_null(v)) {
            int on = 0;
            if (json_is_boolean(v)) on = json_is_true(v);
            else if (!json_is_string(v) || ctl_onoff(json_string_value(v), &on))
                return zl_verr_set(e, "zerolayer.validation", "zerolayer.validation: expected \"on\" or \"off\"");
            c.spec = on ? ZL_SPEC_LOOKUP : ZL_SPEC_OFF;
        }
        long long x;
        int h = zl_jv_int(z, "ring", "zerolayer", 0, 1, 16, &x, e);
        if (h < 0) return -1;
        if (h) c.ring = (int)x;
        const char *pol = NULL;
        if (zl_jv_str(z, "kv_policy", "zerolayer", 0, &pol, e) < 0) return -1;
        if (pol && zl_kv_policy_from_name(pol, &c.kv_policy))
            return zl_verr_set(e, "zerolayer.kv_policy", "zerolayer.kv_policy: expected %s, got '%.64s'",
                               zl_kv_policy_names(), pol);
        v = json_object_get(z, "kv_budget");
        if (v && !json_is_null(v)) {
            char tmp[64];
            int bad = 0;
            if (json_is_integer(v)) {
                json_int_t t = json_integer_value(v);
                if (t < 1 || t > (1 << 30)) bad = 1;
                else c.kv_budget = (int)t, c.kv_frac = 0;
            } else if (json_is_real(v)) {
                double f = json_real_value(v);
                if (!(f > 0 && f <= 1)) bad = 1;
                else c.kv_frac = (float)f, c.kv_budget = 0;
            } else if (json_is_string(v)) {
                snprintf(tmp, sizeof tmp, "%s", json_string_value(v));
                bad = ctl_budget(tmp, &c) != 0;
            } else {
                bad = 1;
            }
            if (bad)
                return zl_verr_set(e, "zerolayer.kv_budget",
                                   "zerolayer.kv_budget: expected a token count >= 1 or a fraction of the context in (0, 1]");
            budget_src = "zerolayer.kv_budget";
        }
        v = json_object_get(z, "anchors");
        if (v && !json_is_null(v)) {
            if (!json_is_array(v) || json_array_size(v) > 64)
                return zl_verr_set(e, "zerolayer.anchors", "zerolayer.anchors: expected an array of at most 64 strings");
            size_t i;
            json_t *a;
            json_array_foreach(v, i, a) {
                if (!json_is_string(a) || !json_string_length(a))
                    return zl_verr_set(e, "zerolayer.anchors", "zerolayer.anchors[%zu]: expected a non-empty string", i);
            }
            rc->anchors = json_array_size(v) ? v : NULL;
        }
    }
    /* 3. headers override the body and the preset */
    const char *h;
    if ((h = HDR("X-Zerolayer-Validation"))) {
        int on = 0;
        if (ctl_onoff(h, &on))
            return zl_verr_set(e, "X-Zerolayer-Validation", "X-Zerolayer-Validation: expected on or off, got '%.64s'", h);
        c.spec = on ? ZL_SPEC_LOOKUP : ZL_SPEC_OFF;
    }
    if ((h = HDR("X-Zerolayer-Ring"))) {
        long x;
        if (ctl_int(h, 1, 16, &x))
            return zl_verr_set(e, "X-Zerolayer-Ring", "X-Zerolayer-Ring: expected an integer 1..16, got '%.64s'", h);
        c.ring = (int)x;
    }
    if ((h = HDR("X-Zerolayer-KV-Policy")) && zl_kv_policy_from_name(h, &c.kv_policy))
        return zl_verr_set(e, "X-Zerolayer-KV-Policy", "X-Zerolayer-KV-Policy: expected %s, got '%.64s'",
                           zl_kv_policy_names(), h);
    if ((h = HDR("X-Zerolayer-KV-Budget"))) {
        if (ctl_budget(h, &c))
            return zl_verr_set(e, "X-Zerolayer-KV-Budget",
                               "X-Zerolayer-KV-Budget: expected a token count >= 1 or a fraction in (0, 1], got '%.64s'",
                               h);
        budget_src = "X-Zerolayer-KV-Budget";
    }
#undef HDR
    if (c.kv_policy != ZL_KV_POLICY_FULL) {
        int n_ctx = zl_sched_n_ctx(r->srv->sched), bud = zl_job_ctl_budget(&c, n_ctx);
        if (bud < ZL_KV_BUDGET_MIN)
            return zl_verr_set(e, budget_src,
                               "%s: a KV budget of %d tokens (of the %d-token context) is below the %d tokens the %s policy needs",
                               budget_src, bud, n_ctx, ZL_KV_BUDGET_MIN,
                               zl_kv_policy_name(c.kv_policy));
        rc->bounded = 1;
    }
    rc->ctl = c;
    return 0;
}

/* ---------------- routing ---------------- */

static int auth_ok(zl_req *r) {
    const zl_server_opts *o = &r->srv->o;
    if (o->n_api_keys == 0) return 1;
    const char *key = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "x-api-key");
    const char *auth = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Authorization");
    if (!key && auth && !strncasecmp(auth, "Bearer ", 7)) {
        key = auth + 7;
        while (*key == ' ') key++;
    }
    if (!key) return 0;
    size_t kl = strlen(key);
    int ok = 0;
    for (int i = 0; i < o->n_api_keys; i++) {
        size_t l = strlen(o->api_keys[i]);
        ok |= l == kl && CRYPTO_memcmp(key, o->api_keys[i], l) == 0;
    }
    return ok;
}

static const char *batch_id(const char *url, const char **suffix) {
    static const char pre[] = "/v1/messages/batches/";
    if (strncmp(url, pre, sizeof pre - 1)) return NULL;
    const char *id = url + sizeof pre - 1;
    const char *slash = strchr(id, '/');
    *suffix = slash ? slash : "";
    return *id && *id != '/' ? id : NULL;
}

static enum MHD_Result dispatch(zl_req *r, const char *method) {
    const char *u = r->url;
    int get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
    if (!strncmp(u, "/v1/messages", 12)) r->api = ZL_API_ANTHROPIC;
    if (!strcmp(u, "/v1/models") && MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "anthropic-version"))
        r->api = ZL_API_ANTHROPIC;

    struct { const char *path; int post; } table[] = {
        {"/health", 0}, {"/v1/health", 0}, {"/metrics", 0}, {"/v1/models", 0}, {"/models", 0},
        {"/tokenize", 1}, {"/detokenize", 1}, {"/v1/preheat", 1}, {"/v1/chat/completions", 1},
        {"/chat/completions", 1}, {"/v1/completions", 1}, {"/completions", 1}, {"/v1/messages", 1},
        {"/v1/messages/count_tokens", 1}, {"/v1/messages/batches", -1}, {"/props", 0}, {"/v1/embeddings", 1},
        {"/embeddings", 1},
    };
    if (!strncmp(u, "/v1/sessions", 12) && (!u[12] || u[12] == '/')) {
        r->route = "/v1/sessions";
        if (MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "anthropic-version")) r->api = ZL_API_ANTHROPIC;
        if (!auth_ok(r))
            return zl_reply_error(r, ZL_E_AUTH, NULL, "invalid or missing API key (Authorization: Bearer or x-api-key)");
        if (r->too_large)
            return zl_reply_error(r, ZL_E_TOO_LARGE, NULL, "request body exceeds the limit of %zu bytes",
                                  r->srv->o.max_body);
        return zl_api_sessions(r, method);
    }
    int found = -1;
    for (int i = 0; i < (int)(sizeof table / sizeof *table); i++)
        if (!strcmp(u, table[i].path)) found = i;
    const char *suffix = "", *bid = batch_id(u, &suffix);
    r->route = found >= 0 ? table[found].path : bid ? "/v1/messages/batches/{id}" : "other";
    if (found < 0 && !bid) return zl_reply_error(r, ZL_E_NOT_FOUND, NULL, "no route for %s %s", method, u);
    if (found >= 0 && strcmp(u, "/health") && strcmp(u, "/v1/health") && !auth_ok(r))
        return zl_reply_error(r, ZL_E_AUTH, NULL, "invalid or missing API key (Authorization: Bearer or x-api-key)");
    if (bid && !auth_ok(r))
        return zl_reply_error(r, ZL_E_AUTH, NULL, "invalid or missing API key (Authorization: Bearer or x-api-key)");
    if (r->too_large)
        return zl_reply_error(r, ZL_E_TOO_LARGE, NULL, "request body exceeds the limit of %zu bytes",
                              r->srv->o.max_body);
    if (bid) {
        char id[128];
        size_t l = strcspn(bid, "/");
        snprintf(id, sizeof id, "%.*s", (int)(l < sizeof id - 1 ? l : sizeof id - 1), bid);
        if (!strcmp(suffix, "") && get) return zl_api_batches_get(r, id);
        if (!strcmp(suffix, "/results") && get) return zl_api_batches_results(r, id);
        if (!strcmp(suffix, "/cancel") && post) return zl_api_batches_cancel(r, id);
        return zl_reply_error(r, ZL_E_NOT_FOUND, NULL, "no route for %s %s", method, u);
    }
    int want_post = table[found].post;
    if (want_post == -1) {
        if (get) return zl_api_batches_list(r);
        want_post = 1;
    }
    if (want_post ? !post : !get)
        return zl_reply_error(r, ZL_E_METHOD, NULL, "%s is not allowed on %s (use %s)", method, u,
                              want_post ? "POST" : "GET");
    if (!want_post) {
        if (!strcmp(u, "/metrics")) return zl_api_metrics(r);
        if (!strcmp(u, "/v1/models") || !strcmp(u, "/models")) return zl_api_models(r);
        if (!strcmp(u, "/props")) return zl_api_props(r);
        return zl_api_health(r);
    }
    if (!strcmp(u, "/v1/preheat")) return zl_api_preheat(r);
    zl_verr ve = {{0}, {0}};
    json_t *body = zl_json_parse_body(r->body.p, r->body.n, &ve);
    if (!body) return zl_reply_error(r, ZL_E_INVALID, ve.param, "%s", ve.msg);
    enum MHD_Result ret;
    /* generations select their model in the pipeline; batches run on the first model */
    int generation = strstr(u, "completions") || !strcmp(u, "/v1/messages");
    if (!generation && strcmp(u, "/v1/messages/batches") && zl_models_select(r, body, &ret)) {
        json_decref(body);
        return ret;
    }
    if (!strcmp(u, "/tokenize")) ret = zl_api_tokenize(r, body);
    else if (!strcmp(u, "/detokenize")) ret = zl_api_detokenize(r, body);
    else if (strstr(u, "chat/completions")) ret = zl_api_chat(r, body);
    else if (strstr(u, "completions")) ret = zl_api_completions(r, body);
    else if (!strcmp(u, "/v1/messages")) ret = zl_api_messages(r, body);
    else if (!strcmp(u, "/v1/messages/count_tokens")) ret = zl_api_count_tokens(r, body);
    else if (strstr(u, "embeddings")) ret = zl_api_embeddings(r, body);
    else ret = zl_api_batches_create(r, body);
    json_decref(body);
    return ret;
}

/* Percent-decoding of the URL (MHD_OPTION_UNESCAPE_CALLBACK) that leaves
 * "%00" as it is: a decoded NUL would cut the route ("/health%00.json" would
 * be "/health"), so such a URL matches no route. */
static int hexv(int c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1; }

static size_t url_unescape(void *cls, struct MHD_Connection *conn, char *s) {
    (void)cls;
    (void)conn;
    char *w = s;
    for (const char *p = s; *p; p++) {
        int hi = *p == '%' ? hexv((unsigned char)p[1]) : -1, lo = hi >= 0 ? hexv((unsigned char)p[2]) : -1;
        if (lo >= 0 && (hi | lo)) {
            *w++ = (char)(hi * 16 + lo);
            p += 2;
        } else {
            *w++ = *p;
        }
    }
    *w = 0;
    return (size_t)(w - s);
}

typedef struct { int n; const char *first; int differ; } cl_scan;

static enum MHD_Result cl_count(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    cl_scan *c = cls;
    (void)kind;
    if (!key || strcasecmp(key, "Content-Length")) return MHD_YES;
    if (!c->n++) c->first = value;
    else if (!value || !c->first || strcmp(value, c->first)) c->differ = 1;
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    zl_srv *srv = cls;
    (void)version;
    zl_req *r = *con_cls;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r) return MHD_NO;
        r->srv = srv;
        r->conn = conn;
        r->t_start = zl_now_ms();
        r->route = "other";
        r->fd = -1;
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci) r->fd = ci->connect_fd;
        *con_cls = r;
        /* The headers are in, the body is not: an announced body over the
         * limit is answered now (401/404 first where they apply, else 413),
         * so it is never read, and no `100 Continue` goes out for it (MHD
         * sends one only while no response is queued). */
        cl_scan cs = {0, NULL, 0};
        MHD_get_connection_values(conn, MHD_HEADER_KIND, cl_count, &cs);
        if (cs.differ) { /* which one frames the body is ambiguous (request smuggling) */
            r->url = url;
            if (!strncmp(url, "/v1/messages", 12)) r->api = ZL_API_ANTHROPIC;
            return zl_reply_error(r, ZL_E_INVALID, NULL, "conflicting Content-Length headers");
        }
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > srv->o.max_body) {
            r->too_large = 1;
            r->url = url;
            return dispatch(r, method);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (r->body.n + *upload_size > srv->o.max_body) {
            /* a chunked body that passes the limit: stop reading and answer */
            r->too_large = 1;
            zl_buf_free(&r->body);
            if (!strncmp(url, "/v1/messages", 12)) r->api = ZL_API_ANTHROPIC;
            return reply_too_large_mid_body(r);
        }
        zl_buf_put(&r->body, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    r->url = url;
    const char *d = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Zerolayer-Diagnostic");
    r->diag_full = d && !strcasecmp(d, "full");
    const char *sb = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Zerolayer-Stream-Buffer");
    if (sb) {
        long v;
        r->stream_buffer = ctl_int(sb, 0, 1 << 20, &v) ? -1 : (int)v; /* -1: rejected by dispatch */
    }
    /* the request is in: while the handler works (a long generation) the
     * connection is busy, not idle; the clock starts again when the reply is
     * queued, and a stream restarts it whenever it has bytes (sse_read) */
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    enum MHD_Result ret = r->body.oom ? zl_reply_error(r, ZL_E_INTERNAL, NULL, "out of memory") : dispatch(r, method);
    idle_clock_restart(conn, srv->idle_timeout_s);
    return ret;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls;
    (void)conn;
    zl_req *r = *con_cls;
    if (!r) return;
    zl_models_release(r->model_slot);
    int status = r->status;
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && status == 200) status = 499; /* client closed */
    if (status) zl_metrics_request(r->route, status, (zl_now_ms() - r->t_start) / 1e3);
    zl_buf_free(&r->body);
    free(r);
    *con_cls = NULL;
}

static void on_step(void *ud, int n_seqs, int n_tokens, double ms) {
    (void)ud;
    (void)n_tokens;
    (void)ms;
    zl_metrics_batch(n_seqs);
}

int zl_server_run(zl_llm *llm, const zl_server_opts *o, zl_err *err) {
    zl_srv *srv = calloc(1, sizeof *srv);
    if (!srv) return zl_errf(err, ZL_ENOMEM, "out of memory");
    srv->llm = llm;
    srv->o = *o;
    srv->started = (long long)time(NULL);
    if (!srv->o.host) srv->o.host = "127.0.0.1";
    if (!srv->o.max_body) srv->o.max_body = 8u << 20;
    const char *base = strrchr(o->model_path, '/');
    base = base ? base + 1 : o->model_path;
    snprintf(srv->model_id, sizeof srv->model_id, "%s", o->model_id ? o->model_id : base);
    int trc = zl_chat_fmt_setup(&srv->tpl, llm, o->model_path, o->chat_template, o->chat_template_file, err);
    if (trc) { free(srv); return trc; }
    if ((trc = zl_models_setup(srv, err))) { zl_chat_fmt_free(&srv->tpl); free(srv); return trc; }
    /* every thread started from here on inherits the blocked signals; only
     * the sigwait below sees SIGINT/SIGTERM */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    int rc = zl_sessions_setup(srv, err);
    if (rc) { zl_chat_fmt_free(&srv->tpl); free(srv); return rc; }
    zl_sched_opts so = o->sched;
    so.on_step = on_step;
    so.on_step_ud = srv;
    rc = zl_sched_new(&srv->sched, llm, &so, err);
    if (!rc && (rc = zl_state_dir_load(srv, err))) zl_sched_free(srv->sched);
    if (rc) { zl_state_free(srv); zl_sessions_free(srv->sessions); zl_chat_fmt_free(&srv->tpl); free(srv); return rc; }

    struct sockaddr_in6 a6 = {0};
    struct sockaddr_in a4 = {0};
    struct sockaddr *sa;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                     MHD_USE_ERROR_LOG;
    if (inet_pton(AF_INET, srv->o.host, &a4.sin_addr) == 1) {
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)o->port);
        sa = (struct sockaddr *)&a4;
    } else if (inet_pton(AF_INET6, srv->o.host, &a6.sin6_addr) == 1) {
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)o->port);
        sa = (struct sockaddr *)&a6;
        flags |= MHD_USE_IPv6;
    } else {
        zl_sched_free(srv->sched);
        zl_state_free(srv);
        zl_sessions_free(srv->sessions);
        zl_chat_fmt_free(&srv->tpl);
        free(srv);
        return zl_errf(err, ZL_EINVAL, "--host: '%s' is not an IPv4 or IPv6 address", o->host);
    }
    /* One address may hold conns_per_ip connections of the max_conns in all,
     * so a client opening many (a slowloris) cannot lock others out; a
     * connection that sends nothing for idle_timeout seconds (partial
     * headers, a stalled body, an idle keep-alive, a reply the client stops
     * reading) is closed.  Waiting for the engine is not idle: the clock is
     * off while the handler runs and restarts whenever a stream has bytes. */
    unsigned max_conns = o->max_conns > 0 ? (unsigned)o->max_conns : 1024;
    unsigned per_ip = o->conns_per_ip > 0 ? (unsigned)o->conns_per_ip : 64;
    unsigned idle = o->idle_timeout_s > 0 ? (unsigned)o->idle_timeout_s : 30;
    srv->idle_timeout_s = idle;
    srv->d = MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, on_request, srv, MHD_OPTION_SOCK_ADDR, sa,
                              MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_CONNECTION_TIMEOUT, idle,
                              MHD_OPTION_CONNECTION_LIMIT, max_conns, MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip,
                              MHD_OPTION_UNESCAPE_CALLBACK, url_unescape, NULL, MHD_OPTION_END);
    if (!srv->d) {
        zl_sched_free(srv->sched);
        zl_state_free(srv);
        zl_sessions_free(srv->sessions);
        zl_chat_fmt_free(&srv->tpl);
        free(srv);
        return zl_errf(err, ZL_EIO, "cannot listen on %s:%d: %s", o->host, o->port, strerror(errno));
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(srv->d, MHD_DAEMON_INFO_BIND_PORT);
    int port = di ? di->port : o->port;
    fprintf(stderr, "zerolayer: %s\n", zl_llm_desc(llm));
    fprintf(stderr, "zerolayer: chat template %s; %d slots x %d context; %d threads\n", srv->tpl.name,
            so.n_parallel, zl_sched_n_ctx(srv->sched), zl_llm_n_threads(llm));
    fprintf(stderr, "zerolayer: listening on http://%s:%d\n", srv->o.host, port);
    fflush(stderr);

    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "zerolayer: shutting down\n");
    MHD_quiesce_daemon(srv->d);
    zl_sched_stop(srv->sched); /* cancels running jobs, so their streams end */
    zl_batches_free(srv->batches);
    MHD_stop_daemon(srv->d);
    zl_state_dir_save(srv);
    zl_models_free(srv);
    zl_sched_free(srv->sched);
    zl_state_free(srv);
    zl_sessions_free(srv->sessions);
    zl_chat_fmt_free(&srv->tpl);
    free(srv);
    return 0;
}
