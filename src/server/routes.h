/* routes.h — the route table: every path the server answers, its methods,
 * whether it needs an API key, its error shape, what body it takes and its
 * handler; and the decision for one request (404 / 401 / 413 / 405 / 415,
 * CORS preflights) made from the table alone, so it is tested without a
 * socket.  The transport (http.c) calls zl_dispatch once a request is in. */
#ifndef ZL_ROUTES_H
#define ZL_ROUTES_H

#include "controls.h"
#include "http.h"

enum { ZL_M_GET = 1, ZL_M_POST = 2, ZL_M_DELETE = 4 }; /* HEAD is GET */

typedef enum {
    ZL_BODY_NONE = 0, /* none read */
    ZL_BODY_JSON,     /* a JSON object, required */
    ZL_BODY_OPTIONAL, /* a JSON object when not empty */
    ZL_BODY_JSON_OR_BLOB, /* as OPTIONAL, or raw bytes under Content-Type: application/octet-stream (the
                             handler gets NULL and r->body_blob set: a sealed snapshot without base64) */
} zl_route_body;

typedef enum {
    ZL_FEATURE_ALWAYS = 0,
    ZL_FEATURE_WEBUI, /* the chat page; --no-webui */
} zl_route_feature;

#define ZL_API_BY_HEADER (-1) /* Anthropic when the request has anthropic-version, else OpenAI */

typedef struct zl_route {
    const char *path;  /* matched exactly; a "{id}" segment matches one non-empty segment */
    unsigned method;   /* one ZL_M_* */
    int is_public;     /* answered without an API key */
    int api;           /* the error shape: zl_api or ZL_API_BY_HEADER */
    zl_route_body body;
    int select_model;  /* switch to the request's model before the handler (zl_models_select; generations do it
                          in the pipeline) */
    enum MHD_Result (*fn)(zl_req *r, json_t *body /* NULL unless the route takes one */);
    zl_route_feature feature; /* a route a flag turns off: absent (404) while it is off */
} zl_route;

/* What routing reads of a request. */
typedef struct zl_route_req {
    const char *method, *path; /* path percent-decoded (zl_url_unescape) */
    zl_hdr_fn hdr;
    void *hdr_ud;
    int too_large;   /* the announced body is over the limit */
    size_t body_len; /* bytes received (0 while only the headers are in) */
} zl_route_req;

typedef struct zl_route_verdict {
    const zl_route *route; /* the handler to run, when !failed && !preflight */
    zl_api api;            /* the error shape of this request */
    int failed;            /* reply the error err / msg */
    zl_ekind err;
    char msg[256];
    int preflight;         /* a CORS preflight: 204 with the Access-Control-Allow-* headers */
    char allow[64];        /* the path's methods ("GET, HEAD, POST"): 405's Allow, a preflight's methods */
    char id[80];           /* the {id} segment, or "" */
    const char *label;     /* metrics label: the route's path pattern, or "other" */
    const char *cors_origin; /* Access-Control-Allow-Origin for the reply ("*" or the origin), or NULL */
} zl_route_verdict;

/* The table (for tests and docs). */
const zl_route *zl_routes(int *n);
/* Decide what to do with a request: in order 404 (no such path), 401 (a
 * key is needed and missing or wrong), 413 (announced body over the limit),
 * 405 (the path has no such method; allow says which it has), 415 (a body
 * that is not application/json on a route that reads one). */
void zl_route_decide(const zl_server_opts *o, const zl_route_req *q, zl_route_verdict *v);
/* The API key a request presents: x-api-key, else the token of
 * Authorization: Bearer; NULL when it presents none.  The one place that
 * reads a key (auth and the tenant both go through it). */
const char *zl_api_key_of(const char *x_api_key, const char *authorization);
/* The same over a request's headers. */
const char *zl_req_api_key(zl_hdr_fn hdr, void *hdr_ud);
/* The API key of a request (zl_api_key_of) is one of
 * o->api_keys (constant time); 1 when no keys are configured. */
int zl_auth_ok(const zl_server_opts *o, const char *x_api_key, const char *authorization);
/* application/json, with or without parameters (charset=utf-8). */
int zl_ctype_is_json(const char *ctype);
/* ctype is `want` (a media type), with or without parameters. */
int zl_ctype_is(const char *ctype, const char *want);
/* The Access-Control-Allow-Origin for a request's Origin under --cors: "*",
 * the origin itself, or NULL (not allowed, or no --cors). */
const char *zl_cors_origin(const zl_server_opts *o, const char *origin);

/* The error shape, CORS origin and metrics label of r (r->url set) without
 * routing it: for the transport's own early replies (conflicting
 * Content-Length, a body that passes the limit while it is read). */
void zl_route_shape(zl_req *r, const char *method);
/* Route a request that is in (or whose announced body is too large) and reply. */
enum MHD_Result zl_dispatch(zl_req *r, const char *method);

#endif
