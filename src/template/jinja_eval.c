/* jinja_eval.c — renders a syntax tree: statements, expressions with python
 * operator semantics, scopes (for / macro / call / with open one; if and set
 * do not), macros and callers, the loop variable, the globals
 * (raise_exception, range, namespace, dict, strftime_now), the limits, and
 * the render entry point.  Never touches anything outside the render arena
 * and its own output. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jinja_internal.h"

enum { C_OK = 0, C_BREAK, C_CONTINUE };

void jfail(jstate *st, const jnode *at, const char *fmt, ...) {
    zl_err *e = st->a.err;
    char m[480];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    if (at && at->line) snprintf(e->msg, sizeof e->msg, "line %d: %s", at->line, m);
    else snprintf(e->msg, sizeof e->msg, "%s", m);
    e->code = ZL_EINVAL;
    longjmp(*st->a.jb, 1);
}

void jfail_undef(jstate *st, const jnode *at, jv u) {
    jfail(st, at, "%.*s", (int)(u.u.s.n > 400 ? 400 : u.u.s.n), u.u.s.p);
}

static jv undef_name(jstate *st, const char *p, size_t n) {
    jbuf b;
    jb_init(&b, &st->a);
    jv_repr_into(&b, jv_str(p, n));
    jb_puts(&b, " is undefined");
    return jv_undef_msg(b.p, b.n);
}

static void enter(jstate *st, const jnode *at) {
    if (++st->depth > st->lim.max_depth)
        jfail(st, at, "template recursion exceeded its limit (depth %d)", st->lim.max_depth);
}

/* ---------------- scopes ---------------- */

static jframe *frame_new(jstate *st, jframe *parent) {
    jframe *f = ja_alloc(&st->a, sizeof *f);
    f->parent = parent;
    return f;
}

static jv lookup(jstate *st, jframe *f, jv name) {
    for (; f; f = f->parent) {
        jv *v = jd_get(&f->vars, name);
        if (v) return *v;
    }
    return undef_name(st, name.u.s.p, name.u.s.n);
}

static void fset(jstate *st, jframe *f, jv name, jv v) { jd_set(&st->a, &f->vars, name, v); }

/* ---------------- output ---------------- */

static void out_val(jstate *st, jv v) {
    if (v.t == JT_STR) jb_put(st->out, v.u.s.p, v.u.s.n);
    else jv_str_into(st->out, v);
}

static jbuf *push_out(jstate *st, jbuf *tmp) {
    jbuf *old = st->out;
    jb_init(tmp, &st->a);
    tmp->total = &st->total_out;
    tmp->limit = st->lim.max_output;
    st->out = tmp;
    return old;
}

/* ---------------- operators ---------------- */

static const char *opname(int op) {
    static const char *const n[] = {"", "+", "-", "*", "/", "//", "%", "**", "~", "==", "!=", "<", "<=", ">", ">=", "in", "not in"};
    return n[op];
}

_Noreturn static void bad_operands(jstate *st, const jnode *at, int op, jv a, jv b) {
    jfail(st, at, "unsupported operand type(s) for %s: '%s' and '%s'", opname(op), jv_typename(a), jv_typename(b));
}

static jv repeat(jstate *st, const jnode *at, jv s, int64_t k) {
    if (k <= 0) return s.t == JT_STR ? jv_str("", 0) : jv_newlist(&st->a, 0);
    size_t unit = s.t == JT_STR ? s.u.s.n : s.u.l->n * sizeof(jv);
    if (unit && (uint64_t)k > st->lim.max_memory / unit) jfail(st, at, "repetition exceeds the template memory limit");
    if (s.t == JT_STR) {
        jbuf b;
        jb_init(&b, &st->a);
        for (int64_t i = 0; i < k; i++) jb_put(&b, s.u.s.p, s.u.s.n);
        return jb_val(&b);
    }
    jv r = jv_newlist(&st->a, s.u.l->n * (size_t)k);
    for (int64_t i = 0; i < k; i++)
        for (size_t j = 0; j < s.u.l->n; j++) jl_push(&st->a, r.u.l, s.u.l->v[j]);
    return r;
}

static double pymod(double a, double b) {
    double m = fmod(a, b);
    if (m != 0 && ((m < 0) != (b < 0))) m += b;
    return m;
}

jv jstr_percent(jstate *st, const jnode *at, jv fmt, jv args) {
    jlist one = {&args, 1, 1};
    jlist *al = args.t == JT_LIST && args.tuple ? args.u.l : &one;
    size_t ai = 0;
    jbuf b;
    jb_init(&b, &st->a);
    const char *p = fmt.u.s.p;
    size_t n = fmt.u.s.n;
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '%') { jb_putc(&b, p[i]); continue; }
        if (++i >= n) jfail(st, at, "incomplete format");
        if (p[i] == '%') { jb_putc(&b, '%'); continue; }
        char spec[32];
        size_t k = 0;
        spec[k++] = '%';
        while (i < n && strchr("-+ #0123456789.", p[i]) && k < 20) spec[k++] = p[i++];
        if (i >= n) jfail(st, at, "incomplete format");
        char c = p[i];
        if (ai >= al->n) jfail(st, at, "not enough arguments for format string");
        jv x = al->v[ai++];
        if (c == 's' || c == 'r') {
            jbuf t;
            jb_init(&t, &st->a);
            if (c == 's') jv_str_into(&t, x);
            else jv_repr_into(&t, x);
            spec[k++] = 's';
            spec[k] = 0;
            jb_printf(&b, spec, t.p ? t.p : "");
        } else if (c == 'd' || c == 'i') {
            if (!jv_is_num(x)) jfail(st, at, "%%d format: a real number is required, not %s", jv_typename(x));
            spec[k++] = 'l';
            spec[k++] = 'l';
            spec[k++] = 'd';
            spec[k] = 0;
            jb_printf(&b, spec, (long long)(x.t == JT_FLOAT ? (long long)x.u.f : x.u.i));
        } else if (c == 'f' || c == 'e' || c == 'g' || c == 'F' || c == 'E' || c == 'G') {
            if (!jv_is_num(x)) jfail(st, at, "must be real number, not %s", jv_typename(x));
            spec[k++] = c;
            spec[k] = 0;
            jb_printf(&b, spec, jv_num(x));
        } else {
            jfail(st, at, "unsupported format character '%c'", c);
        }
    }
    if (ai < al->n) jfail(st, at, "not all arguments converted during string formatting");
    return jb_val(&b);
}

int jv_order(jstate *st, const jnode *at, int op, jv a, jv b) {
    if (a.t == JT_UNDEF) jfail_undef(st, at, a);
    if (b.t == JT_UNDEF) jfail_undef(st, at, b);
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a.t != JT_FLOAT && b.t != JT_FLOAT) return a.u.i < b.u.i ? -1 : a.u.i > b.u.i;
        double x = jv_num(a), y = jv_num(b);
        return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a.t == JT_STR && b.t == JT_STR) {
        size_t m = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
        int c = m ? memcmp(a.u.s.p, b.u.s.p, m) : 0;
        if (c) return c < 0 ? -1 : 1;
        return a.u.s.n < b.u.s.n ? -1 : a.u.s.n > b.u.s.n;
    }
    if (a.t == JT_LIST && b.t == JT_LIST) {
        size_t m = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
        for (size_t i = 0; i < m; i++) {
            if (jv_equal(a.u.l->v[i], b.u.l->v[i])) continue;
            return jv_order(st, at, op, a.u.l->v[i], b.u.l->v[i]);
        }
        return a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n;
    }
    jfail(st, at, "'%s' not supported between instances of '%s' and '%s'", opname(op), jv_typename(a), jv_typename(b));
}

static int cmp_lt(jstate *st, const jnode *at, int op, jv a, jv b) { return jv_order(st, at, op, a, b); }

int jv_contains(jstate *st, const jnode *at, jv hay, jv x) {
    switch (hay.t) {
    case JT_UNDEF: return 0;
    case JT_STR:
        if (x.t != JT_STR) jfail(st, at, "'in <string>' requires string as left operand, not %s", jv_typename(x));
        if (!x.u.s.n) return 1;
        for (size_t i = 0; i + x.u.s.n <= hay.u.s.n; i++)
            if (!memcmp(hay.u.s.p + i, x.u.s.p, x.u.s.n)) return 1;
        return 0;
    case JT_LIST:
        for (size_t i = 0; i < hay.u.l->n; i++)
            if (jv_equal(hay.u.l->v[i], x)) return 1;
        return 0;
    case JT_DICT:
    case JT_NS: return jd_get(hay.u.d, x) != NULL;
    default: jfail(st, at, "argument of type '%s' is not iterable", jv_typename(hay));
    }
}

static jv binop(jstate *st, const jnode *at, int op, jv a, jv b) {
    if (op == OP_CONCAT) {
        jbuf s;
        jb_init(&s, &st->a);
        jb_put(&s, "", 0);
        jv_str_into(&s, a);
        jv_str_into(&s, b);
        return jb_val(&s);
    }
    if (op == OP_EQ) return jv_bool(jv_equal(a, b));
    if (op == OP_NE) return jv_bool(!jv_equal(a, b));
    if (op == OP_IN) return jv_bool(jv_contains(st, at, b, a));
    if (op == OP_NOTIN) return jv_bool(!jv_contains(st, at, b, a));
    if (op >= OP_LT && op <= OP_GE) {
        int c = cmp_lt(st, at, op, a, b);
        return jv_bool(op == OP_LT ? c < 0 : op == OP_LE ? c <= 0 : op == OP_GT ? c > 0 : c >= 0);
    }
    if (a.t == JT_UNDEF) jfail_undef(st, at, a);
    if (b.t == JT_UNDEF) jfail_undef(st, at, b);
    int ints = (a.t == JT_INT || a.t == JT_BOOL) && (b.t == JT_INT || b.t == JT_BOOL);
    int nums = jv_is_num(a) && jv_is_num(b);
    switch (op) {
    case OP_ADD:
        if (ints) {
            int64_t r;
            if (__builtin_add_overflow(a.u.i, b.u.i, &r)) jfail(st, at, "integer overflow");
            return jv_int(r);
        }
        if (nums) return jv_float(jv_num(a) + jv_num(b));
        if (a.t == JT_STR && b.t == JT_STR) {
            jbuf s;
            jb_init(&s, &st->a);
            jb_put(&s, "", 0);
            jb_put(&s, a.u.s.p, a.u.s.n);
            jb_put(&s, b.u.s.p, b.u.s.n);
            return jb_val(&s);
        }
        if (a.t == JT_LIST && b.t == JT_LIST && a.tuple == b.tuple) {
            jv r = jv_newlist(&st->a, a.u.l->n + b.u.l->n);
            r.tuple = a.tuple;
            for (size_t i = 0; i < a.u.l->n; i++) jl_push(&st->a, r.u.l, a.u.l->v[i]);
            for (size_t i = 0; i < b.u.l->n; i++) jl_push(&st->a, r.u.l, b.u.l->v[i]);
            return r;
        }
        if (a.t == JT_STR || a.t == JT_LIST)
            jfail(st, at, "can only concatenate %s (not \"%s\") to %s", jv_typename(a), jv_typename(b), jv_typename(a));
        bad_operands(st, at, op, a, b);
    case OP_SUB:
        if (ints) {
            int64_t r;
            if (__builtin_sub_overflow(a.u.i, b.u.i, &r)) jfail(st, at, "integer overflow");
            return jv_int(r);
        }
        if (nums) return jv_float(jv_num(a) - jv_num(b));
        bad_operands(st, at, op, a, b);
    case OP_MUL:
        if (ints) {
            int64_t r;
            if (__builtin_mul_overflow(a.u.i, b.u.i, &r)) jfail(st, at, "integer overflow");
            return jv_int(r);
        }
        if (nums) return jv_float(jv_num(a) * jv_num(b));
        if ((a.t == JT_STR || a.t == JT_LIST) && (b.t == JT_INT || b.t == JT_BOOL)) return repeat(st, at, a, b.u.i);
        if ((b.t == JT_STR || b.t == JT_LIST) && (a.t == JT_INT || a.t == JT_BOOL)) return repeat(st, at, b, a.u.i);
        if (a.t == JT_STR || a.t == JT_LIST) jfail(st, at, "can't multiply sequence by non-int of type '%s'", jv_typename(b));
        bad_operands(st, at, op, a, b);
    case OP_DIV:
        if (nums) {
            if (jv_num(b) == 0) jfail(st, at, ints ? "division by zero" : "float division by zero");
            return jv_float(jv_num(a) / jv_num(b));
        }
        bad_operands(st, at, op, a, b);
    case OP_FLOORDIV:
        if (ints) {
            if (b.u.i == 0) jfail(st, at, "integer division or modulo by zero");
            if (a.u.i == INT64_MIN && b.u.i == -1) jfail(st, at, "integer overflow");
            int64_t q = a.u.i / b.u.i;
            if ((a.u.i % b.u.i != 0) && ((a.u.i < 0) != (b.u.i < 0))) q--;
            return jv_int(q);
        }
        if (nums) {
            if (jv_num(b) == 0) jfail(st, at, "float floor division by zero");
            return jv_float(floor(jv_num(a) / jv_num(b)));
        }
        bad_operands(st, at, op, a, b);
    case OP_MOD:
        if (a.t == JT_STR) return jstr_percent(st, at, a, b);
        if (ints) {
            if (b.u.i == 0) jfail(st, at, "integer division or modulo by zero");
            if (b.u.i == -1) return jv_int(0);
            int64_t m = a.u.i % b.u.i;
            if (m != 0 && ((m < 0) != (b.u.i < 0))) m += b.u.i;
            return jv_int(m);
        }
        if (nums) {
            if (jv_num(b) == 0) jfail(st, at, "float modulo");
            return jv_float(pymod(jv_num(a), jv_num(b)));
        }
        bad_operands(st, at, op, a, b);
    case OP_POW:
        if (ints && b.u.i >= 0) {
            int64_t r = 1, x = a.u.i;
            for (int64_t e = b.u.i; e > 0; e--) {
                if (__builtin_mul_overflow(r, x, &r)) jfail(st, at, "integer overflow");
                if (r == 0 || r == 1) break;
                if (r == -1) { r = (e % 2) ? -1 : 1; break; }
            }
            return jv_int(r);
        }
        if (nums) return jv_float(pow(jv_num(a), jv_num(b)));
        bad_operands(st, at, op, a, b);
    }
    jfail(st, at, "bad operator");
}

/* ---------------- slicing ---------------- */

static int64_t slice_idx(jstate *st, const jnode *at, jv v, int64_t dflt) {
    if (v.t == JT_NONE || v.t == JT_UNDEF) return dflt;
    if (v.t != JT_INT && v.t != JT_BOOL) jfail(st, at, "slice indices must be integers or None");
    return v.u.i;
}

static jv do_slice(jstate *st, const jnode *at, jv obj, jv vs, jv ve, jv vp) {
    int64_t step = slice_idx(st, at, vp, 1);
    if (step == 0) jfail(st, at, "slice step cannot be zero");
    int64_t len;
    uint32_t *cps = NULL;
    size_t *offs = NULL;
    if (obj.t == JT_STR) {
        len = (int64_t)ju_len(obj.u.s.p, obj.u.s.n);
        offs = ja_alloc(&st->a, (size_t)(len + 1) * sizeof *offs);
        size_t i = 0;
        for (int64_t k = 0; k < len; k++) {
            offs[k] = i;
            ju_next(obj.u.s.p, obj.u.s.n, &i);
        }
        offs[len] = obj.u.s.n;
    } else if (obj.t == JT_LIST) {
        len = (int64_t)obj.u.l->n;
    } else if (obj.t == JT_UNDEF) {
        jfail_undef(st, at, obj);
    } else {
        jfail(st, at, "'%s' object is not subscriptable", jv_typename(obj));
    }
    (void)cps;
    int64_t lo, hi;
    if (step > 0) {
        lo = slice_idx(st, at, vs, 0);
        hi = slice_idx(st, at, ve, len);
        if (lo < 0) lo = lo + len < 0 ? 0 : lo + len;
        if (hi < 0) hi = hi + len < 0 ? 0 : hi + len;
        if (lo > len) lo = len;
        if (hi > len) hi = len;
    } else {
        lo = slice_idx(st, at, vs, len - 1);
        hi = slice_idx(st, at, ve, -1 - len);
        if (lo < 0) lo = lo + len < 0 ? -1 : lo + len;
        if (hi < 0) hi = hi + len < 0 ? -1 : hi + len;
        if (lo >= len) lo = len - 1;
        if (hi >= len) hi = len - 1;
    }
    if (obj.t == JT_STR) {
        jbuf b;
        jb_init(&b, &st->a);
        jb_put(&b, "", 0);
        if (step == 1) {
            if (hi > lo) jb_put(&b, obj.u.s.p + offs[lo], offs[hi] - offs[lo]);
        } else {
            for (int64_t k = lo; step > 0 ? k < hi : k > hi; k += step) jb_put(&b, obj.u.s.p + offs[k], offs[k + 1] - offs[k]);
        }
        return jb_val(&b);
    }
    jv r = jv_newlist(&st->a, 0);
    r.tuple = obj.tuple;
    for (int64_t k = lo; step > 0 ? k < hi : k > hi; k += step) jl_push(&st->a, r.u.l, obj.u.l->v[k]);
    return r;
}

/* ---------------- calls ---------------- */

typedef struct cargs {
    jv *pos;
    int npos;
    const char **kwn;
    jv *kwv;
    int nkw;
} cargs;

static void eval_args(jstate *st, jframe *f, const jnode *call, cargs *ca, int extra_kw) {
    ca->pos = ja_alloc(&st->a, (size_t)(call->nv + 1) * sizeof(jv));
    ca->kwv = ja_alloc(&st->a, (size_t)(call->nv + 1 + extra_kw) * sizeof(jv));
    ca->kwn = ja_alloc(&st->a, (size_t)(call->nv + 1 + extra_kw) * sizeof(char *));
    ca->npos = ca->nkw = 0;
    for (int i = 0; i < call->nv; i++) {
        const jnode *x = call->v[i];
        if (x->k == N_KW) {
            ca->kwn[ca->nkw] = ja_strdup(&st->a, x->lit.u.s.p, x->lit.u.s.n);
            ca->kwv[ca->nkw++] = jeval(st, x->a, f);
        } else {
            ca->pos[ca->npos++] = jeval(st, x, f);
        }
    }
}

static int uses_name(const jnode *n, const char *name, int depth) {
    if (!n || depth > 400) return 0;
    if (n->k == N_NAME && n->lit.u.s.n == strlen(name) && !memcmp(n->lit.u.s.p, name, n->lit.u.s.n)) return 1;
    if (n->k == N_MACRO && depth > 0) return 0;
    const jnode *k[] = {n->a, n->b, n->c, n->d, n->e};
    for (int i = 0; i < 5; i++)
        if (uses_name(k[i], name, depth + 1)) return 1;
    for (int i = 0; i < n->nv; i++)
        if (uses_name(n->v[i], name, depth + 1)) return 1;
    for (int i = 0; i < n->nw; i++)
        if (uses_name(n->w[i], name, depth + 1)) return 1;
    return 0;
}

static void exec_body(jstate *st, const jnode *n, jframe *f, int *ctl);

static jv call_macro(jstate *st, const jnode *at, jmacro *m, cargs *ca) {
    const jnode *def = m->node;
    int is_caller = def->k == N_CALLBLOCK;
    const char *mname = is_caller ? "caller" : ja_strdup(&st->a, def->lit.u.s.p, def->lit.u.s.n);
    jframe *f = frame_new(st, m->closure);
    int np = def->nv;
    int want_var = uses_name(def->b, "varargs", 0), want_kw = uses_name(def->b, "kwargs", 0);
    int want_caller = uses_name(def->b, "caller", 0);
    if (ca->npos > np && !want_var)
        jfail(st, at, "macro '%s' takes not more than %d argument(s)", mname, np);
    jv *vals = ja_alloc(&st->a, (size_t)(np + 1) * sizeof(jv));
    uint8_t *set = ja_alloc(&st->a, (size_t)np + 1);
    for (int i = 0; i < np && i < ca->npos; i++) {
        vals[i] = ca->pos[i];
        set[i] = 1;
    }
    jv kw = jv_newdict(&st->a, 0);
    jv caller = {.t = JT_UNDEF};
    int have_caller = 0;
    for (int k = 0; k < ca->nkw; k++) {
        int hit = 0;
        for (int i = 0; i < np; i++) {
            const jnode *p = def->v[i];
            if (p->lit.u.s.n == strlen(ca->kwn[k]) && !memcmp(p->lit.u.s.p, ca->kwn[k], p->lit.u.s.n)) {
                if (set[i] && i < ca->npos) jfail(st, at, "macro '%s' got multiple values for argument '%s'", mname, ca->kwn[k]);
                vals[i] = ca->kwv[k];
                set[i] = 1;
                hit = 1;
            }
        }
        if (hit) continue;
        if (!strcmp(ca->kwn[k], "caller") && !is_caller) {
            caller = ca->kwv[k];
            have_caller = 1;
            continue;
        }
        if (!want_kw) jfail(st, at, "macro '%s' takes no keyword argument '%s'", mname, ca->kwn[k]);
        jd_set(&st->a, kw.u.d, jv_cstr(ca->kwn[k]), ca->kwv[k]);
    }
    if (have_caller && !want_caller) jfail(st, at, "macro '%s' takes no keyword argument 'caller'", mname);
    for (int i = 0; i < np; i++) {
        if (!set[i]) {
            if (def->w[i]) vals[i] = jeval(st, def->w[i], f);
            else {
                jbuf b;
                jb_init(&b, &st->a);
                jb_printf(&b, "parameter '%.*s' was not provided", (int)def->v[i]->lit.u.s.n, def->v[i]->lit.u.s.p);
                vals[i] = jv_undef_msg(b.p, b.n);
            }
        }
        fset(st, f, def->v[i]->lit, vals[i]);
    }
    jv va = jv_newlist(&st->a, 0);
    va.tuple = 1;
    for (int i = np; i < ca->npos; i++) jl_push(&st->a, va.u.l, ca->pos[i]);
    fset(st, f, jv_cstr("varargs"), va);
    fset(st, f, jv_cstr("kwargs"), kw);
    if (!is_caller) {
        if (have_caller) fset(st, f, jv_cstr("caller"), caller);
        else if (m->caller.t == JT_MACRO) fset(st, f, jv_cstr("caller"), m->caller);
    }
    enter(st, at);
    jbuf tmp;
    jbuf *old = push_out(st, &tmp);
    int ctl = 0;
    exec_body(st, def->b, f, &ctl);
    st->out = old;
    st->depth--;
    return jb_val(&tmp);
}

static jv g_range(jstate *st, const jnode *at, cargs *ca) {
    int64_t a = 0, b, s = 1;
    for (int i = 0; i < ca->npos; i++)
        if (ca->pos[i].t != JT_INT && ca->pos[i].t != JT_BOOL)
            jfail(st, at, "'%s' object cannot be interpreted as an integer", jv_typename(ca->pos[i]));
    if (ca->npos == 1) b = ca->pos[0].u.i;
    else if (ca->npos == 2 || ca->npos == 3) {
        a = ca->pos[0].u.i;
        b = ca->pos[1].u.i;
        if (ca->npos == 3) s = ca->pos[2].u.i;
    } else {
        jfail(st, at, "range expected at most 3 arguments, got %d", ca->npos);
    }
    if (s == 0) jfail(st, at, "range() arg 3 must not be zero");
    double cnt = s > 0 ? ceil(((double)b - (double)a) / (double)s) : ceil(((double)a - (double)b) / (double)-s);
    if (cnt < 0) cnt = 0;
    if (cnt > 100000) jfail(st, at, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    jv r = jv_newlist(&st->a, (size_t)cnt);
    for (int64_t x = a; s > 0 ? x < b : x > b; x += s) jl_push(&st->a, r.u.l, jv_int(x));
    return r;
}

static jv g_strftime(jstate *st, const jnode *at, cargs *ca) {
    if (ca->npos != 1 || ca->pos[0].t != JT_STR) jfail(st, at, "strftime_now() takes one string argument");
    char fmt[256], out[512];
    size_t n = ca->pos[0].u.s.n < sizeof fmt - 1 ? ca->pos[0].u.s.n : sizeof fmt - 1;
    memcpy(fmt, ca->pos[0].u.s.p, n);
    fmt[n] = 0;
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    size_t k = strftime(out, sizeof out, fmt, &tm);
    return jv_str(ja_strdup(&st->a, out, k), k);
}

jv jcall_value(jstate *st, jv callee, jv *args, int nargs, const char **kwn, jv *kwv, int nkw, const jnode *at) {
    cargs ca = {args, nargs, kwn, kwv, nkw};
    switch (callee.t) {
    case JT_MACRO: return call_macro(st, at, callee.u.m, &ca);
    case JT_METHOD: return jcall_method(st, at, *callee.u.bound, callee.name, args, nargs, kwn, kwv, nkw);
    case JT_FUNC:
        switch (callee.fn) {
        case JF_RAISE: {
            jv m = nargs ? jv_tostr(&st->a, args[0]) : jv_str("", 0);
            zl_err *e = st->a.err;
            snprintf(e->msg, sizeof e->msg, "%.*s", (int)m.u.s.n, m.u.s.p);
            e->code = ZL_EINVAL;
            longjmp(*st->a.jb, 1);
        }
        case JF_RANGE: return g_range(st, at, &ca);
        case JF_STRFTIME: return g_strftime(st, at, &ca);
        case JF_NAMESPACE:
        case JF_DICT: {
            jv d = jv_newdict(&st->a, 0);
            if (nargs > 1) jfail(st, at, "%s expected at most 1 argument, got %d", callee.fn == JF_DICT ? "dict" : "namespace", nargs);
            if (nargs == 1) {
                if (args[0].t != JT_DICT && args[0].t != JT_NS) jfail(st, at, "cannot convert %s to a dict", jv_typename(args[0]));
                for (size_t i = 0; i < args[0].u.d->n; i++) jd_set(&st->a, d.u.d, args[0].u.d->k[i], args[0].u.d->v[i]);
            }
            for (int i = 0; i < nkw; i++) jd_set(&st->a, d.u.d, jv_cstr(kwn[i]), kwv[i]);
            if (callee.fn == JF_NAMESPACE) d.t = JT_NS;
            return d;
        }
        }
        break;
    case JT_UNDEF: jfail_undef(st, at, callee);
    default: break;
    }
    jfail(st, at, "'%s' object is not callable", jv_typename(callee));
}

/* ---------------- expressions ---------------- */

static jv eval_filter(jstate *st, const jnode *n, jframe *f, jv x) {
    cargs ca;
    eval_args(st, f, n, &ca, 0);
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)n->lit.u.s.n, n->lit.u.s.p);
    return jfilter(st, n, name, x, ca.pos, ca.npos, ca.kwn, ca.kwv, ca.nkw);
}

jv jeval(jstate *st, const jnode *n, jframe *f) {
    enter(st, n);
    jv r;
    switch (n->k) {
    case N_LIT: r = n->lit; break;
    case N_NAME: r = lookup(st, f, n->lit); break;
    case N_ATTR: {
        jv o = jeval(st, n->a, f);
        r = jgetattr(st, n, o, n->lit.u.s.p, n->lit.u.s.n);
        break;
    }
    case N_ITEM: {
        jv o = jeval(st, n->a, f);
        jv k = jeval(st, n->b, f);
        r = jgetitem(st, n, o, k);
        break;
    }
    case N_SLICE: {
        jv o = jeval(st, n->a, f);
        jv none = jv_none();
        r = do_slice(st, n, o, n->b ? jeval(st, n->b, f) : none, n->c ? jeval(st, n->c, f) : none,
                     n->d ? jeval(st, n->d, f) : none);
        break;
    }
    case N_CALL: {
        jv callee = jeval(st, n->a, f);
        cargs ca;
        eval_args(st, f, n, &ca, 0);
        r = jcall_value(st, callee, ca.pos, ca.npos, ca.kwn, ca.kwv, ca.nkw, n);
        break;
    }
    case N_FILTER: r = eval_filter(st, n, f, jeval(st, n->a, f)); break;
    case N_TEST: {
        jv x = jeval(st, n->a, f);
        jv *args = ja_alloc(&st->a, (size_t)(n->nv + 1) * sizeof(jv));
        for (int i = 0; i < n->nv; i++) args[i] = jeval(st, n->v[i]->k == N_KW ? n->v[i]->a : n->v[i], f);
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)n->lit.u.s.n, n->lit.u.s.p);
        int t = jtest(st, n, name, x, args, n->nv);
        r = jv_bool(n->op ? !t : t);
        break;
    }
    case N_NEG:
    case N_POS: {
        jv x = jeval(st, n->a, f);
        if (x.t == JT_UNDEF) jfail_undef(st, n, x);
        if (x.t == JT_INT || x.t == JT_BOOL) {
            if (n->k == N_NEG && x.u.i == INT64_MIN) jfail(st, n, "integer overflow");
            r = jv_int(n->k == N_NEG ? -x.u.i : x.u.i);
        } else if (x.t == JT_FLOAT) {
            r = jv_float(n->k == N_NEG ? -x.u.f : x.u.f);
        } else {
            jfail(st, n, "bad operand type for unary %c: '%s'", n->k == N_NEG ? '-' : '+', jv_typename(x));
        }
        break;
    }
    case N_NOT: r = jv_bool(!jv_truthy(jeval(st, n->a, f))); break;
    case N_BIN: {
        jv a = jeval(st, n->a, f);
        jv b = jeval(st, n->b, f);
        r = binop(st, n, n->op, a, b);
        break;
    }
    case N_AND: {
        jv a = jeval(st, n->a, f);
        r = jv_truthy(a) ? jeval(st, n->b, f) : a;
        break;
    }
    case N_OR: {
        jv a = jeval(st, n->a, f);
        r = jv_truthy(a) ? a : jeval(st, n->b, f);
        break;
    }
    case N_CMP: {
        jv a = jeval(st, n->a, f);
        r = jv_bool(1);
        for (int i = 0; i < n->nv; i++) {
            jv b = jeval(st, n->v[i]->a, f);
            jv c = binop(st, n->v[i], n->v[i]->op, a, b);
            if (!c.u.i) { r = c; break; }
            a = b;
        }
        break;
    }
    case N_COND:
        if (jv_truthy(jeval(st, n->a, f))) r = jeval(st, n->b, f);
        else if (n->c) r = jeval(st, n->c, f);
        else {
            jbuf b;
            jb_init(&b, &st->a);
            jb_printf(&b, "the inline if-expression on line %d evaluated to false and no else section was defined.", n->line);
            r = jv_undef_msg(b.p, b.n);
        }
        break;
    case N_LIST:
    case N_TUPLE:
        r = jv_newlist(&st->a, (size_t)n->nv);
        r.tuple = n->k == N_TUPLE;
        for (int i = 0; i < n->nv; i++) jl_push(&st->a, r.u.l, jeval(st, n->v[i], f));
        break;
    case N_DICT:
        r = jv_newdict(&st->a, (size_t)n->nv);
        for (int i = 0; i < n->nv; i++) {
            jv k = jeval(st, n->v[i], f);
            if (k.t == JT_LIST && !k.tuple) jfail(st, n, "unhashable type: 'list'");
            if (k.t == JT_DICT) jfail(st, n, "unhashable type: 'dict'");
            jd_set(&st->a, r.u.d, k, jeval(st, n->w[i], f));
        }
        break;
    default: jfail(st, n, "internal error: bad expression node %d", n->k);
    }
    st->depth--;
    return r;
}

/* ---------------- statements ---------------- */

static void assign(jstate *st, const jnode *target, jframe *f, jv v) {
    if (target->k == N_NAME) {
        fset(st, f, target->lit, v);
        return;
    }
    if (target->k == N_ATTR) {
        jv ns = lookup(st, f, target->a->lit);
        if (ns.t != JT_NS) jfail(st, target, "cannot assign attribute on non-namespace object");
        jd_set(&st->a, ns.u.d, target->lit, v);
        return;
    }
    /* tuple unpacking */
    if (v.t == JT_UNDEF) jfail_undef(st, target, v);
    if (v.t != JT_LIST && v.t != JT_DICT && v.t != JT_STR)
        jfail(st, target, "cannot unpack non-iterable %s object", jv_typename(v));
    jlist *items = jiter(st, target, v);
    if (items->n < (size_t)target->nv)
        jfail(st, target, "not enough values to unpack (expected %d, got %zu)", target->nv, items->n);
    if (items->n > (size_t)target->nv) jfail(st, target, "too many values to unpack (expected %d)", target->nv);
    for (int i = 0; i < target->nv; i++) assign(st, target->v[i], f, items->v[i]);
}

static void exec_stmt(jstate *st, const jnode *n, jframe *f, int *ctl);

static void exec_body(jstate *st, const jnode *n, jframe *f, int *ctl) {
    if (!n) return;
    for (int i = 0; i < n->nv; i++) {
        exec_stmt(st, n->v[i], f, ctl);
        if (*ctl) return;
    }
}

static jv render_block(jstate *st, const jnode *body, jframe *f) {
    jbuf tmp;
    jbuf *old = push_out(st, &tmp);
    int ctl = 0;
    exec_body(st, body, f, &ctl);
    st->out = old;
    return jb_val(&tmp);
}

static jv apply_filters(jstate *st, const jnode *n, jframe *f, jv x) {
    for (int i = 0; i < n->nv; i++) x = eval_filter(st, n->v[i], f, x);
    return x;
}

static void exec_for(jstate *st, const jnode *n, jframe *f, int *ctl) {
    jv it = jeval(st, n->b, f);
    jlist *items = jiter(st, n->b, it);
    jframe *lf = frame_new(st, f);
    if (n->c) {
        jlist *kept = ja_alloc(&st->a, sizeof *kept);
        for (size_t i = 0; i < items->n; i++) {
            if (++st->iters > st->lim.max_iters) jfail(st, n, "template loops exceeded their limit (%lld iterations)", st->lim.max_iters);
            assign(st, n->a, lf, items->v[i]);
            if (jv_truthy(jeval(st, n->c, lf))) jl_push(&st->a, kept, items->v[i]);
        }
        items = kept;
    }
    if (items->n == 0) {
        if (n->e) exec_body(st, n->e, f, ctl);
        return;
    }
    jloop *lp = ja_alloc(&st->a, sizeof *lp);
    lp->items = items;
    lp->depth = 1; /* loop.depth counts recursive-loop levels; plain nested loops are all at 1 */
    ++st->loop_depth;
    jv lv = {.t = JT_LOOP};
    lv.u.lp = lp;
    jv loopname = jv_cstr("loop");
    for (size_t i = 0; i < items->n; i++) {
        if (++st->iters > st->lim.max_iters) jfail(st, n, "template loops exceeded their limit (%lld iterations)", st->lim.max_iters);
        lp->i = i;
        assign(st, n->a, lf, items->v[i]);
        fset(st, lf, loopname, lv);
        int c = 0;
        exec_body(st, n->d, lf, &c);
        if (c == C_BREAK) break;
    }
    st->loop_depth--;
    *ctl = 0;
}

static void exec_stmt(jstate *st, const jnode *n, jframe *f, int *ctl) {
    enter(st, n);
    switch (n->k) {
    case N_TEXT: jb_put(st->out, n->lit.u.s.p, n->lit.u.s.n); break;
    case N_OUT: out_val(st, jeval(st, n->a, f)); break;
    case N_BODY: exec_body(st, n, f, ctl); break;
    case N_IF: {
        const jnode *c = n;
        while (c) {
            if (c->k != N_IF) { exec_body(st, c, f, ctl); break; }
            if (jv_truthy(jeval(st, c->a, f))) { exec_body(st, c->b, f, ctl); break; }
            c = c->c;
        }
        break;
    }
    case N_FOR: exec_for(st, n, f, ctl); break;
    case N_SET: assign(st, n->a, f, jeval(st, n->b, f)); break;
    case N_SETBLOCK: {
        jv v = render_block(st, n->b, f);
        assign(st, n->a, f, apply_filters(st, n, f, v));
        break;
    }
    case N_MACRO: {
        jv m = {.t = JT_MACRO};
        m.u.m = ja_alloc(&st->a, sizeof *m.u.m);
        m.u.m->node = n;
        m.u.m->closure = f;
        fset(st, f, n->lit, m);
        break;
    }
    case N_CALLBLOCK: {
        jv caller = {.t = JT_MACRO};
        caller.u.m = ja_alloc(&st->a, sizeof *caller.u.m);
        caller.u.m->node = n;
        caller.u.m->closure = f;
        const jnode *call = n->a;
        jv callee = jeval(st, call->a, f);
        cargs ca;
        eval_args(st, f, call, &ca, 1);
        ca.kwn[ca.nkw] = "caller";
        ca.kwv[ca.nkw++] = caller;
        out_val(st, jcall_value(st, callee, ca.pos, ca.npos, ca.kwn, ca.kwv, ca.nkw, call));
        break;
    }
    case N_FILTERBLOCK: out_val(st, apply_filters(st, n, f, render_block(st, n->b, f))); break;
    case N_WITH: {
        jframe *wf = frame_new(st, f);
        for (int i = 0; i < n->nv; i++) assign(st, n->v[i], wf, jeval(st, n->w[i], f));
        exec_body(st, n->b, wf, ctl);
        break;
    }
    case N_BREAK: *ctl = C_BREAK; break;
    case N_CONTINUE: *ctl = C_CONTINUE; break;
    default: jfail(st, n, "internal error: bad statement node %d", n->k);
    }
    st->depth--;
}

/* ---------------- variables + entry ---------------- */

struct zl_jinja_vars {
    jarena a;
    jdict d;
};

zl_jinja_vars *zl_jinja_vars_new(void) { return calloc(1, sizeof(zl_jinja_vars)); }

void zl_jinja_vars_free(zl_jinja_vars *v) {
    if (!v) return;
    ja_free(&v->a);
    free(v);
}

#define VARS_TRY(v, err)                                                                                               \
    jmp_buf jb;                                                                                                        \
    zl_err local = {0};                                                                                                \
    v->a.jb = &jb;                                                                                                     \
    v->a.err = err ? err : &local;                                                                                     \
    if (setjmp(jb)) return v->a.err->code ? v->a.err->code : ZL_EINVAL

int zl_jinja_vars_json(zl_jinja_vars *v, const char *name, const char *json, size_t n, zl_err *err) {
    VARS_TRY(v, err);
    jv x = jjson_parse(&v->a, json, n);
    if (!name) {
        if (x.t != JT_DICT) return zl_errf(err, ZL_EINVAL, "template variables: expected a JSON object");
        for (size_t i = 0; i < x.u.d->n; i++) jd_set(&v->a, &v->d, x.u.d->k[i], x.u.d->v[i]);
        return 0;
    }
    size_t l = strlen(name);
    jd_set(&v->a, &v->d, jv_str(ja_strdup(&v->a, name, l), l), x);
    return 0;
}

int zl_jinja_vars_str(zl_jinja_vars *v, const char *name, const char *s, zl_err *err) {
    VARS_TRY(v, err);
    size_t l = strlen(name), m = strlen(s);
    jd_set(&v->a, &v->d, jv_str(ja_strdup(&v->a, name, l), l), jv_str(ja_strdup(&v->a, s, m), m));
    return 0;
}

int zl_jinja_vars_bool(zl_jinja_vars *v, const char *name, int b, zl_err *err) {
    VARS_TRY(v, err);
    size_t l = strlen(name);
    jd_set(&v->a, &v->d, jv_str(ja_strdup(&v->a, name, l), l), jv_bool(b));
    return 0;
}

int zl_jinja_render(const zl_jinja *t, const zl_jinja_vars *v, const zl_jinja_limits *lim, char **out, size_t *n,
                    zl_err *err) {
    *out = NULL;
    if (n) *n = 0;
    jstate *st = calloc(1, sizeof *st);
    if (!st) return zl_errf(err, ZL_ENOMEM, "out of memory");
    zl_jinja_limits L = {32u << 20, 256u << 20, 5000000, 400};
    if (lim) {
        if (lim->max_output) L.max_output = lim->max_output;
        if (lim->max_memory) L.max_memory = lim->max_memory;
        if (lim->max_iters) L.max_iters = lim->max_iters;
        if (lim->max_depth) L.max_depth = lim->max_depth;
    }
    st->lim = L;
    jmp_buf jb;
    zl_err local = {0};
    st->a.jb = &jb;
    st->a.err = err ? err : &local;
    st->a.err->code = 0;
    st->a.cap = L.max_memory;
    if (setjmp(jb)) {
        int code = st->a.err->code ? st->a.err->code : ZL_EINVAL;
        ja_free(&st->a);
        free(st);
        return code;
    }
    jframe *g = frame_new(st, NULL);
    static const struct { const char *name; int fn; } globals[] = {
        {"raise_exception", JF_RAISE}, {"range", JF_RANGE}, {"namespace", JF_NAMESPACE},
        {"dict", JF_DICT}, {"strftime_now", JF_STRFTIME}};
    for (size_t i = 0; i < sizeof globals / sizeof *globals; i++) {
        jv fv = {.t = JT_FUNC, .fn = (uint16_t)globals[i].fn};
        fset(st, g, jv_cstr(globals[i].name), fv);
    }
    if (v)
        for (size_t i = 0; i < v->d.n; i++) fset(st, g, v->d.k[i], v->d.v[i]);
    jframe *top = frame_new(st, g);
    jbuf o;
    push_out(st, &o);
    int ctl = 0;
    exec_body(st, t->root, top, &ctl);
    char *res = malloc(o.n + 1);
    if (!res) {
        ja_free(&st->a);
        free(st);
        return zl_errf(err, ZL_ENOMEM, "out of memory");
    }
    if (o.n) memcpy(res, o.p, o.n);
    res[o.n] = 0;
    *out = res;
    if (n) *n = o.n;
    ja_free(&st->a);
    free(st);
    return 0;
}
