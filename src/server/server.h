/* server.h — `zerolayer serve`: the HTTP front of the engine.
 *
 * Routes (the table is in routes.c): OpenAI /v1/chat/completions,
 * /v1/completions, /v1/models; Anthropic /v1/messages, /v1/messages/count_tokens,
 * /v1/messages/batches[...]; /v1/embeddings; /health, /props, /metrics,
 * /tokenize, /detokenize, /v1/preheat.  libmicrohttpd runs one thread per connection; each request
 * thread validates and tokenizes, submits jobs to the engine thread
 * (engine/sched.h) and formats what comes back. */
#ifndef ZL_SERVER_H
#define ZL_SERVER_H

#include <stddef.h>

#include "zerolayer_sched.h"

typedef struct zl_server_opts {
    const char *host; /* default 127.0.0.1 */
    int port;         /* 0: any free port (printed at start) */
    const char *model_path;
    const char *model_id; /* name reported by /v1/models; default: file name */
    const char **api_keys;
    int n_api_keys;
    const char **cors_origins; /* --cors: origins (or "*") whose pages may call the API; none: no CORS */
    int n_cors_origins;
    size_t max_body;       /* bytes; larger bodies get 413 */
    int no_webui;          /* --no-webui: no chat page, GET / is a 404 */
    const char *chat_template; /* NULL: from the model */
    const char *chat_template_file; /* Jinja source to use instead of the model's */
    const char *pooling;   /* /v1/embeddings: mean|cls|last; NULL: the model's <arch>.pooling_type, else mean */
    zl_sched_opts sched;
    /* more models (models.c): paths, ids (NULL: the file name without .gguf), loaded on first use, at most
     * models_max at once counting the first (0: all); llm_opts open them */
    const char **models;
    const char **model_aliases;
    int n_models, models_max;
    uint64_t models_budget; /* bytes of loaded model files at most (0: no bound) */
    double models_idle_s;   /* unload a model (not the first) unused this long (0: never) */
    zl_llm_opts llm_opts;
    /* sessions and prefix cache (0: defaults) */
    double session_ttl_s;         /* 120 */
    double prefill_idle_s;        /* 3 */
    int sessions_per_tenant;      /* 16 */
    size_t session_kv_budget;     /* bytes, 1 GiB */
    long long prefix_cache_bytes; /* 256 MiB; < 0: off */
    const char *session_secret_file; /* NULL: random per start */
    const char *state_key_file;      /* snapshots sealed with the SHA-256 of this file (>= 32 bytes); NULL: only
                                        passphrase snapshots */
    const char **codec_files;        /* --codec: learned state codecs (.zlc), each attached to the served model
                                        whose fingerprint it names (models.c); one naming none is an error */
    int n_codec_files;
    const char *codec_file;          /* this model's codec (set from codec_files at start); NULL: exact only */
    double compress_idle_s;          /* sessions idle this long are held coded (needs codec_file); 0: never */
    const char *state_dir;           /* the state store is this directory: sessions written when idle and at
                                        shutdown, restored at start (state_store.c) */
    const char *state_store;         /* or Redis, redis://HOST:PORT[/DB]: sessions written when idle and at
                                        shutdown, loaded by any replica a request for them reaches */
    double store_idle_s;             /* write a changed session idle this long (5; < 0: only at shutdown) */
    int store_every;                 /* also write a session after every N turns (0: off) */
    /* message batches (0: defaults) */
    double batch_retention_s; /* an ended batch is dropped after this (3600) */
    int batches_per_tenant;   /* 64 */
    /* connections (0: defaults) */
    int max_conns;          /* all connections at once (1024) */
    int conns_per_ip;       /* connections from one address (64) */
    int idle_timeout_s;     /* a connection that sends nothing this long is closed (30); a request
                               being answered (a stream, a long generation) is not idle */
    int drain_timeout_s;    /* after SIGTERM, requests being answered may finish this long (30; < 0: none) */
} zl_server_opts;

/* Block SIGINT and SIGTERM in the calling thread, so every thread started
 * after it inherits the mask and only zl_server_run's sigwait sees them (a
 * thread that left them unblocked, such as a model's pool opened before,
 * would take one and end the process).  Call it before starting any thread:
 * before opening the model.  zl_server_run calls it too. */
void zl_server_block_signals(void);
/* Serve until SIGINT/SIGTERM, then drain: new requests get 503 while those
 * being answered finish, up to drain_timeout_s or a second signal.  Returns
 * 0 or an error code with *err. */
int zl_server_run(zl_llm *llm, const zl_server_opts *o, zl_err *err);

#endif
