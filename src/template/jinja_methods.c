/* jinja_methods.c — attribute and item access (jinja2's getattr/getitem
 * order: an attribute first, then the key, or the reverse for subscripts),
 * the loop variable's fields, iteration, and the python methods templates
 * call on str, dict and list values.  Methods that would mutate a value are
 * refused, as the immutable sandbox refuses them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_internal.h"

static int name_is(const char *p, size_t n, const char *s) { return n == strlen(s) && !memcmp(p, s, n); }

static const char *const str_methods[] = {"strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith",
    "endswith", "replace", "upper", "lower", "title", "capitalize", "swapcase", "format", "join", "find", "rfind",
    "index", "rindex", "count", "isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower", "isnumeric",
    "isdecimal", "center", "ljust", "rjust", "zfill", "partition", "rpartition", "casefold", "removeprefix",
    "removesuffix", "expandtabs", "encode", NULL};
static const char *const dict_methods[] = {"items", "keys", "values", "get", "copy", "pop", "popitem", "setdefault",
                                           "update", "clear", "fromkeys", NULL};
static const char *const list_methods[] = {"index", "count", "copy", "append", "extend", "insert", "pop", "remove",
                                           "clear", "sort", "reverse", NULL};

static const char *find_method(const char *const *tab, const char *p, size_t n) {
    for (int i = 0; tab[i]; i++)
        if (name_is(p, n, tab[i])) return tab[i];
    return NULL;
}

static jv method(jstate *st, jv obj, const char *name) {
    jv m = {.t = JT_METHOD, .name = name};
    m.u.bound = ja_alloc(&st->a, sizeof(jv));
    *m.u.bound = obj;
    return m;
}

static const char *obj_repr(jv o) {
    switch (o.t) {
    case JT_NONE: return "None";
    case JT_NS: return "jinja2.utils.Namespace object";
    case JT_LOOP: return "jinja2.runtime.LoopContext object";
    case JT_MACRO: return "jinja2.runtime.Macro object";
    case JT_DICT: return "dict object";
    case JT_LIST: return o.tuple ? "tuple object" : "list object";
    case JT_STR: return "str object";
    case JT_INT: return "int object";
    case JT_FLOAT: return "float object";
    case JT_BOOL: return "bool object";
    default: return "object";
    }
}

static jv no_attr(jstate *st, jv o, const char *p, size_t n) {
    jbuf b;
    jb_init(&b, &st->a);
    jv_repr_into(&b, jv_cstr(obj_repr(o)));
    jb_puts(&b, " has no attribute ");
    jv_repr_into(&b, jv_str(p, n));
    return jv_undef_msg(b.p, b.n);
}

static jv no_elem(jstate *st, jv o, jv k) {
    jbuf b;
    jb_init(&b, &st->a);
    jb_puts(&b, obj_repr(o));
    jb_puts(&b, " has no element ");
    jv_repr_into(&b, k);
    return jv_undef_msg(b.p, b.n);
}

static jv loop_attr(jstate *st, jv o, const char *p, size_t n) {
    jloop *l = o.u.lp;
    int64_t i = (int64_t)l->i, len = (int64_t)l->items->n;
    if (name_is(p, n, "index")) return jv_int(i + 1);
    if (name_is(p, n, "index0")) return jv_int(i);
    if (name_is(p, n, "revindex")) return jv_int(len - i);
    if (name_is(p, n, "revindex0")) return jv_int(len - i - 1);
    if (name_is(p, n, "first")) return jv_bool(i == 0);
    if (name_is(p, n, "last")) return jv_bool(i == len - 1);
    if (name_is(p, n, "length")) return jv_int(len);
    if (name_is(p, n, "depth")) return jv_int(l->depth);
    if (name_is(p, n, "depth0")) return jv_int(l->depth - 1);
    if (name_is(p, n, "previtem"))
        return i > 0 ? l->items->v[i - 1] : jv_undef_msg("there is no previous item", 25);
    if (name_is(p, n, "nextitem"))
        return i + 1 < len ? l->items->v[i + 1] : jv_undef_msg("there is no next item", 21);
    if (name_is(p, n, "cycle")) return method(st, o, "cycle");
    if (name_is(p, n, "changed")) return method(st, o, "changed");
    return no_attr(st, o, p, n);
}

jv jgetattr(jstate *st, const jnode *at, jv o, const char *p, size_t n) {
    const char *m;
    switch (o.t) {
    case JT_UNDEF: jfail_undef(st, at, o);
    case JT_DICT: {
        if ((m = find_method(dict_methods, p, n))) return method(st, o, m);
        jv *v = jd_gets(o.u.d, p, n);
        return v ? *v : no_attr(st, o, p, n);
    }
    case JT_NS: {
        jv *v = jd_gets(o.u.d, p, n);
        return v ? *v : no_attr(st, o, p, n);
    }
    case JT_STR:
        if ((m = find_method(str_methods, p, n))) return method(st, o, m);
        return no_attr(st, o, p, n);
    case JT_LIST:
        if ((m = find_method(list_methods, p, n)) && (!o.tuple || !strcmp(m, "index") || !strcmp(m, "count")))
            return method(st, o, m);
        return no_attr(st, o, p, n);
    case JT_LOOP: return loop_attr(st, o, p, n);
    default: return no_attr(st, o, p, n);
    }
}

jv jgetitem(jstate *st, const jnode *at, jv o, jv k) {
    if (o.t == JT_UNDEF) jfail_undef(st, at, o);
    if (o.t == JT_DICT) {
        jv *v = jd_get(o.u.d, k);
        if (v) return *v;
        if (k.t == JT_STR) {
            const char *m = find_method(dict_methods, k.u.s.p, k.u.s.n);
            if (m) return method(st, o, m);
            return no_attr(st, o, k.u.s.p, k.u.s.n);
        }
        return no_elem(st, o, k);
    }
    if ((o.t == JT_LIST || o.t == JT_STR) && (k.t == JT_INT || k.t == JT_BOOL)) {
        int64_t i = k.u.i;
        if (o.t == JT_LIST) {
            int64_t len = (int64_t)o.u.l->n;
            if (i < 0) i += len;
            if (i < 0 || i >= len) return no_elem(st, o, k);
            return o.u.l->v[i];
        }
        int64_t len = (int64_t)ju_len(o.u.s.p, o.u.s.n);
        if (i < 0) i += len;
        if (i < 0 || i >= len) return no_elem(st, o, k);
        size_t pos = 0;
        for (int64_t c = 0; c < i; c++) ju_next(o.u.s.p, o.u.s.n, &pos);
        size_t s = pos;
        ju_next(o.u.s.p, o.u.s.n, &pos);
        return jv_str(o.u.s.p + s, pos - s);
    }
    if (k.t == JT_STR) return jgetattr(st, at, o, k.u.s.p, k.u.s.n);
    return no_elem(st, o, k);
}

jlist *jiter(jstate *st, const jnode *at, jv x) {
    switch (x.t) {
    case JT_UNDEF: return ja_alloc(&st->a, sizeof(jlist));
    case JT_LIST: return x.u.l;
    case JT_DICT: {
        jlist *l = ja_alloc(&st->a, sizeof *l);
        for (size_t i = 0; i < x.u.d->n; i++) jl_push(&st->a, l, x.u.d->k[i]);
        return l;
    }
    case JT_STR: {
        jlist *l = ja_alloc(&st->a, sizeof *l);
        size_t i = 0;
        while (i < x.u.s.n) {
            size_t s = i;
            ju_next(x.u.s.p, x.u.s.n, &i);
            jl_push(&st->a, l, jv_str(x.u.s.p + s, i - s));
        }
        return l;
    }
    default: jfail(st, at, "'%s' object is not iterable", jv_typename(x));
    }
}

int jarg(jv *args, int nargs, const char **kwn, jv *kwv, int nkw, int pos, const char *name, jv *out) {
    if (pos >= 0 && pos < nargs) { *out = args[pos]; return 1; }
    for (int i = 0; i < nkw; i++)
        if (!strcmp(kwn[i], name)) { *out = kwv[i]; return 1; }
    return 0;
}

/* ---------------- str helpers ---------------- */

static int in_chars(uint32_t c, jv chars) {
    size_t i = 0;
    while (i < chars.u.s.n)
        if (ju_next(chars.u.s.p, chars.u.s.n, &i) == c) return 1;
    return 0;
}

jv jstr_strip(jstate *st, jv s, jv chars, int left, int right) {
    (void)st;
    const char *p = s.u.s.p;
    size_t a = 0, b = s.u.s.n;
    int ws = chars.t != JT_STR;
    if (left) {
        while (a < b) {
            size_t i = a;
            uint32_t c = ju_next(p, b, &i);
            if (ws ? !ju_isspace(c) : !in_chars(c, chars)) break;
            a = i;
        }
    }
    if (right) {
        while (b > a) {
            size_t k = b - 1;
            while (k > a && ((unsigned char)p[k] & 0xc0) == 0x80) k--;
            size_t i = k;
            uint32_t c = ju_next(p, b, &i);
            if (ws ? !ju_isspace(c) : !in_chars(c, chars)) break;
            b = k;
        }
    }
    return jv_str(p + a, b - a);
}

jv jstr_replace(jstate *st, jv s, jv old, jv nw, int64_t count) {
    jbuf b;
    jb_init(&b, &st->a);
    jb_put(&b, "", 0);
    const char *p = s.u.s.p;
    size_t n = s.u.s.n, i = 0;
    int64_t done = 0;
    if (old.u.s.n == 0) {
        /* python inserts new between every character and at both ends */
        while (count < 0 || done < count) {
            jb_put(&b, nw.u.s.p, nw.u.s.n);
            done++;
            if (i >= n) break;
            size_t s0 = i;
            ju_next(p, n, &i);
            jb_put(&b, p + s0, i - s0);
        }
        jb_put(&b, p + i, n - i);
        return jb_val(&b);
    }
    while (i < n) {
        if ((count < 0 || done < count) && i + old.u.s.n <= n && !memcmp(p + i, old.u.s.p, old.u.s.n)) {
            jb_put(&b, nw.u.s.p, nw.u.s.n);
            i += old.u.s.n;
            done++;
        } else {
            jb_putc(&b, p[i++]);
        }
    }
    return jb_val(&b);
}

static int is_cased(uint32_t c) { return ju_upper(c) != c || ju_lower(c) != c; }

jv jstr_case(jstate *st, jv s, int mode) {
    jbuf b;
    jb_init(&b, &st->a);
    jb_put(&b, "", 0);
    size_t i = 0;
    int first = 1, prev_cased = 0;
    while (i < s.u.s.n) {
        uint32_t c = ju_next(s.u.s.p, s.u.s.n, &i);
        uint32_t o;
        if (mode == 0) o = ju_lower(c);
        else if (mode == 1) o = ju_upper(c);
        else if (mode == 2) o = first ? ju_upper(c) : ju_lower(c);
        else if (mode == 4) o = ju_upper(c) != c ? ju_upper(c) : ju_lower(c);
        else {
            o = prev_cased ? ju_lower(c) : ju_upper(c);
            prev_cased = is_cased(c);
        }
        if (c == 0xdf && (mode == 1 || (mode == 3 && !prev_cased))) { jb_puts(&b, mode == 1 ? "SS" : "Ss"); }
        else ju_put(&b, o);
        first = 0;
    }
    return jb_val(&b);
}

static jv need_str(jstate *st, const jnode *at, const char *meth, jv x) {
    if (x.t != JT_STR) jfail(st, at, "%s arg must be None or str", meth);
    return x;
}

static size_t find_sub(const char *p, size_t n, const char *q, size_t m, size_t from) {
    if (m == 0) return from <= n ? from : (size_t)-1;
    for (size_t i = from; i + m <= n; i++)
        if (!memcmp(p + i, q, m)) return i;
    return (size_t)-1;
}

static size_t rfind_sub(const char *p, size_t n, const char *q, size_t m) {
    if (m > n) return (size_t)-1;
    for (size_t i = n - m + 1; i-- > 0;)
        if (!memcmp(p + i, q, m)) return i;
    return (size_t)-1;
}

static int64_t cp_index(const char *p, size_t byte) { return (int64_t)ju_len(p, byte); }

static jv str_split(jstate *st, const jnode *at, jv s, jv sep, int64_t maxsplit, int right) {
    jv r = jv_newlist(&st->a, 0);
    const char *p = s.u.s.p;
    size_t n = s.u.s.n;
    if (sep.t != JT_STR) {
        /* runs of whitespace; no empty strings */
        jlist *parts = r.u.l;
        if (!right) {
            size_t i = 0;
            int64_t done = 0;
            for (;;) {
                while (i < n) { size_t k = i; if (!ju_isspace(ju_next(p, n, &k))) break; i = k; }
                if (i >= n) break;
                if (maxsplit >= 0 && done >= maxsplit) {
                    jv rest = jstr_strip(st, jv_str(p + i, n - i), jv_none(), 0, 1);
                    jl_push(&st->a, parts, rest);
                    break;
                }
                size_t s0 = i;
                while (i < n) { size_t k = i; if (ju_isspace(ju_next(p, n, &k))) break; i = k; }
                jl_push(&st->a, parts, jv_str(p + s0, i - s0));
                done++;
            }
        } else {
            jv t = jstr_strip(st, s, jv_none(), 0, 1);
            size_t e = t.u.s.n;
            int64_t done = 0;
            jv tmp = jv_newlist(&st->a, 0);
            while (e > 0) {
                if (maxsplit >= 0 && done >= maxsplit) {
                    jl_push(&st->a, tmp.u.l, jstr_strip(st, jv_str(p, e), jv_none(), 1, 0));
                    break;
                }
                size_t b = e;
                while (b > 0 && !ju_isspace((unsigned char)p[b - 1])) b--;
                jl_push(&st->a, tmp.u.l, jv_str(p + b, e - b));
                done++;
                while (b > 0 && ju_isspace((unsigned char)p[b - 1])) b--;
                e = b;
            }
            for (size_t i = tmp.u.l->n; i-- > 0;) jl_push(&st->a, parts, tmp.u.l->v[i]);
        }
        return r;
    }
    if (!sep.u.s.n) jfail(st, at, "empty separator");
    if (!right) {
        size_t i = 0;
        int64_t done = 0;
        for (;;) {
            size_t k = (maxsplit < 0 || done < maxsplit) ? find_sub(p, n, sep.u.s.p, sep.u.s.n, i) : (size_t)-1;
            if (k == (size_t)-1) { jl_push(&st->a, r.u.l, jv_str(p + i, n - i)); break; }
            jl_push(&st->a, r.u.l, jv_str(p + i, k - i));
            i = k + sep.u.s.n;
            done++;
        }
        return r;
    }
    jv tmp = jv_newlist(&st->a, 0);
    size_t e = n;
    int64_t done = 0;
    for (;;) {
        size_t k = (maxsplit < 0 || done < maxsplit) ? rfind_sub(p, e, sep.u.s.p, sep.u.s.n) : (size_t)-1;
        if (k == (size_t)-1) { jl_push(&st->a, tmp.u.l, jv_str(p, e)); break; }
        jl_push(&st->a, tmp.u.l, jv_str(p + k + sep.u.s.n, e - k - sep.u.s.n));
        e = k;
        done++;
    }
    for (size_t i = tmp.u.l->n; i-- > 0;) jl_push(&st->a, r.u.l, tmp.u.l->v[i]);
    return r;
}

static int affix(jstate *st, const jnode *at, jv s, jv x, int end) {
    if (x.t == JT_LIST && x.tuple) {
        for (size_t i = 0; i < x.u.l->n; i++)
            if (affix(st, at, s, x.u.l->v[i], end)) return 1;
        return 0;
    }
    if (x.t != JT_STR)
        jfail(st, at, "%s first arg must be str or a tuple of str, not %s", end ? "endswith" : "startswith", jv_typename(x));
    if (x.u.s.n > s.u.s.n) return 0;
    return !memcmp(s.u.s.p + (end ? s.u.s.n - x.u.s.n : 0), x.u.s.p, x.u.s.n);
}

/* str.format: {} {0} {name} {{ }}; conversions !s !r; no format specs beyond none */
static jv str_format(jstate *st, const jnode *at, jv s, jv *args, int nargs, const char **kwn, jv *kwv, int nkw) {
    jbuf b;
    jb_init(&b, &st->a);
    jb_put(&b, "", 0);
    const char *p = s.u.s.p;
    size_t n = s.u.s.n;
    int autoi = 0;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c == '}' ) {
            if (i + 1 < n && p[i + 1] == '}') { jb_putc(&b, '}'); i++; continue; }
            jfail(st, at, "Single '}' encountered in format string");
        }
        if (c != '{') { jb_putc(&b, c); continue; }
        if (i + 1 < n && p[i + 1] == '{') { jb_putc(&b, '{'); i++; continue; }
        size_t e = i + 1;
        while (e < n && p[e] != '}') e++;
        if (e >= n) jfail(st, at, "Single '{' encountered in format string");
        const char *f = p + i + 1;
        size_t fl = e - i - 1, nl = 0;
        while (nl < fl && f[nl] != '!' && f[nl] != ':') nl++;
        jv v;
        if (nl == 0) {
            if (autoi >= nargs) jfail(st, at, "tuple index out of range");
            v = args[autoi++];
        } else if (f[0] >= '0' && f[0] <= '9') {
            int k = atoi(f);
            if (k >= nargs) jfail(st, at, "tuple index out of range");
            v = args[k];
        } else {
            int hit = 0;
            for (int k = 0; k < nkw; k++)
                if (name_is(f, nl, kwn[k])) { v = kwv[k]; hit = 1; }
            if (!hit) jfail(st, at, "'%.*s'", (int)nl, f);
        }
        if (nl < fl && f[nl] == '!' && nl + 1 < fl && f[nl + 1] == 'r') jv_repr_into(&b, v);
        else if (nl < fl && f[nl] == ':' ) {
            /* numeric precision like {:.2f} */
            char spec[32];
            snprintf(spec, sizeof spec, "%%%.*s", (int)(fl - nl - 1 < 20 ? fl - nl - 1 : 20), f + nl + 1);
            size_t sl = strlen(spec);
            char last = sl > 1 ? spec[sl - 1] : 0;
            if ((last == 'f' || last == 'e' || last == 'g') && jv_is_num(v)) jb_printf(&b, spec, jv_num(v));
            else if (last == 'd' && (v.t == JT_INT || v.t == JT_BOOL)) {
                spec[sl - 1] = 0;
                char sp2[40];
                snprintf(sp2, sizeof sp2, "%slld", spec);
                jb_printf(&b, sp2, (long long)v.u.i);
            } else if (sl == 1) jv_str_into(&b, v);
            else jfail(st, at, "format spec '%s' is not supported", spec + 1);
        } else jv_str_into(&b, v);
        i = e;
    }
    return jb_val(&b);
}

static jv str_method(jstate *st, const jnode *at, jv s, const char *m, jv *args, int nargs, const char **kwn, jv *kwv,
                     int nkw) {
    jv a0 = jv_none(), a1 = jv_none(), a2 = jv_none();
    int h0 = jarg(args, nargs, kwn, kwv, nkw, 0, "", &a0);
    int h1 = jarg(args, nargs, kwn, kwv, nkw, 1, "", &a1);
    int h2 = jarg(args, nargs, kwn, kwv, nkw, 2, "", &a2);
    (void)h2;
    if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip")) {
        if (h0 && a0.t != JT_NONE) need_str(st, at, m, a0);
        return jstr_strip(st, s, a0, m[0] != 'r', m[0] != 'l');
    }
    if (!strcmp(m, "split") || !strcmp(m, "rsplit")) {
        jv sep = jv_none(), mx = jv_int(-1);
        jarg(args, nargs, kwn, kwv, nkw, 0, "sep", &sep);
        jarg(args, nargs, kwn, kwv, nkw, 1, "maxsplit", &mx);
        if (sep.t != JT_NONE) need_str(st, at, m, sep);
        return str_split(st, at, s, sep, mx.t == JT_INT ? mx.u.i : -1, m[0] == 'r');
    }
    if (!strcmp(m, "splitlines")) {
        jv r = jv_newlist(&st->a, 0);
        int keep = h0 && jv_truthy(a0);
        size_t i = 0, st0 = 0, n = s.u.s.n;
        while (i < n) {
            size_t k = i;
            uint32_t c = ju_next(s.u.s.p, n, &k);
            int br = c == '\n' || c == '\r' || c == 0xb || c == 0xc || (c >= 0x1c && c <= 0x1e) || c == 0x85 || c == 0x2028 || c == 0x2029;
            if (!br) { i = k; continue; }
            size_t e = k;
            if (c == '\r' && e < n && s.u.s.p[e] == '\n') e++;
            jl_push(&st->a, r.u.l, jv_str(s.u.s.p + st0, (keep ? e : i) - st0));
            i = st0 = e;
        }
        if (st0 < n) jl_push(&st->a, r.u.l, jv_str(s.u.s.p + st0, n - st0));
        return r;
    }
    if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
        if (!h0) jfail(st, at, "%s() takes at least 1 argument (0 given)", m);
        return jv_bool(affix(st, at, s, a0, m[0] == 'e'));
    }
    if (!strcmp(m, "replace")) {
        if (!h1) jfail(st, at, "replace expected at least 2 arguments, got %d", nargs);
        need_str(st, at, m, a0);
        need_str(st, at, m, a1);
        return jstr_replace(st, s, a0, a1, a2.t == JT_INT ? a2.u.i : -1);
    }
    if (!strcmp(m, "upper")) return jstr_case(st, s, 1);
    if (!strcmp(m, "lower") || !strcmp(m, "casefold")) return jstr_case(st, s, 0);
    if (!strcmp(m, "capitalize")) return jstr_case(st, s, 2);
    if (!strcmp(m, "title")) return jstr_case(st, s, 3);
    if (!strcmp(m, "swapcase")) return jstr_case(st, s, 4);
    if (!strcmp(m, "format")) return str_format(st, at, s, args, nargs, kwn, kwv, nkw);
    if (!strcmp(m, "join")) {
        if (!h0) jfail(st, at, "join() takes exactly one argument (0 given)");
        jlist *l = jiter(st, at, a0);
        jbuf b;
        jb_init(&b, &st->a);
        jb_put(&b, "", 0);
        for (size_t i = 0; i < l->n; i++) {
            if (l->v[i].t != JT_STR)
                jfail(st, at, "sequence item %zu: expected str instance, %s found", i, jv_typename(l->v[i]));
            if (i) jb_put(&b, s.u.s.p, s.u.s.n);
            jb_put(&b, l->v[i].u.s.p, l->v[i].u.s.n);
        }
        return jb_val(&b);
    }
    if (!strcmp(m, "find") || !strcmp(m, "rfind") || !strcmp(m, "index") || !strcmp(m, "rindex")) {
        need_str(st, at, m, a0);
        size_t k = m[0] == 'r' ? rfind_sub(s.u.s.p, s.u.s.n, a0.u.s.p, a0.u.s.n)
                               : find_sub(s.u.s.p, s.u.s.n, a0.u.s.p, a0.u.s.n, 0);
        if (k == (size_t)-1) {
            if (strstr(m, "index")) jfail(st, at, "substring not found");
            return jv_int(-1);
        }
        return jv_int(cp_index(s.u.s.p, k));
    }
    if (!strcmp(m, "count")) {
        need_str(st, at, m, a0);
        if (!a0.u.s.n) return jv_int((int64_t)ju_len(s.u.s.p, s.u.s.n) + 1);
        int64_t c = 0;
        size_t i = 0, k;
        while ((k = find_sub(s.u.s.p, s.u.s.n, a0.u.s.p, a0.u.s.n, i)) != (size_t)-1) { c++; i = k + a0.u.s.n; }
        return jv_int(c);
    }
    if (!strncmp(m, "is", 2)) {
        size_t i = 0;
        int any = 0, ok = 1, has_upper = 0, has_lower = 0;
        while (i < s.u.s.n) {
            uint32_t c = ju_next(s.u.s.p, s.u.s.n, &i);
            any = 1;
            if (!strcmp(m, "isdigit") || !strcmp(m, "isnumeric") || !strcmp(m, "isdecimal")) ok &= ju_isdigit(c);
            else if (!strcmp(m, "isalpha")) ok &= ju_isalpha(c);
            else if (!strcmp(m, "isalnum")) ok &= ju_isalpha(c) || ju_isdigit(c);
            else if (!strcmp(m, "isspace")) ok &= ju_isspace(c);
            if (ju_lower(c) != c) has_upper = 1;
            if (ju_upper(c) != c) has_lower = 1;
        }
        if (!strcmp(m, "isupper")) return jv_bool(has_upper && !has_lower);
        if (!strcmp(m, "islower")) return jv_bool(has_lower && !has_upper);
        return jv_bool(any && ok);
    }
    if (!strcmp(m, "center") || !strcmp(m, "ljust") || !strcmp(m, "rjust") || !strcmp(m, "zfill")) {
        if (a0.t != JT_INT) jfail(st, at, "'%s' object cannot be interpreted as an integer", jv_typename(a0));
        int64_t len = (int64_t)ju_len(s.u.s.p, s.u.s.n), w = a0.u.i;
        if (w > (int64_t)(st->lim.max_output)) jfail(st, at, "%s width exceeds the output limit", m);
        const char *fill = m[0] == 'z' ? "0" : h1 && a1.t == JT_STR ? a1.u.s.p : " ";
        size_t fl = m[0] == 'z' ? 1 : h1 && a1.t == JT_STR ? a1.u.s.n : 1;
        if (len >= w) return s;
        int64_t pad = w - len, left = m[0] == 'l' ? 0 : m[0] == 'c' ? pad / 2 + (pad & w & 1) : pad;
        jbuf b;
        jb_init(&b, &st->a);
        jb_put(&b, "", 0);
        for (int64_t i = 0; i < left; i++) jb_put(&b, fill, fl);
        jb_put(&b, s.u.s.p, s.u.s.n);
        for (int64_t i = left; i < pad; i++) jb_put(&b, fill, fl);
        return jb_val(&b);
    }
    if (!strcmp(m, "partition") || !strcmp(m, "rpartition")) {
        need_str(st, at, m, a0);
        size_t k = m[0] == 'r' ? rfind_sub(s.u.s.p, s.u.s.n, a0.u.s.p, a0.u.s.n) : find_sub(s.u.s.p, s.u.s.n, a0.u.s.p, a0.u.s.n, 0);
        jv r = jv_newlist(&st->a, 3);
        r.tuple = 1;
        if (k == (size_t)-1) {
            jv e = jv_str("", 0);
            jl_push(&st->a, r.u.l, m[0] == 'r' ? e : s);
            jl_push(&st->a, r.u.l, e);
            jl_push(&st->a, r.u.l, m[0] == 'r' ? s : e);
        } else {
            jl_push(&st->a, r.u.l, jv_str(s.u.s.p, k));
            jl_push(&st->a, r.u.l, a0);
            jl_push(&st->a, r.u.l, jv_str(s.u.s.p + k + a0.u.s.n, s.u.s.n - k - a0.u.s.n));
        }
        return r;
    }
    if (!strcmp(m, "removeprefix") || !strcmp(m, "removesuffix")) {
        need_str(st, at, m, a0);
        int suf = m[6] == 's';
        if (affix(st, at, s, a0, suf))
            return suf ? jv_str(s.u.s.p, s.u.s.n - a0.u.s.n) : jv_str(s.u.s.p + a0.u.s.n, s.u.s.n - a0.u.s.n);
        return s;
    }
    jfail(st, at, "str.%s() is not supported", m);
}

jv jcall_method(jstate *st, const jnode *at, jv self, const char *m, jv *args, int nargs, const char **kwn, jv *kwv,
                int nkw) {
    jv a0 = jv_none(), a1 = jv_none();
    int h0 = jarg(args, nargs, kwn, kwv, nkw, 0, "", &a0);
    int h1 = jarg(args, nargs, kwn, kwv, nkw, 1, "", &a1);
    switch (self.t) {
    case JT_STR: return str_method(st, at, self, m, args, nargs, kwn, kwv, nkw);
    case JT_DICT:
        if (!strcmp(m, "items") || !strcmp(m, "keys") || !strcmp(m, "values")) {
            jv r = jv_newlist(&st->a, self.u.d->n);
            for (size_t i = 0; i < self.u.d->n; i++) {
                if (m[0] == 'k') jl_push(&st->a, r.u.l, self.u.d->k[i]);
                else if (m[0] == 'v') jl_push(&st->a, r.u.l, self.u.d->v[i]);
                else {
                    jv t = jv_newlist(&st->a, 2);
                    t.tuple = 1;
                    jl_push(&st->a, t.u.l, self.u.d->k[i]);
                    jl_push(&st->a, t.u.l, self.u.d->v[i]);
                    jl_push(&st->a, r.u.l, t);
                }
            }
            return r;
        }
        if (!strcmp(m, "get")) {
            if (!h0) jfail(st, at, "get expected at least 1 argument, got 0");
            jv *v = jd_get(self.u.d, a0);
            return v ? *v : h1 ? a1 : jv_none();
        }
        if (!strcmp(m, "copy")) {
            jv r = jv_newdict(&st->a, self.u.d->n);
            for (size_t i = 0; i < self.u.d->n; i++) jd_set(&st->a, r.u.d, self.u.d->k[i], self.u.d->v[i]);
            return r;
        }
        jfail(st, at, "access to attribute '%s' of 'dict' object is unsafe.", m);
    case JT_LIST:
        if (!strcmp(m, "index") || !strcmp(m, "count")) {
            int64_t c = 0;
            for (size_t i = 0; i < self.u.l->n; i++)
                if (jv_equal(self.u.l->v[i], a0)) {
                    if (m[0] == 'i') return jv_int((int64_t)i);
                    c++;
                }
            if (m[0] == 'i') {
                jbuf b;
                jb_init(&b, &st->a);
                jv_repr_into(&b, a0);
                jfail(st, at, "%s is not in list", b.p ? b.p : "");
            }
            return jv_int(c);
        }
        if (!strcmp(m, "copy")) {
            jv r = jv_newlist(&st->a, self.u.l->n);
            for (size_t i = 0; i < self.u.l->n; i++) jl_push(&st->a, r.u.l, self.u.l->v[i]);
            return r;
        }
        jfail(st, at, "access to attribute '%s' of '%s' object is unsafe.", m, jv_typename(self));
    case JT_LOOP:
        if (!strcmp(m, "cycle")) {
            if (!nargs) jfail(st, at, "no items for cycling given");
            return args[self.u.lp->i % (size_t)nargs];
        }
        jfail(st, at, "loop.%s() is not supported", m);
    default: break;
    }
    (void)h0;
    jfail(st, at, "'%s' object has no method '%s'", jv_typename(self), m);
}
