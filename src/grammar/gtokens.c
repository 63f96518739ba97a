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

/* ---- the constraint ----
 *
 * Frames are interned (one index per (position, frame below)), so equal
 * stacks have equal indices and a set of stacks, sorted, is interned as a
 * set id.  Each set keeps its byte transitions (256 ids, computed on first
 * use) and its mask once computed.  Inside a string the set after one more
 * character is the set before it, so most of a trie walk is table lookups,
 * and revisited states cost nothing. */

#define GC_SET_UNKNOWN (-2)
#define GC_DEAD (-1)
#define GC_MAX_MASKS 256
/* Expansion steps one mask's walk over the vocabulary's trie may take, over
 * all its bytes: the engine thread computes masks, so one ambiguous grammar
 * must not hold every other generation for seconds.  A JSON Schema's walk
 * over a 152k-token vocabulary takes at most about 5 * 10^4 (grammar_bench). */
#define GC_MAX_WALK_WORK (32L * GM_MAX_WORK)
#define GC_WALK_MSG "one token's mask needs more than 8388608 expansion steps (the grammar is too ambiguous: " \
                    "nested or repeated optional parts)"
#define GC_MAX_SETS 40000
#define GC_MAX_FRAMES (1 << 22)

typedef struct gcset {
    int32_t off, n;   /* stacks: pool[off .. off + n), sorted */
    uint64_t hash;
    int32_t *trans;   /* 256 next-set ids (GC_SET_UNKNOWN until computed) or NULL */
    uint64_t *mask;   /* NULL until computed */
    int32_t n_allowed;
    int accepting;
} gcset;

struct zl_gconstraint {
    const zl_grammar *g;
    const zl_gvocab *v;
    garena a;             /* interned frames */
    gcset *set;
    int32_t n_set, cap_set;
    int32_t *pool;
    int32_t n_pool, cap_pool;
    int32_t *set_ht;      /* open addressing over set ids, -1 empty */
    int32_t set_ht_cap;
    int n_masks;
    gstackset tmp;
    int32_t *lv;          /* set id per trie depth during a walk */
    int32_t nwords;
    int32_t cur;          /* the current set id */
    int32_t start;        /* the id of the root's initial set in the tables, or -1 */
    int oom;              /* sticky: the tables failed (err says why); nothing is allowed any more */
    int err;              /* ZL_ENOMEM, or ZL_ERANGE: a byte needed more than GM_MAX_WORK steps, or (walk_over)
                           * a mask more than GC_MAX_WALK_WORK */
    int walk_over;
    long walk_work;       /* expansion steps of the walk under way */
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

static int cmp_i32(const void *x, const void *y) {
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return a < b ? -1 : a > b;
}

static int set_ht_grow(zl_gconstraint *c) {
    int32_t nc = c->set_ht_cap ? c->set_ht_cap * 2 : 1024;
    int32_t *t = malloc((size_t)nc * sizeof *t);
    if (!t) return -1;
    for (int32_t k = 0; k < nc; k++) t[k] = -1;
    for (int32_t id = 0; id < c->n_set; id++) {
        uint32_t h = (uint32_t)c->set[id].hash & (uint32_t)(nc - 1);
        while (t[h] >= 0) h = (h + 1) & (uint32_t)(nc - 1);
        t[h] = id;
    }
    free(c->set_ht);
    c->set_ht = t;
    c->set_ht_cap = nc;
    return 0;
}

/* The id of the set holding tmp's stacks (sorted in place); -1 on OOM. */
static int32_t set_intern(zl_gconstraint *c, gstackset *s) {
    qsort(s->s, (size_t)s->n, sizeof *s->s, cmp_i32);
    uint64_t h = 0x51ED27;
    for (int32_t k = 0; k < s->n; k++) h = mix(h, (uint64_t)(uint32_t)s->s[k]);
    if ((c->n_set + 1) * 2 > c->set_ht_cap && set_ht_grow(c)) return -1;
    uint32_t m = (uint32_t)(c->set_ht_cap - 1), i = (uint32_t)h & m;
    for (; c->set_ht[i] >= 0; i = (i + 1) & m) {
        const gcset *e = &c->set[c->set_ht[i]];
        if (e->hash == h && e->n == s->n && !memcmp(c->pool + e->off, s->s, (size_t)s->n * sizeof *s->s))
            return c->set_ht[i];
    }
    if (c->n_set == c->cap_set) {
        int32_t nc = c->cap_set ? c->cap_set * 2 : 256;
        gcset *t = realloc(c->set, (size_t)nc * sizeof *t);
        if (!t) return -1;
        c->set = t;
        c->cap_set = nc;
    }
    if (c->n_pool + s->n > c->cap_pool) {
        int32_t nc = (c->n_pool + s->n) * 2 + 256;
        int32_t *t = realloc(c->pool, (size_t)nc * sizeof *t);
        if (!t) return -1;
        c->pool = t;
        c->cap_pool = nc;
    }
    gcset *e = &c->set[c->n_set];
    memset(e, 0, sizeof *e);
    e->off = c->n_pool;
    e->n = s->n;
    e->hash = h;
    e->accepting = gm_set_accepting(s);
    memcpy(c->pool + c->n_pool, s->s, (size_t)s->n * sizeof *s->s);
    c->n_pool += s->n;
    c->set_ht[i] = c->n_set;
    return c->n_set++;
}

/* The constraint is broken for good: code says why (the first reason stands). */
static void fail(zl_gconstraint *c, int code) {
    if (!c->oom) c->err = code;
    c->oom = 1;
}

/* Next set from set sid over byte b (GC_DEAD when no stack survives). */
static int32_t trans(zl_gconstraint *c, int32_t sid, unsigned char b) {
    gcset *e = &c->set[sid];
    if (e->trans && e->trans[b] != GC_SET_UNKNOWN) return e->trans[b];
    if (!e->trans) {
        e->trans = malloc(256 * sizeof *e->trans);
        if (!e->trans) {
            fail(c, ZL_ENOMEM);
            return GC_DEAD;
        }
        for (int k = 0; k < 256; k++) e->trans[k] = GC_SET_UNKNOWN;
    }
    gstackset in = {c->pool + e->off, e->n, e->n};
    gm_advance(c->g, &c->a, &in, b, &c->tmp);
    c->walk_work += c->a.work;
    int32_t next = GC_DEAD;
    if (c->a.oom) fail(c, c->a.over ? ZL_ERANGE : ZL_ENOMEM);
    else if (c->tmp.n) next = set_intern(c, &c->tmp);
    if (next < 0 && c->tmp.n) {
        fail(c, ZL_ENOMEM);
        next = GC_DEAD;
    }
    c->set[sid].trans[b] = next; /* set_intern may have moved c->set */
    return next;
}

static void tables_free(zl_gconstraint *c) {
    for (int32_t id = 0; id < c->n_set; id++) {
        free(c->set[id].trans);
        free(c->set[id].mask);
    }
    c->n_set = 0;
    c->n_pool = 0;
    c->n_masks = 0;
    c->start = -1;
    c->a.n = 0;
    free(c->a.ht);
    c->a.ht = NULL;
    c->a.ht_cap = 0;
    free(c->set_ht);
    c->set_ht = NULL;
    c->set_ht_cap = 0;
}

/* The id of the root's initial set (interned on first use), or -1 after
 * failing the constraint. */
static int32_t start_set(zl_gconstraint *c) {
    if (c->oom) return -1;
    if (c->start >= 0) return c->start;
    gm_start(c->g, &c->a, &c->tmp);
    if (c->a.oom) {
        fail(c, c->a.over ? ZL_ERANGE : ZL_ENOMEM);
        return -1;
    }
    c->start = set_intern(c, &c->tmp);
    if (c->start < 0) fail(c, ZL_ENOMEM);
    return c->start;
}

/* Bound the tables: past the limits, keep only the current state. */
static int rebase(zl_gconstraint *c) {
    if (c->n_set < GC_MAX_SETS && c->a.n < GC_MAX_FRAMES) return 0;
    garena old = c->a;
    memset(&c->a, 0, sizeof c->a);
    gstackset s = {0};
    const gcset *e = &c->set[c->cur];
    s.s = malloc((size_t)(e->n ? e->n : 1) * sizeof *s.s);
    if (!s.s) {
        c->a = old;
        return -1;
    }
    memcpy(s.s, c->pool + e->off, (size_t)e->n * sizeof *s.s);
    s.n = s.cap = e->n;
    free(old.ht);
    old.ht = NULL;
    int rc = gm_compact(&old, &c->a, &s);
    gm_arena_free(&old);
    garena keep = c->a;
    memset(&c->a, 0, sizeof c->a);
    tables_free(c);
    c->a = keep;
    if (!rc) c->cur = set_intern(c, &s);
    free(s.s);
    return rc || c->cur < 0 ? -1 : 0;
}

int zl_gconstraint_new(zl_gconstraint **out, const zl_grammar *g, const zl_gvocab *v, const char *lazy_trigger,
                       zl_err *err) {
    *out = NULL;
    zl_gconstraint *c = calloc(1, sizeof *c);
    if (!c) return zl_errf(err, ZL_ENOMEM, "out of memory");
    c->g = g;
    c->v = v;
    c->start = -1;
    c->nwords = (v->n_tokens + 63) / 64;
    c->lv = calloc((size_t)v->max_depth + 1, sizeof *c->lv);
    int bad = !c->lv;
    if (!bad && lazy_trigger && *lazy_trigger) {
        c->trig_len = strlen(lazy_trigger);
        c->trigger = strdup(lazy_trigger);
        bad = !c->trigger;
    } else {
        c->active = 1;
    }
    if (bad) {
        zl_gconstraint_free(c);
        return zl_errf(err, ZL_ENOMEM, "out of memory");
    }
    if (c->active && (c->cur = start_set(c)) < 0) {
        int code = c->err;
        zl_gconstraint_free(c);
        return code == ZL_ERANGE ? zl_errf(err, code, "grammar: %s", GM_WORK_MSG) : zl_errf(err, code, "out of memory");
    }
    *out = c;
    return 0;
}

void zl_gconstraint_free(zl_gconstraint *c) {
    if (!c) return;
    tables_free(c);
    free(c->set);
    free(c->pool);
    gm_arena_free(&c->a);
    free(c->tmp.s);
    free(c->lv);
    free(c->trigger);
    free(c->window);
    free(c);
}

/* One pass over the trie from set sid: bits of the tokens whose whole bytes
 * keep at least one stack alive. */
static int32_t walk(zl_gconstraint *c, int32_t sid, uint64_t *mask) {
    const zl_gvocab *v = c->v;
    memset(mask, 0, (size_t)c->nwords * sizeof *mask);
    c->lv[0] = sid;
    c->walk_work = 0;
    int32_t allowed = 0;
    for (int32_t i = 0; i < v->n_nodes;) {
        int d = v->depth[i];
        int32_t nx = trans(c, c->lv[d - 1], v->byte[i]);
        if (!c->oom && c->walk_work > GC_MAX_WALK_WORK) {
            fail(c, ZL_ERANGE);
            c->walk_over = 1;
        }
        if (c->oom) return -1;
        if (nx < 0) {
            i = v->skip[i];
            continue;
        }
        c->lv[d] = nx;
        for (int32_t t = 0; t < v->tok_n[i]; t++) {
            int32_t id = v->tok[v->tok_off[i] + t];
            mask[id >> 6] |= 1ull << (id & 63);
            allowed++;
        }
        i++;
    }
    if (c->set[sid].accepting)
        for (int k = 0; k < v->n_eog; k++) {
            int32_t id = v->eog[k];
            if (!((mask[id >> 6] >> (id & 63)) & 1)) allowed++;
            mask[id >> 6] |= 1ull << (id & 63);
        }
    return allowed;
}

const uint64_t *zl_gconstraint_mask(zl_gconstraint *c, int32_t *n_allowed) {
    if (c->oom) {
        if (n_allowed) *n_allowed = 0;
        return NULL;
    }
    if (!c->active) {
        if (n_allowed) *n_allowed = c->v->n_tokens;
        return NULL;
    }
    gcset *e = &c->set[c->cur];
    if (e->mask) {
        c->hits++;
        if (n_allowed) *n_allowed = e->n_allowed;
        return e->mask;
    }
    if (c->n_masks >= GC_MAX_MASKS) {
        for (int32_t id = 0; id < c->n_set; id++) {
            free(c->set[id].mask);
            c->set[id].mask = NULL;
        }
        c->n_masks = 0;
    }
    uint64_t *mask = malloc((size_t)c->nwords * sizeof *mask);
    if (!mask) {
        fail(c, ZL_ENOMEM);
        if (n_allowed) *n_allowed = 0;
        return NULL;
    }
    int32_t n = walk(c, c->cur, mask);
    if (n < 0) {
        free(mask);
        if (n_allowed) *n_allowed = 0;
        return NULL;
    }
    c->walks++;
    e = &c->set[c->cur];
    e->mask = mask;
    e->n_allowed = n;
    c->n_masks++;
    if (n_allowed) *n_allowed = n;
    return mask;
}

int32_t zl_gconstraint_apply(zl_gconstraint *c, float *logits) {
    int32_t n = 0;
    const uint64_t *m = zl_gconstraint_mask(c, &n);
    if (!m) return c->active || c->oom ? 0 : c->v->n_tokens;
    for (int32_t w = 0; w < c->nwords; w++) {
        uint64_t bits = m[w];
        if (bits == ~0ull) continue;
        int32_t lo = w * 64, hi = lo + 64 < c->v->n_tokens ? lo + 64 : c->v->n_tokens;
        for (int32_t id = lo; id < hi; id++)
            if (!((bits >> (id - lo)) & 1)) logits[id] = -INFINITY;
    }
    return n;
}

/* The set after bytes p[0..n) from the current one, or GC_DEAD. */
static int32_t run_bytes(zl_gconstraint *c, const uint8_t *p, size_t n) {
    int32_t sid = c->cur;
    for (size_t i = 0; i < n && sid >= 0; i++) sid = trans(c, sid, p[i]);
    return sid;
}

static int window_push(zl_gconstraint *c, const char *p, size_t n) {
    if (!n) return 0; /* a token without bytes (the window may not exist yet) */
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

/* Where the grammar of a lazy constraint not yet active would start if
 * piece p[0..n) came next: the window (the bytes that may begin the
 * trigger) is extended by the piece and searched.  Returns 1 with
 * *after = the offset in the window just past the first trigger, 0 when
 * there is none, -1 out of memory.  The piece stays in the window. */
static int trigger_find(zl_gconstraint *c, const uint8_t *p, size_t n, size_t *after) {
    if (window_push(c, (const char *)p, n)) return -1;
    for (size_t i = 0; i + c->trig_len <= c->win_len; i++)
        if (!memcmp(c->window + i, c->trigger, c->trig_len)) {
            *after = i + c->trig_len;
            return 1;
        }
    return 0;
}

/* What the constraint does with piece p[0..n): the set it leads to
 * (GC_DEAD: refused), and for a lazy one not yet active whether the piece
 * triggers it (*starts).  The same function decides check and accept, so
 * the two never disagree.  Changes only caches (the window keeps its
 * length). */
static int32_t next_set(zl_gconstraint *c, const uint8_t *p, size_t n, int *starts, size_t *after) {
    *starts = 0;
    if (c->active) return n ? run_bytes(c, p, n) : GC_DEAD;
    size_t wl = c->win_len;
    int found = trigger_find(c, p, n, after);
    int32_t sid = c->cur;
    if (found < 0) fail(c, ZL_ENOMEM);
    if (found > 0) {
        *starts = 1;
        int32_t st = start_set(c);
        const uint8_t *w = (const uint8_t *)c->window;
        sid = GC_DEAD;
        if (st >= 0) {
            sid = st;
            for (size_t i = *after; i < c->win_len && sid >= 0; i++) sid = trans(c, sid, w[i]);
        }
    }
    c->win_len = wl;
    return found < 0 ? GC_DEAD : sid;
}

/* Move to set sid (bounding the tables); a lazy grammar that has nothing
 * left to match goes back to watching for its trigger. */
static int enter(zl_gconstraint *c, int32_t sid) {
    c->cur = sid;
    if (rebase(c)) {
        fail(c, ZL_ENOMEM);
        return ZL_ENOMEM;
    }
    const gcset *e = &c->set[c->cur];
    if (c->trigger && e->n == 1 && c->pool[e->off] == GSTACK_ACCEPT) {
        c->active = 0;
        c->win_len = 0;
    }
    return 0;
}

int zl_gconstraint_check(zl_gconstraint *c, int32_t token) {
    const zl_gvocab *v = c->v;
    if (token < 0 || token >= v->n_tokens || c->oom) return 0;
    if (c->active && v->is_eog[token]) return c->set[c->cur].accepting;
    int starts;
    size_t after;
    const uint8_t *p = v->bytes + v->boff[token];
    size_t n = v->boff[token + 1] - v->boff[token];
    int32_t sid = next_set(c, p, n, &starts, &after);
    return !c->oom && (sid >= 0 || (!c->active && !starts));
}

int zl_gconstraint_accept(zl_gconstraint *c, int32_t token) {
    const zl_gvocab *v = c->v;
    if (token < 0 || token >= v->n_tokens) return ZL_EINVAL;
    if (c->oom) return c->err;
    if (c->active && v->is_eog[token]) return c->set[c->cur].accepting ? 0 : ZL_EINVAL;
    int starts;
    size_t after;
    const uint8_t *p = v->bytes + v->boff[token];
    size_t n = v->boff[token + 1] - v->boff[token];
    int32_t sid = next_set(c, p, n, &starts, &after);
    if (c->oom) return c->err;
    if (!c->active && !starts) { /* keep what may begin the trigger */
        if (window_push(c, (const char *)p, n)) {
            fail(c, ZL_ENOMEM);
            return ZL_ENOMEM;
        }
        size_t keep = c->trig_len - 1;
        if (c->win_len > keep) {
            memmove(c->window, c->window + c->win_len - keep, keep);
            c->win_len = keep;
        }
        return 0;
    }
    if (sid < 0) return ZL_EINVAL;
    if (!c->active) {
        c->active = 1;
        c->win_len = 0;
    }
    return enter(c, sid);
}

int zl_gconstraint_error(const zl_gconstraint *c, const char **msg) {
    if (!c->oom) return 0;
    if (msg) *msg = c->err != ZL_ERANGE ? "grammar: out of memory" : c->walk_over ? "grammar: " GC_WALK_MSG : "grammar: " GM_WORK_MSG;
    return c->err;
}

int zl_gconstraint_active(const zl_gconstraint *c) { return c->active; }

int zl_gconstraint_accepting(const zl_gconstraint *c) { return c->active && c->set[c->cur].accepting; }

void zl_gconstraint_stats(const zl_gconstraint *c, long *walks, long *hits) {
    if (walks) *walks = c->walks;
    if (hits) *hits = c->hits;
}
