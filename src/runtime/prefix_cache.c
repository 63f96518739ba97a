/* prefix_cache.c — see prefix_cache.h.  A short list scanned linearly: with
 * entries of hundreds to thousands of tokens and a memory bound of a few
 * hundred MiB there are tens of entries, and the scan compares one 64-bit
 * chain hash per block before it touches any token.  Runtime layer: drives
 * sequences only through zerolayer.h, never the engine's internals. */
#include "prefix_cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../base/err.h"

typedef struct pc_entry {
    char *tenant;
    zl_seq *seq;      /* compact snapshot (n_ctx == n tokens) or a finished sequence kept whole */
    int whole;        /* seq is the finished sequence itself (zl_pcache_take may hand it on) */
    const int32_t *tokens; /* == seq's tokens, n of them */
    int n, n_blocks;
    uint64_t *chain;  /* chain[i]: hash of tenant + blocks 0..i */
    size_t bytes;
    uint64_t last_use;
    struct pc_entry *next;
} pc_entry;

struct zl_pcache {
    pthread_mutex_t mu;
    size_t max_bytes, bytes;
    int block;
    pc_entry *head;
    uint64_t clock, hit_tokens, query_tokens;
};

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdULL;
    return h ^ (h >> 33);
}

static uint64_t tenant_seed(const char *t) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *t; t++) h = (h ^ (unsigned char)*t) * 0x100000001b3ULL;
    return mix(h, 0x7a65726f6c61ULL);
}

/* chain[i] for the first n_blocks blocks of ids; returns n_blocks. */
static void chain_hashes(const char *tenant, const int32_t *ids, int n_blocks, int block, uint64_t *chain) {
    uint64_t h = tenant_seed(tenant);
    for (int b = 0; b < n_blocks; b++) {
        for (int i = 0; i < block; i++) h = mix(h, (uint32_t)ids[b * block + i]);
        chain[b] = h;
    }
}

int zl_pcache_new(zl_pcache **out, size_t max_bytes, int block, zl_err *err) {
    zl_pcache *c = calloc(1, sizeof *c);
    if (!c) return zl_errf(err, ZL_ENOMEM, "out of memory");
    pthread_mutex_init(&c->mu, NULL);
    c->max_bytes = max_bytes;
    c->block = block > 0 ? block : 16;
    *out = c;
    return 0;
}

static void entry_free(pc_entry *e) {
    zl_seq_truncate(e->seq, 0); /* zeroes the KV rows */
    zl_seq_free(e->seq);
    free(e->tenant);
    free(e->chain);
    free(e);
}

void zl_pcache_free(zl_pcache *c) {
    if (!c) return;
    while (c->head) {
        pc_entry *e = c->head;
        c->head = e->next;
        entry_free(e);
    }
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static int lcp(const int32_t *a, int na, const int32_t *b, int nb) {
    int n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

static pc_entry **best_entry(zl_pcache *c, const char *tenant, const int32_t *ids, int n, const uint64_t *q, int nb,
                             int *len);

int zl_pcache_lookup(zl_pcache *c, const char *tenant, const int32_t *ids, int n, zl_seq *dst) {
    if (!c || !c->max_bytes || n < 2) return 0;
    int nb = (n - 1) / c->block; /* whole blocks strictly before the last prompt token */
    uint64_t *q = malloc((size_t)(nb ? nb : 1) * sizeof *q);
    if (!q) return 0;
    chain_hashes(tenant, ids, nb, c->block, q);
    pthread_mutex_lock(&c->mu);
    c->query_tokens += (uint64_t)n;
    int best_n = 0;
    pc_entry **bp = best_entry(c, tenant, ids, n, q, nb, &best_n), *best = bp ? *bp : NULL;
    int reused = 0;
    if (best && best_n > 0) {
        zl_err err = {0};
        if (!zl_seq_copy_prefix(dst, best->seq, best_n, &err)) {
            reused = best_n;
            best->last_use = ++c->clock;
            c->hit_tokens += (uint64_t)reused;
        }
    }
    pthread_mutex_unlock(&c->mu);
    free(q);
    return reused;
}

/* Under c->mu: the entry of `tenant` sharing the longest prefix with ids
 * (block hashes first, then the tokens, to the exact first difference below
 * the last prompt token); its length in *len. */
static pc_entry **best_entry(zl_pcache *c, const char *tenant, const int32_t *ids, int n, const uint64_t *q, int nb,
                             int *len) {
    pc_entry **best = NULL;
    int best_n = 0;
    for (pc_entry **pp = &c->head; *pp; pp = &(*pp)->next) {
        pc_entry *e = *pp;
        if (strcmp(e->tenant, tenant)) continue;
        int m = nb < e->n_blocks ? nb : e->n_blocks, b = 0;
        while (b < m && e->chain[b] == q[b]) b++;
        if (!b) continue; /* not even one block in common */
        int got = b * c->block;
        /* trust tokens, not hashes; then reuse up to the exact first
         * difference (a new turn rarely starts on a block boundary), below
         * the last prompt token, which is evaluated for fresh logits */
        int v = lcp(e->tokens, got, ids, got);
        if (v == got) {
            int lim = e->n < n - 1 ? e->n : n - 1;
            v += lcp(e->tokens + v, lim - v, ids + v, lim - v);
        }
        if (v > best_n) { best = pp; best_n = v; }
    }
    *len = best_n;
    return best;
}

int zl_pcache_take(zl_pcache *c, const char *tenant, const int32_t *ids, int n, const zl_llm *llm, int n_ctx,
                   zl_kv_type kv_type, zl_seq **out) {
    *out = NULL;
    if (!c || !c->max_bytes || n < 2) return 0;
    int nb = (n - 1) / c->block;
    uint64_t *q = malloc((size_t)(nb ? nb : 1) * sizeof *q);
    if (!q) return 0;
    chain_hashes(tenant, ids, nb, c->block, q);
    pthread_mutex_lock(&c->mu);
    int len = 0;
    pc_entry **pp = best_entry(c, tenant, ids, n, q, nb, &len), *e = pp ? *pp : NULL;
    /* whole, made alike, and reused but for a short tail (at most an eighth of what is reused: a new
     * turn after the same history, or the same history extended); a longer tail may serve other
     * requests, so then the entry stays and lookup copies from it */
    if (!e || !e->whole || zl_seq_llm(e->seq) != llm || zl_seq_n_ctx(e->seq) != n_ctx || zl_seq_kv_type(e->seq) != kv_type ||
        len <= 0 || e->n - len > len / 8) {
        pthread_mutex_unlock(&c->mu);
        free(q);
        return 0;
    }
    *pp = e->next;
    c->bytes -= e->bytes;
    c->query_tokens += (uint64_t)n;
    c->hit_tokens += (uint64_t)len;
    pthread_mutex_unlock(&c->mu);
    free(q);
    zl_seq *s = e->seq;
    free(e->tenant);
    free(e->chain);
    free(e);
    zl_seq_truncate(s, len);
    *out = s;
    return len;
}

/* Under c->mu: drop least-recently-used entries until the cache fits. */
static void evict(zl_pcache *c) {
    while (c->bytes > c->max_bytes && c->head) {
        pc_entry **victim = &c->head;
        for (pc_entry **pp = &c->head; *pp; pp = &(*pp)->next)
            if ((*pp)->last_use < (*victim)->last_use) victim = pp;
        pc_entry *e = *victim;
        *victim = e->next;
        c->bytes -= e->bytes;
        entry_free(e);
    }
}

static void seq_zero_free(zl_seq *q) {
    zl_seq_truncate(q, 0);
    zl_seq_free(q);
}

void zl_pcache_insert(zl_pcache *c, const char *tenant, zl_seq *src, int take) {
    int n = zl_seq_n_cached(src), n_fed;
    const int32_t *src_tokens = zl_seq_tokens(src, &n_fed);
    zl_kv_stats ks;
    zl_seq_kv_stats(src, &ks);
    /* what the entry holds: a snapshot its n rows; a sequence kept whole
     * the memory its whole cache holds (zl_kv_stats.bytes_held) */
    size_t bytes = take ? (size_t)ks.bytes_held : (size_t)ks.bytes_per_token * (size_t)n;
    if (!c || !c->max_bytes || n < c->block || zl_seq_kv_policy(src) != ZL_KV_POLICY_FULL || n != n_fed ||
        bytes > c->max_bytes) {
        if (take) seq_zero_free(src);
        return;
    }
    pthread_mutex_lock(&c->mu);
    /* already covered by a longer entry: just refresh it; an entry that this
     * one extends is replaced */
    for (pc_entry **pp = &c->head; *pp;) {
        pc_entry *e = *pp;
        if (strcmp(e->tenant, tenant)) { pp = &e->next; continue; }
        int l = lcp(e->tokens, e->n, src_tokens, n);
        if (l == n) {
            e->last_use = ++c->clock;
            pthread_mutex_unlock(&c->mu);
            if (take) seq_zero_free(src);
            return;
        }
        if (l == e->n) {
            *pp = e->next;
            c->bytes -= e->bytes;
            entry_free(e);
            continue;
        }
        pp = &e->next;
    }
    pthread_mutex_unlock(&c->mu);
    /* the copy runs outside the lock; a sequence we may keep is not copied at all */
    pc_entry *e = calloc(1, sizeof *e);
    if (take && e && (e->tenant = strdup(tenant))) {
        e->seq = src;
        e->whole = 1;
    } else if (take) {
        free(e);
        seq_zero_free(src);
        return;
    }
    zl_seq_opts so = {.n_ctx = n, .kv_type = zl_seq_kv_type(src), .sampling = zl_sampling_defaults()};
    if (!take && (!e || !(e->tenant = strdup(tenant)) || zl_seq_new(&e->seq, zl_seq_llm(src), &so, NULL) ||
                  zl_seq_copy_prefix(e->seq, src, n, NULL))) {
        if (e) {
            if (e->seq) zl_seq_free(e->seq);
            free(e->tenant);
            free(e);
        }
        return;
    }
    e->n = n;
    int n_copied;
    e->tokens = zl_seq_tokens(e->seq, &n_copied);
    e->n_blocks = n / c->block;
    e->bytes = bytes;
    e->chain = malloc((size_t)(e->n_blocks ? e->n_blocks : 1) * sizeof *e->chain);
    if (!e->chain) { entry_free(e); return; }
    chain_hashes(tenant, e->tokens, e->n_blocks, c->block, e->chain);
    pthread_mutex_lock(&c->mu);
    e->last_use = ++c->clock;
    e->next = c->head;
    c->head = e;
    c->bytes += bytes;
    evict(c);
    pthread_mutex_unlock(&c->mu);
}

void zl_pcache_stats_get(zl_pcache *c, zl_pcache_stats *st) {
    memset(st, 0, sizeof *st);
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    for (pc_entry *e = c->head; e; e = e->next) st->entries++;
    st->bytes = c->bytes;
    st->max_bytes = c->max_bytes;
    st->hit_tokens = c->hit_tokens;
    st->query_tokens = c->query_tokens;
    pthread_mutex_unlock(&c->mu);
}
