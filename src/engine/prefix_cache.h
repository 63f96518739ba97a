/* prefix_cache.h — KV snapshots of finished sequences, shared between the
 * requests of one tenant.
 *
 * An entry is a finished sequence handed over whole (no copy) or a compact
 * copy of one (zl_seq_copy_prefix): its tokens and KV rows.  Keys are hash chains over blocks of `block`
 * tokens seeded with the tenant, so equal text of two tenants never shares a
 * key; a lookup also compares the tenant string and the tokens themselves,
 * so a hash collision cannot leak state either.  Reuse is block-granular:
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
/* Store a snapshot of src's tokens for `tenant`.  take = 0: a compact copy
 * (src is not modified); take = 1: src itself is kept (a finished sequence:
 * no copy) or, if not kept, zeroed and freed. */
void zl_pcache_insert(zl_pcache *c, const char *tenant, zl_seq *src, int take);
void zl_pcache_stats_get(zl_pcache *c, zl_pcache_stats *st);

#endif
