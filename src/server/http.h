/* http.h — what the API adapters share: the server state, one request's
 * context, and replies (JSON, errors in the caller's API shape, SSE streams). */
#ifndef ZL_HTTP_H
#define ZL_HTTP_H

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>

#include "../engine/session.h"
#include "chat_template.h"
#include "gen.h"
#include "jsonv.h"
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
    zl_srv_state *state;           /* snapshot key, codec, model fingerprint (api_state.c) */
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
} zl_ekind;

/* Per-request verification ring / KV slicing controls (zl_ctl_parse). */
typedef struct zl_req_ctl {
    zl_job_ctl ctl;   /* resolved: server defaults < compute preset < body fields < headers */
    json_t *anchors;  /* body zerolayer.anchors (borrowed from the body), or NULL */
    int bounded;      /* a window/anchor KV policy: prompts and generations may exceed the context */
} zl_req_ctl;

/* Longest generation a request may ask for under a bounded KV policy. */
#define ZL_MAX_TOKENS_BOUNDED (1 << 20)

typedef struct zl_req {
    zl_srv *srv;
    struct MHD_Connection *conn;
    zl_buf body;
    int too_large, started;
    const char *route; /* metrics label */
    const char *url;
    int status;
    double t_start;
    zl_api api;
    int diag_full;
    int stream_buffer; /* X-Zerolayer-Stream-Buffer, 0 if absent */
    int fd;
    char sess_id[80]; /* the session this request runs on ("" if none) */
    zl_req_ctl ctl;   /* ring / KV controls (zeroed until zl_ctl_parse) */
    struct zl_model_slot *model_slot; /* the model this request holds (zl_models_select), or NULL */
} zl_req;

/* Replies: each queues the response and returns MHD's result. */
enum MHD_Result zl_reply_json(zl_req *r, int status, json_t *j /* stolen */, const char *server_timing);
enum MHD_Result zl_reply_raw(zl_req *r, int status, const char *ctype, const char *body, size_t len);
enum MHD_Result zl_reply_error(zl_req *r, zl_ekind kind, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

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
    zl_sessions *sess_store; /* with sess_id: end with `session_expired` when it goes away */
    char sess_id[80];
    struct zl_model_slot *model_slot; /* the request's hold on its model, released when the stream is freed */
} zl_sse;
enum MHD_Result zl_reply_sse(zl_req *r, zl_sse *s /* owned from here */);
void zl_sse_event(zl_sse *s, const char *event /* NULL: data only */, json_t *data /* stolen */);

/* Wait for a non-streamed generation; 0 when done, -1 when the client left. */
int zl_gen_wait_all(zl_req *r, zl_gen *g);

/* Helpers shared by the adapters. */
void zl_rand_id(char *out, size_t cap, const char *prefix);
uint64_t zl_rand_seed(void);
json_t *zl_timings_json(const zl_gen_timing *t);
void zl_server_timing(const zl_gen_timing *t, char *buf, size_t cap);
/* Ring / KV controls of a generation request into r->ctl: headers
 * X-Zerolayer-Validation (on|off), X-Zerolayer-Ring (1..16),
 * X-Zerolayer-KV-Policy (full|window|anchor), X-Zerolayer-KV-Budget (tokens,
 * or a fraction like 0.25), X-Zerolayer-Compute (exact|balanced|aggressive),
 * and the body object "zerolayer" with the same keys (validation, ring,
 * kv_policy, kv_budget, compute) plus anchors (strings of the prompt that are
 * never evicted).  Returns 0, or -1 with e naming the header or field. */
int zl_ctl_parse(zl_req *r, json_t *body, zl_verr *e);
/* Route handlers. */
enum MHD_Result zl_api_chat(zl_req *r, json_t *body);
enum MHD_Result zl_api_completions(zl_req *r, json_t *body);
enum MHD_Result zl_api_models(zl_req *r);
/* What an OpenAI request that sets no sampling field gets (the seed is drawn per request). */
zl_sampling zl_oai_sampling_defaults(void);
/* GET /props (api_props.c), POST /v1/embeddings (api_embeddings.c). */
enum MHD_Result zl_api_props(zl_req *r);
enum MHD_Result zl_api_embeddings(zl_req *r, json_t *body);
/* Several models (models.c).  setup: from o.models (nothing when there are
 * none); select: switch r->srv to the model the body's `model` names,
 * loading it if need be, and hold it (-1: replied 404 / 429 / 500 in *ret);
 * release: drop a hold; list: GET /v1/models of every model. */
int zl_models_setup(zl_srv *home, zl_err *err);
int zl_models_select(zl_req *r, json_t *body, enum MHD_Result *ret);
void zl_models_release(struct zl_model_slot *s);
json_t *zl_models_list(zl_srv *home, int anthropic);
void zl_models_free(zl_srv *home);
/* The embeddings' pooling: --pooling, else the model file's, else mean. */
zl_pooling zl_srv_pooling(const zl_srv *s);
enum MHD_Result zl_api_messages(zl_req *r, json_t *body);
enum MHD_Result zl_api_count_tokens(zl_req *r, json_t *body);
enum MHD_Result zl_api_batches_create(zl_req *r, json_t *body);
enum MHD_Result zl_api_batches_list(zl_req *r);
enum MHD_Result zl_api_batches_get(zl_req *r, const char *id);
enum MHD_Result zl_api_batches_results(zl_req *r, const char *id);
enum MHD_Result zl_api_batches_cancel(zl_req *r, const char *id);
void zl_batches_free(struct zl_batches *b);
enum MHD_Result zl_api_health(zl_req *r);
enum MHD_Result zl_api_metrics(zl_req *r);
enum MHD_Result zl_api_tokenize(zl_req *r, json_t *body);
enum MHD_Result zl_api_detokenize(zl_req *r, json_t *body);
enum MHD_Result zl_api_preheat(zl_req *r);

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
enum MHD_Result zl_api_sessions(zl_req *r, const char *method);
int zl_sessions_setup(zl_srv *srv, zl_err *err);
void zl_sessions_metrics(zl_srv *srv, zl_buf *out);
/* Session routes' errors, in the API's shape with `code` = reason
 * (api_sessions.c), and the reply for a store status. */
enum MHD_Result zl_sess_error(zl_req *r, int status, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
enum MHD_Result zl_sess_status_reply(zl_req *r, zl_sess_status st, const char *id);
/* Snapshots (api_state.c): setup with the sessions (the model fingerprint,
 * --state-key-file, --codec), free, POST /v1/sessions/{id}/snapshot, and the
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
/* --state-dir (state_dir.c): restore the saved sessions at start (after the
 * scheduler exists); save every live session at shutdown. */
int zl_state_dir_load(zl_srv *srv, zl_err *err);
void zl_state_dir_save(zl_srv *srv);
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
