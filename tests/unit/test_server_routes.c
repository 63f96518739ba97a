/* test_server_routes.c — routing, auth, the body policy, CORS and the
 * ring/KV controls, without a socket: requests are a method, a path as the
 * transport decodes it (zl_url_unescape) and a header table, decided by
 * zl_route_decide over the real route table; error bodies come from the
 * one error shaper (zl_error_json); controls from zl_ctl_parse. */
#include <criterion/criterion.h>
#include <string.h>
#include <strings.h>

#include "server/controls.h"
#include "server/routes.h"

typedef struct { const char *k, *v; } hdr_kv;

static const char *hdr_of(void *ud, const char *name) {
    for (const hdr_kv *h = ud; h && h->k; h++)
        if (!strcasecmp(h->k, name)) return h->v;
    return NULL;
}

static const char *k_keys[] = {"k1-secret", "k2-secret"};

static zl_server_opts opts(int with_keys) {
    zl_server_opts o;
    memset(&o, 0, sizeof o);
    o.max_body = 1000;
    if (with_keys) {
        o.api_keys = k_keys;
        o.n_api_keys = 2;
    }
    return o;
}

static void decide(const zl_server_opts *o, const char *method, const char *raw_path, const hdr_kv *h,
                   size_t body_len, zl_route_verdict *v) {
    char path[256];
    snprintf(path, sizeof path, "%s", raw_path);
    zl_url_unescape(path);
    zl_route_req q = {method, path, hdr_of, (void *)h, 0, body_len};
    zl_route_decide(o, &q, v);
}

static const hdr_kv k_json[] = {{"Content-Type", "application/json"}, {NULL, NULL}};

/* A concrete path of route t ({id} as id) and its method's name. */
static const char *route_path(const zl_route *t, const char *id, char *path, size_t cap) {
    const char *p = strstr(t->path, "{id}");
    if (p) snprintf(path, cap, "%.*s%s%s", (int)(p - t->path), t->path, id, p + 4);
    else snprintf(path, cap, "%s", t->path);
    return t->method == ZL_M_GET ? "GET" : t->method == ZL_M_POST ? "POST" : "DELETE";
}

/* ---------------- routing ---------------- */

Test(routes, every_path_of_the_table_routes_to_its_own_handler) {
    zl_server_opts o = opts(0);
    int n;
    const zl_route *t = zl_routes(&n);
    cr_assert_gt(n, 20);
    for (int i = 0; i < n; i++) {
        char path[128];
        const char *m = route_path(&t[i], "abc123", path, sizeof path);
        zl_route_verdict v;
        decide(&o, m, path, k_json, 2, &v);
        cr_expect(!v.failed, "%s %s: %s", m, path, v.msg);
        cr_expect_eq(v.route, &t[i], "%s %s went to another route", m, path);
        cr_expect_str_eq(v.label, t[i].path);
        if (strstr(t[i].path, "{id}")) cr_expect_str_eq(v.id, "abc123");
        else cr_expect_str_eq(v.id, "", "%s %s: an id without {id} in the path", m, path);
        for (int k = 0; k < i; k++)
            cr_expect(strcmp(t[k].path, t[i].path) || t[k].method != t[i].method, "%s twice", t[i].path);
    }
}

Test(routes, the_chat_page_is_public_and_off_with_no_webui) {
    zl_server_opts o = opts(1);
    zl_route_verdict v;
    decide(&o, "GET", "/", NULL, 0, &v);
    cr_expect(!v.failed, "GET / with keys configured: %s", v.msg);
    cr_expect_str_eq(v.label, "/");
    decide(&o, "HEAD", "/", NULL, 0, &v);
    cr_expect(!v.failed);
    decide(&o, "POST", "/", k_json, 2, &v);
    cr_expect(v.failed && v.err == ZL_E_METHOD);
    o.no_webui = 1;
    for (int i = 0; i < 2; i++) {
        decide(&o, i ? "POST" : "GET", "/", NULL, 0, &v);
        cr_expect(v.failed && v.err == ZL_E_NOT_FOUND, "--no-webui: %s / is not a 404", i ? "POST" : "GET");
        cr_expect_str_eq(v.label, "other");
    }
    decide(&o, "GET", "/health", NULL, 0, &v);
    cr_expect(!v.failed);
}

Test(routes, strict_paths_are_404) {
    zl_server_opts o = opts(0);
    const char *bad[] = {"/health%00.json", "/health%00", "/v1/models%00x", "/health/", "/HEALTH", "/healthz",
                         "/v1/chat/completions/", "/v1/chat/completionsX", "/v1/messages/batches//results",
                         "/v1/messages/batches/x/results/more", "/v1/sessions/", "/v1/sessions//flush",
                         "/v1/sessions//snapshot", "/v1/sessions/x/snapshot/", "//", "/index.html", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        zl_route_verdict v;
        decide(&o, "GET", bad[i], NULL, 0, &v);
        cr_expect(v.failed && v.err == ZL_E_NOT_FOUND, "%s: not a 404", bad[i]);
        cr_expect_null(v.route);
        cr_expect_str_eq(v.label, "other");
    }
    /* a decoded NUL stays escaped; other escapes decode */
    char p[64] = "/health%00.json";
    zl_url_unescape(p);
    cr_expect_str_eq(p, "/health%00.json");
    snprintf(p, sizeof p, "/v1/%%6dodels");
    zl_url_unescape(p);
    cr_expect_str_eq(p, "/v1/models");
    zl_route_verdict v;
    decide(&o, "GET", "/v1/%6dodels", NULL, 0, &v);
    cr_expect(!v.failed);
    /* an id longer than any the server makes matches nothing */
    char longp[256];
    snprintf(longp, sizeof longp, "/v1/messages/batches/%0100d", 7);
    decide(&o, "GET", longp, NULL, 0, &v);
    cr_expect(v.failed && v.err == ZL_E_NOT_FOUND);
}

Test(routes, wrong_method_is_405_with_allow) {
    zl_server_opts o = opts(0);
    struct { const char *m, *path, *allow; } c[] = {
        {"GET", "/v1/chat/completions", "POST"},
        {"DELETE", "/v1/messages/batches", "GET, HEAD, POST"},
        {"PUT", "/health", "GET, HEAD"},
        {"POST", "/v1/sessions/abc", "GET, HEAD, DELETE"},
        {"GET", "/v1/messages/batches/abc/cancel", "POST"},
        {"DELETE", "/v1/sessions/abc/snapshot", "POST"},
        {"OPTIONS", "/v1/messages", "POST"}, /* no --cors: a preflight is a method like any other */
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        zl_route_verdict v;
        decide(&o, c[i].m, c[i].path, NULL, 0, &v);
        cr_expect(v.failed && v.err == ZL_E_METHOD, "%s %s: not a 405", c[i].m, c[i].path);
        cr_expect_str_eq(v.allow, c[i].allow, "%s %s", c[i].m, c[i].path);
        cr_expect_str_neq(v.label, "other", "%s %s: a known path keeps its label", c[i].m, c[i].path);
        cr_expect_not_null(strstr(v.msg, c[i].allow), "%s", v.msg);
    }
    zl_route_verdict v;
    decide(&o, "HEAD", "/health", NULL, 0, &v);
    cr_expect(!v.failed);
    cr_expect_eq(v.route->fn, zl_api_health);
}

Test(routes, api_shape_by_path_and_header) {
    zl_server_opts o = opts(0);
    const hdr_kv ant[] = {{"anthropic-version", "2023-06-01"}, {NULL, NULL}};
    struct { const char *m, *path; const hdr_kv *h; zl_api want; } c[] = {
        {"GET", "/v1/messages/nope", NULL, ZL_API_ANTHROPIC}, {"GET", "/v1/nope", NULL, ZL_API_OPENAI},
        {"GET", "/v1/models", NULL, ZL_API_OPENAI},           {"GET", "/v1/models", ant, ZL_API_ANTHROPIC},
        {"GET", "/v1/sessions/x", ant, ZL_API_ANTHROPIC},     {"POST", "/v1/chat/completions", ant, ZL_API_OPENAI},
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        zl_route_verdict v;
        decide(&o, c[i].m, c[i].path, c[i].h, 0, &v);
        cr_expect_eq(v.api, c[i].want, "%s %s", c[i].m, c[i].path);
    }
}

/* ---------------- auth ---------------- */

Test(auth, declared_per_route_and_checked_once) {
    zl_server_opts o = opts(1);
    int n;
    const zl_route *t = zl_routes(&n);
    const hdr_kv none[] = {{"Content-Type", "application/json"}, {NULL, NULL}};
    const hdr_kv xkey[] = {{"x-api-key", "k2-secret"}, {NULL, NULL}};
    const hdr_kv bearer[] = {{"Authorization", "Bearer  k1-secret"}, {NULL, NULL}};
    const hdr_kv wrong[] = {{"Authorization", "Bearer k3-secret"}, {NULL, NULL}};
    const hdr_kv prefix[] = {{"x-api-key", "k1-secre"}, {NULL, NULL}};
    const hdr_kv longer[] = {{"x-api-key", "k1-secretX"}, {NULL, NULL}};
    const hdr_kv basic[] = {{"Authorization", "Basic k1-secret"}, {NULL, NULL}};
    int n_public = 0;
    for (int i = 0; i < n; i++) {
        char path[128];
        const char *m = route_path(&t[i], "id1", path, sizeof path);
        zl_route_verdict v;
        decide(&o, m, path, none, 0, &v);
        if (t[i].is_public) {
            n_public++;
            cr_expect(!v.failed, "%s is public", path);
        } else {
            cr_expect(v.failed && v.err == ZL_E_AUTH, "%s %s without a key: not a 401", m, path);
        }
        const hdr_kv *bad[] = {wrong, prefix, longer, basic};
        for (int k = 0; k < 4; k++) {
            decide(&o, m, path, bad[k], 0, &v);
            cr_expect(t[i].is_public ? !v.failed : v.failed && v.err == ZL_E_AUTH, "%s %s key %d", m, path, k);
        }
        decide(&o, m, path, xkey, 0, &v);
        cr_expect(!v.failed, "%s %s with x-api-key: %s", m, path, v.msg);
        decide(&o, m, path, bearer, 0, &v);
        cr_expect(!v.failed, "%s %s with Bearer: %s", m, path, v.msg);
    }
    cr_expect_eq(n_public, 3); /* /health, /v1/health and / (the page holds no secret; the API it calls asks for the key) */
    /* without keys every route is open */
    zl_server_opts open = opts(0);
    zl_route_verdict v;
    decide(&open, "GET", "/metrics", NULL, 0, &v);
    cr_expect(!v.failed);
    cr_expect_eq(zl_auth_ok(&open, NULL, NULL), 1);
    cr_expect_eq(zl_auth_ok(&o, NULL, NULL), 0);
    cr_expect_eq(zl_auth_ok(&o, "k1-secret", "Bearer nope"), 1); /* x-api-key wins */
}

Test(auth, one_reading_of_the_key) {
    cr_expect_null(zl_api_key_of(NULL, NULL));
    cr_expect_str_eq(zl_api_key_of("k1", "Bearer k2"), "k1"); /* x-api-key first */
    cr_expect_str_eq(zl_api_key_of(NULL, "Bearer k2"), "k2");
    cr_expect_str_eq(zl_api_key_of(NULL, "bearer   k2"), "k2"); /* the scheme in any case, spaces skipped */
    cr_expect_null(zl_api_key_of(NULL, "Basic azE6"));          /* no other scheme carries a key */
    cr_expect_null(zl_api_key_of(NULL, "Bearer"));
}

Test(auth, order_404_then_401_then_413_then_405) {
    zl_server_opts o = opts(1);
    zl_route_verdict v;
    decide(&o, "GET", "/nope", NULL, 0, &v);
    cr_expect_eq(v.err, ZL_E_NOT_FOUND);
    decide(&o, "GET", "/v1/chat/completions", NULL, 0, &v);
    cr_expect_eq(v.err, ZL_E_AUTH);
    const hdr_kv key[] = {{"x-api-key", "k1-secret"}, {NULL, NULL}};
    zl_route_req q = {"GET", "/v1/chat/completions", hdr_of, (void *)key, 1, 0};
    zl_route_decide(&o, &q, &v);
    cr_expect_eq(v.err, ZL_E_TOO_LARGE);
    cr_expect_not_null(strstr(v.msg, "1000"), "%s", v.msg);
    q.too_large = 0;
    zl_route_decide(&o, &q, &v);
    cr_expect_eq(v.err, ZL_E_METHOD);
}

static json_t *err_body(zl_api api, zl_ekind k, const char *param, int *status) {
    return zl_error_json(api, k, param, "the message", status);
}

Test(auth, error_shapes_of_both_apis) {
    int st;
    json_t *j = err_body(ZL_API_OPENAI, ZL_E_AUTH, NULL, &st);
    cr_expect_eq(st, 401);
    json_t *e = json_object_get(j, "error");
    cr_expect_str_eq(json_string_value(json_object_get(e, "type")), "authentication_error");
    cr_expect_str_eq(json_string_value(json_object_get(e, "code")), "invalid_api_key");
    cr_expect_str_eq(json_string_value(json_object_get(e, "message")), "the message");
    cr_expect(json_is_null(json_object_get(e, "param")));
    json_decref(j);
    j = err_body(ZL_API_ANTHROPIC, ZL_E_AUTH, NULL, &st);
    cr_expect_eq(st, 401);
    cr_expect_str_eq(json_string_value(json_object_get(j, "type")), "error");
    e = json_object_get(j, "error");
    cr_expect_str_eq(json_string_value(json_object_get(e, "type")), "authentication_error");
    cr_expect_str_eq(json_string_value(json_object_get(e, "message")), "the message");
    json_decref(j);
    /* the status of every kind in both shapes */
    struct { zl_ekind k; int oai, ant; const char *ant_type; } c[] = {
        {ZL_E_INVALID, 400, 400, "invalid_request_error"}, {ZL_E_NOT_FOUND, 404, 404, "not_found_error"},
        {ZL_E_METHOD, 405, 405, "invalid_request_error"},  {ZL_E_TOO_LARGE, 413, 413, "request_too_large"},
        {ZL_E_BUSY, 429, 529, "overloaded_error"},         {ZL_E_INTERNAL, 500, 500, "api_error"},
        {ZL_E_MEDIA, 415, 415, "invalid_request_error"},
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        j = err_body(ZL_API_OPENAI, c[i].k, "messages", &st);
        cr_expect_eq(st, c[i].oai, "kind %d", c[i].k);
        cr_expect_str_eq(json_string_value(json_object_get(json_object_get(j, "error"), "param")), "messages");
        json_decref(j);
        j = err_body(ZL_API_ANTHROPIC, c[i].k, NULL, &st);
        cr_expect_eq(st, c[i].ant, "kind %d", c[i].k);
        cr_expect_str_eq(json_string_value(json_object_get(json_object_get(j, "error"), "type")), c[i].ant_type);
        json_decref(j);
    }
}

/* Every session status in both APIs' own shapes: OpenAI {error: {message,
 * type, param, code = reason}}, Anthropic {type: error, error: {type,
 * message, reason}}; the same HTTP status in both. */
Test(auth, session_status_errors_in_both_shapes) {
    struct { zl_sess_status st; int status; const char *reason, *oai_type, *ant_type, *says; } c[] = {
        {ZL_SESS_UNKNOWN, 404, "not_found", "invalid_request_error", "not_found_error", "does not exist"},
        {ZL_SESS_TENANT, 403, "forbidden", "permission_error", "permission_error", "another tenant"},
        {ZL_SESS_EXPIRED, 410, "expired", "invalid_request_error", "invalid_request_error", "expired after 90 s"},
        {ZL_SESS_EVICTED, 410, "evicted", "invalid_request_error", "invalid_request_error", "evicted"},
        {ZL_SESS_DELETED, 410, "deleted", "invalid_request_error", "invalid_request_error", "deleted"},
        {ZL_SESS_BUSY, 409, "busy", "invalid_request_error", "invalid_request_error", "one request at a time"},
        {ZL_SESS_LIMIT, 429, "limit", "rate_limit_error", "rate_limit_error", "most sessions"},
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        int st = 0;
        json_t *j = zl_sess_status_json(ZL_API_OPENAI, c[i].st, "zs_1", 90, &st);
        cr_expect_eq(st, c[i].status, "openai %s", c[i].reason);
        json_t *e = json_object_get(j, "error");
        cr_expect_eq(json_object_size(j), 1);
        cr_expect_str_eq(json_string_value(json_object_get(e, "type")), c[i].oai_type);
        cr_expect_str_eq(json_string_value(json_object_get(e, "code")), c[i].reason);
        cr_expect(json_is_null(json_object_get(e, "param")));
        cr_expect_not_null(strstr(json_string_value(json_object_get(e, "message")), c[i].says), "%s", c[i].reason);
        json_decref(j);
        j = zl_sess_status_json(ZL_API_ANTHROPIC, c[i].st, "zs_1", 90, &st);
        cr_expect_eq(st, c[i].status, "anthropic %s", c[i].reason);
        cr_expect_str_eq(json_string_value(json_object_get(j, "type")), "error");
        e = json_object_get(j, "error");
        cr_expect_str_eq(json_string_value(json_object_get(e, "type")), c[i].ant_type);
        cr_expect_str_eq(json_string_value(json_object_get(e, "reason")), c[i].reason);
        cr_expect_null(json_object_get(e, "code"));
        cr_expect_not_null(strstr(json_string_value(json_object_get(e, "message")), c[i].says), "%s", c[i].reason);
        json_decref(j);
    }
}

/* ---------------- body policy and CORS ---------------- */

Test(body, only_json_bodies_on_routes_that_read_one) {
    zl_server_opts o = opts(0);
    const char *bad[] = {"text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
                         "multipart/form-data; boundary=x", "application/jsonx", "application/json5", "", NULL};
    const char *good[] = {"application/json", "application/json; charset=utf-8", "Application/JSON",
                          " application/json ;charset=utf-8"};
    const char *paths[] = {"/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/embeddings",
                           "/tokenize", "/v1/messages/batches", "/v1/sessions"};
    for (size_t p = 0; p < sizeof paths / sizeof *paths; p++) {
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
            hdr_kv h[] = {{bad[i] ? "Content-Type" : NULL, bad[i]}, {NULL, NULL}};
            zl_route_verdict v;
            decide(&o, "POST", paths[p], h, 10, &v);
            cr_expect(v.failed && v.err == ZL_E_MEDIA, "%s with '%s': not a 415", paths[p], bad[i] ? bad[i] : "(none)");
            cr_expect_not_null(strstr(v.msg, "Content-Type"), "%s", v.msg);
        }
        for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
            hdr_kv h[] = {{"Content-Type", good[i]}, {NULL, NULL}};
            zl_route_verdict v;
            decide(&o, "POST", paths[p], h, 10, &v);
            cr_expect(!v.failed, "%s with '%s': %s", paths[p], good[i], v.msg);
        }
    }
    /* no body, or a route that reads none: no Content-Type needed */
    const hdr_kv plain[] = {{"Content-Type", "text/plain"}, {NULL, NULL}};
    zl_route_verdict v;
    decide(&o, "POST", "/v1/sessions", plain, 0, &v);
    cr_expect(!v.failed);
    decide(&o, "POST", "/v1/preheat", plain, 10, &v);
    cr_expect(!v.failed);
}

Test(cors, none_by_default) {
    zl_server_opts o = opts(0);
    const hdr_kv pre[] = {{"Origin", "https://a.example"}, {"Access-Control-Request-Method", "POST"}, {NULL, NULL}};
    zl_route_verdict v;
    decide(&o, "OPTIONS", "/v1/chat/completions", pre, 0, &v);
    cr_expect(!v.preflight);
    cr_expect(v.failed && v.err == ZL_E_METHOD);
    cr_expect_null(v.cors_origin);
    decide(&o, "GET", "/health", pre, 0, &v);
    cr_expect_null(v.cors_origin);
}

Test(cors, listed_origins_get_preflights_and_headers) {
    zl_server_opts o = opts(1);
    const char *origins[] = {"https://a.example", "http://localhost:3000"};
    o.cors_origins = origins;
    o.n_cors_origins = 2;
    const hdr_kv pre[] = {{"Origin", "https://a.example"}, {"Access-Control-Request-Method", "POST"}, {NULL, NULL}};
    const hdr_kv other[] = {{"Origin", "https://b.example"}, {"Access-Control-Request-Method", "POST"}, {NULL, NULL}};
    zl_route_verdict v;
    decide(&o, "OPTIONS", "/v1/chat/completions", pre, 0, &v); /* no key: a preflight carries none */
    cr_expect(v.preflight && !v.failed);
    cr_expect_str_eq(v.allow, "POST");
    cr_expect_str_eq(v.cors_origin, "https://a.example");
    decide(&o, "OPTIONS", "/v1/messages/batches", pre, 0, &v);
    cr_expect(v.preflight);
    cr_expect_str_eq(v.allow, "GET, HEAD, POST");
    decide(&o, "OPTIONS", "/v1/chat/completions", other, 0, &v);
    cr_expect(!v.preflight && v.failed && v.err == ZL_E_AUTH);
    cr_expect_null(v.cors_origin);
    decide(&o, "OPTIONS", "/nope", pre, 0, &v);
    cr_expect(!v.preflight && v.err == ZL_E_NOT_FOUND);
    const hdr_kv get[] = {{"Origin", "http://localhost:3000"}, {"x-api-key", "k1-secret"}, {NULL, NULL}};
    decide(&o, "GET", "/v1/models", get, 0, &v);
    cr_expect(!v.failed);
    cr_expect_str_eq(v.cors_origin, "http://localhost:3000");
    /* CORS does not lift the body policy */
    const hdr_kv plain[] = {{"Origin", "https://a.example"}, {"x-api-key", "k1-secret"}, {"Content-Type", "text/plain"},
                            {NULL, NULL}};
    decide(&o, "POST", "/v1/messages", plain, 5, &v);
    cr_expect(v.failed && v.err == ZL_E_MEDIA);
    const char *star[] = {"*"};
    o.cors_origins = star;
    o.n_cors_origins = 1;
    decide(&o, "OPTIONS", "/v1/chat/completions", other, 0, &v);
    cr_expect(v.preflight);
    cr_expect_str_eq(v.cors_origin, "*");
    cr_expect_null(zl_cors_origin(&o, NULL));
}

/* ---------------- controls ---------------- */

static int ctl(const hdr_kv *h, const char *body, zl_req_ctl *out, zl_verr *e) {
    zl_job_ctl def = {0};
    json_t *b = body ? json_loads(body, 0, NULL) : NULL;
    if (body) cr_assert_not_null(b, "bad test body %s", body);
    memset(e, 0, sizeof *e);
    int rc = zl_ctl_parse(&def, 1024, hdr_of, (void *)h, b, out, e);
    json_decref(b); /* out->anchors is borrowed: only compared against NULL below */
    return rc;
}

Test(controls, valid_headers_and_fields) {
    zl_req_ctl c;
    zl_verr e;
    cr_assert_eq(ctl(NULL, NULL, &c, &e), 0);
    cr_expect_eq(c.ctl.spec, ZL_SPEC_OFF);
    cr_expect_eq(c.bounded, 0);
    cr_expect_eq(c.stream_buffer, 0);
    hdr_kv h1[] = {{"X-Zerolayer-Ring", "4"}, {"X-Zerolayer-Validation", "on"}, {"X-Zerolayer-Stream-Buffer", "8"},
                   {NULL, NULL}};
    cr_assert_eq(ctl(h1, NULL, &c, &e), 0, "%s", e.msg);
    cr_expect_eq(c.ctl.ring, 4);
    cr_expect_eq(c.ctl.spec, ZL_SPEC_LOOKUP);
    cr_expect_eq(c.stream_buffer, 8);
    hdr_kv h2[] = {{"X-Zerolayer-KV-Policy", "window"}, {"X-Zerolayer-KV-Budget", "128"}, {NULL, NULL}};
    cr_assert_eq(ctl(h2, NULL, &c, &e), 0, "%s", e.msg);
    cr_expect_eq(c.ctl.kv_policy, ZL_KV_POLICY_WINDOW);
    cr_expect_eq(c.ctl.kv_budget, 128);
    cr_expect_eq(c.bounded, 1);
    hdr_kv h3[] = {{"X-Zerolayer-KV-Policy", "anchor"}, {"X-Zerolayer-KV-Budget", "0.5"}, {NULL, NULL}};
    cr_assert_eq(ctl(h3, NULL, &c, &e), 0, "%s", e.msg);
    cr_expect_float_eq(c.ctl.kv_frac, 0.5f, 1e-6);
    cr_expect_eq(c.ctl.kv_window, 0);
    /* heavy hitters: a recent window under the anchor policy, from a header or the body */
    hdr_kv hw[] = {{"X-Zerolayer-KV-Policy", "anchor"}, {"X-Zerolayer-KV-Window", "96"}, {NULL, NULL}};
    cr_assert_eq(ctl(hw, NULL, &c, &e), 0, "%s", e.msg);
    cr_expect_eq(c.ctl.kv_window, 96);
    cr_assert_eq(ctl(NULL, "{\"zerolayer\": {\"kv_policy\": \"anchor\", \"kv_window\": 80}}", &c, &e), 0, "%s", e.msg);
    cr_expect_eq(c.ctl.kv_window, 80);
    /* every policy name of the engine's table parses */
    const char *names[] = {"full", "window", "anchor"};
    for (int i = 0; i < 3; i++) {
        hdr_kv h[] = {{"X-Zerolayer-KV-Policy", names[i]}, {NULL, NULL}};
        cr_expect_eq(ctl(h, NULL, &c, &e), 0, "%s: %s", names[i], e.msg);
        cr_expect_str_eq(zl_kv_policy_name(c.ctl.kv_policy), names[i]);
    }
    /* a preset, then the body, then headers */
    hdr_kv hc[] = {{"X-Zerolayer-Compute", "aggressive"}, {NULL, NULL}};
    cr_assert_eq(ctl(hc, NULL, &c, &e), 0, "%s", e.msg);
    cr_expect_eq(c.ctl.kv_policy, ZL_KV_POLICY_ANCHOR);
    cr_expect_eq(c.bounded, 1);
    cr_assert_eq(ctl(NULL, "{\"zerolayer\": {\"ring\": 3, \"validation\": true}}", &c, &e), 0, "%s", e.msg);
    cr_expect_eq(c.ctl.ring, 3);
    cr_expect_eq(c.ctl.spec, ZL_SPEC_LOOKUP);
    hdr_kv h5[] = {{"X-Zerolayer-Ring", "5"}, {NULL, NULL}};
    cr_assert_eq(ctl(h5, "{\"zerolayer\": {\"ring\": 3}}", &c, &e), 0, "%s", e.msg);
    cr_expect_eq(c.ctl.ring, 5);
    cr_assert_eq(ctl(NULL, "{\"zerolayer\": {\"kv_policy\": \"window\", \"kv_budget\": 0.25, \"anchors\": [\"a\"]}}",
                     &c, &e), 0, "%s", e.msg);
    cr_expect_eq(c.bounded, 1);
    cr_expect_not_null(c.anchors);
    cr_assert_eq(ctl(NULL, "{\"zerolayer\": null}", &c, &e), 0);
}

Test(controls, invalid_values_name_the_header_or_field) {
    struct { const char *k, *v, *param; } hs[] = {
        {"X-Zerolayer-Ring", "0", NULL},          {"X-Zerolayer-Ring", "17", NULL},
        {"X-Zerolayer-Ring", "4x", NULL},         {"X-Zerolayer-Validation", "maybe", NULL},
        {"X-Zerolayer-KV-Policy", "nope", NULL},  {"X-Zerolayer-KV-Budget", "0", NULL},
        {"X-Zerolayer-KV-Budget", "1.5", NULL},   {"X-Zerolayer-KV-Budget", "abc", NULL},
        {"X-Zerolayer-Compute", "fast", NULL},    {"X-Zerolayer-Stream-Buffer", "-1", NULL},
        {"X-Zerolayer-Stream-Buffer", "9999999", NULL},
        {"X-Zerolayer-KV-Window", "0", NULL},     {"X-Zerolayer-KV-Window", "64", NULL}, /* no anchor policy */
    };
    for (size_t i = 0; i < sizeof hs / sizeof *hs; i++) {
        hdr_kv h[] = {{hs[i].k, hs[i].v}, {NULL, NULL}};
        zl_req_ctl c;
        zl_verr e;
        cr_expect_eq(ctl(h, NULL, &c, &e), -1, "%s: %s accepted", hs[i].k, hs[i].v);
        cr_expect_str_eq(e.param, hs[i].k);
        cr_expect_not_null(strstr(e.msg, hs[i].k), "%s", e.msg);
    }
    hdr_kv hp[] = {{"X-Zerolayer-KV-Policy", "nope"}, {NULL, NULL}};
    zl_req_ctl c;
    zl_verr e;
    ctl(hp, NULL, &c, &e);
    cr_expect_not_null(strstr(e.msg, zl_kv_policy_names()), "%s", e.msg);
    struct { const char *body, *param; } bs[] = {
        {"{\"zerolayer\": 5}", "zerolayer"},
        {"{\"zerolayer\": {\"bogus\": 1}}", "zerolayer"},
        {"{\"zerolayer\": {\"ring\": 99}}", "zerolayer.ring"},
        {"{\"zerolayer\": {\"validation\": \"perhaps\"}}", "zerolayer.validation"},
        {"{\"zerolayer\": {\"kv_policy\": \"x\"}}", "zerolayer.kv_policy"},
        {"{\"zerolayer\": {\"kv_window\": 0, \"kv_policy\": \"anchor\"}}", "zerolayer.kv_window"},
        {"{\"zerolayer\": {\"kv_window\": 64, \"kv_policy\": \"window\"}}", "zerolayer.kv_window"},
        {"{\"zerolayer\": {\"kv_budget\": 0}}", "zerolayer.kv_budget"},
        {"{\"zerolayer\": {\"kv_budget\": \"lots\"}}", "zerolayer.kv_budget"},
        {"{\"zerolayer\": {\"anchors\": [\"\"]}}", "zerolayer.anchors"},
        {"{\"zerolayer\": {\"anchors\": \"a\"}}", "zerolayer.anchors"},
        {"{\"zerolayer\": {\"compute\": \"fast\"}}", "zerolayer.compute"},
        /* a budget under what a bounded policy needs names where the budget came from */
        {"{\"zerolayer\": {\"kv_policy\": \"window\", \"kv_budget\": 10}}", "zerolayer.kv_budget"},
    };
    for (size_t i = 0; i < sizeof bs / sizeof *bs; i++) {
        cr_expect_eq(ctl(NULL, bs[i].body, &c, &e), -1, "%s accepted", bs[i].body);
        cr_expect_str_eq(e.param, bs[i].param, "%s: %s", bs[i].body, e.msg);
    }
    hdr_kv hb[] = {{"X-Zerolayer-KV-Policy", "window"}, {"X-Zerolayer-KV-Budget", "10"}, {NULL, NULL}};
    cr_expect_eq(ctl(hb, NULL, &c, &e), -1);
    cr_expect_str_eq(e.param, "X-Zerolayer-KV-Budget");
}
