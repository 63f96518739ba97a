/* controls.h — the per-request ring / KV slicing controls of a generation
 * request, from its headers and its body's "zerolayer" object, resolved
 * over the server's defaults.  Pure parsing: headers come through a lookup
 * function, so nothing here touches a connection, and KV policy names are
 * the engine's one table (zl_kv_policy_from_name). */
#ifndef ZL_CONTROLS_H
#define ZL_CONTROLS_H

#include <jansson.h>

#include "zerolayer_sched.h"
#include "jsonv.h"

typedef struct zl_req_ctl {
    zl_job_ctl ctl;    /* resolved: server defaults < compute preset < body fields < headers */
    json_t *anchors;   /* body zerolayer.anchors (borrowed from the body), or NULL */
    int bounded;       /* a window/anchor KV policy: prompts and generations may exceed the context */
    int stream_buffer; /* X-Zerolayer-Stream-Buffer (tokens held back for stop matching at most), 0 if absent */
} zl_req_ctl;

/* Longest generation a request may ask for under a bounded KV policy. */
#define ZL_MAX_TOKENS_BOUNDED (1 << 20)

/* A request header by name, or NULL. */
typedef const char *(*zl_hdr_fn)(void *ud, const char *name);

/* Headers X-Zerolayer-Validation (on|off: the lookup-drafted verification
 * ring, the name README's controls table documents), X-Zerolayer-Ring
 * (1..16), X-Zerolayer-KV-Policy (a KV policy name), X-Zerolayer-KV-Budget
 * (tokens, or a fraction like 0.25), X-Zerolayer-KV-Window (tokens, anchor
 * only), X-Zerolayer-Compute (exact|balanced|aggressive),
 * X-Zerolayer-Stream-Buffer (tokens >= 0), and the body object "zerolayer"
 * with the same keys (validation, ring, kv_policy, kv_budget, kv_window,
 * compute) plus anchors (strings of the prompt that are never evicted).  defaults: the
 * server's; n_ctx: the context a budget fraction is of.  Returns 0, or -1
 * with e naming the header or field. */
int zl_ctl_parse(const zl_job_ctl *defaults, int n_ctx, zl_hdr_fn hdr, void *hdr_ud, json_t *body, zl_req_ctl *out,
                 zl_verr *e);

#endif
