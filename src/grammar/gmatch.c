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

static int32_t frame_new(garena *a, int32_t pos, int32_t parent) {
    uint32_t slot = 0;
    if (a->intern) {
        if ((a->n + 1) * 2 > a->ht_cap && ht_grow(a)) {
            a->oom = 1;
            return -2;
        }
        uint32_t m = (uint32_t)(a->ht_cap - 1);
        for (slot = frame_hash(pos, parent) & m; a->ht[slot] >= 0; slot = (slot + 1) & m) {
            const gframe *f = &a->f[a->ht[slot]];
            if (f->pos == pos && f->parent == parent) return a->ht[slot];
        }
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
    if (a->intern) a->ht[slot] = a->n;
    return a->n++;
}

static int stack_eq(const garena *a, int32_t x, int32_t y) {
    while (x != y) {
        if (x < 0 || y < 0) return 0;
        if (a->f[x].pos != a->f[y].pos) return 0;
        x = a->f[x].parent;
        y = a->f[y].parent;
    }
    return 1;
}

int gm_set_add(garena *a, gstackset *out, int32_t st) {
    if (a->intern) {
        for (int32_t k = 0; k < out->n; k++)
            if (out->s[k] == st) return 0;
    } else {
        for (int32_t k = 0; k < out->n; k++)
            if (stack_eq(a, out->s[k], st)) return 0;
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

void gm_expand(const zl_grammar *g, garena *a, int32_t pos, int32_t parent, gstackset *out) {
    while (!a->oom) {
        const gelem *e = &g->el[pos];
        if (e->kind == GE_END) { /* alternative done: continue in the frame below */
            if (parent < 0) {
                gm_set_add(a, out, GSTACK_ACCEPT);
                return;
            }
            if (g->el[a->f[parent].pos].kind == GE_BYTES) {
                gm_set_add(a, out, parent);
                return;
            }
            pos = a->f[parent].pos;
            parent = a->f[parent].parent;
            continue;
        }
        if (e->kind == GE_BYTES) {
            int32_t f = frame_new(a, pos, parent);
            if (f >= 0) gm_set_add(a, out, f);
            return;
        }
        /* a reference: its continuation (unless in tail position), then each alternative */
        int32_t cont = parent;
        if (g->el[pos + 1].kind != GE_END) {
            cont = frame_new(a, pos + 1, parent);
            if (cont < -1) return;
        }
        int32_t r = e->arg;
        for (int32_t k = 0; k < g->rule_nalt[r]; k++) gm_expand(g, a, g->alt_start[g->rule_alt0[r] + k], cont, out);
        return;
    }
}

void gm_advance(const zl_grammar *g, garena *a, const gstackset *in, unsigned char c, gstackset *out) {
    out->n = 0;
    for (int32_t k = 0; k < in->n; k++) {
        int32_t st = in->s[k];
        if (st < 0) continue;
        gframe f = a->f[st];
        if (!gset_has(&g->sets[g->el[f.pos].arg], c)) continue;
        gm_expand(g, a, f.pos + 1, f.parent, out);
    }
}

void gm_start(const zl_grammar *g, garena *a, gstackset *out) {
    out->n = 0;
    int32_t r = g->root;
    for (int32_t k = 0; k < g->rule_nalt[r]; k++) gm_expand(g, a, g->alt_start[g->rule_alt0[r] + k], -1, out);
}

int gm_set_accepting(const gstackset *s) {
    for (int32_t k = 0; k < s->n; k++)
        if (s->s[k] == GSTACK_ACCEPT) return 1;
    return 0;
}

/* Frames are copied bottom-up through a remap table over src. */
static int32_t copy_frame(const garena *src, garena *dst, int32_t *map, int32_t x) {
    if (x < 0) return x;
    if (map[x] != -3) return map[x];
    int32_t p = copy_frame(src, dst, map, src->f[x].parent);
    if (p < -1) return p;
    int32_t y = frame_new(dst, src->f[x].pos, p);
    map[x] = y;
    return y;
}

int gm_compact(const garena *src, garena *dst, gstackset *set) {
    dst->n = 0;
    int32_t *map = malloc((size_t)(src->n ? src->n : 1) * sizeof *map);
    if (!map) return -1;
    for (int32_t k = 0; k < src->n; k++) map[k] = -3;
    int rc = 0;
    for (int32_t k = 0; k < set->n && !rc; k++) {
        int32_t y = copy_frame(src, dst, map, set->s[k]);
        if (y < -1) rc = -1;
        set->s[k] = y;
    }
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
    m->a.n = 0;
    gm_start(m->g, &m->a, &m->cur);
}

int zl_gmatch_new(zl_gmatch **out, const zl_grammar *g, zl_err *err) {
    *out = NULL;
    zl_gmatch *m = calloc(1, sizeof *m);
    if (!m) return zl_errf(err, ZL_ENOMEM, "out of memory");
    m->g = g;
    zl_gmatch_reset(m);
    if (m->a.oom) {
        zl_gmatch_free(m);
        return zl_errf(err, ZL_ENOMEM, "out of memory");
    }
    *out = m;
    return 0;
}

void zl_gmatch_free(zl_gmatch *m) {
    if (!m) return;
    free(m->a.f);
    free(m->spare.f);
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
        if (m->a.oom) rc = ZL_ENOMEM;
        else if (!m->cur.n) rc = ZL_EINVAL;
    }
    if (rc) { /* restore */
        m->a.n = mark;
        m->a.oom = 0;
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

int zl_gmatch_accepting(const zl_gmatch *m) { return gm_set_accepting(&m->cur); }

int zl_gmatch_done(const zl_gmatch *m) { return m->cur.n == 1 && m->cur.s[0] == GSTACK_ACCEPT; }
