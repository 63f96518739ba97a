/* metrics.h — the process-wide metrics registry (the one sanctioned global)
 * and its Prometheus text rendering.  Gauges that the scheduler knows
 * (running, waiting, KV usage) are read from it at scrape time. */
#ifndef ZL_METRICS_H
#define ZL_METRICS_H

#include "zerolayer_sched.h"
#include "jsonv.h"

void zl_metrics_request(const char *route, int status, double seconds);
void zl_metrics_ttft(double seconds);
void zl_metrics_inter_token(double seconds);
void zl_metrics_tokens(long long prompt, long long generated);
void zl_metrics_batch(int n_seqs);
void zl_metrics_cancelled(void);
/* Session snapshots (api_state.c): one per export or restore attempt, with
 * the bytes sealed (encoded) or opened (decoded). */
typedef enum { ZL_SNAPM_EXPORTED, ZL_SNAPM_RESTORED, ZL_SNAPM_INVALID, ZL_SNAPM_FORBIDDEN, ZL_SNAPM_MISMATCH,
               ZL_SNAPM_COUNT } zl_snapm;
void zl_metrics_snapshot(zl_snapm result, size_t encoded_bytes, size_t decoded_bytes);
/* Idle sessions coded with the learned codec (bytes produced / read), and
 * the empirical entropy of the last coded state's coefficients (bits per
 * K/V element: the state-health gauge). */
void zl_metrics_codec(size_t encoded_bytes, size_t decoded_bytes);
void zl_metrics_state_entropy(double bits);
/* The session state store (state_store.c): a session a request named and
 * this replica did not hold, by what the store gave (the result of
 * zl_state_store_fetch); and each write of a sealed session. */
typedef enum { ZL_FETCH_LOADED, ZL_FETCH_MISS, ZL_FETCH_DOWN, ZL_FETCH_BAD, ZL_FETCH_COUNT } zl_fetch_result;
void zl_metrics_store_load(zl_fetch_result result, double ms);
void zl_metrics_store_write(int ok, size_t bytes);
/* Append the exposition text (version 0.0.4) to out. */
void zl_metrics_render(zl_buf *out, zl_sched *s);

#endif
