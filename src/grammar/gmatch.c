/* gmatch.c — the pushdown matcher: sets of stacks over the compiled grammar,
 * advanced one byte at a time.
 *
 * Owns stack expansion (a rule reference becomes one stack per
 * alternative; an ended alternative pops), the frame arena with its
 * compaction, and zl_gmatch (a state fed bytes).  Stacks share their lower
 * frames; a set never holds two equal stacks.  Never knows tokens. */
#include <stdlib.h>
#include <string.h>

#include "grammar_internal.h"

static uint32_t frame_hash(int32_t pos, int32_t parent) {
    uint64_t h = ((uint64_t)(uint32_t)pos << 32 | (uint32_t)parent) * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 32);
}

static int ht_grow(garena *a) {
    int32_t nc = a->ht_cap ? a->ht_cap * 2 : 1024;
    int32_t *t = malloc((size_t)nc * sizeof *t);
    if (!t) return -1;
    for (int32_t k = 0; k < nc; k++) t[k] = -1;
    for (int32_t i = 0; i < a->n; i++) {
        uint32_t h = frame_hash(a->f[i].pos, a->f[i].parent) & (uint32_t)(nc - 1);
        while (t[h] >= 0) h = (h + 1) & (uint32_t)(nc - 1);
        t[h] = i;
    }
    free(a->ht);
    a->ht = t;
    a->ht_cap = nc;
    return 0;
}

/* Keep frames [0, n) and their interning table (n <= a->n).  A table far
 * larger than n needs is shrunk first, so a cut costs what it keeps. */
static void arena_cut(garena *a, int32_t n) {
    a->n = n;
    if (!a->ht) return;
    int32_t want = 1024;
    while (want < (n + 1) * 2) want *= 2;
    if (a->ht_cap > 4 * want) {
        int32_t *t = malloc((size_t)want * sizeof *t);
        if (t) {
            free(a->ht);
            a->ht = t;
            a->ht_cap = want;
        }
    }
    for (int32_t k = 0; k < a->ht_cap; k++) a->ht[k] = -1;
    uint32_t m = (uint32_t)(a->ht_cap - 1);
    for (int32_t i = 0; i < n; i++) {
        uint32_t h = frame_hash(a->f[i].pos, a->f[i].parent) & m;
        while (a->ht[h] >= 0) h = (h + 1) & m;
        a->ht[h] = i;
    }
}

static int32_t frame_new(garena *a, int32_t pos, int32_t parent) {
    uint32_t slot = 0;
    if ((a->n + 1) * 2 > a->ht_cap && ht_grow(a)) {
        a->oom = 1;
        return -2;
    }
    uint32_t m = (uint32_t)(a->ht_cap - 1);
    for (slot = frame_hash(pos, parent) & m; a->ht[slot] >= 0; slot = (slot + 1) & m) {
        const gframe *f = &a->f[a->ht[slot]];
        if (f->pos == pos && f->parent == parent) return a->ht[slot];
    }
    if (a->n == a->cap) {
        int32_t nc = a->cap ? a->cap * 2 : 256;
        gframe *t = realloc(a->f, (size_t)nc * sizeof *t);
        if (!t) {
            a->oom = 1;
            return -2;
        }
        a->f = t;
        a->cap = nc;
    }
    a->f[a->n].pos = pos;
    a->f[a->n].parent = parent;
    a->ht[slot] = a->n;
    return a->n++;
}

int gm_set_add(garena *a, gstackset *out, int32_t st) {
    /* interned: equal stacks are equal indices, and out is the set of this epoch */
    if (st == GSTACK_ACCEPT) {
        if (a->accept_seen == a->epoch) return 0;
        a->accept_seen = a->epoch;
    } else {
        if (st >= a->seen_cap) {
            int32_t nc = a->cap > st ? a->cap : st + 1;
            uint32_t *t = realloc(a->seen, (size_t)nc * sizeof *t);
            if (!t) {
                a->oom = 1;
                return -1;
            }
            memset(t + a->seen_cap, 0, (size_t)(nc - a->seen_cap) * sizeof *t);
            a->seen = t;
            a->seen_cap = nc;
        }
        if (a->seen[st] == a->epoch) return 0;
        a->seen[st] = a->epoch;
    }
    if (out->n == out->cap) {
        int32_t nc = out->cap ? out->cap * 2 : 16;
        int32_t *t = realloc(out->s, (size_t)nc * sizeof *t);
        if (!t) {
            a->oom = 1;
            return -1;
        }
        out->s = t;
        out->cap = nc;
    }
    out->s[out->n++] = st;
    return 0;
}

/* A new set in out: a new epoch of seen[] and of the visited table (both
 * cleared when it wraps). */
static void gm_set_begin(garena *a, gstackset *out) {
    out->n = 0;
    a->work = 0;
    if (++a->epoch == 0) {
        if (a->seen) memset(a->seen, 0, (size_t)a->seen_cap * sizeof *a->seen);
        if (a->vep) memset(a->vep, 0, (size_t)a->v_cap * sizeof *a->vep);
        a->accept_seen = 0;
        a->epoch = 1;
    }
}

static uint32_t visit_hash(uint64_t key) { return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 32); }

/* Whether rule r was already expanded on frame `below` in the set being
 * built; marks it when not.  Expanding (r, below) again would add the same
 * frames and stacks (both are interned), so it is skipped.  -1: out of memory. */
static int visited(garena *a, int32_t r, int32_t below) {
    if (a->v_epoch != a->epoch) a->v_epoch = a->epoch, a->v_n = 0;
    if ((a->v_n + 1) * 2 > a->v_cap) {
        int32_t nc = a->v_cap ? a->v_cap * 2 : 256;
        uint64_t *k = malloc((size_t)nc * sizeof *k);
        uint32_t *e = calloc((size_t)nc, sizeof *e);
        if (!k || !e) {
            free(k);
            free(e);
            a->oom = 1;
            return -1;
        }
        for (int32_t i = 0; i < a->v_cap; i++) {
            if (a->vep[i] != a->epoch) continue;
            uint32_t h = visit_hash(a->vkey[i]) & (uint32_t)(nc - 1);
            while (e[h] == a->epoch) h = (h + 1) & (uint32_t)(nc - 1);
            k[h] = a->vkey[i];
            e[h] = a->epoch;
        }
        free(a->vkey);
        free(a->vep);
        a->vkey = k;
        a->vep = e;
        a->v_cap = nc;
    }
    uint64_t key = (uint64_t)(uint32_t)r << 32 | (uint32_t)below;
    uint32_t m = (uint32_t)(a->v_cap - 1), h;
    for (h = visit_hash(key) & m; a->vep[h] == a->epoch; h = (h + 1) & m)
        if (a->vkey[h] == key) return 1;
    a->vkey[h] = key;
    a->vep[h] = a->epoch;
    a->v_n++;
    return 0;
}

void gm_arena_free(garena *a) {
    free(a->f);
    free(a->ht);
    free(a->seen);
    free(a->todo);
    free(a->vkey);
    free(a->vep);
    memset(a, 0, sizeof *a);
}

/* Expansion keeps its pending (position, frame below) pairs on a stack of
 * the arena, not the C stack: a chain of 100,000 rules is as deep. */
static int todo_push(garena *a, int32_t pos, int32_t parent) {
    if (a->todo_n + 2 > a->todo_cap) {
        int32_t nc = a->todo_cap ? a->todo_cap * 2 : 256;
        int32_t *t = realloc(a->todo, (size_t)nc * sizeof *t);
        if (!t) {
            a->oom = 1;
            return -1;
        }
        a->todo = t;
        a->todo_cap = nc;
    }
    a->todo[a->todo_n++] = pos;
    a->todo[a->todo_n++] = parent;
    return 0;
}

void gm_expand(const zl_grammar *g, garena *a, int32_t pos, int32_t parent, gstackset *out) {
    a->todo_n = 0;
    if (todo_push(a, pos, parent)) return;
    while (a->todo_n && !a->oom) {
        parent = a->todo[--a->todo_n];
        pos = a->todo[--a->todo_n];
        while (!a->oom) {
            if (++a->work > GM_MAX_WORK) {
                a->oom = a->over = 1;
                return;
            }
            const gelem *e = &g->el[pos];
            if (e->kind == GE_END) { /* alternative done: continue in the frame below */
                if (parent < 0) {
                    gm_set_add(a, out, GSTACK_ACCEPT);
                    break;
                }
                if (g->el[a->f[parent].pos].kind == GE_BYTES) {
                    gm_set_add(a, out, parent);
                    break;
                }
                pos = a->f[parent].pos;
                parent = a->f[parent].parent;
                continue;
            }
            if (e->kind == GE_BYTES) {
                int32_t f = frame_new(a, pos, parent);
                if (f >= 0) gm_set_add(a, out, f);
                break;
            }
            /* a reference: its continuation (unless in tail position), then each alternative, first on top */
            int32_t cont = parent;
            if (g->el[pos + 1].kind != GE_END) {
                cont = frame_new(a, pos + 1, parent);
                if (cont < -1) return;
            }
            int32_t r = e->arg;
            /* paths multiply only at a choice: a rule of one alternative is not worth the lookup */
            if (g->rule_nalt[r] > 1 && visited(a, r, cont)) break; /* done on this frame (or oom is set) */
            for (int32_t k = g->rule_nalt[r] - 1; k >= 0; k--)
                if (todo_push(a, g->alt_start[g->rule_alt0[r] + k], cont)) return;
            break;
        }
    }
}

void gm_advance(const zl_grammar *g, garena *a, const gstackset *in, unsigned char c, gstackset *out) {
    gm_set_begin(a, out);
    for (int32_t k = 0; k < in->n && !a->oom; k++) {
        int32_t st = in->s[k];
        if (st < 0) continue;
        gframe f = a->f[st];
        if (!gset_has(&g->sets[g->el[f.pos].arg], c)) continue;
        gm_expand(g, a, f.pos + 1, f.parent, out);
    }
}

void gm_start(const zl_grammar *g, garena *a, gstackset *out) {
    gm_set_begin(a, out);
    int32_t r = g->root;
    for (int32_t k = 0; k < g->rule_nalt[r]; k++) gm_expand(g, a, g->alt_start[g->rule_alt0[r] + k], -1, out);
}

int gm_set_accepting(const gstackset *s) {
    for (int32_t k = 0; k < s->n; k++)
        if (s->s[k] == GSTACK_ACCEPT) return 1;
    return 0;
}

/* A frame's parent always has a smaller index (frames are only appended,
 * each after the frame below it), so the frames the set uses are marked
 * walking down from its tops, then copied in index order: a parent is
 * mapped before its children, without recursion. */
int gm_compact(const garena *src, garena *dst, gstackset *set) {
    arena_cut(dst, 0);
    int32_t *map = malloc((size_t)(src->n ? src->n : 1) * sizeof *map);
    if (!map) return -1;
    for (int32_t k = 0; k < src->n; k++) map[k] = -3; /* -3: unused, -2: used */
    for (int32_t k = 0; k < set->n; k++)
        for (int32_t x = set->s[k]; x >= 0 && map[x] == -3; x = src->f[x].parent) map[x] = -2;
    int rc = 0;
    for (int32_t x = 0; x < src->n && !rc; x++) {
        if (map[x] != -2) continue;
        int32_t p = src->f[x].parent;
        map[x] = frame_new(dst, src->f[x].pos, p < 0 ? p : map[p]);
        if (map[x] < -1) rc = -1;
    }
    for (int32_t k = 0; k < set->n && !rc; k++)
        if (set->s[k] >= 0) set->s[k] = map[set->s[k]];
    free(map);
    return rc || dst->oom ? -1 : 0;
}

/* ---- zl_gmatch ---- */

struct zl_gmatch {
    const zl_grammar *g;
    garena a, spare;
    gstackset cur, next;
};

void zl_gmatch_reset(zl_gmatch *m) {
    arena_cut(&m->a, 0);
    gm_start(m->g, &m->a, &m->cur);
}

int zl_gmatch_new(zl_gmatch **out, const zl_grammar *g, zl_err *err) {
    *out = NULL;
    zl_gmatch *m = calloc(1, sizeof *m);
    if (!m) return zl_errf(err, ZL_ENOMEM, "out of memory");
    m->g = g;
    zl_gmatch_reset(m);
    if (m->a.oom) {
        int over = m->a.over;
        zl_gmatch_free(m);
        return over ? zl_errf(err, ZL_ERANGE, "grammar: %s", GM_WORK_MSG) : zl_errf(err, ZL_ENOMEM, "out of memory");
    }
    *out = m;
    return 0;
}

void zl_gmatch_free(zl_gmatch *m) {
    if (!m) return;
    gm_arena_free(&m->a);
    gm_arena_free(&m->spare);
    free(m->cur.s);
    free(m->next.s);
    free(m);
}

int zl_gmatch_feed(zl_gmatch *m, const char *s, size_t n) {
    int32_t mark = m->a.n;
    gstackset keep = {0};
    if (m->cur.n) {
        keep.s = malloc((size_t)m->cur.n * sizeof *keep.s);
        if (!keep.s) return ZL_ENOMEM;
        memcpy(keep.s, m->cur.s, (size_t)m->cur.n * sizeof *keep.s);
        keep.n = keep.cap = m->cur.n;
    }
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        gm_advance(m->g, &m->a, &m->cur, (unsigned char)s[i], &m->next);
        gstackset t = m->cur;
        m->cur = m->next;
        m->next = t;
        if (m->a.oom) rc = m->a.over ? ZL_ERANGE : ZL_ENOMEM;
        else if (!m->cur.n) rc = ZL_EINVAL;
    }
    if (rc) { /* restore */
        arena_cut(&m->a, mark);
        m->a.oom = m->a.over = 0;
        free(m->cur.s);
        m->cur = keep;
        return rc;
    }
    free(keep.s);
    if (gm_compact(&m->a, &m->spare, &m->cur)) return ZL_ENOMEM;
    garena t = m->a;
    m->a = m->spare;
    m->spare = t;
    return 0;
}

int zl_gmatch_copy(zl_gmatch *dst, const zl_gmatch *src) {
    if (dst->g != src->g) return ZL_EINVAL;
    garena *a = &dst->a;
    const garena *s = &src->a;
    if (a->cap < s->n) {
        gframe *t = realloc(a->f, (size_t)s->n * sizeof *t);
        if (!t) return ZL_ENOMEM;
        a->f = t;
        a->cap = s->n;
    }
    while ((s->n + 1) * 2 > a->ht_cap)
        if (ht_grow(a)) return ZL_ENOMEM;
    if (dst->cur.cap < src->cur.n) {
        int32_t *t = realloc(dst->cur.s, (size_t)src->cur.n * sizeof *t);
        if (!t) return ZL_ENOMEM;
        dst->cur.s = t;
        dst->cur.cap = src->cur.n;
    }
    if (s->n) memcpy(a->f, s->f, (size_t)s->n * sizeof *a->f);
    arena_cut(a, s->n); /* rebuilds the interning table over the copied frames */
    a->oom = a->over = 0;
    if (src->cur.n) memcpy(dst->cur.s, src->cur.s, (size_t)src->cur.n * sizeof *dst->cur.s);
    dst->cur.n = src->cur.n;
    return 0;
}

int zl_gmatch_accepting(const zl_gmatch *m) { return gm_set_accepting(&m->cur); }

int zl_gmatch_done(const zl_gmatch *m) { return m->cur.n == 1 && m->cur.s[0] == GSTACK_ACCEPT; }
