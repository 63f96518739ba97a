/* prefix_cache.h — KV snapshots of finished sequences, shared between the
 * requests of one tenant.
 *
 * An entry is a finished sequence handed over whole (no copy) or a compact
 * copy of one (zl_seq_copy_prefix): its tokens and KV rows.  Keys are hash
 * chains over blocks of `block` tokens seeded with the tenant, so equal text
 * of two tenants never shares a key; a lookup also compares the tenant
 * string and the tokens themselves, so a hash collision cannot leak state
 * either.  Reuse is block-granular:
 * the longest common prefix is rounded down to whole blocks (and kept below
 * the prompt length, so at least one token is evaluated for fresh logits).
 * Memory is bounded: least-recently-used entries go first; evicted entries
 * are zeroed before they are freed.  Thread-safe (one mutex). */
#ifndef ZL_PREFIX_CACHE_H
#define ZL_PREFIX_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "zerolayer.h"

typedef struct zl_pcache zl_pcache;

typedef struct zl_pcache_stats {
    int entries;
    size_t bytes, max_bytes;
    uint64_t hit_tokens, query_tokens;
} zl_pcache_stats;

/* max_bytes 0: the cache is off.  block <= 0: 16 tokens. */
int zl_pcache_new(zl_pcache **out, size_t max_bytes, int block, zl_err *err);
void zl_pcache_free(zl_pcache *c);
/* Copy the longest cached prefix of ids[0..n) stored for `tenant` into dst
 * (a sequence with nothing cached) and return its length (0: miss). */
int zl_pcache_lookup(zl_pcache *c, const char *tenant, const int32_t *ids, int n, zl_seq *dst);
/* The cheaper hit when the request extends a whole cached sequence: when the
 * best entry for ids[0..n) is a sequence handed over whole, made with
 * n_ctx / kv_type by `llm`, and ids share all its tokens but a short tail
 * (at most an eighth of the shared length: the same history with a new turn,
 * or extended), the entry leaves the cache and its sequence becomes *out,
 * truncated to the reused length (returned), with no copy and no fresh
 * memory.  The caller hands it back with zl_pcache_insert(take = 1)
 * when its job ends (its tokens then extend what it held).  0 (and *out NULL):
 * no such entry; zl_pcache_lookup copies instead. */
int zl_pcache_take(zl_pcache *c, const char *tenant, const int32_t *ids, int n, const zl_llm *llm, int n_ctx,
                   zl_kv_type kv_type, zl_seq **out);
/* Store a snapshot of src's tokens for `tenant`.  take = 0: a compact copy
 * (src is not modified); take = 1: src itself is kept (a finished sequence:
 * no copy) or, if not kept, zeroed and freed. */
void zl_pcache_insert(zl_pcache *c, const char *tenant, zl_seq *src, int take);
void zl_pcache_stats_get(zl_pcache *c, zl_pcache_stats *st);

#endif
