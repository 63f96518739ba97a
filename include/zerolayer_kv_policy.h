/* zerolayer_kv_policy.h — the KV slicing policies: the one enum and its
 * names.  zerolayer.h includes it for the API; the KV layer (src/kv/), which
 * owns the name table (kv_policy.c), includes it for the enum its policy
 * struct holds.  It depends on nothing, so the KV layer reads no more of the
 * public API than this.
 *
 *   full    keep everything (the cache is bounded by the context only)
 *   window  4 attention sinks + the most recent tokens
 *   anchor  sinks + marked anchors + a recent window, per layer */
#ifndef ZEROLAYER_KV_POLICY_H
#define ZEROLAYER_KV_POLICY_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    ZL_KV_POLICY_FULL = 0,
    ZL_KV_POLICY_WINDOW = 1,
    ZL_KV_POLICY_ANCHOR = 2,
    ZL_KV_POLICY_COUNT /* not a policy: the number of them */
} zl_kv_policy_kind;

/* The policy's name ("full", "window", "anchor"; "full" for a value out of
 * range).  from_name: 0, or -1 (kind untouched) for an unknown name. */
const char *zl_kv_policy_name(zl_kv_policy_kind kind);
int zl_kv_policy_from_name(const char *name, zl_kv_policy_kind *kind);
/* "full, window or anchor" (built from the table), for messages that list
 * the choices. */
const char *zl_kv_policy_names(void);

#ifdef __cplusplus
}
#endif

#endif
