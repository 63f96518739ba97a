/* metrics.c — counters and histograms behind one mutex.  Cheap enough: a
 * few updates per token at most, far below the cost of a forward pass. */
#include "metrics.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define MAX_SERIES 96

typedef struct hist {
    const double *le;
    int n_le;
    long long counts[24]; /* per bucket, non-cumulative; last = +Inf */
    double sum;
    long long count;
} hist;

static const double le_req[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
static const double le_tok[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
static const double le_batch[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
#define NLE(a) ((int)(sizeof a / sizeof *a))

static struct {
    pthread_mutex_t mu;
    struct { char route[48]; int status; long long n; } req[MAX_SERIES];
    int n_req;
    hist duration, ttft, itl, batch;
    long long prompt_tokens, generated_tokens, cancelled;
    long long snapshots[ZL_SNAPM_COUNT], encoded_bytes, decoded_bytes;
    double state_entropy;
    long long store_loads[ZL_FETCH_COUNT], store_writes[2];
    double store_load_s;
} M = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .duration = {le_req, NLE(le_req), {0}, 0, 0},
    .ttft = {le_req, NLE(le_req), {0}, 0, 0},
    .itl = {le_tok, NLE(le_tok), {0}, 0, 0},
    .batch = {le_batch, NLE(le_batch), {0}, 0, 0},
};

static void observe(hist *h, double v) {
    int i = 0;
    while (i < h->n_le && v > h->le[i]) i++;
    h->counts[i]++;
    h->sum += v;
    h->count++;
}

void zl_metrics_request(const char *route, int status, double seconds) {
    pthread_mutex_lock(&M.mu);
    int i = 0;
    while (i < M.n_req && !(M.req[i].status == status && !strcmp(M.req[i].route, route))) i++;
    if (i == M.n_req && M.n_req < MAX_SERIES) {
        snprintf(M.req[i].route, sizeof M.req[i].route, "%s", route);
        M.req[i].status = status;
        M.req[i].n = 0;
        M.n_req++;
    }
    if (i < M.n_req) M.req[i].n++;
    observe(&M.duration, seconds);
    pthread_mutex_unlock(&M.mu);
}

#define LOCKED(stmt)                    \
    do {                                \
        pthread_mutex_lock(&M.mu);      \
        stmt;                           \
        pthread_mutex_unlock(&M.mu);    \
    } while (0)

void zl_metrics_ttft(double s) { LOCKED(observe(&M.ttft, s)); }
void zl_metrics_inter_token(double s) { LOCKED(observe(&M.itl, s)); }
void zl_metrics_batch(int n) { LOCKED(observe(&M.batch, n)); }
void zl_metrics_cancelled(void) { LOCKED(M.cancelled++); }
void zl_metrics_codec(size_t enc, size_t dec) {
    LOCKED(M.encoded_bytes += (long long)enc; M.decoded_bytes += (long long)dec);
}
void zl_metrics_state_entropy(double bits) { LOCKED(M.state_entropy = bits); }
void zl_metrics_snapshot(zl_snapm result, size_t enc, size_t dec) {
    LOCKED(M.snapshots[result]++; M.encoded_bytes += (long long)enc; M.decoded_bytes += (long long)dec);
}
void zl_metrics_store_load(zl_fetch_result r, double ms) { LOCKED(M.store_loads[r]++; M.store_load_s += ms / 1e3); }
void zl_metrics_store_write(int ok, size_t bytes) { (void)bytes; LOCKED(M.store_writes[ok ? 1 : 0]++); }
void zl_metrics_tokens(long long p, long long g) { LOCKED(M.prompt_tokens += p; M.generated_tokens += g); }

static void render_hist(zl_buf *o, const char *name, const char *help, const hist *h) {
    zl_buf_printf(o, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    long long cum = 0;
    for (int i = 0; i < h->n_le; i++) {
        cum += h->counts[i];
        zl_buf_printf(o, "%s_bucket{le=\"%g\"} %lld\n", name, h->le[i], cum);
    }
    cum += h->counts[h->n_le];
    zl_buf_printf(o, "%s_bucket{le=\"+Inf\"} %lld\n%s_sum %.9g\n%s_count %lld\n", name, cum, name, h->sum, name,
                  h->count);
}

static void render_scalar(zl_buf *o, const char *name, const char *type, const char *help, double v) {
    zl_buf_printf(o, "# HELP %s %s\n# TYPE %s %s\n%s %.9g\n", name, help, name, type, name, v);
}

void zl_metrics_render(zl_buf *o, zl_sched *s) {
    zl_sched_stats st = {0};
    if (s) zl_sched_get_stats(s, &st);
    pthread_mutex_lock(&M.mu);
    zl_buf_puts(o, "# HELP zerolayer_requests_total HTTP requests answered, by route and status.\n"
                   "# TYPE zerolayer_requests_total counter\n");
    for (int i = 0; i < M.n_req; i++)
        zl_buf_printf(o, "zerolayer_requests_total{route=\"%s\",status=\"%d\"} %lld\n", M.req[i].route,
                      M.req[i].status, M.req[i].n);
    render_hist(o, "zerolayer_request_duration_seconds", "Time from request to the last byte of the response.",
                &M.duration);
    render_hist(o, "zerolayer_time_to_first_token_seconds", "Time from request arrival to the first generated token.",
                &M.ttft);
    render_hist(o, "zerolayer_inter_token_seconds", "Time between consecutive generated tokens of one stream.",
                &M.itl);
    render_hist(o, "zerolayer_batch_size", "Sequences advanced by one batched forward pass.", &M.batch);
    render_scalar(o, "zerolayer_prompt_tokens_total", "counter", "Prompt tokens processed.", (double)M.prompt_tokens);
    render_scalar(o, "zerolayer_generated_tokens_total", "counter", "Tokens generated.", (double)M.generated_tokens);
    render_scalar(o, "zerolayer_requests_cancelled_total", "counter", "Generations cancelled by disconnect or stop.",
                  (double)M.cancelled);
    static const char *const snap[ZL_SNAPM_COUNT] = {"exported", "restored", "invalid", "forbidden", "mismatch"};
    zl_buf_puts(o, "# HELP zerolayer_state_snapshots_total Session snapshots exported and restored, by result.\n"
                   "# TYPE zerolayer_state_snapshots_total counter\n");
    for (int i = 0; i < ZL_SNAPM_COUNT; i++)
        zl_buf_printf(o, "zerolayer_state_snapshots_total{result=\"%s\"} %lld\n", snap[i], M.snapshots[i]);
    render_scalar(o, "zerolayer_codec_encoded_bytes_total", "counter", "Bytes of state coded: snapshots sealed and idle sessions coded.",
                  (double)M.encoded_bytes);
    render_scalar(o, "zerolayer_codec_decoded_bytes_total", "counter",
                  "Bytes of state opened: snapshots restored and coded idle sessions rebuilt.", (double)M.decoded_bytes);
    static const char *const fetch[ZL_FETCH_COUNT] = {"loaded", "miss", "store_down", "invalid"};
    zl_buf_puts(o, "# HELP zerolayer_state_store_loads_total Sessions a request named that this replica did not hold, "
                   "by what the state store gave.\n# TYPE zerolayer_state_store_loads_total counter\n");
    for (int i = 0; i < ZL_FETCH_COUNT; i++)
        zl_buf_printf(o, "zerolayer_state_store_loads_total{result=\"%s\"} %lld\n", fetch[i], M.store_loads[i]);
    zl_buf_printf(o, "# HELP zerolayer_state_store_writes_total Sealed sessions written to the state store, by result.\n"
                     "# TYPE zerolayer_state_store_writes_total counter\n"
                     "zerolayer_state_store_writes_total{result=\"ok\"} %lld\n"
                     "zerolayer_state_store_writes_total{result=\"failed\"} %lld\n",
                  M.store_writes[1], M.store_writes[0]);
    render_scalar(o, "zerolayer_state_store_load_seconds_total", "counter",
                  "Time spent loading sessions from the state store (read, unseal, restore).", M.store_load_s);
    render_scalar(o, "zerolayer_state_entropy_bits", "gauge",
                  "Empirical entropy of the last coded idle state's coefficients, bits per K/V element.",
                  M.state_entropy);
    pthread_mutex_unlock(&M.mu);
    render_scalar(o, "zerolayer_requests_running", "gauge", "Sequences being generated.", st.running);
    render_scalar(o, "zerolayer_requests_waiting", "gauge", "Requests queued for a sequence slot.", st.waiting);
    render_scalar(o, "zerolayer_kv_usage_ratio", "gauge", "KV cache positions in use over capacity.",
                  st.kv_capacity ? (double)st.kv_used / (double)st.kv_capacity : 0.0);
    render_scalar(o, "zerolayer_slots", "gauge", "Sequence slots (--parallel).", st.n_parallel);
    render_scalar(o, "zerolayer_ring_drafted_tokens_total", "counter",
                  "Tokens drafted by the verification ring (speculative decoding).", (double)st.ring_drafted);
    render_scalar(o, "zerolayer_ring_accepted_tokens_total", "counter",
                  "Drafted tokens the model accepted in verify steps.", (double)st.ring_accepted);
    render_scalar(o, "zerolayer_kv_evicted_tokens_total", "counter",
                  "KV cache entries evicted by bounded KV policies (window, anchor).", (double)st.kv_evicted);
    render_scalar(o, "zerolayer_kv_anchor_tokens", "gauge",
                  "Anchored KV entries (never evicted) held by running sequences.", (double)st.kv_anchor_tokens);
    render_scalar(o, "zerolayer_engine_steps_total", "counter", "Engine steps (one batched forward each).",
                  (double)st.steps);
    render_scalar(o, "zerolayer_engine_busy_seconds_total", "counter",
                  "Engine thread time spent working (admission, forwards, sampling, bookkeeping).", st.busy_s);
    render_scalar(o, "zerolayer_engine_forward_seconds_total", "counter",
                  "Engine thread time inside batched forward passes.", st.forward_s);
    render_scalar(o, "zerolayer_engine_sample_seconds_total", "counter",
                  "Engine thread time choosing tokens (sampling, ring verification).", st.sample_s);
}
