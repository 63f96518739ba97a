/* jinja_filters.c — jinja2's built-in filters and tests (the ones chat
 * templates use and the common rest), with jinja2 3.1's argument names,
 * defaults and messages; tojson is HF transformers' (json.dumps with
 * ensure_ascii=False, no HTML escaping).  Pure functions of their arguments. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_internal.h"

typedef struct fa {
    jv *args;
    int nargs;
    const char **kwn;
    jv *kwv;
    int nkw;
} fa;

static int arg(fa *a, int pos, const char *name, jv *out) { return jarg(a->args, a->nargs, a->kwn, a->kwv, a->nkw, pos, name, out); }

static jv S(jstate *st, jv x) { return jv_tostr(&st->a, x); }

static int64_t to_int(jstate *st, const jnode *at, jv x, const char *what) {
    if (x.t == JT_INT || x.t == JT_BOOL) return x.u.i;
    if (x.t == JT_FLOAT) return (int64_t)x.u.f;
    jfail(st, at, "%s: expected an integer, got %s", what, jv_typename(x));
}

/* attribute getter of "a.b.0" style paths */
static jv attr_path(jstate *st, const jnode *at, jv x, jv path) {
    if (path.t == JT_INT) return jgetitem(st, at, x, path);
    jv p = S(st, path);
    size_t i = 0;
    while (i <= p.u.s.n) {
        size_t e = i;
        while (e < p.u.s.n && p.u.s.p[e] != '.') e++;
        const char *s = p.u.s.p + i;
        size_t n = e - i;
        int digits = n > 0;
        for (size_t k = 0; k < n; k++) digits &= s[k] >= '0' && s[k] <= '9';
        if (digits) x = jgetitem(st, at, x, jv_int(strtoll(s, NULL, 10)));
        else x = jgetitem(st, at, x, jv_str(s, n));
        i = e + 1;
        if (e >= p.u.s.n) break;
    }
    return x;
}

static jv lower_key(jstate *st, jv x, int case_sensitive) {
    if (!case_sensitive && x.t == JT_STR) return jstr_case(st, x, 0);
    return x;
}

/* stable merge sort on values with a key */
typedef struct skey {
    jv key, val;
} skey;

static void msort(jstate *st, const jnode *at, skey *a, skey *tmp, size_t n, int rev) {
    if (n < 2) return;
    size_t h = n / 2;
    msort(st, at, a, tmp, h, rev);
    msort(st, at, a + h, tmp, n - h, rev);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        int c = jv_order(st, at, OP_LT, a[j].key, a[i].key);
        if (rev) c = -jv_order(st, at, OP_LT, a[j].key, a[i].key);
        /* take from the right only when strictly before the left: stable */
        if (rev ? jv_order(st, at, OP_LT, a[i].key, a[j].key) < 0 : c < 0) tmp[k++] = a[j++];
        else tmp[k++] = a[i++];
    }
    while (i < h) tmp[k++] = a[i++];
    while (j < n) tmp[k++] = a[j++];
    memcpy(a, tmp, n * sizeof *a);
}

static jv sorted(jstate *st, const jnode *at, jlist *l, jv attr, int case_sensitive, int rev, int pairs_by) {
    skey *a = ja_alloc(&st->a, (l->n + 1) * sizeof *a), *tmp = ja_alloc(&st->a, (l->n + 1) * sizeof *tmp);
    for (size_t i = 0; i < l->n; i++) {
        jv k = l->v[i];
        if (pairs_by >= 0) k = k.u.l->v[pairs_by];
        else if (attr.t != JT_NONE) k = attr_path(st, at, k, attr);
        a[i].key = lower_key(st, k, case_sensitive);
        a[i].val = l->v[i];
    }
    msort(st, at, a, tmp, l->n, rev);
    jv r = jv_newlist(&st->a, l->n);
    for (size_t i = 0; i < l->n; i++) jl_push(&st->a, r.u.l, a[i].val);
    return r;
}

static jv html_escape(jstate *st, jv s) {
    jbuf b;
    jb_init(&b, &st->a);
    jb_put(&b, "", 0);
    for (size_t i = 0; i < s.u.s.n; i++) {
        char c = s.u.s.p[i];
        switch (c) {
        case '&': jb_puts(&b, "&amp;"); break;
        case '<': jb_puts(&b, "&lt;"); break;
        case '>': jb_puts(&b, "&gt;"); break;
        case '"': jb_puts(&b, "&#34;"); break;
        case '\'': jb_puts(&b, "&#39;"); break;
        default: jb_putc(&b, c);
        }
    }
    return jb_val(&b);
}

static jv pyround(double x, int64_t prec, const char *method) {
    if (!strcmp(method, "common")) {
        if (prec > 300 || prec < -300) return jv_float(x);
        if (prec >= 0) {
            char buf[400];
            snprintf(buf, sizeof buf, "%.*f", (int)prec, x);
            return jv_float(strtod(buf, NULL));
        }
        double p = pow(10, (double)-prec);
        double q = x / p, r = nearbyint(q);
        return jv_float(r * p);
    }
    double p = pow(10, (double)prec);
    return jv_float((!strcmp(method, "ceil") ? ceil(x * p) : floor(x * p)) / p);
}

static jlist *seq_of(jstate *st, const jnode *at, jv x) { return jiter(st, at, x); }

static jv select_impl(jstate *st, const jnode *at, jv seq, fa *a, int by_attr, int keep_if) {
    jlist *l = seq_of(st, at, seq);
    int off = 0;
    jv attr = jv_none();
    if (by_attr) {
        if (!a->nargs) jfail(st, at, "Missing parameter for attribute name");
        attr = a->args[0];
        off = 1;
    }
    jv test = jv_none();
    if (a->nargs > off) test = a->args[off];
    char tname[64] = "";
    if (test.t == JT_STR) snprintf(tname, sizeof tname, "%.*s", (int)test.u.s.n, test.u.s.p);
    else if (test.t != JT_NONE) jfail(st, at, "test name must be a string");
    jv r = jv_newlist(&st->a, 0);
    for (size_t i = 0; i < l->n; i++) {
        jv x = l->v[i];
        jv y = by_attr ? attr_path(st, at, x, attr) : x;
        int t = test.t == JT_NONE ? jv_truthy(y) : jtest(st, at, tname, y, a->args + off + 1, a->nargs - off - 1);
        if (t == keep_if) jl_push(&st->a, r.u.l, x);
    }
    return r;
}

static const char *const filter_names[] = {"abs", "attr", "batch", "capitalize", "center", "count", "d", "default",
    "dictsort", "e", "escape", "first", "float", "forceescape", "format", "indent", "int", "items", "join", "last",
    "length", "list", "lower", "map", "max", "min", "reject", "rejectattr", "replace", "reverse", "round", "safe",
    "select", "selectattr", "slice", "sort", "string", "sum", "title", "tojson", "trim", "truncate", "unique", "upper",
    "wordcount", NULL};

int jfilter_known(const char *name) {
    for (int i = 0; filter_names[i]; i++)
        if (!strcmp(filter_names[i], name)) return 1;
    return 0;
}

static jv indent_impl(jstate *st, jv s, jv width, int first, int blank) {
    jv ind;
    if (width.t == JT_STR) ind = width;
    else {
        int64_t w = width.t == JT_INT || width.t == JT_BOOL ? width.u.i : 4;
        if (w < 0) w = 0;
        if (w > 4096) w = 4096;
        char *p = ja_alloc(&st->a, (size_t)w + 1);
        memset(p, ' ', (size_t)w);
        ind = jv_str(p, (size_t)w);
    }
    /* s + "\n", then splitlines */
    jlist *lines = ja_alloc(&st->a, sizeof *lines);
    const char *p = s.u.s.p;
    size_t n = s.u.s.n, i = 0, st0 = 0;
    while (i < n) {
        size_t k = i;
        uint32_t c = ju_next(p, n, &k);
        int br = c == '\n' || c == '\r' || c == 0xb || c == 0xc || (c >= 0x1c && c <= 0x1e) || c == 0x85 || c == 0x2028 || c == 0x2029;
        if (!br) { i = k; continue; }
        jl_push(&st->a, lines, jv_str(p + st0, i - st0));
        if (c == '\r' && k < n && p[k] == '\n') k++;
        i = st0 = k;
    }
    jl_push(&st->a, lines, jv_str(p + st0, n - st0)); /* the line the appended "\n" ends */
    jbuf b;
    jb_init(&b, &st->a);
    jb_put(&b, "", 0);
    if (first) jb_put(&b, ind.u.s.p, ind.u.s.n);
    for (size_t k = 0; k < lines->n; k++) {
        jv ln = lines->v[k];
        if (k) {
            jb_putc(&b, '\n');
            if (blank || ln.u.s.n) jb_put(&b, ind.u.s.p, ind.u.s.n);
        }
        jb_put(&b, ln.u.s.p, ln.u.s.n);
    }
    return jb_val(&b);
}

jv jfilter(jstate *st, const jnode *at, const char *name, jv x, jv *args, int nargs, const char **kwn, jv *kwv, int nkw) {
    fa A = {args, nargs, kwn, kwv, nkw};
    fa *a = &A;
    jv v1 = jv_none(), v2 = jv_none(), v3 = jv_none();
    if (!strcmp(name, "default") || !strcmp(name, "d")) {
        jv dv = jv_str("", 0), boolean = jv_bool(0);
        arg(a, 0, "default_value", &dv);
        arg(a, 1, "boolean", &boolean);
        if (x.t == JT_UNDEF || (jv_truthy(boolean) && !jv_truthy(x))) return dv;
        return x;
    }
    if (!strcmp(name, "length") || !strcmp(name, "count")) {
        switch (x.t) {
        case JT_UNDEF: return jv_int(0);
        case JT_STR: return jv_int((int64_t)ju_len(x.u.s.p, x.u.s.n));
        case JT_LIST: return jv_int((int64_t)x.u.l->n);
        case JT_DICT: return jv_int((int64_t)x.u.d->n);
        default: jfail(st, at, "object of type '%s' has no len()", jv_typename(x));
        }
    }
    if (!strcmp(name, "tojson")) {
        jv ind = jv_none(), seps = jv_none(), sk = jv_bool(0), ea = jv_bool(0);
        arg(a, 1, "indent", &ind);
        arg(a, 0, "ensure_ascii", &ea);
        arg(a, 2, "separators", &seps);
        arg(a, 3, "sort_keys", &sk);
        if (nargs >= 1 && !(a->nkw)) { ind = args[0]; ea = jv_bool(0); } /* jinja's tojson(indent) positional form */
        int indent = -1;
        if (ind.t == JT_INT) indent = ind.u.i < 0 ? 0 : ind.u.i > 64 ? 64 : (int)ind.u.i;
        const char *isep = indent >= 0 ? "," : ", ", *ksep = ": ";
        if (seps.t == JT_LIST && seps.u.l->n == 2 && seps.u.l->v[0].t == JT_STR && seps.u.l->v[1].t == JT_STR) {
            isep = ja_strdup(&st->a, seps.u.l->v[0].u.s.p, seps.u.l->v[0].u.s.n);
            ksep = ja_strdup(&st->a, seps.u.l->v[1].u.s.p, seps.u.l->v[1].u.s.n);
        }
        if (jv_truthy(ea)) jfail(st, at, "tojson: ensure_ascii=True is not supported");
        jbuf b;
        jb_init(&b, &st->a);
        jb_put(&b, "", 0);
        jjson_dump(&b, x, indent, isep, ksep, jv_truthy(sk), 0);
        return jb_val(&b);
    }
    if (!strcmp(name, "trim")) {
        jv chars = jv_none();
        arg(a, 0, "chars", &chars);
        return jstr_strip(st, S(st, x), chars, 1, 1);
    }
    if (!strcmp(name, "upper")) return jstr_case(st, S(st, x), 1);
    if (!strcmp(name, "lower")) return jstr_case(st, S(st, x), 0);
    if (!strcmp(name, "capitalize")) return jstr_case(st, S(st, x), 2);
    if (!strcmp(name, "title")) {
        /* jinja: words start after runs of [-\s({\[<] */
        jv s = S(st, x);
        jbuf b;
        jb_init(&b, &st->a);
        jb_put(&b, "", 0);
        size_t i = 0;
        int start = 1;
        while (i < s.u.s.n) {
            uint32_t c = ju_next(s.u.s.p, s.u.s.n, &i);
            int sep = c == '-' || ju_isspace(c) || c == '(' || c == '{' || c == '[' || c == '<';
            if (sep) { ju_put(&b, c); start = 1; continue; }
            ju_put(&b, start ? ju_upper(c) : ju_lower(c));
            start = 0;
        }
        return jb_val(&b);
    }
    if (!strcmp(name, "replace")) {
        if (!arg(a, 0, "old", &v1) || !arg(a, 1, "new", &v2)) jfail(st, at, "replace() missing required arguments");
        int64_t cnt = -1;
        if (arg(a, 2, "count", &v3) && v3.t != JT_NONE) cnt = to_int(st, at, v3, "replace count");
        return jstr_replace(st, S(st, x), S(st, v1), S(st, v2), cnt);
    }
    if (!strcmp(name, "string")) return S(st, x);
    if (!strcmp(name, "safe")) return x.t == JT_STR ? x : S(st, x);
    if (!strcmp(name, "escape") || !strcmp(name, "e") || !strcmp(name, "forceescape"))
        return html_escape(st, x.t == JT_UNDEF ? jv_str("", 0) : S(st, x));
    if (!strcmp(name, "first") || !strcmp(name, "last")) {
        jlist *l = seq_of(st, at, x);
        if (!l->n) return jv_undef_msg(name[0] == 'f' ? "No first item, sequence was empty." : "No last item, sequence was empty.",
                                    name[0] == 'f' ? 34 : 33);
        return name[0] == 'f' ? l->v[0] : l->v[l->n - 1];
    }
    if (!strcmp(name, "join")) {
        jv d = jv_str("", 0), attr = jv_none();
        arg(a, 0, "d", &d);
        arg(a, 1, "attribute", &attr);
        jlist *l = seq_of(st, at, x);
        jv ds = S(st, d);
        jbuf b;
        jb_init(&b, &st->a);
        jb_put(&b, "", 0);
        for (size_t i = 0; i < l->n; i++) {
            if (i) jb_put(&b, ds.u.s.p, ds.u.s.n);
            jv it = attr.t != JT_NONE ? attr_path(st, at, l->v[i], attr) : l->v[i];
            jv_str_into(&b, it);
        }
        return jb_val(&b);
    }
    if (!strcmp(name, "list")) {
        jlist *l = seq_of(st, at, x);
        jv r = jv_newlist(&st->a, l->n);
        for (size_t i = 0; i < l->n; i++) jl_push(&st->a, r.u.l, l->v[i]);
        return r;
    }
    if (!strcmp(name, "items")) {
        if (x.t == JT_UNDEF) return jv_newlist(&st->a, 0);
        if (x.t != JT_DICT) jfail(st, at, "Can only get item pairs from a mapping.");
        return jcall_method(st, at, x, "items", NULL, 0, NULL, NULL, 0);
    }
    if (!strcmp(name, "map")) {
        jlist *l = seq_of(st, at, x);
        jv r = jv_newlist(&st->a, l->n);
        jv attr;
        if (arg(a, -1, "attribute", &attr)) {
            jv dflt = jv_none();
            int has_d = arg(a, -1, "default", &dflt);
            for (size_t i = 0; i < l->n; i++) {
                jv y = attr_path(st, at, l->v[i], attr);
                if (y.t == JT_UNDEF && has_d) y = dflt;
                jl_push(&st->a, r.u.l, y);
            }
            return r;
        }
        if (!nargs || args[0].t != JT_STR) jfail(st, at, "map requires a filter argument");
        char fname[64];
        snprintf(fname, sizeof fname, "%.*s", (int)args[0].u.s.n, args[0].u.s.p);
        if (!jfilter_known(fname)) jfail(st, at, "No filter named '%s'.", fname);
        for (size_t i = 0; i < l->n; i++) jl_push(&st->a, r.u.l, jfilter(st, at, fname, l->v[i], args + 1, nargs - 1, kwn, kwv, nkw));
        return r;
    }
    if (!strcmp(name, "select")) return select_impl(st, at, x, a, 0, 1);
    if (!strcmp(name, "reject")) return select_impl(st, at, x, a, 0, 0);
    if (!strcmp(name, "selectattr")) return select_impl(st, at, x, a, 1, 1);
    if (!strcmp(name, "rejectattr")) return select_impl(st, at, x, a, 1, 0);
    if (!strcmp(name, "int")) {
        jv d = jv_int(0);
        arg(a, 0, "default", &d);
        if (x.t == JT_INT) return x;
        if (x.t == JT_BOOL) return jv_int(x.u.i);
        if (x.t == JT_FLOAT) return isfinite(x.u.f) ? jv_int((int64_t)x.u.f) : d;
        if (x.t == JT_STR) {
            jv t = jstr_strip(st, x, jv_none(), 1, 1);
            char buf[64];
            if (t.u.s.n && t.u.s.n < sizeof buf) {
                memcpy(buf, t.u.s.p, t.u.s.n);
                buf[t.u.s.n] = 0;
                char *end;
                long long v = strtoll(buf, &end, 10);
                if (!*end) return jv_int(v);
                double f = strtod(buf, &end);
                if (!*end && isfinite(f) && !strpbrk(buf, "xXpP")) return jv_int((int64_t)f);
            }
        }
        return d;
    }
    if (!strcmp(name, "float")) {
        jv d = jv_float(0);
        arg(a, 0, "default", &d);
        if (x.t == JT_FLOAT) return x;
        if (x.t == JT_INT || x.t == JT_BOOL) return jv_float((double)x.u.i);
        if (x.t == JT_STR) {
            jv t = jstr_strip(st, x, jv_none(), 1, 1);
            char buf[64];
            if (t.u.s.n && t.u.s.n < sizeof buf) {
                memcpy(buf, t.u.s.p, t.u.s.n);
                buf[t.u.s.n] = 0;
                char *end;
                double f = strtod(buf, &end);
                if (!*end && !strpbrk(buf, "xXpP")) return jv_float(f); /* python's float() reads no hex */
            }
        }
        return d;
    }
    if (!strcmp(name, "abs")) {
        if (x.t == JT_INT || x.t == JT_BOOL) return jv_int(x.u.i < 0 ? -x.u.i : x.u.i);
        if (x.t == JT_FLOAT) return jv_float(fabs(x.u.f));
        jfail(st, at, "bad operand type for abs(): '%s'", jv_typename(x));
    }
    if (!strcmp(name, "round")) {
        jv prec = jv_int(0), method = jv_cstr("common");
        arg(a, 0, "precision", &prec);
        arg(a, 1, "method", &method);
        char m[16];
        snprintf(m, sizeof m, "%.*s", (int)S(st, method).u.s.n, S(st, method).u.s.p);
        if (strcmp(m, "common") && strcmp(m, "ceil") && strcmp(m, "floor"))
            jfail(st, at, "method must be common, ceil or floor");
        if (!jv_is_num(x)) jfail(st, at, "type %s doesn't define __round__ method", jv_typename(x));
        if (x.t != JT_FLOAT && !strcmp(m, "common")) return jv_int(x.u.i);
        return pyround(jv_num(x), to_int(st, at, prec, "round precision"), m);
    }
    if (!strcmp(name, "indent")) {
        jv width = jv_int(4), first = jv_bool(0), blank = jv_bool(0);
        arg(a, 0, "width", &width);
        arg(a, 1, "first", &first);
        arg(a, 2, "blank", &blank);
        return indent_impl(st, S(st, x), width, jv_truthy(first), jv_truthy(blank));
    }
    if (!strcmp(name, "unique")) {
        jv cs = jv_bool(0), attr = jv_none();
        arg(a, 0, "case_sensitive", &cs);
        arg(a, 1, "attribute", &attr);
        jlist *l = seq_of(st, at, x);
        jv r = jv_newlist(&st->a, 0), seen = jv_newlist(&st->a, 0);
        for (size_t i = 0; i < l->n; i++) {
            jv k = lower_key(st, attr.t != JT_NONE ? attr_path(st, at, l->v[i], attr) : l->v[i], jv_truthy(cs));
            int dup = 0;
            for (size_t j = 0; j < seen.u.l->n && !dup; j++) dup = jv_equal(seen.u.l->v[j], k);
            if (dup) continue;
            jl_push(&st->a, seen.u.l, k);
            jl_push(&st->a, r.u.l, l->v[i]);
        }
        return r;
    }
    if (!strcmp(name, "sort")) {
        jv rev = jv_bool(0), cs = jv_bool(0), attr = jv_none();
        arg(a, 0, "reverse", &rev);
        arg(a, 1, "case_sensitive", &cs);
        arg(a, 2, "attribute", &attr);
        return sorted(st, at, seq_of(st, at, x), attr, jv_truthy(cs), jv_truthy(rev), -1);
    }
    if (!strcmp(name, "dictsort")) {
        jv cs = jv_bool(0), by = jv_cstr("key"), rev = jv_bool(0);
        arg(a, 0, "case_sensitive", &cs);
        arg(a, 1, "by", &by);
        arg(a, 2, "reverse", &rev);
        if (x.t != JT_DICT) jfail(st, at, "dictsort: expected a mapping, got %s", jv_typename(x));
        jv items = jcall_method(st, at, x, "items", NULL, 0, NULL, NULL, 0);
        int pos = by.t == JT_STR && by.u.s.n == 5 && !memcmp(by.u.s.p, "value", 5) ? 1 : 0;
        if (by.t == JT_STR && !pos && !(by.u.s.n == 3 && !memcmp(by.u.s.p, "key", 3)))
            jfail(st, at, "You can only sort by either \"key\" or \"value\"");
        return sorted(st, at, items.u.l, jv_none(), jv_truthy(cs), jv_truthy(rev), pos);
    }
    if (!strcmp(name, "reverse")) {
        if (x.t == JT_STR) {
            jlist *l = seq_of(st, at, x);
            jbuf b;
            jb_init(&b, &st->a);
            jb_put(&b, "", 0);
            for (size_t i = l->n; i-- > 0;) jb_put(&b, l->v[i].u.s.p, l->v[i].u.s.n);
            return jb_val(&b);
        }
        jlist *l = seq_of(st, at, x);
        jv r = jv_newlist(&st->a, l->n);
        for (size_t i = l->n; i-- > 0;) jl_push(&st->a, r.u.l, l->v[i]);
        return r;
    }
    if (!strcmp(name, "min") || !strcmp(name, "max")) {
        jv cs = jv_bool(0), attr = jv_none();
        arg(a, 0, "case_sensitive", &cs);
        arg(a, 1, "attribute", &attr);
        jlist *l = seq_of(st, at, x);
        if (!l->n) return jv_undef_msg("No aggregated item, sequence was empty.", 39);
        size_t best = 0;
        jv bk = lower_key(st, attr.t != JT_NONE ? attr_path(st, at, l->v[0], attr) : l->v[0], jv_truthy(cs));
        for (size_t i = 1; i < l->n; i++) {
            jv k = lower_key(st, attr.t != JT_NONE ? attr_path(st, at, l->v[i], attr) : l->v[i], jv_truthy(cs));
            int c = jv_order(st, at, OP_LT, k, bk);
            if (name[1] == 'i' ? c < 0 : c > 0) { best = i; bk = k; }
        }
        return l->v[best];
    }
    if (!strcmp(name, "sum")) {
        jv attr = jv_none(), start = jv_int(0);
        arg(a, 0, "attribute", &attr);
        arg(a, 1, "start", &start);
        jlist *l = seq_of(st, at, x);
        jv acc = start;
        for (size_t i = 0; i < l->n; i++) {
            jv y = attr.t != JT_NONE ? attr_path(st, at, l->v[i], attr) : l->v[i];
            if (!jv_is_num(acc) || !jv_is_num(y))
                jfail(st, at, "unsupported operand type(s) for +: '%s' and '%s'", jv_typename(acc), jv_typename(y));
            if (acc.t != JT_FLOAT && y.t != JT_FLOAT) acc = jv_int(acc.u.i + y.u.i);
            else acc = jv_float(jv_num(acc) + jv_num(y));
        }
        return acc;
    }
    if (!strcmp(name, "wordcount")) {
        jv s = S(st, x);
        int64_t c = 0;
        int in = 0;
        size_t i = 0;
        while (i < s.u.s.n) {
            uint32_t ch = ju_next(s.u.s.p, s.u.s.n, &i);
            int w = ju_isalpha(ch) || ju_isdigit(ch) || ch == '_';
            if (w && !in) c++;
            in = w;
        }
        return jv_int(c);
    }
    if (!strcmp(name, "center")) {
        jv w = jv_int(80);
        arg(a, 0, "width", &w);
        jv wa[1] = {w};
        return jcall_method(st, at, S(st, x), "center", wa, 1, NULL, NULL, 0);
    }
    if (!strcmp(name, "truncate")) {
        jv len = jv_int(255), kill = jv_bool(0), end = jv_cstr("..."), lee = jv_int(5);
        arg(a, 0, "length", &len);
        arg(a, 1, "killwords", &kill);
        arg(a, 2, "end", &end);
        arg(a, 3, "leeway", &lee);
        jv s = S(st, x);
        int64_t n = (int64_t)ju_len(s.u.s.p, s.u.s.n), L = to_int(st, at, len, "truncate length");
        int64_t el = (int64_t)ju_len(S(st, end).u.s.p, S(st, end).u.s.n);
        if (L < el) jfail(st, at, "expected length >= %lld, got %lld", (long long)el, (long long)L);
        if (n <= L + to_int(st, at, lee, "truncate leeway")) return s;
        jlist *chars = seq_of(st, at, s);
        jbuf b;
        jb_init(&b, &st->a);
        jb_put(&b, "", 0);
        for (int64_t i = 0; i < L - el; i++) jb_put(&b, chars->v[i].u.s.p, chars->v[i].u.s.n);
        if (!jv_truthy(kill)) {
            for (size_t i = b.n; i-- > 0;)
                if (b.p[i] == ' ') { b.n = i; break; }
        }
        jv e = S(st, end);
        jb_put(&b, e.u.s.p, e.u.s.n);
        return jb_val(&b);
    }
    if (!strcmp(name, "format")) {
        jv t = jv_newlist(&st->a, (size_t)nargs);
        t.tuple = 1;
        for (int i = 0; i < nargs; i++) jl_push(&st->a, t.u.l, args[i]);
        return jstr_percent(st, at, S(st, x), t);
    }
    if (!strcmp(name, "attr")) {
        if (!nargs) jfail(st, at, "attr() missing required argument 'name'");
        jv n = S(st, args[0]);
        if (x.t == JT_DICT) { /* python getattr only: a dict's keys are not attributes */
            jv m = jgetattr(st, at, jv_newdict(&st->a, 0), n.u.s.p, n.u.s.n);
            if (m.t == JT_METHOD) *m.u.bound = x;
            return m;
        }
        return jgetattr(st, at, x, n.u.s.p, n.u.s.n);
    }
    if (!strcmp(name, "batch") || !strcmp(name, "slice")) {
        if (!nargs) jfail(st, at, "%s() missing required argument", name);
        int64_t k = to_int(st, at, args[0], name);
        jv fill = jv_none();
        int has_fill = arg(a, 1, "fill_with", &fill) && fill.t != JT_NONE;
        jlist *l = seq_of(st, at, x);
        jv r = jv_newlist(&st->a, 0);
        if (k <= 0) jfail(st, at, "%s: the count must be positive", name);
        if (name[0] == 'b') {
            for (size_t i = 0; i < l->n; i += (size_t)k) {
                jv row = jv_newlist(&st->a, (size_t)k);
                for (size_t j = i; j < i + (size_t)k; j++) {
                    if (j < l->n) jl_push(&st->a, row.u.l, l->v[j]);
                    else if (has_fill) jl_push(&st->a, row.u.l, fill);
                }
                jl_push(&st->a, r.u.l, row);
            }
            return r;
        }
        size_t per = l->n / (size_t)k, extra = l->n % (size_t)k, off = 0;
        for (size_t s = 0; s < (size_t)k; s++) {
            size_t start = off + s * per + (s < extra ? s : extra);
            size_t end = start + per + (s < extra ? 1 : 0);
            jv row = jv_newlist(&st->a, 0);
            for (size_t j = start; j < end; j++) jl_push(&st->a, row.u.l, l->v[j]);
            if (has_fill && s >= extra && extra) jl_push(&st->a, row.u.l, fill);
            jl_push(&st->a, r.u.l, row);
        }
        return r;
    }
    jfail(st, at, "No filter named '%s'.", name);
}

/* ---------------- tests ---------------- */

static const char *const test_names[] = {"defined", "undefined", "none", "boolean", "false", "true", "integer", "float",
    "number", "string", "mapping", "iterable", "sequence", "callable", "sameas", "escaped", "lower", "upper", "odd",
    "even", "divisibleby", "eq", "equalto", "==", "ne", "!=", "lt", "lessthan", "<", "le", "<=", "gt", "greaterthan",
    ">", "ge", ">=", "in", "filter", "test", NULL};

int jtest_known(const char *name) {
    for (int i = 0; test_names[i]; i++)
        if (!strcmp(test_names[i], name)) return 1;
    return 0;
}

int jtest(jstate *st, const jnode *at, const char *name, jv x, jv *args, int nargs) {
    jv y = nargs ? args[0] : (jv){.t = JT_UNDEF, .u.s = {"", 0}};
    if (!strcmp(name, "defined")) return x.t != JT_UNDEF;
    if (!strcmp(name, "undefined")) return x.t == JT_UNDEF;
    if (!strcmp(name, "none")) return x.t == JT_NONE;
    if (!strcmp(name, "boolean")) return x.t == JT_BOOL;
    if (!strcmp(name, "false")) return x.t == JT_BOOL && !x.u.i;
    if (!strcmp(name, "true")) return x.t == JT_BOOL && x.u.i;
    if (!strcmp(name, "integer")) return x.t == JT_INT;
    if (!strcmp(name, "float")) return x.t == JT_FLOAT;
    if (!strcmp(name, "number")) return jv_is_num(x);
    if (!strcmp(name, "string")) return x.t == JT_STR;
    if (!strcmp(name, "mapping")) return x.t == JT_DICT;
    if (!strcmp(name, "iterable")) return x.t == JT_STR || x.t == JT_LIST || x.t == JT_DICT || x.t == JT_UNDEF;
    if (!strcmp(name, "sequence")) return x.t == JT_STR || x.t == JT_LIST || x.t == JT_DICT || x.t == JT_UNDEF;
    if (!strcmp(name, "callable")) return x.t == JT_MACRO || x.t == JT_FUNC || x.t == JT_METHOD;
    if (!strcmp(name, "escaped")) return 0;
    if (!strcmp(name, "sameas")) {
        if (x.t != y.t) return 0;
        if (x.t == JT_NONE || x.t == JT_UNDEF) return 1;
        if (x.t == JT_BOOL) return x.u.i == y.u.i;
        if (x.t == JT_INT) return x.u.i == y.u.i && x.u.i >= -5 && x.u.i <= 256;
        if (x.t == JT_STR) return x.u.s.p == y.u.s.p && x.u.s.n == y.u.s.n;
        return jv_equal(x, y) && x.u.l == y.u.l;
    }
    if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        jv s = S(st, x);
        jv a[1];
        return jcall_method(st, at, s, name[0] == 'l' ? "islower" : "isupper", a, 0, NULL, NULL, 0).u.i != 0;
    }
    if (!strcmp(name, "odd") || !strcmp(name, "even") || !strcmp(name, "divisibleby")) {
        if (x.t == JT_UNDEF) jfail_undef(st, at, x);
        int64_t d = name[0] == 'd' ? (nargs ? to_int(st, at, y, "divisibleby") : 0) : 2;
        if (name[0] == 'd' && !nargs) jfail(st, at, "divisibleby() missing 1 required positional argument: 'num'");
        if (x.t != JT_INT && x.t != JT_BOOL) {
            if (x.t == JT_FLOAT) {
                if (d == 0) jfail(st, at, "float modulo");
                double m = fmod(x.u.f, (double)d);
                return name[0] == 'o' ? m == 1 || m == -1 : m == 0;
            }
            jfail(st, at, "not all arguments converted during string formatting");
        }
        if (d == 0) jfail(st, at, "integer division or modulo by zero");
        int64_t m = x.u.i % d;
        if (m != 0 && ((m < 0) != (d < 0))) m += d;
        return name[0] == 'o' ? m == 1 : m == 0;
    }
    if (!strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "==")) return jv_equal(x, y);
    if (!strcmp(name, "ne") || !strcmp(name, "!=")) return !jv_equal(x, y);
    if (!strcmp(name, "lt") || !strcmp(name, "lessthan") || !strcmp(name, "<")) return jv_order(st, at, OP_LT, x, y) < 0;
    if (!strcmp(name, "le") || !strcmp(name, "<=")) return jv_order(st, at, OP_LE, x, y) <= 0;
    if (!strcmp(name, "gt") || !strcmp(name, "greaterthan") || !strcmp(name, ">")) return jv_order(st, at, OP_GT, x, y) > 0;
    if (!strcmp(name, "ge") || !strcmp(name, ">=")) return jv_order(st, at, OP_GE, x, y) >= 0;
    if (!strcmp(name, "in")) return jv_contains(st, at, y, x);
    if (!strcmp(name, "filter") || !strcmp(name, "test")) {
        jv s = S(st, x);
        char nm[64];
        snprintf(nm, sizeof nm, "%.*s", (int)s.u.s.n, s.u.s.p);
        return name[0] == 'f' ? jfilter_known(nm) : jtest_known(nm);
    }
    jfail(st, at, "No test named '%s'.", name);
}
