/* http.c — the transport: libmicrohttpd, body collection with its limits
 * (an announced oversized body answered before it is read, conflicting
 * Content-Length refused), the connection policy (per-address limits, idle
 * timeouts), replies (JSON, errors in the caller's API shape, SSE, CORS
 * headers, the one Retry-After rule) and metrics per request.  Routing is
 * routes.c's: this file never looks at a path; the server's lifecycle
 * (setup, signals, drain, shutdown) is server.c's, which starts and stops
 * the listener through zl_http_start / zl_http_quiesce / zl_http_stop.
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
#include "../base/clock.h"
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/rand.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../base/err.h"
#include "metrics.h"
#include "routes.h"

#define ZL_WAIT_MS 100

/* ---------------- replies ---------------- */

/* Every reply goes out here: the headers every response carries, then
 * MHD.  Retry-After: on every 429, 503 and 529 (busy, draining,
 * overloaded), whatever the body. */
static enum MHD_Result queue_reply(zl_req *r, int status, struct MHD_Response *resp, const char *ctype) {
    if (ctype) MHD_add_response_header(resp, "Content-Type", ctype);
    MHD_add_response_header(resp, "Server", "zerolayer/" ZEROLAYER_VERSION);
    if (status == 429 || status == 503 || status == 529) MHD_add_response_header(resp, "Retry-After", "1");
    if (status == 405 && r->allow[0]) MHD_add_response_header(resp, "Allow", r->allow);
    if (r->cors_origin) {
        MHD_add_response_header(resp, "Access-Control-Allow-Origin", r->cors_origin);
        MHD_add_response_header(resp, "Access-Control-Expose-Headers", "Retry-After, Server-Timing");
        if (strcmp(r->cors_origin, "*")) MHD_add_response_header(resp, "Vary", "Origin");
    }
    r->status = status;
    enum MHD_Result ret = MHD_queue_response(r->conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return ret;
}

enum MHD_Result zl_reply_raw(zl_req *r, int status, const char *ctype, const char *body, size_t len) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!resp) return MHD_NO;
    return queue_reply(r, status, resp, ctype);
}

enum MHD_Result zl_reply_bytes(zl_req *r, int status, const char *ctype, const void *body, size_t len,
                               const char *const *hdrs, int persistent) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        len, (void *)body, persistent ? MHD_RESPMEM_PERSISTENT : MHD_RESPMEM_MUST_COPY);
    if (!resp) return MHD_NO;
    for (; hdrs && hdrs[0]; hdrs += 2) MHD_add_response_header(resp, hdrs[0], hdrs[1]);
    return queue_reply(r, status, resp, ctype);
}

enum MHD_Result zl_reply_json(zl_req *r, int status, json_t *j, const char *server_timing) {
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!s) return zl_reply_raw(r, 500, "application/json", "{}", 2);
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(s), s, MHD_RESPMEM_MUST_FREE);
    if (!resp) { free(s); return MHD_NO; }
    if (server_timing && *server_timing) MHD_add_response_header(resp, "Server-Timing", server_timing);
    return queue_reply(r, status, resp, "application/json");
}

enum MHD_Result zl_reply_preflight(zl_req *r, const char *methods, const char *req_headers) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!resp) return MHD_NO;
    char m[96];
    snprintf(m, sizeof m, "%s, OPTIONS", methods);
    MHD_add_response_header(resp, "Access-Control-Allow-Methods", m);
    MHD_add_response_header(resp, "Access-Control-Allow-Headers",
                            req_headers && *req_headers
                                ? req_headers
                                : "Authorization, Content-Type, x-api-key, anthropic-version, X-Zerolayer-Session");
    MHD_add_response_header(resp, "Access-Control-Max-Age", "600");
    return queue_reply(r, 204, resp, NULL);
}

const char *zl_req_header(void *conn, const char *name) {
    return MHD_lookup_connection_value((struct MHD_Connection *)conn, MHD_HEADER_KIND, name);
}

json_t *zl_error_json(zl_api api, zl_ekind kind, const char *param, const char *msg, int *status_out) {
    return zl_error_json_code(api, kind, param, NULL, msg, status_out);
}

json_t *zl_error_json_code(zl_api api, zl_ekind kind, const char *param, const char *code, const char *msg,
                           int *status_out) {
    /* one row per zl_ekind, in its order */
    static const int st_oai[] = {400, 401, 404, 405, 413, 429, 500, 404, 415, 503, 403, 409, 410, 429};
    static const int st_ant[] = {400, 401, 404, 405, 413, 529, 500, 404, 415, 503, 403, 409, 410, 429};
    static const char *const t_oai[] = {"invalid_request_error", "authentication_error", "invalid_request_error",
                                        "invalid_request_error", "invalid_request_error", "rate_limit_error",
                                        "server_error",          "invalid_request_error", "invalid_request_error",
                                        "server_error",          "permission_error",      "invalid_request_error",
                                        "invalid_request_error", "rate_limit_error"};
    static const char *const c_oai[] = {NULL, "invalid_api_key", "unknown_url", "method_not_allowed",
                                        "request_too_large", "rate_limit_exceeded", NULL, "model_not_found",
                                        "unsupported_media_type", "service_unavailable", "forbidden", "conflict",
                                        "gone", "rate_limit_exceeded"};
    static const char *const t_ant[] = {"invalid_request_error", "authentication_error", "not_found_error",
                                        "invalid_request_error", "request_too_large",    "overloaded_error",
                                        "api_error",             "not_found_error",      "invalid_request_error",
                                        "overloaded_error",      "permission_error",     "invalid_request_error",
                                        "invalid_request_error", "rate_limit_error"};
    _Static_assert(sizeof st_oai / sizeof *st_oai == ZL_E_RATE_LIMIT + 1, "one row per zl_ekind");
    json_t *j;
    /* the message and the parameter may quote the request (a method, a URL, a key): bytes that are not
     * UTF-8 become U+FFFD */
    json_t *m = zl_json_lossy_string(msg, strlen(msg));
    if (api == ZL_API_ANTHROPIC) {
        *status_out = st_ant[kind];
        j = json_pack("{s:s, s:{s:s, s:o}}", "type", "error", "error", "type", t_ant[kind], "message", m);
        if (code) json_object_set_new(json_object_get(j, "error"), "reason", json_string(code));
    } else {
        *status_out = st_oai[kind];
        if (!code) code = c_oai[kind];
        j = json_pack("{s:{s:o, s:s, s:o, s:o}}", "error", "message", m, "type", t_oai[kind], "param",
                      param && *param ? zl_json_lossy_string(param, strlen(param)) : json_null(), "code",
                      code ? json_string(code) : json_null());
    }
    return j;
}

enum MHD_Result zl_reply_error(zl_req *r, zl_ekind kind, const char *param, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int status;
    json_t *j = zl_error_json(r->api, kind, param, msg, &status);
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
    json_t *j = zl_error_json(r->api, ZL_E_TOO_LARGE, NULL, msg, &status);
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
            r->status = 499;
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
        zl_sess_status st = s->sess_id[0] ? zl_sessions_check(s->srv->sessions, s->sess_id) : ZL_SESS_OK;
        if (st != ZL_SESS_OK) {
            /* the generation is cancelled when the stream is freed; the error is each API's own event:
             * Anthropic's `event: error`, OpenAI's data-only {"error": ...} */
            int status;
            json_t *e = zl_sess_status_json(s->api, st, s->sess_id, zl_sessions_get_opts(s->srv->sessions)->ttl_s, &status);
            zl_sse_event(s, s->api == ZL_API_ANTHROPIC ? "error" : NULL, e);
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
        s->srv = r->srv;
        s->api = r->api;
        snprintf(s->sess_id, sizeof s->sess_id, "%s", r->sess_id);
    }
    if (r->model_slot) { /* the stream holds the model until its last byte */
        s->model_slot = r->model_slot;
        r->model_slot = NULL;
    }
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, sse_read, s, sse_free);
    if (!resp) { sse_free(s); return MHD_NO; }
    s->resp = resp;
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    if (r->diag_full) MHD_add_response_header(resp, "Trailer", "Server-Timing");
    return queue_reply(r, 200, resp, "text/event-stream");
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

/* ---------------- requests ---------------- */

static int hexv(int c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1; }

size_t zl_url_unescape(char *s) {
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

/* MHD_OPTION_UNESCAPE_CALLBACK: the URL as routes see it. */
static size_t url_unescape(void *cls, struct MHD_Connection *conn, char *s) {
    (void)cls;
    (void)conn;
    return zl_url_unescape(s);
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

/* While draining: 503 with Retry-After, in the caller's API shape. */
static enum MHD_Result reply_draining(zl_req *r, const char *url, const char *method) {
    r->url = url;
    zl_route_shape(r, method);
    return zl_reply_error(r, ZL_E_UNAVAILABLE, NULL, "the server is shutting down");
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
        atomic_fetch_add(&srv->in_flight, 1);
        if (atomic_load(&srv->draining)) return reply_draining(r, url, method);
        /* The headers are in, the body is not: an announced body over the
         * limit is answered now (401/404 first where they apply, else 413),
         * so it is never read, and no `100 Continue` goes out for it (MHD
         * sends one only while no response is queued). */
        cl_scan cs = {0, NULL, 0};
        MHD_get_connection_values(conn, MHD_HEADER_KIND, cl_count, &cs);
        if (cs.differ) { /* which one frames the body is ambiguous (request smuggling) */
            r->url = url;
            zl_route_shape(r, method);
            return zl_reply_error(r, ZL_E_INVALID, NULL, "conflicting Content-Length headers");
        }
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > srv->o.max_body) {
            r->too_large = 1;
            r->url = url;
            return zl_dispatch(r, method);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (r->body.n + *upload_size > srv->o.max_body) {
            /* a chunked body that passes the limit: stop reading and answer */
            r->too_large = 1;
            zl_buf_free(&r->body);
            r->url = url;
            zl_route_shape(r, method);
            return reply_too_large_mid_body(r);
        }
        zl_buf_put(&r->body, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    r->url = url;
    const char *d = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Zerolayer-Diagnostic");
    r->diag_full = d && !strcasecmp(d, "full");
    /* the request is in: while the handler works (a long generation) the
     * connection is busy, not idle; the clock starts again when the reply is
     * queued, and a stream restarts it whenever it has bytes (sse_read) */
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    enum MHD_Result ret = r->body.oom ? zl_reply_error(r, ZL_E_INTERNAL, NULL, "out of memory") : zl_dispatch(r, method);
    idle_clock_restart(conn, srv->idle_timeout_s);
    return ret;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe) {
    zl_srv *srv = cls;
    (void)conn;
    zl_req *r = *con_cls;
    if (!r) return;
    atomic_fetch_sub(&srv->in_flight, 1);
    zl_models_release(r->model_slot);
    int status = r->status;
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && status == 200) status = 499; /* client closed */
    if (status) zl_metrics_request(r->route, status, (zl_now_ms() - r->t_start) / 1e3);
    zl_buf_free(&r->body);
    free(r);
    *con_cls = NULL;
}

int zl_http_start(zl_srv *srv, int *port, zl_err *err) {
    const zl_server_opts *o = &srv->o;
    struct sockaddr_in6 a6 = {0};
    struct sockaddr_in a4 = {0};
    struct sockaddr *sa;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                     MHD_USE_ERROR_LOG;
    if (inet_pton(AF_INET, o->host, &a4.sin_addr) == 1) {
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)o->port);
        sa = (struct sockaddr *)&a4;
    } else if (inet_pton(AF_INET6, o->host, &a6.sin6_addr) == 1) {
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)o->port);
        sa = (struct sockaddr *)&a6;
        flags |= MHD_USE_IPv6;
    } else {
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
    if (!srv->d) return zl_errf(err, ZL_EIO, "cannot listen on %s:%d: %s", o->host, o->port, strerror(errno));
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(srv->d, MHD_DAEMON_INFO_BIND_PORT);
    *port = di ? di->port : o->port;
    return 0;
}

void zl_http_quiesce(zl_srv *srv) { MHD_quiesce_daemon(srv->d); }

void zl_http_stop(zl_srv *srv) {
    MHD_stop_daemon(srv->d);
    srv->d = NULL;
}
