/* gbnf.c — grammar text to the compiled grammar (syntax: grammar.h).
 *
 * Owns the recursive-descent parser, the lowering of character classes to
 * UTF-8 byte sequences and of repetition to helper rules, and the checks
 * that make matching terminate (no left recursion, every rule can finish).
 * Never matches text itself. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_internal.h"

#define GBNF_MAX_DEPTH 64
#define GBNF_MAX_REPEAT 10000
#define GBNF_MAX_RULES 100000
#define GBNF_MAX_ELEMENTS (1 << 22) /* items of all alternatives together (repetition multiplies them) */

typedef struct pseq {
    gelem *it;
    int n, cap;
} pseq;

typedef struct prule {
    char *name;
    int defined;
    size_t first_ref; /* byte offset of the first reference (for "undefined" errors) */
    pseq *alts;
    int nalt, capalt;
} prule;

typedef struct gp {
    const char *s;
    size_t n, i;
    prule *r;
    int nr, capr;
    gset *sets;
    int nsets, capsets;
    int32_t *rule_ht, *set_ht; /* open addressing: rule ids by name, set ids by bits (-1 empty) */
    int rule_ht_cap, set_ht_cap;
    long n_el;
    int anon;
    zl_err *err;
    int failed;
} gp;

static void where(const gp *P, size_t at, int *line, int *col) {
    int l = 1, c = 1;
    for (size_t k = 0; k < at && k < P->n; k++) {
        if (P->s[k] == '\n') {
            l++;
            c = 1;
        } else {
            c++;
        }
    }
    *line = l;
    *col = c;
}

static int failat(gp *P, size_t at, const char *what) {
    if (P->failed) return -1;
    int l, c;
    where(P, at, &l, &c);
    zl_errf(P->err, ZL_EINVAL, "grammar: line %d column %d: %s", l, c, what);
    P->failed = 1;
    return -1;
}

static int oom(gp *P) {
    if (!P->failed) zl_errf(P->err, ZL_ENOMEM, "grammar: out of memory");
    P->failed = 1;
    return -1;
}

static int seq_push(gp *P, pseq *q, int32_t kind, int32_t arg) {
    if (++P->n_el > GBNF_MAX_ELEMENTS) return failat(P, P->i, "grammar too large (over 4194304 items once repetition is expanded)");
    if (q->n == q->cap) {
        int nc = q->cap ? q->cap * 2 : 8;
        gelem *t = realloc(q->it, (size_t)nc * sizeof *t);
        if (!t) return oom(P);
        q->it = t;
        q->cap = nc;
    }
    q->it[q->n].kind = kind;
    q->it[q->n].arg = arg;
    q->n++;
    return 0;
}

static uint32_t hash_bytes(const void *p, size_t n) {
    const unsigned char *b = p;
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t k = 0; k < n; k++) h = (h ^ b[k]) * 16777619u;
    return h;
}

/* Grow an id table to twice its size (ids re-hashed by key(ud, id)). */
static int ht_grow(gp *P, int32_t **ht, int *cap, int n, uint32_t (*key)(const gp *, int)) {
    int nc = *cap ? *cap * 2 : 256;
    int32_t *t = malloc((size_t)nc * sizeof *t);
    if (!t) return oom(P);
    for (int k = 0; k < nc; k++) t[k] = -1;
    for (int id = 0; id < n; id++) {
        uint32_t h = key(P, id) & (uint32_t)(nc - 1);
        while (t[h] >= 0) h = (h + 1) & (uint32_t)(nc - 1);
        t[h] = id;
    }
    free(*ht);
    *ht = t;
    *cap = nc;
    return 0;
}

static uint32_t set_key(const gp *P, int id) { return hash_bytes(&P->sets[id], sizeof P->sets[id]); }
static uint32_t rule_key(const gp *P, int id) { return hash_bytes(P->r[id].name, strlen(P->r[id].name)); }

static int set_intern(gp *P, const gset *s) {
    if ((P->nsets + 1) * 2 > P->set_ht_cap && ht_grow(P, &P->set_ht, &P->set_ht_cap, P->nsets, set_key)) return -1;
    uint32_t m = (uint32_t)(P->set_ht_cap - 1), h = hash_bytes(s, sizeof *s) & m;
    for (; P->set_ht[h] >= 0; h = (h + 1) & m)
        if (!memcmp(&P->sets[P->set_ht[h]], s, sizeof *s)) return P->set_ht[h];
    if (P->nsets == P->capsets) {
        int nc = P->capsets ? P->capsets * 2 : 64;
        gset *t = realloc(P->sets, (size_t)nc * sizeof *t);
        if (!t) return oom(P);
        P->sets = t;
        P->capsets = nc;
    }
    P->sets[P->nsets] = *s;
    P->set_ht[h] = P->nsets;
    return P->nsets++;
}

static int rule_add(gp *P, const char *name, size_t len) {
    if (P->nr >= GBNF_MAX_RULES) return failat(P, P->i, "too many rules");
    if ((P->nr + 1) * 2 > P->rule_ht_cap && ht_grow(P, &P->rule_ht, &P->rule_ht_cap, P->nr, rule_key)) return -1;
    if (P->nr == P->capr) {
        int nc = P->capr ? P->capr * 2 : 32;
        prule *t = realloc(P->r, (size_t)nc * sizeof *t);
        if (!t) return oom(P);
        P->r = t;
        P->capr = nc;
    }
    prule *r = &P->r[P->nr];
    memset(r, 0, sizeof *r);
    r->name = malloc(len + 1);
    if (!r->name) return oom(P);
    memcpy(r->name, name, len);
    r->name[len] = 0;
    r->first_ref = P->i;
    uint32_t m = (uint32_t)(P->rule_ht_cap - 1), h = hash_bytes(name, len) & m;
    while (P->rule_ht[h] >= 0) h = (h + 1) & m;
    P->rule_ht[h] = P->nr;
    return P->nr++;
}

static int rule_find(gp *P, const char *name, size_t len) {
    if (!P->rule_ht_cap) return -1;
    uint32_t m = (uint32_t)(P->rule_ht_cap - 1), h = hash_bytes(name, len) & m;
    for (; P->rule_ht[h] >= 0; h = (h + 1) & m) {
        const char *nm = P->r[P->rule_ht[h]].name;
        if (strlen(nm) == len && !memcmp(nm, name, len)) return P->rule_ht[h];
    }
    return -1;
}

/* A helper rule named after the rule being defined ("value-3"). */
static int rule_anon(gp *P, int parent) {
    char nm[160];
    snprintf(nm, sizeof nm, "%.120s-%d", parent >= 0 ? P->r[parent].name : "anon", ++P->anon);
    int id = rule_add(P, nm, strlen(nm));
    if (id >= 0) P->r[id].defined = 1;
    return id;
}

static pseq *rule_new_alt(gp *P, int rule) {
    prule *r = &P->r[rule];
    if (r->nalt == r->capalt) {
        int nc = r->capalt ? r->capalt * 2 : 4;
        pseq *t = realloc(r->alts, (size_t)nc * sizeof *t);
        if (!t) {
            oom(P);
            return NULL;
        }
        r->alts = t;
        r->capalt = nc;
    }
    pseq *q = &r->alts[r->nalt++];
    memset(q, 0, sizeof *q);
    return q;
}

/* ---- lexing ---- */

static void skip_space(gp *P) {
    while (P->i < P->n) {
        char c = P->s[P->i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            P->i++;
        } else if (c == '#') {
            while (P->i < P->n && P->s[P->i] != '\n') P->i++;
        } else {
            break;
        }
    }
}

static int is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

static size_t name_len_at(const gp *P, size_t at) {
    size_t k = at;
    while (k < P->n && is_name_char(P->s[k])) k++;
    return k - at;
}

/* Whether a rule definition ("name ::=") starts at P->i. */
static int at_definition(const gp *P) {
    size_t len = name_len_at(P, P->i);
    if (!len) return 0;
    size_t k = P->i + len;
    while (k < P->n && (P->s[k] == ' ' || P->s[k] == '\t')) k++;
    return k + 3 <= P->n && !memcmp(P->s + k, "::=", 3);
}

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* One character of a literal or class at P->i (escapes decoded) as a code
 * point; raw bytes of multi-byte UTF-8 are decoded too.  -1 on error. */
static long read_char(gp *P) {
    size_t at = P->i;
    unsigned char c = (unsigned char)P->s[P->i++];
    if (c == '\\') {
        if (P->i >= P->n) return failat(P, at, "escape at the end of the text");
        char e = P->s[P->i++];
        int digits = 0;
        switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '\\': return '\\';
        case '"': return '"';
        case '\'': return '\'';
        case '[': return '[';
        case ']': return ']';
        case '-': return '-';
        case '^': return '^';
        case '/': return '/';
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        default: return failat(P, at, "unknown escape (use \\n \\r \\t \\\\ \\\" \\' \\xHH \\uHHHH \\UHHHHHHHH)");
        }
        long v = 0;
        for (int k = 0; k < digits; k++) {
            int h = P->i < P->n ? hexval(P->s[P->i]) : -1;
            if (h < 0) return failat(P, at, "bad hexadecimal escape");
            v = v * 16 + h;
            P->i++;
        }
        if (v > 0x10FFFF) return failat(P, at, "code point above U+10FFFF");
        return v;
    }
    if (c < 0x80) return c;
    int need = c >= 0xF8 ? -1 : c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : -1;
    if (need < 0 || P->i + (size_t)need > P->n) return failat(P, at, "invalid UTF-8 in the grammar text");
    long v = c & (0x3F >> need);
    for (int k = 0; k < need; k++) {
        unsigned char d = (unsigned char)P->s[P->i++];
        if ((d & 0xC0) != 0x80) return failat(P, at, "invalid UTF-8 in the grammar text");
        v = (v << 6) | (d & 0x3F);
    }
    /* RFC 3629: the shortest form only, no surrogates, nothing past U+10FFFF */
    static const long min_cp[] = {0, 0x80, 0x800, 0x10000};
    if (v < min_cp[need] || (v >= 0xD800 && v <= 0xDFFF) || v > 0x10FFFF)
        return failat(P, at, "invalid UTF-8 in the grammar text");
    return v;
}

static int utf8_encode(long cp, unsigned char *o) {
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

static int push_byte(gp *P, pseq *q, unsigned char b) {
    gset s = {{0, 0, 0, 0}};
    s.w[b >> 6] |= 1ull << (b & 63);
    int k = set_intern(P, &s);
    return k < 0 ? -1 : seq_push(P, q, GE_BYTES, k);
}

/* ---- character classes: code point ranges to UTF-8 byte sequences ---- */

typedef struct cprange {
    long lo, hi;
} cprange;

static int cmp_range(const void *a, const void *b) {
    const cprange *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Sorted, merged, surrogates removed; negated over U+0000..U+10FFFF. */
static int normalize_ranges(cprange *r, int n, int negate, cprange *out) {
    qsort(r, (size_t)n, sizeof *r, cmp_range);
    int m = 0;
    for (int k = 0; k < n; k++) {
        if (m && r[k].lo <= out[m - 1].hi + 1) {
            if (r[k].hi > out[m - 1].hi) out[m - 1].hi = r[k].hi;
        } else {
            out[m++] = r[k];
        }
    }
    if (negate) {
        cprange tmp[520];
        int t = 0;
        long next = 0;
        for (int k = 0; k < m; k++) {
            if (out[k].lo > next) tmp[t++] = (cprange){next, out[k].lo - 1};
            next = out[k].hi + 1;
        }
        if (next <= 0x10FFFF) tmp[t++] = (cprange){next, 0x10FFFF};
        memcpy(out, tmp, (size_t)t * sizeof *tmp);
        m = t;
    }
    /* cut the surrogates out */
    cprange fin[530];
    int f = 0;
    for (int k = 0; k < m; k++) {
        long lo = out[k].lo, hi = out[k].hi;
        if (hi < 0xD800 || lo > 0xDFFF) {
            fin[f++] = out[k];
            continue;
        }
        if (lo < 0xD800) fin[f++] = (cprange){lo, 0xD7FF};
        if (hi > 0xDFFF) fin[f++] = (cprange){0xE000, hi};
    }
    memcpy(out, fin, (size_t)f * sizeof *fin);
    return f;
}

typedef struct gclass {
    gset one;       /* the one-byte characters */
    int has_one;
    pseq *multi;    /* alternatives of byte-set sequences */
    int nmulti, capmulti;
} gclass;

static int class_seq(gp *P, gclass *k, const unsigned char *a, const unsigned char *b, int len) {
    if (k->nmulti == k->capmulti) {
        int nc = k->capmulti ? k->capmulti * 2 : 8;
        pseq *t = realloc(k->multi, (size_t)nc * sizeof *t);
        if (!t) return oom(P);
        k->multi = t;
        k->capmulti = nc;
    }
    pseq *q = &k->multi[k->nmulti++];
    memset(q, 0, sizeof *q);
    for (int i = 0; i < len; i++) {
        gset s = {{0, 0, 0, 0}};
        for (int c = a[i]; c <= b[i]; c++) s.w[c >> 6] |= 1ull << (c & 63);
        int id = set_intern(P, &s);
        if (id < 0 || seq_push(P, q, GE_BYTES, id)) return -1;
    }
    return 0;
}

/* Split [lo, hi] (same encoded length) until each piece is a product of
 * byte ranges: the lower bytes of lo are all 0x80 and those of hi all 0xBF
 * wherever the leading bytes differ. */
static int class_split(gp *P, gclass *k, long lo, long hi) {
    unsigned char a[4], b[4];
    int len = utf8_encode(lo, a);
    if (len == 1) {
        for (long c = lo; c <= hi; c++) k->one.w[c >> 6] |= 1ull << (c & 63);
        k->has_one = 1;
        return 0;
    }
    for (int i = 1; i < len; i++) {
        long m = (1L << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) {
                if (class_split(P, k, lo, lo | m)) return -1;
                return class_split(P, k, (lo | m) + 1, hi);
            }
            if ((hi & m) != m) {
                if (class_split(P, k, lo, (hi & ~m) - 1)) return -1;
                return class_split(P, k, hi & ~m, hi);
            }
        }
    }
    utf8_encode(hi, b);
    return class_seq(P, k, a, b, len);
}

static int class_add_range(gp *P, gclass *k, long lo, long hi) {
    static const long bound[4] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
    long start = lo;
    for (int l = 0; l < 4 && start <= hi; l++) {
        if (start > bound[l]) continue;
        long end = hi < bound[l] ? hi : bound[l];
        if (class_split(P, k, start, end)) return -1;
        start = end + 1;
    }
    return 0;
}

/* Append the lowered class to q: one byte set, or a reference to a helper
 * rule whose alternatives are the one-byte set and the multi-byte sequences. */
static int emit_class(gp *P, int rule, pseq *q, cprange *raw, int n, int negate, size_t at) {
    cprange norm[540];
    int m = normalize_ranges(raw, n, negate, norm);
    if (!m) return failat(P, at, "character class matches nothing");
    gclass k;
    memset(&k, 0, sizeof k);
    int rc = 0;
    for (int i = 0; i < m && !rc; i++) rc = class_add_range(P, &k, norm[i].lo, norm[i].hi);
    if (!rc && !k.nmulti) {
        int id = set_intern(P, &k.one);
        rc = id < 0 ? -1 : seq_push(P, q, GE_BYTES, id);
    } else if (!rc) {
        int r = rule_anon(P, rule);
        if (r < 0) rc = -1;
        if (!rc && k.has_one) {
            pseq *alt = rule_new_alt(P, r);
            int id = alt ? set_intern(P, &k.one) : -1;
            rc = id < 0 ? -1 : seq_push(P, alt, GE_BYTES, id);
        }
        for (int i = 0; i < k.nmulti && !rc; i++) {
            pseq *alt = rule_new_alt(P, r);
            if (!alt) {
                rc = -1;
                break;
            }
            *alt = k.multi[i];
            k.multi[i].it = NULL;
        }
        if (!rc) rc = seq_push(P, q, GE_REF, r);
    }
    for (int i = 0; i < k.nmulti; i++) free(k.multi[i].it);
    free(k.multi);
    return rc;
}

static int parse_class(gp *P, int rule, pseq *q) {
    size_t at = P->i;
    P->i++; /* [ */
    int negate = 0;
    if (P->i < P->n && P->s[P->i] == '^') {
        negate = 1;
        P->i++;
    }
    cprange r[512];
    int n = 0;
    while (1) {
        if (P->i >= P->n) return failat(P, at, "unterminated character class");
        if (P->s[P->i] == ']') break;
        if (n == 512) return failat(P, at, "character class with more than 512 ranges");
        long lo = read_char(P);
        if (lo < 0) return -1;
        long hi = lo;
        if (P->i + 1 < P->n && P->s[P->i] == '-' && P->s[P->i + 1] != ']') {
            P->i++;
            hi = read_char(P);
            if (hi < 0) return -1;
            if (hi < lo) return failat(P, at, "character range out of order");
        }
        r[n++] = (cprange){lo, hi};
    }
    P->i++; /* ] */
    if (!n && !negate) return failat(P, at, "empty character class");
    return emit_class(P, rule, q, r, n, negate, at);
}

static int parse_literal(gp *P, pseq *q) {
    size_t at = P->i;
    char quote = P->s[P->i++];
    while (1) {
        if (P->i >= P->n || P->s[P->i] == '\n') return failat(P, at, "unterminated string literal");
        if (P->s[P->i] == quote) break;
        long cp = read_char(P);
        if (cp < 0) return -1;
        unsigned char b[4];
        int len = utf8_encode(cp, b);
        for (int k = 0; k < len; k++)
            if (push_byte(P, q, b[k])) return -1;
    }
    P->i++;
    return 0;
}

static int parse_alts(gp *P, int rule, int target, int depth);

/* x{m,n} etc. on the last item of q (which is a single element). */
static int apply_repeat(gp *P, int rule, pseq *q, long m, long n) {
    gelem x = q->it[--q->n];
    for (long k = 0; k < m; k++)
        if (seq_push(P, q, x.kind, x.arg)) return -1;
    if (n < 0) { /* unbounded: R ::= x R | "" */
        int r = rule_anon(P, rule);
        pseq *a1 = r >= 0 ? rule_new_alt(P, r) : NULL;
        if (!a1 || seq_push(P, a1, x.kind, x.arg) || seq_push(P, a1, GE_REF, r) || !rule_new_alt(P, r)) return -1;
        return seq_push(P, q, GE_REF, r);
    }
    int prev = -1; /* O_k ::= x O_{k-1} | "" */
    for (long k = 0; k < n - m; k++) {
        int r = rule_anon(P, rule);
        pseq *a1 = r >= 0 ? rule_new_alt(P, r) : NULL;
        if (!a1 || seq_push(P, a1, x.kind, x.arg)) return -1;
        if (prev >= 0 && seq_push(P, a1, GE_REF, prev)) return -1;
        if (!rule_new_alt(P, r)) return -1;
        prev = r;
    }
    return prev >= 0 ? seq_push(P, q, GE_REF, prev) : 0;
}

static int parse_number(gp *P, long *v) {
    size_t at = P->i;
    if (P->i >= P->n || P->s[P->i] < '0' || P->s[P->i] > '9') return failat(P, at, "expected a number");
    long x = 0;
    while (P->i < P->n && P->s[P->i] >= '0' && P->s[P->i] <= '9') {
        x = x * 10 + (P->s[P->i++] - '0');
        if (x > GBNF_MAX_REPEAT) return failat(P, at, "repetition count above 10000");
    }
    *v = x;
    return 0;
}

/* One repetition operator on the item just parsed.  A second one right
 * after it is refused: it would apply to an item the first one rewrote (or
 * removed, as x{0} does); (x{2})* says which is meant. */
static int parse_postfix(gp *P, int rule, pseq *q, size_t item_at) {
    for (int ops = 0; P->i < P->n; ops++) {
        char c = P->s[P->i];
        size_t at = P->i;
        if (ops && (c == '*' || c == '+' || c == '?' || c == '{'))
            return failat(P, at, "a repetition operator right after another: put the repeated item in parentheses");
        if (c == '*' || c == '+' || c == '?') {
            P->i++;
            if (apply_repeat(P, rule, q, c == '+' ? 1 : 0, c == '?' ? 1 : -1)) return -1;
        } else if (c == '{') {
            P->i++;
            long m, n;
            skip_space(P);
            if (parse_number(P, &m)) return -1;
            skip_space(P);
            n = m;
            if (P->i < P->n && P->s[P->i] == ',') {
                P->i++;
                skip_space(P);
                n = -1;
                if (P->i < P->n && P->s[P->i] != '}' && parse_number(P, &n)) return -1;
                skip_space(P);
            }
            if (P->i >= P->n || P->s[P->i] != '}') return failat(P, at, "expected '}' closing a repetition");
            P->i++;
            if (n >= 0 && n < m) return failat(P, at, "repetition {m,n} with n < m");
            if (apply_repeat(P, rule, q, m, n)) return -1;
        } else {
            break;
        }
    }
    (void)item_at;
    return 0;
}

static int parse_seq(gp *P, int rule, pseq *q, int depth) {
    while (1) {
        skip_space(P);
        if (P->i >= P->n) return 0;
        char c = P->s[P->i];
        size_t at = P->i;
        int n0 = q->n;
        if (c == '|' || c == ')') return 0;
        if (c == '"' || c == '\'') {
            if (parse_literal(P, q)) return -1;
            if (q->n == n0) continue; /* "" */
            if (q->n - n0 > 1 && P->i < P->n && strchr("*+?{", P->s[P->i])) {
                /* a repeated multi-byte literal: wrap it in a helper rule */
                int r = rule_anon(P, rule);
                pseq *alt = r >= 0 ? rule_new_alt(P, r) : NULL;
                if (!alt) return -1;
                for (int k = n0; k < q->n; k++)
                    if (seq_push(P, alt, q->it[k].kind, q->it[k].arg)) return -1;
                q->n = n0;
                if (seq_push(P, q, GE_REF, r)) return -1;
            }
        } else if (c == '[') {
            if (parse_class(P, rule, q)) return -1;
        } else if (c == '.') {
            P->i++;
            cprange all = {0, -1};
            if (emit_class(P, rule, q, &all, 0, 1, at)) return -1;
        } else if (c == '(') {
            if (depth >= GBNF_MAX_DEPTH) return failat(P, at, "groups nested too deeply");
            P->i++;
            int r = rule_anon(P, rule);
            if (r < 0 || parse_alts(P, rule, r, depth + 1)) return -1;
            skip_space(P);
            if (P->i >= P->n || P->s[P->i] != ')') return failat(P, at, "unclosed '('");
            P->i++;
            if (seq_push(P, q, GE_REF, r)) return -1;
        } else if (is_name_char(c)) {
            if (at_definition(P)) return 0; /* the next rule starts */
            size_t len = name_len_at(P, P->i);
            int r = rule_find(P, P->s + P->i, len);
            if (r < 0) r = rule_add(P, P->s + P->i, len);
            if (r < 0) return -1;
            P->i += len;
            if (seq_push(P, q, GE_REF, r)) return -1;
        } else {
            return failat(P, at, "unexpected character");
        }
        if (parse_postfix(P, rule, q, at)) return -1;
    }
}

static int parse_alts(gp *P, int rule, int target, int depth) {
    while (1) {
        pseq *q = rule_new_alt(P, target);
        if (!q) return -1;
        pseq tmp = {0};
        int rc = parse_seq(P, rule, &tmp, depth);
        q = &P->r[target].alts[P->r[target].nalt - 1]; /* the rule array may have moved */
        *q = tmp;
        if (rc) return -1;
        skip_space(P);
        if (P->i < P->n && P->s[P->i] == '|') {
            P->i++;
            continue;
        }
        return 0;
    }
}

static int parse_rules(gp *P) {
    while (1) {
        skip_space(P);
        if (P->i >= P->n) return 0;
        size_t at = P->i;
        size_t len = name_len_at(P, P->i);
        if (!len) return failat(P, at, "expected a rule name");
        if (!at_definition(P)) return failat(P, at + len, "expected '::=' after the rule name");
        int r = rule_find(P, P->s + P->i, len);
        if (r >= 0 && P->r[r].defined) return failat(P, at, "rule defined twice");
        if (r < 0) r = rule_add(P, P->s + P->i, len);
        if (r < 0) return -1;
        P->r[r].defined = 1;
        P->i += len;
        skip_space(P);
        P->i += 3; /* ::= */
        if (parse_alts(P, r, r, 0)) return -1;
        skip_space(P);
        if (P->i < P->n && P->s[P->i] == ')') return failat(P, P->i, "unmatched ')'");
    }
}

/* ---- checks ---- */

/* Which rules can match the empty string (nullable) and which can finish
 * at all (prod), by a worklist: each alternative counts the rule references
 * it still waits on (one per occurrence; an alternative holding a byte set
 * is never nullable) and a rule is done by its first alternative that waits
 * on nothing.  Linear in the grammar's size. */
static int null_prod(gp *P, char *nullable, char *prod) {
    int n = P->nr;
    long n_alt = 0, n_ref = 0;
    for (int k = 0; k < n; k++) {
        n_alt += P->r[k].nalt;
        for (int a = 0; a < P->r[k].nalt; a++)
            for (int i = 0; i < P->r[k].alts[a].n; i++) n_ref += P->r[k].alts[a].it[i].kind == GE_REF;
    }
    int *alt_rule = malloc((size_t)(n_alt ? n_alt : 1) * sizeof *alt_rule);
    long *wait = malloc((size_t)(n_alt ? n_alt : 1) * 2 * sizeof *wait); /* [2a]: prod, [2a + 1]: nullable */
    size_t nn = n > 0 ? (size_t)n : 1;
    long *occ0 = calloc(nn + 1, sizeof *occ0);
    int *occ = malloc((size_t)(n_ref ? n_ref : 1) * sizeof *occ);
    int *queue = malloc(nn * sizeof *queue);
    int rc = 0;
    if (!alt_rule || !wait || !occ0 || !occ || !queue) rc = oom(P);
    long ai = 0;
    for (int k = 0; !rc && k < n; k++)
        for (int a = 0; a < P->r[k].nalt; a++, ai++) {
            const pseq *q = &P->r[k].alts[a];
            long refs = 0, bytes = 0;
            for (int i = 0; i < q->n; i++) {
                if (q->it[i].kind == GE_REF) {
                    refs++;
                    occ0[q->it[i].arg + 1]++;
                } else {
                    bytes++;
                }
            }
            alt_rule[ai] = k;
            wait[2 * ai] = refs;
            wait[2 * ai + 1] = bytes ? -1 : refs;
        }
    for (int k = 0; !rc && k < n; k++) occ0[k + 1] += occ0[k];
    ai = 0;
    for (int k = 0; !rc && k < n; k++) /* occ0[r] counts up while filling; shifted back below */
        for (int a = 0; a < P->r[k].nalt; a++, ai++)
            for (int i = 0; i < P->r[k].alts[a].n; i++)
                if (P->r[k].alts[a].it[i].kind == GE_REF) occ[occ0[P->r[k].alts[a].it[i].arg]++] = (int)ai;
    for (int k = n; !rc && k > 0; k--) occ0[k] = occ0[k - 1];
    if (!rc) occ0[0] = 0;
    for (int w = 0; !rc && w < 2; w++) {
        char *done = w ? nullable : prod;
        int qn = 0;
        for (long a = 0; a < n_alt; a++)
            if (wait[2 * a + w] == 0 && !done[alt_rule[a]]) {
                done[alt_rule[a]] = 1;
                queue[qn++] = alt_rule[a];
            }
        while (qn) {
            int r = queue[--qn];
            for (long o = occ0[r]; o < occ0[r + 1]; o++) {
                long a = occ[o];
                if (wait[2 * a + w] > 0 && --wait[2 * a + w] == 0 && !done[alt_rule[a]]) {
                    done[alt_rule[a]] = 1;
                    queue[qn++] = alt_rule[a];
                }
            }
        }
    }
    free(alt_rule);
    free(wait);
    free(occ0);
    free(occ);
    free(queue);
    return rc;
}

static int check(gp *P, int root) {
    int n = P->nr;
    for (int k = 0; k < n; k++)
        if (!P->r[k].defined) return failat(P, P->r[k].first_ref, "reference to an undefined rule");
    size_t nn = n > 0 ? (size_t)n : 1;
    char *nullable = calloc(nn, 1), *prod = calloc(nn, 1), *color = calloc(nn, 1);
    int *stk = malloc(nn * 3 * sizeof *stk);
    int rc = 0;
    if (!nullable || !prod || !color || !stk) rc = oom(P);
    if (!rc) rc = null_prod(P, nullable, prod);
    for (int k = 0; !rc && k < n; k++)
        if (!prod[k]) {
            char m[200];
            snprintf(m, sizeof m, "rule '%.120s' can never finish (every alternative recurses)", P->r[k].name);
            rc = failat(P, P->r[k].first_ref, m);
        }
    /* left recursion: a cycle through leftmost references (after nullable prefixes) */
    for (int s0 = 0; !rc && s0 < n; s0++) {
        if (color[s0]) continue;
        int sp = 0;
        stk[sp++] = s0; /* (rule, alternative, item) of the next leftmost reference to look at */
        stk[sp++] = 0;
        stk[sp++] = 0;
        color[s0] = 1;
        while (sp && !rc) {
            int r = stk[sp - 3], a = stk[sp - 2], i = stk[sp - 1], target = -1;
            for (; a < P->r[r].nalt; a++, i = 0) {
                const pseq *q = &P->r[r].alts[a];
                if (i < q->n && q->it[i].kind == GE_REF) {
                    target = q->it[i].arg;
                    if (nullable[target]) i++; /* the next item is leftmost too */
                    else a++, i = 0;
                    break;
                }
            }
            stk[sp - 2] = a;
            stk[sp - 1] = i;
            if (target < 0) {
                color[r] = 2;
                sp -= 3;
            } else if (color[target] == 1) {
                char m[200];
                snprintf(m, sizeof m, "rule '%.120s' is left-recursive", P->r[target].name);
                rc = failat(P, P->r[target].first_ref, m);
            } else if (!color[target]) {
                color[target] = 1;
                stk[sp++] = target;
                stk[sp++] = 0;
                stk[sp++] = 0;
            }
        }
    }
    (void)root;
    free(nullable);
    free(prod);
    free(color);
    free(stk);
    return rc;
}

static int build(gp *P, int root, zl_grammar **out) {
    zl_grammar *g = calloc(1, sizeof *g);
    if (!g) return oom(P);
    int n_alt = 0, n_el = 0;
    for (int k = 0; k < P->nr; k++) {
        n_alt += P->r[k].nalt;
        for (int a = 0; a < P->r[k].nalt; a++) n_el += P->r[k].alts[a].n + 1;
    }
    g->el = malloc((size_t)n_el * sizeof *g->el);
    g->alt_start = malloc((size_t)n_alt * sizeof *g->alt_start);
    g->rule_alt0 = malloc((size_t)P->nr * sizeof *g->rule_alt0);
    g->rule_nalt = malloc((size_t)P->nr * sizeof *g->rule_nalt);
    g->rule_name = calloc((size_t)P->nr, sizeof *g->rule_name);
    g->sets = malloc((size_t)(P->nsets ? P->nsets : 1) * sizeof *g->sets);
    g->n_rules = P->nr;
    if (!g->el || !g->alt_start || !g->rule_alt0 || !g->rule_nalt || !g->rule_name || !g->sets) {
        zl_grammar_free(g);
        return oom(P);
    }
    if (P->nsets) memcpy(g->sets, P->sets, (size_t)P->nsets * sizeof *g->sets); /* root ::= "" has none */
    g->n_sets = P->nsets;
    int ai = 0, ei = 0;
    for (int k = 0; k < P->nr; k++) {
        g->rule_alt0[k] = ai;
        g->rule_nalt[k] = P->r[k].nalt;
        g->rule_name[k] = P->r[k].name;
        P->r[k].name = NULL;
        for (int a = 0; a < P->r[k].nalt; a++) {
            g->alt_start[ai++] = ei;
            if (P->r[k].alts[a].n) memcpy(g->el + ei, P->r[k].alts[a].it, (size_t)P->r[k].alts[a].n * sizeof *g->el);
            ei += P->r[k].alts[a].n;
            g->el[ei].kind = GE_END;
            g->el[ei].arg = 0;
            ei++;
        }
    }
    g->n_el = ei;
    g->n_alt = ai;
    g->root = root;
    *out = g;
    return 0;
}

/* The matcher's first step (the root's initial stacks) within its work
 * bound: a grammar over it from the start is refused here, with the
 * parse's other errors, rather than failing its first generation. */
static int start_within_bound(const zl_grammar *g, zl_err *err) {
    garena a;
    gstackset s = {0};
    memset(&a, 0, sizeof a);
    gm_start(g, &a, &s);
    int rc = !a.oom ? 0 : a.over ? zl_errf(err, ZL_ERANGE, "grammar: rule '%.100s': %s", g->rule_name[g->root], GM_WORK_MSG)
                                 : zl_errf(err, ZL_ENOMEM, "grammar: out of memory");
    gm_arena_free(&a);
    free(s.s);
    return rc;
}

int zl_grammar_parse(zl_grammar **out, const char *src, size_t n, const char *root, zl_err *err) {
    *out = NULL;
    gp P;
    memset(&P, 0, sizeof P);
    P.s = src;
    P.n = n;
    P.err = err;
    if (!root) root = "root";
    int rc = parse_rules(&P);
    int r = -1;
    if (!rc) {
        r = rule_find(&P, root, strlen(root));
        if (r < 0 || !P.r[r].defined) rc = zl_errf(err, ZL_EINVAL, "grammar: no rule named '%.100s'", root);
    }
    if (!rc) rc = check(&P, r);
    if (!rc) rc = build(&P, r, out);
    if (!rc && (rc = start_within_bound(*out, err))) {
        zl_grammar_free(*out);
        *out = NULL;
    }
    for (int k = 0; k < P.nr; k++) {
        for (int a = 0; a < P.r[k].nalt; a++) free(P.r[k].alts[a].it);
        free(P.r[k].alts);
        free(P.r[k].name);
    }
    free(P.r);
    free(P.sets);
    free(P.rule_ht);
    free(P.set_ht);
    if (rc) return err && err->code ? err->code : ZL_EINVAL;
    return 0;
}

void zl_grammar_free(zl_grammar *g) {
    if (!g) return;
    for (int k = 0; g->rule_name && k < g->n_rules; k++) free(g->rule_name[k]);
    free(g->rule_name);
    free(g->el);
    free(g->alt_start);
    free(g->rule_alt0);
    free(g->rule_nalt);
    free(g->sets);
    free(g);
}
