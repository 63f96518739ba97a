/* jinja_value.c — the interpreter's arena, value helpers, python-compatible
 * str()/repr() (including the shortest round-trip float repr) and UTF-8
 * helpers.  Owns no global state and never prints. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_internal.h"

/* ---------------- arena ---------------- */

void *ja_alloc(jarena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (a->cap && a->total + n > a->cap) ja_fail(a, ZL_ERANGE, "template exceeded its memory limit (%zu bytes)", a->cap);
    jchunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > (64u << 10) ? n : (64u << 10);
        c = malloc(sizeof *c + cap);
        if (!c) ja_fail(a, ZL_ENOMEM, "out of memory");
        c->next = a->head;
        c->used = 0;
        c->cap = cap;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += n;
    a->total += n;
    memset(p, 0, n);
    return p;
}

void ja_free(jarena *a) {
    jchunk *c = a->head;
    while (c) {
        jchunk *nx = c->next;
        free(c);
        c = nx;
    }
    a->head = NULL;
    a->total = 0;
}

char *ja_strdup(jarena *a, const char *s, size_t n) {
    char *p = ja_alloc(a, n + 1);
    if (n) memcpy(p, s, n);
    return p;
}

void ja_fail(jarena *a, int code, const char *fmt, ...) {
    if (a->err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(a->err->msg, sizeof a->err->msg, fmt, ap);
        va_end(ap);
        a->err->code = code;
    }
    longjmp(*a->jb, 1);
}

/* ---------------- values ---------------- */

jv jv_cstr(const char *s) { return jv_str(s, strlen(s)); }

jv jv_newlist(jarena *a, size_t cap) {
    jv v = {.t = JT_LIST};
    v.u.l = ja_alloc(a, sizeof *v.u.l);
    if (cap) {
        v.u.l->v = ja_alloc(a, cap * sizeof(jv));
        v.u.l->cap = cap;
    }
    return v;
}

jv jv_newdict(jarena *a, size_t cap) {
    jv v = {.t = JT_DICT};
    v.u.d = ja_alloc(a, sizeof *v.u.d);
    if (cap) {
        v.u.d->k = ja_alloc(a, cap * sizeof(jv));
        v.u.d->v = ja_alloc(a, cap * sizeof(jv));
        v.u.d->cap = cap;
    }
    return v;
}

void jl_push(jarena *a, jlist *l, jv x) {
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 4;
        jv *nv = ja_alloc(a, nc * sizeof(jv));
        if (l->n) memcpy(nv, l->v, l->n * sizeof(jv));
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = x;
}

static int key_eq(jv a, jv b) {
    if (a.t == JT_STR && b.t == JT_STR) return a.u.s.n == b.u.s.n && (!a.u.s.n || !memcmp(a.u.s.p, b.u.s.p, a.u.s.n));
    return jv_equal(a, b);
}

jv *jd_get(const jdict *d, jv k) {
    for (size_t i = 0; i < d->n; i++)
        if (key_eq(d->k[i], k)) return &d->v[i];
    return NULL;
}

jv *jd_gets(const jdict *d, const char *k, size_t n) { return jd_get(d, jv_str(k, n)); }

void jd_set(jarena *a, jdict *d, jv k, jv x) {
    jv *p = jd_get(d, k);
    if (p) { *p = x; return; }
    if (d->n == d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 4;
        jv *nk = ja_alloc(a, nc * sizeof(jv)), *nv = ja_alloc(a, nc * sizeof(jv));
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof(jv));
            memcpy(nv, d->v, d->n * sizeof(jv));
        }
        d->k = nk;
        d->v = nv;
        d->cap = nc;
    }
    d->k[d->n] = k;
    d->v[d->n++] = x;
}

int jv_truthy(jv v) {
    switch (v.t) {
    case JT_UNDEF:
    case JT_NONE: return 0;
    case JT_BOOL:
    case JT_INT: return v.u.i != 0;
    case JT_FLOAT: return v.u.f != 0;
    case JT_STR: return v.u.s.n != 0;
    case JT_LIST: return v.u.l->n != 0;
    case JT_DICT: return v.u.d->n != 0;
    default: return 1;
    }
}

int jv_is_num(jv v) { return v.t == JT_INT || v.t == JT_FLOAT || v.t == JT_BOOL; }
double jv_num(jv v) { return v.t == JT_FLOAT ? v.u.f : (double)v.u.i; }

int jv_equal(jv a, jv b) {
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a.t != JT_FLOAT && b.t != JT_FLOAT) return a.u.i == b.u.i;
        return jv_num(a) == jv_num(b);
    }
    if (a.t != b.t) return 0;
    switch (a.t) {
    case JT_UNDEF:
    case JT_NONE: return 1;
    case JT_STR: return a.u.s.n == b.u.s.n && (!a.u.s.n || !memcmp(a.u.s.p, b.u.s.p, a.u.s.n));
    case JT_LIST:
        if (a.tuple != b.tuple || a.u.l->n != b.u.l->n) return 0;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!jv_equal(a.u.l->v[i], b.u.l->v[i])) return 0;
        return 1;
    case JT_DICT:
        if (a.u.d->n != b.u.d->n) return 0;
        for (size_t i = 0; i < a.u.d->n; i++) {
            jv *o = jd_get(b.u.d, a.u.d->k[i]);
            if (!o || !jv_equal(a.u.d->v[i], *o)) return 0;
        }
        return 1;
    case JT_NS: return a.u.d == b.u.d;
    case JT_MACRO: return a.u.m == b.u.m;
    case JT_FUNC: return a.fn == b.fn;
    case JT_LOOP: return a.u.lp == b.u.lp;
    default: return 0;
    }
}

const char *jv_typename(jv v) {
    switch (v.t) {
    case JT_UNDEF: return "Undefined";
    case JT_NONE: return "NoneType";
    case JT_BOOL: return "bool";
    case JT_INT: return "int";
    case JT_FLOAT: return "float";
    case JT_STR: return "str";
    case JT_LIST: return v.tuple ? "tuple" : "list";
    case JT_DICT: return "dict";
    case JT_NS: return "Namespace";
    case JT_MACRO: return "Macro";
    case JT_FUNC: return "function";
    case JT_METHOD: return "builtin_function_or_method";
    case JT_LOOP: return "LoopContext";
    }
    return "object";
}

/* ---------------- buffers ---------------- */

void jb_init(jbuf *b, jarena *a) { *b = (jbuf){.a = a}; }

void jb_put(jbuf *b, const char *s, size_t n) {
    if (!n) {
        if (!b->p) { /* an empty buffer still has text: "" */
            b->p = ja_alloc(b->a, 16);
            b->cap = 16;
        }
        return;
    }
    if (b->total) {
        if (*b->total + n > b->limit)
            ja_fail(b->a, ZL_ERANGE, "template output exceeded its limit (%zu bytes)", b->limit);
        *b->total += n;
    }
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 64;
        while (nc < b->n + n + 1) nc *= 2;
        char *np = ja_alloc(b->a, nc);
        if (b->n) memcpy(np, b->p, b->n);
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void jb_puts(jbuf *b, const char *s) { jb_put(b, s, strlen(s)); }
void jb_putc(jbuf *b, char c) { jb_put(b, &c, 1); }

void jb_printf(jbuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) jb_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

jv jb_val(jbuf *b) { return b->p ? jv_str(b->p, b->n) : jv_str("", 0); }

/* ---------------- str / repr ---------------- */

void jv_float_into(jbuf *b, double f) {
    if (isnan(f)) { jb_puts(b, "nan"); return; }
    if (isinf(f)) { jb_puts(b, f < 0 ? "-inf" : "inf"); return; }
    char tmp[64];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f) break;
    }
    /* tmp = [-]d[.ddd]e[+-]xx: split into digits and exponent */
    char digits[32];
    int nd = 0, neg = 0;
    const char *p = tmp;
    if (*p == '-') { neg = 1; p++; }
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9') digits[nd++] = *p;
    int ex = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    int decpt = ex + 1;
    if (neg) jb_putc(b, '-');
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            jb_puts(b, "0.");
            for (int i = 0; i < -decpt; i++) jb_putc(b, '0');
            jb_put(b, digits, (size_t)nd);
        } else if (decpt >= nd) {
            jb_put(b, digits, (size_t)nd);
            for (int i = nd; i < decpt; i++) jb_putc(b, '0');
            jb_puts(b, ".0");
        } else {
            jb_put(b, digits, (size_t)decpt);
            jb_putc(b, '.');
            jb_put(b, digits + decpt, (size_t)(nd - decpt));
        }
    } else {
        jb_putc(b, digits[0]);
        if (nd > 1) {
            jb_putc(b, '.');
            jb_put(b, digits + 1, (size_t)(nd - 1));
        }
        jb_printf(b, "e%c%02d", ex < 0 ? '-' : '+', ex < 0 ? -ex : ex);
    }
}

static void repr_str(jbuf *b, const char *s, size_t n) {
    int sq = memchr(s, '\'', n) != NULL, dq = memchr(s, '"', n) != NULL;
    char q = sq && !dq ? '"' : '\'';
    jb_putc(b, q);
    size_t i = 0;
    while (i < n) {
        size_t st = i;
        uint32_t c = ju_next(s, n, &i);
        if (c == (uint32_t)q || c == '\\') { jb_putc(b, '\\'); jb_putc(b, (char)c); }
        else if (c == '\n') jb_puts(b, "\\n");
        else if (c == '\r') jb_puts(b, "\\r");
        else if (c == '\t') jb_puts(b, "\\t");
        else if (c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0)) jb_printf(b, "\\x%02x", c);
        else jb_put(b, s + st, i - st);
    }
    jb_putc(b, q);
}

static void seq_into(jbuf *b, jv v, int depth);

static void repr_d(jbuf *b, jv v, int depth) {
    if (depth > 64) { jb_puts(b, "..."); return; }
    switch (v.t) {
    case JT_STR: repr_str(b, v.u.s.p, v.u.s.n); break;
    case JT_LIST:
    case JT_DICT: seq_into(b, v, depth); break;
    default: jv_str_into(b, v); break;
    }
}

static void seq_into(jbuf *b, jv v, int depth) {
    if (v.t == JT_LIST) {
        jb_putc(b, v.tuple ? '(' : '[');
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) jb_puts(b, ", ");
            repr_d(b, v.u.l->v[i], depth + 1);
        }
        if (v.tuple && v.u.l->n == 1) jb_putc(b, ',');
        jb_putc(b, v.tuple ? ')' : ']');
    } else {
        jb_putc(b, '{');
        for (size_t i = 0; i < v.u.d->n; i++) {
            if (i) jb_puts(b, ", ");
            repr_d(b, v.u.d->k[i], depth + 1);
            jb_puts(b, ": ");
            repr_d(b, v.u.d->v[i], depth + 1);
        }
        jb_putc(b, '}');
    }
}

void jv_repr_into(jbuf *b, jv v) { repr_d(b, v, 0); }

void jv_str_into(jbuf *b, jv v) {
    switch (v.t) {
    case JT_UNDEF: break;
    case JT_NONE: jb_puts(b, "None"); break;
    case JT_BOOL: jb_puts(b, v.u.i ? "True" : "False"); break;
    case JT_INT: jb_printf(b, "%lld", (long long)v.u.i); break;
    case JT_FLOAT: jv_float_into(b, v.u.f); break;
    case JT_STR: jb_put(b, v.u.s.p, v.u.s.n); break;
    case JT_LIST:
    case JT_DICT: seq_into(b, v, 0); break;
    case JT_NS:
        jb_puts(b, "<Namespace ");
        seq_into(b, (jv){.t = JT_DICT, .u.d = v.u.d}, 0);
        jb_puts(b, ">");
        break;
    case JT_MACRO: jb_puts(b, "<Macro>"); break;
    case JT_FUNC: jb_puts(b, "<function>"); break;
    case JT_METHOD: jb_printf(b, "<built-in method %s>", v.name); break;
    case JT_LOOP: jb_puts(b, "<LoopContext>"); break;
    }
}

jv jv_tostr(jarena *a, jv v) {
    if (v.t == JT_STR) return v;
    jbuf b;
    jb_init(&b, a);
    jv_str_into(&b, v);
    return jb_val(&b);
}

/* ---------------- UTF-8 ---------------- */

uint32_t ju_next(const char *p, size_t n, size_t *i) {
    const unsigned char *s = (const unsigned char *)p;
    size_t k = *i;
    unsigned c = s[k];
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || k + (size_t)len > n) { *i = k + 1; return 0xFFFD; }
    uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
    for (int j = 1; j < len; j++) {
        if ((s[k + j] & 0xc0) != 0x80) { *i = k + 1; return 0xFFFD; }
        cp = cp << 6 | (s[k + j] & 0x3f);
    }
    *i = k + (size_t)len;
    return cp;
}

size_t ju_len(const char *p, size_t n) {
    size_t i = 0, c = 0;
    while (i < n) { ju_next(p, n, &i); c++; }
    return c;
}

void ju_put(jbuf *b, uint32_t cp) {
    char t[4];
    if (cp < 0x80) { t[0] = (char)cp; jb_put(b, t, 1); }
    else if (cp < 0x800) { t[0] = (char)(0xc0 | cp >> 6); t[1] = (char)(0x80 | (cp & 0x3f)); jb_put(b, t, 2); }
    else if (cp < 0x10000) {
        t[0] = (char)(0xe0 | cp >> 12); t[1] = (char)(0x80 | ((cp >> 6) & 0x3f)); t[2] = (char)(0x80 | (cp & 0x3f));
        jb_put(b, t, 3);
    } else {
        t[0] = (char)(0xf0 | cp >> 18); t[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        t[2] = (char)(0x80 | ((cp >> 6) & 0x3f)); t[3] = (char)(0x80 | (cp & 0x3f));
        jb_put(b, t, 4);
    }
}

/* python's str.isspace */
int ju_isspace(uint32_t c) {
    return (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

/* Case mapping: ASCII, Latin-1, Latin Extended-A pairs, Greek and Cyrillic basics. */
uint32_t ju_upper(uint32_t c) {
    if (c >= 'a' && c <= 'z') return c - 32;
    if (c < 0x80) return c;
    if ((c >= 0xe0 && c <= 0xfe && c != 0xf7)) return c - 32;
    if (c == 0xff) return 0x178;
    if (c >= 0x100 && c <= 0x17f && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17f) {
        int odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e);
        if (odd_upper) return (c & 1) ? c : c - 1;
        return (c & 1) ? c - 1 : c;
    }
    if (c >= 0x3b1 && c <= 0x3c9 && c != 0x3c2) return c - 32;
    if (c >= 0x430 && c <= 0x44f) return c - 32;
    if (c >= 0x450 && c <= 0x45f) return c - 80;
    return c;
}

uint32_t ju_lower(uint32_t c) {
    if (c >= 'A' && c <= 'Z') return c + 32;
    if (c < 0x80) return c;
    if (c >= 0xc0 && c <= 0xde && c != 0xd7) return c + 32;
    if (c == 0x178) return 0xff;
    if (c >= 0x100 && c <= 0x17f && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17f) {
        int odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e);
        if (odd_upper) return (c & 1) ? c + 1 : c;
        return (c & 1) ? c : c + 1;
    }
    if (c >= 0x391 && c <= 0x3a9 && c != 0x3a2) return c + 32;
    if (c >= 0x410 && c <= 0x42f) return c + 32;
    if (c >= 0x400 && c <= 0x40f) return c + 80;
    return c;
}

int ju_isalpha(uint32_t c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || ju_upper(c) != c || ju_lower(c) != c ||
           (c >= 0x4e00 && c <= 0x9fff) || (c >= 0x3040 && c <= 0x30ff) || (c >= 0xac00 && c <= 0xd7a3);
}

int ju_isdigit(uint32_t c) { return c >= '0' && c <= '9'; }
