/* routes.c — the route table and the one routing decision (routes.h):
 * exact paths, methods (405 with Allow), the API-key check declared per
 * route, the body policy (JSON only: 415 for text/plain and form bodies, so
 * a cross-site page cannot start a generation with a simple request) and
 * CORS (--cors).  It must never parse a body's fields or match a path
 * anywhere but zl_route_decide. */
#include "routes.h"

#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const zl_route k_routes[] = {
    {"/", ZL_M_GET, 1, ZL_API_OPENAI, ZL_BODY_NONE, 0, zl_api_webui, ZL_FEATURE_WEBUI},
    {"/health", ZL_M_GET, 1, ZL_API_OPENAI, ZL_BODY_NONE, 0, zl_api_health, 0},
    {"/v1/health", ZL_M_GET, 1, ZL_API_OPENAI, ZL_BODY_NONE, 0, zl_api_health, 0},
    {"/metrics", ZL_M_GET, 0, ZL_API_OPENAI, ZL_BODY_NONE, 0, zl_api_metrics, 0},
    {"/props", ZL_M_GET, 0, ZL_API_OPENAI, ZL_BODY_NONE, 0, zl_api_props, 0},
    {"/v1/models", ZL_M_GET, 0, ZL_API_BY_HEADER, ZL_BODY_NONE, 0, zl_api_models, 0},
    {"/models", ZL_M_GET, 0, ZL_API_BY_HEADER, ZL_BODY_NONE, 0, zl_api_models, 0},
    {"/tokenize", ZL_M_POST, 0, ZL_API_OPENAI, ZL_BODY_JSON, 1, zl_api_tokenize, 0},
    {"/detokenize", ZL_M_POST, 0, ZL_API_OPENAI, ZL_BODY_JSON, 1, zl_api_detokenize, 0},
    {"/v1/preheat", ZL_M_POST, 0, ZL_API_OPENAI, ZL_BODY_NONE, 0, zl_api_preheat, 0},
    {"/v1/chat/completions", ZL_M_POST, 0, ZL_API_OPENAI, ZL_BODY_JSON, 0, zl_api_chat, 0},
    {"/chat/completions", ZL_M_POST, 0, ZL_API_OPENAI, ZL_BODY_JSON, 0, zl_api_chat, 0},
    {"/v1/completions", ZL_M_POST, 0, ZL_API_OPENAI, ZL_BODY_JSON, 0, zl_api_completions, 0},
    {"/completions", ZL_M_POST, 0, ZL_API_OPENAI, ZL_BODY_JSON, 0, zl_api_completions, 0},
    {"/v1/embeddings", ZL_M_POST, 0, ZL_API_OPENAI, ZL_BODY_JSON, 1, zl_api_embeddings, 0},
    {"/embeddings", ZL_M_POST, 0, ZL_API_OPENAI, ZL_BODY_JSON, 1, zl_api_embeddings, 0},
    {"/v1/messages", ZL_M_POST, 0, ZL_API_ANTHROPIC, ZL_BODY_JSON, 0, zl_api_messages, 0},
    {"/v1/messages/count_tokens", ZL_M_POST, 0, ZL_API_ANTHROPIC, ZL_BODY_JSON, 1, zl_api_count_tokens, 0},
    /* batches run on the first model */
    {"/v1/messages/batches", ZL_M_POST, 0, ZL_API_ANTHROPIC, ZL_BODY_JSON, 0, zl_api_batches_create, 0},
    {"/v1/messages/batches", ZL_M_GET, 0, ZL_API_ANTHROPIC, ZL_BODY_NONE, 0, zl_api_batches_list, 0},
    {"/v1/messages/batches/{id}", ZL_M_GET, 0, ZL_API_ANTHROPIC, ZL_BODY_NONE, 0, zl_api_batches_get, 0},
    {"/v1/messages/batches/{id}/results", ZL_M_GET, 0, ZL_API_ANTHROPIC, ZL_BODY_NONE, 0, zl_api_batches_results, 0},
    {"/v1/messages/batches/{id}/cancel", ZL_M_POST, 0, ZL_API_ANTHROPIC, ZL_BODY_NONE, 0, zl_api_batches_cancel, 0},
    /* sessions go to the model holding them, else the body's `model` (models.c) */
    {"/v1/sessions", ZL_M_POST, 0, ZL_API_BY_HEADER, ZL_BODY_JSON_OR_BLOB, 1, zl_api_session_create, 0},
    {"/v1/sessions/{id}", ZL_M_GET, 0, ZL_API_BY_HEADER, ZL_BODY_NONE, 1, zl_api_session_get, 0},
    {"/v1/sessions/{id}", ZL_M_DELETE, 0, ZL_API_BY_HEADER, ZL_BODY_NONE, 1, zl_api_session_delete, 0},
    {"/v1/sessions/{id}/flush", ZL_M_POST, 0, ZL_API_BY_HEADER, ZL_BODY_OPTIONAL, 1, zl_api_session_flush, 0},
    {"/v1/sessions/{id}/prefill", ZL_M_POST, 0, ZL_API_BY_HEADER, ZL_BODY_OPTIONAL, 1, zl_api_session_prefill, 0},
    {"/v1/sessions/{id}/snapshot", ZL_M_POST, 0, ZL_API_BY_HEADER, ZL_BODY_OPTIONAL, 1, zl_api_session_snapshot, 0},
};

const zl_route *zl_routes(int *n) {
    *n = (int)(sizeof k_routes / sizeof *k_routes);
    return k_routes;
}

static int feature_on(const zl_server_opts *o, zl_route_feature f) {
    return f != ZL_FEATURE_WEBUI || !o->no_webui;
}

/* path against a pattern; the {id} segment (at most cap - 1 bytes) into id. */
static int path_match(const char *pat, const char *path, char *id, size_t cap) {
    while (*pat) {
        if (!strncmp(pat, "{id}", 4)) {
            size_t l = strcspn(path, "/");
            if (!l || l >= cap) return 0;
            memcpy(id, path, l);
            id[l] = 0;
            pat += 4;
            path += l;
            continue;
        }
        if (*pat++ != *path++) return 0;
    }
    return !*path;
}

static unsigned method_bit(const char *m) {
    if (!strcmp(m, "GET") || !strcmp(m, "HEAD")) return ZL_M_GET;
    if (!strcmp(m, "POST")) return ZL_M_POST;
    if (!strcmp(m, "DELETE")) return ZL_M_DELETE;
    return 0;
}

static void allow_str(unsigned methods, char *buf, size_t cap) {
    snprintf(buf, cap, "%s%s%s", methods & ZL_M_GET ? "GET, HEAD" : "",
             methods & ZL_M_POST ? (methods & ZL_M_GET ? ", POST" : "POST") : "",
             methods & ZL_M_DELETE ? (methods & (ZL_M_GET | ZL_M_POST) ? ", DELETE" : "DELETE") : "");
}

const char *zl_api_key_of(const char *key, const char *auth) {
    if (!key && auth && !strncasecmp(auth, "Bearer ", 7)) {
        key = auth + 7;
        while (*key == ' ') key++;
    }
    return key;
}

const char *zl_req_api_key(zl_hdr_fn hdr, void *hdr_ud) {
    return zl_api_key_of(hdr(hdr_ud, "x-api-key"), hdr(hdr_ud, "Authorization"));
}

static int key_known(const zl_server_opts *o, const char *key) {
    if (o->n_api_keys == 0) return 1;
    if (!key) return 0;
    size_t kl = strlen(key);
    int ok = 0;
    for (int i = 0; i < o->n_api_keys; i++) {
        size_t l = strlen(o->api_keys[i]);
        ok |= l == kl && CRYPTO_memcmp(key, o->api_keys[i], l) == 0;
    }
    return ok;
}

int zl_auth_ok(const zl_server_opts *o, const char *x_api_key, const char *auth) {
    return key_known(o, zl_api_key_of(x_api_key, auth));
}

int zl_ctype_is(const char *ct, const char *want) {
    if (!ct) return 0;
    while (*ct == ' ' || *ct == '\t') ct++;
    size_t l = strlen(want);
    if (strncasecmp(ct, want, l)) return 0;
    ct += l;
    while (*ct == ' ' || *ct == '\t') ct++;
    return !*ct || *ct == ';';
}

int zl_ctype_is_json(const char *ct) { return zl_ctype_is(ct, "application/json"); }

const char *zl_cors_origin(const zl_server_opts *o, const char *origin) {
    if (!origin || !*origin) return NULL;
    for (int i = 0; i < o->n_cors_origins; i++) {
        if (!strcmp(o->cors_origins[i], "*")) return "*";
        if (!strcmp(o->cors_origins[i], origin)) return origin;
    }
    return NULL;
}

static void verdict_fail(zl_route_verdict *v, zl_ekind err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void verdict_fail(zl_route_verdict *v, zl_ekind err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->msg, sizeof v->msg, fmt, ap);
    va_end(ap);
    v->failed = 1;
    v->err = err;
    v->route = NULL;
}

void zl_route_decide(const zl_server_opts *o, const zl_route_req *q, zl_route_verdict *v) {
    memset(v, 0, sizeof *v);
    v->label = "other";
    v->cors_origin = zl_cors_origin(o, q->hdr(q->hdr_ud, "Origin"));
    int n = 0;
    const zl_route *t = zl_routes(&n), *path_route = NULL;
    unsigned want = method_bit(q->method), have = 0;
    char id[sizeof v->id];
    for (int i = 0; i < n; i++) {
        id[0] = 0; /* a route without {id} leaves it empty (a failed match may have written one) */
        if (!feature_on(o, t[i].feature) || !path_match(t[i].path, q->path, id, sizeof id)) continue;
        path_route = path_route ? path_route : &t[i];
        have |= t[i].method;
        if (t[i].method == want) {
            v->route = &t[i];
            snprintf(v->id, sizeof v->id, "%s", id);
        }
    }
    const zl_route *rt = v->route ? v->route : path_route;
    int api = rt ? rt->api : !strncmp(q->path, "/v1/messages", 12) ? ZL_API_ANTHROPIC : ZL_API_OPENAI;
    if (api == ZL_API_BY_HEADER) api = q->hdr(q->hdr_ud, "anthropic-version") ? ZL_API_ANTHROPIC : ZL_API_OPENAI;
    v->api = (zl_api)api;
    allow_str(have, v->allow, sizeof v->allow);
    if (!rt) {
        verdict_fail(v, ZL_E_NOT_FOUND, "no route for %s %.200s", q->method, q->path);
        return;
    }
    v->label = rt->path;
    /* a preflight carries no credentials: it is answered before the key check */
    if (!strcmp(q->method, "OPTIONS") && v->cors_origin && q->hdr(q->hdr_ud, "Access-Control-Request-Method")) {
        v->route = NULL;
        v->preflight = 1;
        return;
    }
    if (!rt->is_public && !key_known(o, zl_req_api_key(q->hdr, q->hdr_ud))) {
        verdict_fail(v, ZL_E_AUTH, "invalid or missing API key (Authorization: Bearer or x-api-key)");
        return;
    }
    if (q->too_large) {
        verdict_fail(v, ZL_E_TOO_LARGE, "request body exceeds the limit of %zu bytes", o->max_body);
        return;
    }
    if (!v->route) {
        verdict_fail(v, ZL_E_METHOD, "%s is not allowed on %.160s (use %s)", q->method, q->path, v->allow);
        return;
    }
    const char *ct = q->hdr(q->hdr_ud, "Content-Type");
    int blob = v->route->body == ZL_BODY_JSON_OR_BLOB && zl_ctype_is(ct, "application/octet-stream");
    if (v->route->body != ZL_BODY_NONE && q->body_len && !zl_ctype_is_json(ct) && !blob)
        verdict_fail(v, ZL_E_MEDIA, "Content-Type: expected application/json%s, got '%.64s'",
                     v->route->body == ZL_BODY_JSON_OR_BLOB ? " (or application/octet-stream: a sealed state)" : "",
                     ct ? ct : "(none)");
}

/* ---------------- dispatch ---------------- */

static void route_of(zl_req *r, const char *method, zl_route_verdict *v) {
    zl_route_req q = {method, r->url, zl_req_header, r->conn, r->too_large, r->body.n};
    zl_route_decide(&r->srv->o, &q, v);
    r->api = v->api;
    r->route = v->label;
    r->cors_origin = v->cors_origin;
}

void zl_route_shape(zl_req *r, const char *method) {
    zl_route_verdict v;
    route_of(r, method, &v);
}

enum MHD_Result zl_dispatch(zl_req *r, const char *method) {
    zl_route_verdict v;
    route_of(r, method, &v);
    snprintf(r->path_id, sizeof r->path_id, "%s", v.id);
    if (v.preflight) return zl_reply_preflight(r, v.allow, zl_req_header(r->conn, "Access-Control-Request-Headers"));
    if (v.failed) {
        if (v.err == ZL_E_METHOD) snprintf(r->allow, sizeof r->allow, "%s", v.allow);
        return zl_reply_error(r, v.err, NULL, "%s", v.msg);
    }
    json_t *body = NULL;
    r->body_blob = v.route->body == ZL_BODY_JSON_OR_BLOB && r->body.n &&
                   zl_ctype_is(zl_req_header(r->conn, "Content-Type"), "application/octet-stream");
    if (v.route->body == ZL_BODY_JSON ||
        ((v.route->body == ZL_BODY_OPTIONAL || v.route->body == ZL_BODY_JSON_OR_BLOB) && r->body.n && !r->body_blob)) {
        zl_verr ve = {{0}, {0}};
        if (!(body = zl_json_parse_body(r->body.p, r->body.n, &ve)))
            return zl_reply_error(r, ZL_E_INVALID, ve.param, "%s", ve.msg);
    }
    enum MHD_Result ret;
    if (!(v.route->select_model && zl_models_select(r, body, &ret))) ret = v.route->fn(r, body);
    json_decref(body);
    return ret;
}
