/* http.h — the transport (http.c) and what every handler shares: the server
 * state, one request's context, replies (JSON, errors in the caller's API
 * shape, SSE streams) and the handlers the route table (routes.c) holds. */
#ifndef ZL_HTTP_H
#define ZL_HTTP_H

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>

#include "../runtime/session.h"
#include "chat_template.h"
#include "controls.h"
#include "gen.h"
#include "jsonv.h"
#include "metrics.h"
#include "server.h"

struct zl_batches;
typedef struct zl_models zl_models;
struct zl_model_slot;

typedef struct zl_srv_state zl_srv_state; /* api_state.c */
typedef struct zl_srv {
    zl_llm *llm;
    zl_sched *sched;
    zl_server_opts o;
    zl_chat_fmt tpl; /* chat formatting (chat_template.h) */
    char model_id[256];
    long long started;
    struct MHD_Daemon *d;
    struct zl_batches *batches;
    zl_sessions *sessions;        /* sessions + prefix cache (api_sessions.c) */
    unsigned char sess_secret[32]; /* HMAC key of session tokens */
    size_t sess_secret_len;
    unsigned idle_timeout_s; /* MHD connection timeout between requests */
    zl_models *models;             /* several models (models.c), or NULL: this one only */
    atomic_int draining;           /* SIGTERM came: every new request is a 503 */
    atomic_int in_flight;          /* requests begun and not yet completed */
    zl_srv_state *state;           /* snapshot key, codec, model fingerprint (api_state.c) */
    struct zl_store *store;        /* sessions kept outside the process (state_store.c), or NULL */
} zl_srv;

typedef enum { ZL_API_OPENAI = 0, ZL_API_ANTHROPIC = 1 } zl_api;

typedef enum {
    ZL_E_INVALID = 0, /* 400 */
    ZL_E_AUTH,        /* 401 */
    ZL_E_NOT_FOUND,   /* 404 */
    ZL_E_METHOD,      /* 405 */
    ZL_E_TOO_LARGE,   /* 413 */
    ZL_E_BUSY,        /* 429 OpenAI / 529 Anthropic */
    ZL_E_INTERNAL,    /* 500 */
    ZL_E_MODEL_NOT_FOUND, /* 404: OpenAI code model_not_found, Anthropic not_found_error */
    ZL_E_MEDIA,       /* 415: a body that is not application/json */
    ZL_E_UNAVAILABLE, /* 503: transient (out of memory before any token, draining); retry later */
    ZL_E_FORBIDDEN,   /* 403: another tenant's object, a rejected token */
    ZL_E_CONFLICT,    /* 409: the object is in a state that refuses the call (a busy session, another model) */
    ZL_E_GONE,        /* 410: the object existed and is gone (an expired, evicted or deleted session) */
    ZL_E_RATE_LIMIT,  /* 429 in both APIs: a per-tenant bound */
} zl_ekind;

typedef struct zl_req {
    zl_srv *srv;
    struct MHD_Connection *conn;
    zl_buf body;
    int too_large, started;
    int body_blob;     /* the body is raw bytes (application/octet-stream on a ZL_BODY_JSON_OR_BLOB route) */
    const char *route; /* metrics label */
    const char *url;
    int status;
    double t_start;
    zl_api api;
    int diag_full;
    int fd;
    char path_id[80];        /* the route's {id} segment, or "" */
    char allow[64];          /* sent as Allow (a 405) when set */
    const char *cors_origin; /* sent as Access-Control-Allow-Origin when set (--cors) */
    char sess_id[80]; /* the session this request runs on ("" if none) */
    zl_req_ctl ctl;   /* ring / KV controls (zeroed until zl_ctl_parse) */
    struct zl_model_slot *model_slot; /* the model this request holds (zl_models_select), or NULL */
} zl_req;

/* Replies: each queues the response and returns MHD's result. */
enum MHD_Result zl_reply_json(zl_req *r, int status, json_t *j /* stolen */, const char *server_timing);
enum MHD_Result zl_reply_raw(zl_req *r, int status, const char *ctype, const char *body, size_t len);
/* A reply of len bytes with extra headers (hdrs: name, value pairs ending with
 * NULL; may be NULL). persistent: body outlives the request (an embedded
 * asset) and is not copied; otherwise MHD copies it before this returns. */
enum MHD_Result zl_reply_bytes(zl_req *r, int status, const char *ctype, const void *body, size_t len,
                               const char *const *hdrs, int persistent);
enum MHD_Result zl_reply_error(zl_req *r, zl_ekind kind, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The error body of kind in an API's shape, and its status. */
json_t *zl_error_json(zl_api api, zl_ekind kind, const char *param, const char *msg, int *status);
/* The same with a reason code of the server's (NULL: the kind's own): OpenAI's
 * `error.code`, and `error.reason` beside Anthropic's type and message. */
json_t *zl_error_json_code(zl_api api, zl_ekind kind, const char *param, const char *code, const char *msg,
                           int *status);
/* A CORS preflight: 204 with the Access-Control-Allow-* headers for r->cors_origin. */
enum MHD_Result zl_reply_preflight(zl_req *r, const char *methods, const char *req_headers);
/* A request header (conn: the MHD connection), as a zl_hdr_fn. */
const char *zl_req_header(void *conn, const char *name);
/* Percent-decode a path in place, leaving "%00" as it is (a decoded NUL
 * would cut the path: "/health%00.json" must not be "/health"). */
size_t zl_url_unescape(char *s);

/* Every model's server state (server.c; models.c for the models past the
 * first): the scheduler's per-step callback (the batch-size metric), and
 * freeing what setup built once its scheduler runs, in the order the
 * threads need: the scheduler (its jobs use the sessions), the sessions
 * (their sweeper uses the state), the state, the template, srv itself. */
void zl_srv_on_step(void *ud, int n_seqs, int n_tokens, double ms);
void zl_srv_teardown(zl_srv *srv);

/* The listener (server.c's lifecycle drives it): bind srv->o.host:port and
 * start answering (*port: the port bound, for port 0 the one picked); stop
 * accepting new connections; stop, once no request thread runs. */
int zl_http_start(zl_srv *srv, int *port, zl_err *err);
void zl_http_quiesce(zl_srv *srv);
void zl_http_stop(zl_srv *srv);

/* Is the client still connected?  (A closed or reset socket says no.) */
int zl_conn_alive(int fd);

/* A streamed (SSE) response: produce() appends bytes to out and sets
 * finished; it may wait up to timeout_ms for the engine.  destroy() frees ud
 * (called once, when the connection is done, whether or not it finished). */
typedef struct zl_sse {
    zl_buf out;
    size_t pos;
    int finished;
    int fd;
    struct MHD_Connection *conn;
    unsigned idle_s; /* the server's idle timeout, restarted whenever bytes are ready */
    int diag_full;
    char server_timing[256]; /* sent as a trailer when set before finishing */
    void (*produce)(struct zl_sse *s, int timeout_ms);
    void (*destroy)(struct zl_sse *s);
    void *ud;
    struct MHD_Response *resp;
    zl_srv *srv;             /* with sess_id: end with the API's error event when the session goes away */
    char sess_id[80];
    zl_api api;              /* the error event's shape */
    struct zl_model_slot *model_slot; /* the request's hold on its model, released when the stream is freed */
} zl_sse;
enum MHD_Result zl_reply_sse(zl_req *r, zl_sse *s /* owned from here */);
void zl_sse_event(zl_sse *s, const char *event /* NULL: data only */, json_t *data /* stolen */);

/* Wait for a non-streamed generation; 0 when done, -1 when the client left
 * (g cancelled, r->status 499: nothing is to be replied). */
int zl_gen_wait_all(zl_req *r, zl_gen *g);

/* Helpers shared by the adapters. */
void zl_rand_id(char *out, size_t cap, const char *prefix);
uint64_t zl_rand_seed(void);
/* Several models (models.c).  setup: from o.models (with none, only the
 * --codec file) and each --codec file to its model; select: switch r->srv
 * to the loaded model holding the request's session (path {id} or token),
 * else the one the body's `model` names, loading it if need be, and hold it
 * (-1: replied 404 / 409 model_mismatch / 429 / 500 in *ret);
 * release: drop a hold; list: GET /v1/models of every model. */
int zl_models_setup(zl_srv *home, zl_err *err);
int zl_models_select(zl_req *r, json_t *body, enum MHD_Result *ret);
/* ?model=ID of a GET (/props, /metrics): 0 without one or once r holds that
 * model; load = 0 refuses a model not loaded (409) instead of loading it. */
int zl_models_select_query(zl_req *r, int load, enum MHD_Result *ret);
void zl_models_release(struct zl_model_slot *s);
json_t *zl_models_list(zl_srv *home, int anthropic);
void zl_models_free(zl_srv *home);
/* The embeddings' pooling: --pooling, else the model file's, else mean. */
zl_pooling zl_srv_pooling(const zl_srv *s);
void zl_batches_free(struct zl_batches *b);

/* Route handlers, one per route of the table in routes.c: body is the
 * request's JSON object (NULL on routes that read none), r->path_id the
 * path's {id}.  OpenAI (api_openai.c), Anthropic (api_anthropic.c), Message
 * Batches (batches.c), embeddings, props, misc (/health, /metrics,
 * /tokenize, /detokenize, /v1/preheat) and sessions (api_sessions.c). */
#define ZL_HANDLER(name) enum MHD_Result name(zl_req *r, json_t *body)
ZL_HANDLER(zl_api_chat);
ZL_HANDLER(zl_api_completions);
ZL_HANDLER(zl_api_models);
ZL_HANDLER(zl_api_messages);
ZL_HANDLER(zl_api_count_tokens);
ZL_HANDLER(zl_api_batches_create);
ZL_HANDLER(zl_api_batches_list);
ZL_HANDLER(zl_api_batches_get);
ZL_HANDLER(zl_api_batches_results);
ZL_HANDLER(zl_api_batches_cancel);
ZL_HANDLER(zl_api_embeddings);
ZL_HANDLER(zl_api_props);
ZL_HANDLER(zl_api_webui);
ZL_HANDLER(zl_api_health);
ZL_HANDLER(zl_api_metrics);
ZL_HANDLER(zl_api_tokenize);
ZL_HANDLER(zl_api_detokenize);
ZL_HANDLER(zl_api_preheat);
ZL_HANDLER(zl_api_session_create);
ZL_HANDLER(zl_api_session_get);
ZL_HANDLER(zl_api_session_delete);
ZL_HANDLER(zl_api_session_flush);
ZL_HANDLER(zl_api_session_prefill);
ZL_HANDLER(zl_api_session_snapshot);

/* Tenants (api_sessions.c): what every stored object (sessions, cached
 * prefixes, message batches) is owned by.  "key:<sha256 hex>" of the API key
 * when keys are configured, else "user:<sha256 hex>" of the user id, else
 * "anonymous": a fixed-size digest of the whole identity, never cut. */
#define ZL_TENANT_CAP 72
void zl_tenant_derive(const char *api_key /* NULL: no keys */, const char *user, char out[ZL_TENANT_CAP]);
/* The tenant of a request; user: the body's user field (NULL: the
 * X-Zerolayer-User header). */
void zl_tenant_of(zl_req *r, const char *user, char out[ZL_TENANT_CAP]);

/* Sessions (api_sessions.c). */
int zl_sessions_setup(zl_srv *srv, zl_err *err);
void zl_sessions_metrics(zl_srv *srv, zl_buf *out);
/* Session routes' errors, in the API's shape with `code` = reason
 * (api_sessions.c), and the reply for a store status. */
enum MHD_Result zl_sess_error(zl_req *r, zl_ekind kind, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
enum MHD_Result zl_sess_status_reply(zl_req *r, zl_sess_status st, const char *id);
/* A store status (not OK) as an error body in api's shape, and its HTTP status:
 * the one mapping, for replies and for the error event that ends a stream
 * (ttl_s: the store's, quoted when the session expired). */
json_t *zl_sess_status_json(zl_api api, zl_sess_status st, const char *id, double ttl_s, int *status);
/* Snapshots (api_state.c): setup with the sessions (the model fingerprint,
 * --state-key-file, --codec), free, the snapshot route's work once the
 * session token is checked (zl_api_session_snapshot), and the
 * restore behind POST /v1/sessions {"state"}: 0 and a sequence holding the
 * state (free it with zl_state_seq_free unless a session takes it), or -1
 * after replying. */
struct zl_snap_info;
int zl_state_setup(zl_srv *srv, zl_err *err);
void zl_state_free(zl_srv *srv);
enum MHD_Result zl_api_snapshot(zl_req *r, json_t *body, const char *id, const char *tenant);
int zl_state_restore(zl_req *r, json_t *body, const char *tenant, zl_seq **out, struct zl_snap_info *info);
void zl_state_seq_free(zl_seq *q);
/* The idle-session coding of the session store (--compress-idle with
 * --codec; zero when off). */
int zl_state_idle_codec(const zl_srv *srv, zl_sessions_codec *out, zl_err *err);
/* The server key (NULL: none) and the model fingerprint. */
const uint8_t *zl_state_key(const zl_srv *srv);
const uint8_t *zl_state_fingerprint(const zl_srv *srv);
/* The learned codec (--codec), or NULL. */
const struct zl_codec *zl_state_codec(const zl_srv *srv);
/* The session state store (state_store.c: --state-dir or --state-store):
 * setup opens it and fills the sweeper's write hooks (zero when there is
 * none); load_all restores a directory's sessions at start (after the
 * scheduler exists; nothing for a shared store); save_all writes every live
 * session at shutdown; fetch loads a session this replica does not hold
 * (ZL_FETCH_LOADED: it is in the session store now); drop deletes one. */
int zl_state_store_setup(zl_srv *srv, zl_sessions_persist *p, zl_err *err);
void zl_state_store_free(zl_srv *srv);
int zl_state_store_load_all(zl_srv *srv, zl_err *err);
void zl_state_store_save_all(zl_srv *srv);
/* Write one session now (a new or restored session, before its token goes
 * out: the next request may reach another replica); 0 when written. */
int zl_state_store_write_now(zl_srv *srv, const char *id, const char *tenant, double created_unix);
zl_fetch_result zl_state_store_fetch(zl_srv *srv, const char *id, const char *tenant);
void zl_state_store_drop(zl_srv *srv, const char *id, const char *tenant);
void zl_state_store_metrics(zl_srv *srv, zl_buf *out);
/* The session store's spill hooks over the state store (zero without one):
 * sessions past --session-kv-mb are sealed there (learned codes with --codec)
 * instead of evicted. */
void zl_state_store_spill(zl_srv *srv, zl_sessions_spill *out);
/* Per generation request: the tenant, and the session when the request
 * names one (X-Zerolayer-Session header or body field `session`). */
typedef struct zl_sess_req zl_sess_req;
/* Verify and begin the session; on failure replies (403/404/409/410) and
 * returns -1.  user: the body's user field (OpenAI `user`, Anthropic
 * `metadata.user_id`), used as the tenant when no API keys are configured. */
int zl_sess_open(zl_req *r, json_t *body, const char *user, zl_sess_req **out);
/* In append mode prepend the session's stored conversation; records the
 * whole conversation for the session.  *all is malloc'd (free it); its
 * strings live as long as c.  Returns -1 after replying 400/500. */
int zl_sess_merge(zl_sess_req *c, zl_req *r, const zl_chat_msg *msgs, int n, zl_chat_msg **all, int *n_all);
/* Hand c to the generation (it is freed by gp->on_end). */
void zl_sess_params(zl_sess_req *c, zl_gen_params *gp);
/* End without a generation (an error reply came first). */
void zl_sess_close(zl_sess_req *c);

#endif
