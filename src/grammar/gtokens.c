/* gtokens.c — the grammar applied to tokens: the vocabulary's byte trie,
 * allowed-token masks, and the per-generation constraint.
 *
 * The trie holds every token's decoded bytes in depth-first order with, per
 * node, the index just past its subtree: a mask is one pass over that array
 * carrying the stack set of each depth, skipping a whole subtree as soon as
 * its prefix leaves the grammar.  Masks are cached per parse state (the
 * exact set of stacks), so the states a generation revisits — the inside
 * of a string, the gap between two values — cost a hash lookup.  Owns no
 * model or sampler: it sees tokens only as ids and bytes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_internal.h"

#define GC_CACHE_SLOTS 1024
#define GC_CACHE_MAX 384

struct zl_gvocab {
    int32_t n_tokens;
    int32_t n_nodes;
    uint8_t *byte;
    uint16_t *depth;
    int32_t *skip;
    int32_t *tok_off; /* into tok[]; tok_n tokens end at the node */
    int32_t *tok_n;
    int32_t *tok;
    int32_t max_depth;
    char *is_eog; /* per token */
    int32_t *eog;
    int n_eog;
    uint8_t *bytes; /* every token's bytes: token t is bytes[boff[t] .. boff[t + 1]) */
    size_t *boff;
};

typedef struct piece_ref {
    const uint8_t *p;
    uint32_t len;
    int32_t id;
} piece_ref;

static int cmp_piece(const void *a, const void *b) {
    const piece_ref *x = a, *y = b;
    uint32_t m = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->p, y->p, m);
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

int zl_gvocab_new(zl_gvocab **out, int32_t n_tokens, zl_gvocab_piece_fn piece, void *ud, const int32_t *eog,
                  int n_eog, zl_err *err) {
    *out = NULL;
    if (n_tokens <= 0) return zl_errf(err, ZL_EINVAL, "grammar vocabulary: no tokens");
    zl_gvocab *v = calloc(1, sizeof *v);
    piece_ref *pr = malloc((size_t)n_tokens * sizeof *pr);
    if (!v || !pr) {
        free(v);
        free(pr);
        return zl_errf(err, ZL_ENOMEM, "out of memory for the grammar vocabulary");
    }
    v->n_tokens = n_tokens;
    v->is_eog = calloc((size_t)n_tokens, 1);
    v->eog = malloc((size_t)(n_eog > 0 ? n_eog : 1) * sizeof *v->eog);
    for (int k = 0; k < n_eog && v->is_eog && v->eog; k++)
        if (eog[k] >= 0 && eog[k] < n_tokens && !v->is_eog[eog[k]]) {
            v->is_eog[eog[k]] = 1;
            v->eog[v->n_eog++] = eog[k];
        }
    size_t total = 0;
    int32_t np = 0;
    v->boff = malloc(((size_t)n_tokens + 1) * sizeof *v->boff);
    for (int32_t id = 0; v->boff && id < n_tokens; id++) {
        size_t len = 0;
        const char *p = piece(ud, id, &len);
        if (!p || len > 65535) len = 0;
        v->boff[id] = total;
        total += len;
    }
    if (v->boff) v->boff[n_tokens] = total;
    v->bytes = malloc(total ? total : 1);
    if (!v->boff || !v->bytes || !v->is_eog || !v->eog) {
        free(pr);
        zl_gvocab_free(v);
        return zl_errf(err, ZL_ENOMEM, "out of memory for the grammar vocabulary");
    }
    for (int32_t id = 0; id < n_tokens; id++) {
        size_t len = v->boff[id + 1] - v->boff[id];
        if (!len || v->is_eog[id]) continue;
        const char *p = piece(ud, id, &len);
        memcpy(v->bytes + v->boff[id], p, len);
        p = (const char *)v->bytes + v->boff[id];
        pr[np].p = (const uint8_t *)p;
        pr[np].len = (uint32_t)len;
        pr[np].id = id;
        np++;
    }
    qsort(pr, (size_t)np, sizeof *pr, cmp_piece);
    size_t cap = total ? total : 1;
    v->byte = malloc(cap);
    v->depth = malloc(cap * sizeof *v->depth);
    v->skip = malloc(cap * sizeof *v->skip);
    v->tok_off = malloc(cap * sizeof *v->tok_off);
    v->tok_n = calloc(cap, sizeof *v->tok_n);
    v->tok = malloc((size_t)(np ? np : 1) * sizeof *v->tok);
    int32_t *path = malloc(65536 * sizeof *path);
    int32_t *open = malloc(65537 * sizeof *open);
    if (!v->is_eog || !v->eog || !v->byte || !v->depth || !v->skip || !v->tok_off || !v->tok_n || !v->tok || !path ||
        !open) {
        free(pr);
        free(path);
        free(open);
        zl_gvocab_free(v);
        return zl_errf(err, ZL_ENOMEM, "out of memory for the grammar vocabulary");
    }
    int32_t nn = 0;
    for (int32_t k = 0; k < np; k++) {
        uint32_t lcp = 0;
        if (k) {
            uint32_t m = pr[k].len < pr[k - 1].len ? pr[k].len : pr[k - 1].len;
            while (lcp < m && pr[k].p[lcp] == pr[k - 1].p[lcp]) lcp++;
        }
        for (uint32_t d = lcp; d < pr[k].len; d++) {
            v->byte[nn] = pr[k].p[d];
            v->depth[nn] = (uint16_t)(d + 1);
            v->tok_n[nn] = 0;
            v->tok_off[nn] = 0;
            path[d] = nn++;
        }
        int32_t node = path[pr[k].len - 1];
        if (!v->tok_n[node]) v->tok_off[node] = k;
        v->tok_n[node]++;
        v->tok[k] = pr[k].id;
        if ((int32_t)pr[k].len > v->max_depth) v->max_depth = (int32_t)pr[k].len;
    }
    v->n_nodes = nn;
    int32_t sp = 0;
    for (int32_t i = 0; i < nn; i++) {
        while (sp && v->depth[open[sp - 1]] >= v->depth[i]) v->skip[open[--sp]] = i;
        open[sp++] = i;
    }
    while (sp) v->skip[open[--sp]] = nn;
    free(pr);
    free(path);
    free(open);
    *out = v;
    return 0;
}

void zl_gvocab_free(zl_gvocab *v) {
    if (!v) return;
    free(v->byte);
    free(v->depth);
    free(v->skip);
    free(v->tok_off);
    free(v->tok_n);
    free(v->tok);
    free(v->is_eog);
    free(v->eog);
    free(v->bytes);
    free(v->boff);
    free(v);
}

int32_t zl_gvocab_n_tokens(const zl_gvocab *v) { return v->n_tokens; }

/* ---- the constraint ---- */

typedef struct gcache_ent {
    uint64_t hash;
    int32_t *key;
    int32_t klen;
    int32_t n_allowed;
    uint64_t *mask;
} gcache_ent;

struct zl_gconstraint {
    const zl_grammar *g;
    const zl_gvocab *v;
    garena a, spare;
    gstackset cur, tmp;
    gstackset *lv; /* per trie depth, during a walk */
    int32_t *mark;
    int32_t nwords;
    /* the current state's cache key */
    int32_t *key;
    int32_t klen, kcap;
    uint64_t khash;
    int key_ok;
    gcache_ent *slot; /* open addressing */
    int n_ent;
    const gcache_ent *last;
    /* lazy trigger */
    char *trigger;
    size_t trig_len;
    char *window; /* the last trig_len - 1 generated bytes + the new piece */
    size_t win_len, win_cap;
    int active;
    long walks, hits;
};

static uint64_t mix(uint64_t h, uint64_t x) {
    h ^= x + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    return h * 0xFF51AFD7ED558CCDull;
}

static uint64_t stack_hash(const garena *a, int32_t st) {
    uint64_t h = 1469598103934665603ull;
    for (; st >= 0; st = a->f[st].parent) h = mix(h, (uint64_t)(uint32_t)a->f[st].pos);
    return mix(h, st == GSTACK_ACCEPT ? 7 : 3);
}

typedef struct hs {
    uint64_t h;
    int32_t st;
} hs;

static int cmp_hs(const void *x, const void *y) {
    const hs *a = x, *b = y;
    return a->h < b->h ? -1 : a->h > b->h;
}

/* Canonical key of the current set: stacks ordered by hash, each written top
 * to bottom and closed by -2 (the accepting stack is [-1, -2]). */
static int make_key(zl_gconstraint *c) {
    int32_t n = c->cur.n;
    hs *h = malloc((size_t)(n ? n : 1) * sizeof *h);
    if (!h) return -1;
    for (int32_t k = 0; k < n; k++) {
        h[k].st = c->cur.s[k];
        h[k].h = stack_hash(&c->a, c->cur.s[k]);
    }
    qsort(h, (size_t)n, sizeof *h, cmp_hs);
    c->klen = 0;
    uint64_t hh = 0x12345;
    for (int32_t k = 0; k < n; k++) {
        hh = mix(hh, h[k].h);
        for (int32_t st = h[k].st;; st = c->a.f[st].parent) {
            if (c->klen + 2 > c->kcap) {
                int32_t nc = c->kcap ? c->kcap * 2 : 64;
                int32_t *t = realloc(c->key, (size_t)nc * sizeof *t);
                if (!t) {
                    free(h);
                    return -1;
                }
                c->key = t;
                c->kcap = nc;
            }
            if (st < 0) {
                if (st == GSTACK_ACCEPT) c->key[c->klen++] = -1;
                c->key[c->klen++] = -2;
                break;
            }
            c->key[c->klen++] = c->a.f[st].pos;
        }
    }
    free(h);
    c->khash = hh;
    c->key_ok = 1;
    return 0;
}

static void cache_clear(zl_gconstraint *c) {
    for (int k = 0; k < GC_CACHE_SLOTS; k++) {
        free(c->slot[k].key);
        free(c->slot[k].mask);
        memset(&c->slot[k], 0, sizeof c->slot[k]);
    }
    c->n_ent = 0;
    c->last = NULL;
}

static gcache_ent *cache_find(zl_gconstraint *c, int *found) {
    size_t i = (size_t)(c->khash % GC_CACHE_SLOTS);
    for (int probe = 0; probe < GC_CACHE_SLOTS; probe++, i = (i + 1) % GC_CACHE_SLOTS) {
        gcache_ent *e = &c->slot[i];
        if (!e->mask) {
            *found = 0;
            return e;
        }
        if (e->hash == c->khash && e->klen == c->klen && !memcmp(e->key, c->key, (size_t)c->klen * sizeof *c->key)) {
            *found = 1;
            return e;
        }
    }
    *found = 0;
    return NULL;
}

/* One pass over the trie from the current set: bits of the tokens whose
 * whole bytes keep at least one stack alive. */
static int32_t walk(zl_gconstraint *c, uint64_t *mask) {
    const zl_gvocab *v = c->v;
    memset(mask, 0, (size_t)c->nwords * sizeof *mask);
    int32_t base = c->a.n;
    c->lv[0].n = 0;
    for (int32_t k = 0; k < c->cur.n; k++)
        if (c->cur.s[k] >= 0 && gm_set_add(&c->a, &c->lv[0], c->cur.s[k])) return -1;
    c->mark[0] = base;
    int32_t allowed = 0;
    for (int32_t i = 0; i < v->n_nodes;) {
        int d = v->depth[i];
        c->a.n = c->mark[d - 1];
        gm_advance(c->g, &c->a, &c->lv[d - 1], v->byte[i], &c->lv[d]);
        if (c->a.oom) {
            c->a.n = base;
            return -1;
        }
        if (!c->lv[d].n) {
            i = v->skip[i];
            continue;
        }
        c->mark[d] = c->a.n;
        for (int32_t t = 0; t < v->tok_n[i]; t++) {
            int32_t id = v->tok[v->tok_off[i] + t];
            mask[id >> 6] |= 1ull << (id & 63);
            allowed++;
        }
        i++;
    }
    c->a.n = base;
    if (gm_set_accepting(&c->cur))
        for (int k = 0; k < v->n_eog; k++) {
            int32_t id = v->eog[k];
            if (!((mask[id >> 6] >> (id & 63)) & 1)) allowed++;
            mask[id >> 6] |= 1ull << (id & 63);
        }
    return allowed;
}

static int state_start(zl_gconstraint *c) {
    c->a.n = 0;
    gm_start(c->g, &c->a, &c->cur);
    c->key_ok = 0;
    return c->a.oom ? -1 : 0;
}

int zl_gconstraint_new(zl_gconstraint **out, const zl_grammar *g, const zl_gvocab *v, const char *lazy_trigger,
                       zl_err *err) {
    *out = NULL;
    zl_gconstraint *c = calloc(1, sizeof *c);
    if (!c) return zl_errf(err, ZL_ENOMEM, "out of memory");
    c->g = g;
    c->v = v;
    c->nwords = (v->n_tokens + 63) / 64;
    c->slot = calloc(GC_CACHE_SLOTS, sizeof *c->slot);
    c->lv = calloc((size_t)v->max_depth + 1, sizeof *c->lv);
    c->mark = calloc((size_t)v->max_depth + 1, sizeof *c->mark);
    int bad = !c->slot || !c->lv || !c->mark;
    if (!bad && lazy_trigger && *lazy_trigger) {
        c->trig_len = strlen(lazy_trigger);
        c->trigger = strdup(lazy_trigger);
        bad = !c->trigger;
    } else {
        c->active = 1;
    }
    if (!bad && c->active) bad = state_start(c);
    if (bad) {
        zl_gconstraint_free(c);
        return zl_errf(err, ZL_ENOMEM, "out of memory");
    }
    *out = c;
    return 0;
}

void zl_gconstraint_free(zl_gconstraint *c) {
    if (!c) return;
    if (c->slot) cache_clear(c);
    free(c->slot);
    for (int32_t d = 0; c->lv && d <= c->v->max_depth; d++) free(c->lv[d].s);
    free(c->lv);
    free(c->mark);
    free(c->a.f);
    free(c->spare.f);
    free(c->cur.s);
    free(c->tmp.s);
    free(c->key);
    free(c->trigger);
    free(c->window);
    free(c);
}

const uint64_t *zl_gconstraint_mask(zl_gconstraint *c, int32_t *n_allowed) {
    if (!c->active) {
        if (n_allowed) *n_allowed = c->v->n_tokens;
        return NULL;
    }
    if (!c->key_ok && make_key(c)) return NULL;
    int found = 0;
    gcache_ent *e = cache_find(c, &found);
    if (found) {
        c->hits++;
        c->last = e;
        if (n_allowed) *n_allowed = e->n_allowed;
        return e->mask;
    }
    if (!e || c->n_ent >= GC_CACHE_MAX) {
        cache_clear(c);
        e = cache_find(c, &found);
    }
    uint64_t *mask = malloc((size_t)c->nwords * sizeof *mask);
    int32_t *key = malloc((size_t)(c->klen ? c->klen : 1) * sizeof *key);
    if (!mask || !key) {
        free(mask);
        free(key);
        return NULL;
    }
    int32_t n = walk(c, mask);
    if (n < 0) {
        free(mask);
        free(key);
        return NULL;
    }
    c->walks++;
    memcpy(key, c->key, (size_t)c->klen * sizeof *key);
    e->hash = c->khash;
    e->key = key;
    e->klen = c->klen;
    e->mask = mask;
    e->n_allowed = n;
    c->n_ent++;
    c->last = e;
    if (n_allowed) *n_allowed = n;
    return mask;
}

int32_t zl_gconstraint_apply(zl_gconstraint *c, float *logits) {
    int32_t n = 0;
    const uint64_t *m = zl_gconstraint_mask(c, &n);
    if (!m) return c->active ? 0 : c->v->n_tokens;
    for (int32_t w = 0; w < c->nwords; w++) {
        uint64_t bits = m[w];
        if (bits == ~0ull) continue;
        int32_t lo = w * 64, hi = lo + 64 < c->v->n_tokens ? lo + 64 : c->v->n_tokens;
        for (int32_t id = lo; id < hi; id++)
            if (!((bits >> (id - lo)) & 1)) logits[id] = -INFINITY;
    }
    return n;
}

/* Feed bytes to the state; 0, or -1 (state unchanged) when rejected. */
static int feed(zl_gconstraint *c, const uint8_t *p, size_t n) {
    int32_t mark = c->a.n;
    gstackset work = {0}, next = {0};
    int rc = 0;
    const gstackset *in = &c->cur;
    for (size_t i = 0; i < n && !rc; i++) {
        gm_advance(c->g, &c->a, in, p[i], &next);
        gstackset t = work;
        work = next;
        next = t;
        in = &work;
        if (c->a.oom || !work.n) rc = -1;
    }
    if (rc) {
        c->a.n = mark;
        c->a.oom = 0;
    } else if (n) {
        gstackset t = c->cur;
        c->cur = work;
        work = t;
        if (gm_compact(&c->a, &c->spare, &c->cur)) rc = -1;
        garena ta = c->a;
        c->a = c->spare;
        c->spare = ta;
        c->key_ok = 0;
    }
    free(work.s);
    free(next.s);
    return rc;
}

static int window_push(zl_gconstraint *c, const char *p, size_t n) {
    if (c->win_len + n > c->win_cap) {
        size_t nc = (c->win_len + n) * 2 + 16;
        char *t = realloc(c->window, nc);
        if (!t) return -1;
        c->window = t;
        c->win_cap = nc;
    }
    memcpy(c->window + c->win_len, p, n);
    c->win_len += n;
    return 0;
}

/* Lazy mode: look for the trigger in the text so far plus this piece; once
 * found, the grammar starts and takes the bytes after the trigger. */
static int lazy_feed(zl_gconstraint *c, const uint8_t *p, size_t n) {
    if (window_push(c, (const char *)p, n)) return ZL_ENOMEM;
    const char *w = c->window;
    size_t wl = c->win_len;
    for (size_t i = 0; i + c->trig_len <= wl; i++) {
        if (memcmp(w + i, c->trigger, c->trig_len)) continue;
        size_t after = i + c->trig_len;
        if (state_start(c)) return ZL_ENOMEM;
        c->active = 1;
        c->win_len = 0;
        if (after < wl && feed(c, (const uint8_t *)w + after, wl - after)) return ZL_EINVAL;
        return 0;
    }
    if (wl >= c->trig_len) { /* keep what may begin the trigger */
        size_t keep = c->trig_len - 1;
        memmove(c->window, w + wl - keep, keep);
        c->win_len = keep;
    }
    return 0;
}

int zl_gconstraint_accept(zl_gconstraint *c, int32_t token) {
    const zl_gvocab *v = c->v;
    if (token < 0 || token >= v->n_tokens) return ZL_EINVAL;
    const uint8_t *p = v->bytes + v->boff[token];
    size_t n = v->boff[token + 1] - v->boff[token];
    if (!c->active) return lazy_feed(c, p, n);
    if (v->is_eog[token]) return gm_set_accepting(&c->cur) ? 0 : ZL_EINVAL;
    if (!n) return ZL_EINVAL;
    if (feed(c, p, n)) return ZL_EINVAL;
    /* a lazy grammar that has nothing left to match goes back to watching */
    if (c->trigger && c->cur.n == 1 && c->cur.s[0] == GSTACK_ACCEPT) {
        c->active = 0;
        c->win_len = 0;
    }
    return 0;
}

int zl_gconstraint_active(const zl_gconstraint *c) { return c->active; }

int zl_gconstraint_accepting(const zl_gconstraint *c) { return c->active && gm_set_accepting(&c->cur); }

void zl_gconstraint_stats(const zl_gconstraint *c, long *walks, long *hits) {
    if (walks) *walks = c->walks;
    if (hits) *hits = c->hits;
}
