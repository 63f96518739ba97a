/* jinja_parse.c — tokens to a syntax tree, with jinja2's grammar and operator
 * precedence (or < and < not < comparisons < + - < ~ < * / // % < ** < unary
 * < postfix, filters and tests binding to the primary they follow).  Also
 * the entry point zl_jinja_parse: newline normalisation (\r\n and \r become
 * \n; one trailing newline is dropped, as jinja2 does by default).  Never
 * evaluates anything; nesting is bounded so hostile input cannot exhaust the
 * stack. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_internal.h"

#define MAX_NEST 100

typedef struct ps {
    jarena *a;
    jtok *t;
    size_t n, i;
    int depth;
    int soft; /* inside an if block: unknown filters/tests fail at run time, as jinja2 does */
} ps;

static const char *tok_desc(const jtok *t, char *buf, size_t cap) {
    switch (t->k) {
    case TK_EOF: return "end of template";
    case TK_DATA: return "template data";
    case TK_VAR_BEGIN: return "begin of print statement";
    case TK_VAR_END: return "end of print statement";
    case TK_BLOCK_BEGIN: return "begin of statement block";
    case TK_BLOCK_END: return "end of statement block";
    case TK_NAME:
    case TK_STRING: snprintf(buf, cap, "%.*s", (int)(t->n > 60 ? 60 : t->n), t->p); return buf;
    case TK_INT: snprintf(buf, cap, "%lld", (long long)t->i); return buf;
    case TK_FLOAT: snprintf(buf, cap, "%g", t->f); return buf;
    case TK_OP: snprintf(buf, cap, "%s", t->op); return buf;
    }
    return "?";
}

_Noreturn __attribute__((format(printf, 3, 4))) static void pfail(ps *P, const jtok *t, const char *fmt, ...) {
    char m[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    ja_fail(P->a, ZL_EINVAL, "line %d, column %d: %s", t->line, t->col, m);
}

static jtok *cur(ps *P) { return &P->t[P->i]; }
static jtok *peek(ps *P, size_t k) { return &P->t[P->i + k < P->n ? P->i + k : P->n - 1]; }
static jtok *next(ps *P) {
    jtok *t = cur(P);
    if (P->i + 1 < P->n) P->i++;
    return t;
}
static int is_op(const jtok *t, const char *op) { return t->k == TK_OP && !strcmp(t->op, op); }
static int is_name(const jtok *t, const char *nm) {
    return t->k == TK_NAME && t->n == strlen(nm) && !memcmp(t->p, nm, t->n);
}

static void expect_op(ps *P, const char *op) {
    jtok *t = cur(P);
    char b[80];
    if (!is_op(t, op)) pfail(P, t, "expected token '%s', got '%s'", op, tok_desc(t, b, sizeof b));
    next(P);
}

static void expect_kind(ps *P, int k, const char *what) {
    jtok *t = cur(P);
    char b[80];
    if (t->k != k) pfail(P, t, "expected token '%s', got '%s'", what, tok_desc(t, b, sizeof b));
    next(P);
}

static jtok *expect_name(ps *P) {
    jtok *t = cur(P);
    char b[80];
    if (t->k != TK_NAME) pfail(P, t, "expected token 'name', got '%s'", tok_desc(t, b, sizeof b));
    return next(P);
}

static jnode *mk(ps *P, int k, const jtok *at) {
    jnode *n = ja_alloc(P->a, sizeof *n);
    n->k = (uint16_t)k;
    n->line = at->line;
    n->col = at->col;
    return n;
}

typedef struct nvec {
    jnode **v;
    int n, cap;
} nvec;

static void nv_push(ps *P, nvec *v, jnode *x) {
    if (v->n == v->cap) {
        int nc = v->cap ? v->cap * 2 : 4;
        jnode **nn = ja_alloc(P->a, (size_t)nc * sizeof *nn);
        if (v->n) memcpy(nn, v->v, (size_t)v->n * sizeof *nn);
        v->v = nn;
        v->cap = nc;
    }
    v->v[v->n++] = x;
}

static void enter(ps *P) {
    if (++P->depth > MAX_NEST) pfail(P, cur(P), "template nested too deeply (more than %d levels)", MAX_NEST);
}
static void leave(ps *P) { P->depth--; }

static jnode *parse_expr(ps *P);
static jnode *parse_or(ps *P);
static jnode *parse_unary(ps *P, int with_filter);
static jnode *parse_tuple(ps *P, int with_condexpr, int explicit_parens);
static jnode *parse_postfix(ps *P, jnode *node);

static jv tok_str(const jtok *t) { return jv_str(t->p, t->n); }

static void parse_call_args(ps *P, nvec *args) {
    expect_op(P, "(");
    int kw_seen = 0;
    while (!is_op(cur(P), ")")) {
        if (args->n) expect_op(P, ",");
        if (is_op(cur(P), ")")) break;
        jtok *t = cur(P);
        if (is_op(t, "*") || is_op(t, "**")) pfail(P, t, "*args and **kwargs in calls are not supported");
        if (t->k == TK_NAME && is_op(peek(P, 1), "=")) {
            next(P);
            next(P);
            jnode *k = mk(P, N_KW, t);
            k->lit = tok_str(t);
            k->a = parse_expr(P);
            nv_push(P, args, k);
            kw_seen = 1;
        } else {
            if (kw_seen) pfail(P, t, "invalid syntax for function call expression");
            nv_push(P, args, parse_expr(P));
        }
    }
    next(P);
}

static jnode *parse_primary(ps *P) {
    enter(P);
    jtok *t = cur(P);
    jnode *n;
    char b[80];
    if (t->k == TK_NAME) {
        next(P);
        if (is_name(t, "true") || is_name(t, "True") || is_name(t, "false") || is_name(t, "False")) {
            n = mk(P, N_LIT, t);
            n->lit = jv_bool(t->p[0] == 't' || t->p[0] == 'T');
        } else if (is_name(t, "none") || is_name(t, "None")) {
            n = mk(P, N_LIT, t);
            n->lit = jv_none();
        } else {
            n = mk(P, N_NAME, t);
            n->lit = tok_str(t);
        }
    } else if (t->k == TK_STRING) {
        next(P);
        n = mk(P, N_LIT, t);
        if (cur(P)->k == TK_STRING) {
            jbuf sb;
            jb_init(&sb, P->a);
            jb_put(&sb, t->p, t->n);
            while (cur(P)->k == TK_STRING) {
                jtok *u = next(P);
                jb_put(&sb, u->p, u->n);
            }
            n->lit = jb_val(&sb);
        } else {
            n->lit = tok_str(t);
        }
    } else if (t->k == TK_INT || t->k == TK_FLOAT) {
        next(P);
        n = mk(P, N_LIT, t);
        n->lit = t->k == TK_INT ? jv_int(t->i) : jv_float(t->f);
    } else if (is_op(t, "(")) {
        next(P);
        n = parse_tuple(P, 1, 1);
        expect_op(P, ")");
    } else if (is_op(t, "[")) {
        next(P);
        nvec v = {0};
        while (!is_op(cur(P), "]")) {
            if (v.n) expect_op(P, ",");
            if (is_op(cur(P), "]")) break;
            nv_push(P, &v, parse_expr(P));
        }
        next(P);
        n = mk(P, N_LIST, t);
        n->v = v.v;
        n->nv = v.n;
    } else if (is_op(t, "{")) {
        next(P);
        nvec k = {0}, v = {0};
        while (!is_op(cur(P), "}")) {
            if (k.n) expect_op(P, ",");
            if (is_op(cur(P), "}")) break;
            nv_push(P, &k, parse_expr(P));
            expect_op(P, ":");
            nv_push(P, &v, parse_expr(P));
        }
        next(P);
        n = mk(P, N_DICT, t);
        n->v = k.v;
        n->nv = k.n;
        n->w = v.v;
        n->nw = v.n;
    } else {
        pfail(P, t, "unexpected '%s'", tok_desc(t, b, sizeof b));
    }
    leave(P);
    return n;
}

static jnode *parse_subscribed(ps *P) {
    jtok *t = cur(P);
    jnode *args[3] = {NULL, NULL, NULL};
    if (is_op(t, ":")) {
        next(P);
    } else {
        jnode *e = parse_expr(P);
        if (!is_op(cur(P), ":")) return e;
        next(P);
        args[0] = e;
    }
    jnode *s = mk(P, N_SLICE, t);
    if (!is_op(cur(P), "]") && !is_op(cur(P), ",") && !is_op(cur(P), ":")) args[1] = parse_expr(P);
    if (is_op(cur(P), ":")) {
        next(P);
        if (!is_op(cur(P), "]") && !is_op(cur(P), ",")) args[2] = parse_expr(P);
    }
    s->b = args[0];
    s->c = args[1];
    s->d = args[2];
    return s;
}

static jnode *parse_postfix(ps *P, jnode *node) {
    for (;;) {
        jtok *t = cur(P);
        if (is_op(t, ".")) {
            next(P);
            jtok *a = cur(P);
            if (a->k == TK_NAME) {
                next(P);
                jnode *n = mk(P, N_ATTR, t);
                n->a = node;
                n->lit = tok_str(a);
                node = n;
            } else if (a->k == TK_INT) {
                next(P);
                jnode *n = mk(P, N_ITEM, t);
                n->a = node;
                n->b = mk(P, N_LIT, a);
                n->b->lit = jv_int(a->i);
                node = n;
            } else {
                char b[80];
                pfail(P, a, "expected name or number, got '%s'", tok_desc(a, b, sizeof b));
            }
        } else if (is_op(t, "[")) {
            next(P);
            nvec v = {0};
            while (!is_op(cur(P), "]")) {
                if (v.n) expect_op(P, ",");
                if (is_op(cur(P), "]")) break;
                nv_push(P, &v, parse_subscribed(P));
            }
            next(P);
            if (v.n == 0) pfail(P, t, "expected subscript expression");
            jnode *idx = v.v[0];
            if (v.n > 1) {
                idx = mk(P, N_TUPLE, t);
                idx->v = v.v;
                idx->nv = v.n;
            }
            if (idx->k == N_SLICE) {
                idx->a = node;
                node = idx;
            } else {
                jnode *n = mk(P, N_ITEM, t);
                n->a = node;
                n->b = idx;
                node = n;
            }
        } else if (is_op(t, "(")) {
            nvec v = {0};
            parse_call_args(P, &v);
            jnode *n = mk(P, N_CALL, t);
            n->a = node;
            n->v = v.v;
            n->nv = v.n;
            node = n;
        } else {
            return node;
        }
    }
}

static jnode *parse_filter(ps *P, jnode *node) {
    jtok *t = cur(P);
    jtok *nm = expect_name(P);
    jbuf name;
    jb_init(&name, P->a);
    jb_put(&name, nm->p, nm->n);
    while (is_op(cur(P), ".")) {
        next(P);
        jtok *x = expect_name(P);
        jb_putc(&name, '.');
        jb_put(&name, x->p, x->n);
    }
    jnode *f = mk(P, N_FILTER, t);
    f->a = node;
    f->lit = jb_val(&name);
    if (!P->soft && !jfilter_known(name.p)) pfail(P, nm, "No filter named '%s'.", name.p);
    if (is_op(cur(P), "(")) {
        nvec v = {0};
        parse_call_args(P, &v);
        f->v = v.v;
        f->nv = v.n;
    }
    return f;
}

static jnode *parse_test(ps *P, jnode *node) {
    jtok *t = next(P); /* is */
    int neg = 0;
    if (is_name(cur(P), "not")) {
        next(P);
        neg = 1;
    }
    jtok *nm = expect_name(P);
    jnode *x = mk(P, N_TEST, t);
    x->a = node;
    x->lit = tok_str(nm);
    while (is_op(cur(P), ".")) { /* dotted test names: keep the last part */
        next(P);
        x->lit = tok_str(expect_name(P));
    }
    x->op = (uint16_t)neg;
    {
        char tn[64];
        snprintf(tn, sizeof tn, "%.*s", (int)x->lit.u.s.n, x->lit.u.s.p);
        if (!P->soft && !jtest_known(tn)) pfail(P, nm, "No test named '%s'.", tn);
    }
    jtok *c = cur(P);
    if (is_op(c, "(")) {
        nvec v = {0};
        parse_call_args(P, &v);
        x->v = v.v;
        x->nv = v.n;
    } else if ((c->k == TK_NAME || c->k == TK_STRING || c->k == TK_INT || c->k == TK_FLOAT || is_op(c, "[") ||
                is_op(c, "{")) &&
               !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
        if (is_name(c, "is")) pfail(P, c, "You cannot chain multiple tests with is");
        jnode *arg = parse_postfix(P, parse_primary(P));
        x->v = ja_alloc(P->a, sizeof *x->v);
        x->v[0] = arg;
        x->nv = 1;
    }
    return x;
}

static jnode *parse_filter_expr(ps *P, jnode *node) {
    for (;;) {
        jtok *t = cur(P);
        if (is_op(t, "|")) {
            next(P);
            node = parse_filter(P, node);
        } else if (is_name(t, "is")) {
            node = parse_test(P, node);
        } else if (is_op(t, "(")) {
            nvec v = {0};
            parse_call_args(P, &v);
            jnode *n = mk(P, N_CALL, t);
            n->a = node;
            n->v = v.v;
            n->nv = v.n;
            node = n;
        } else {
            return node;
        }
    }
}

static jnode *parse_unary(ps *P, int with_filter) {
    enter(P);
    jtok *t = cur(P);
    jnode *node;
    if (is_op(t, "-") || is_op(t, "+")) {
        next(P);
        node = mk(P, is_op(t, "-") ? N_NEG : N_POS, t);
        node->a = parse_unary(P, 0);
    } else {
        node = parse_primary(P);
    }
    node = parse_postfix(P, node);
    if (with_filter) node = parse_filter_expr(P, node);
    leave(P);
    return node;
}

static jnode *bin(ps *P, const jtok *t, int op, jnode *a, jnode *b) {
    jnode *n = mk(P, N_BIN, t);
    n->op = (uint16_t)op;
    n->a = a;
    n->b = b;
    return n;
}

static jnode *parse_pow(ps *P) {
    jnode *l = parse_unary(P, 1);
    while (is_op(cur(P), "**")) {
        jtok *t = next(P);
        l = bin(P, t, OP_POW, l, parse_unary(P, 1));
    }
    return l;
}

static jnode *parse_math2(ps *P) {
    jnode *l = parse_pow(P);
    for (;;) {
        jtok *t = cur(P);
        int op = is_op(t, "*") ? OP_MUL : is_op(t, "/") ? OP_DIV : is_op(t, "//") ? OP_FLOORDIV : is_op(t, "%") ? OP_MOD : 0;
        if (!op) return l;
        next(P);
        l = bin(P, t, op, l, parse_pow(P));
    }
}

static jnode *parse_concat(ps *P) {
    jnode *l = parse_math2(P);
    while (is_op(cur(P), "~")) {
        jtok *t = next(P);
        l = bin(P, t, OP_CONCAT, l, parse_math2(P));
    }
    return l;
}

static jnode *parse_math1(ps *P) {
    jnode *l = parse_concat(P);
    for (;;) {
        jtok *t = cur(P);
        int op = is_op(t, "+") ? OP_ADD : is_op(t, "-") ? OP_SUB : 0;
        if (!op) return l;
        next(P);
        l = bin(P, t, op, l, parse_concat(P));
    }
}

static jnode *parse_compare(ps *P) {
    jtok *t0 = cur(P);
    jnode *first = parse_math1(P);
    nvec ops = {0};
    for (;;) {
        jtok *t = cur(P);
        int op = is_op(t, "==") ? OP_EQ : is_op(t, "!=") ? OP_NE : is_op(t, "<") ? OP_LT : is_op(t, "<=") ? OP_LE
               : is_op(t, ">") ? OP_GT : is_op(t, ">=") ? OP_GE : is_name(t, "in") ? OP_IN : 0;
        if (!op && is_name(t, "not") && is_name(peek(P, 1), "in")) {
            next(P);
            op = OP_NOTIN;
        }
        if (!op) break;
        next(P);
        jnode *o = mk(P, N_CMPOP, t);
        o->op = (uint16_t)op;
        o->a = parse_math1(P);
        nv_push(P, &ops, o);
    }
    if (!ops.n) return first;
    jnode *c = mk(P, N_CMP, t0);
    c->a = first;
    c->v = ops.v;
    c->nv = ops.n;
    return c;
}

static jnode *parse_not(ps *P) {
    jtok *t = cur(P);
    if (is_name(t, "not")) {
        next(P);
        enter(P);
        jnode *n = mk(P, N_NOT, t);
        n->a = parse_not(P);
        leave(P);
        return n;
    }
    return parse_compare(P);
}

static jnode *parse_and(ps *P) {
    jnode *l = parse_not(P);
    while (is_name(cur(P), "and")) {
        jtok *t = next(P);
        jnode *n = mk(P, N_AND, t);
        n->a = l;
        n->b = parse_not(P);
        l = n;
    }
    return l;
}

static jnode *parse_or(ps *P) {
    jnode *l = parse_and(P);
    while (is_name(cur(P), "or")) {
        jtok *t = next(P);
        jnode *n = mk(P, N_OR, t);
        n->a = l;
        n->b = parse_and(P);
        l = n;
    }
    return l;
}

static jnode *parse_expr(ps *P) {
    enter(P);
    jnode *e = parse_or(P);
    while (is_name(cur(P), "if")) {
        jtok *t = next(P);
        jnode *c = mk(P, N_COND, t);
        c->b = e;
        c->a = parse_or(P);
        if (is_name(cur(P), "else")) {
            next(P);
            c->c = parse_expr(P);
        }
        e = c;
    }
    leave(P);
    return e;
}

static int tuple_ends(ps *P) {
    jtok *t = cur(P);
    return t->k == TK_VAR_END || t->k == TK_BLOCK_END || t->k == TK_EOF || is_op(t, ")") || is_op(t, "]") ||
           is_op(t, "}") || is_name(t, "in") || is_name(t, "if") || is_op(t, "=") || is_op(t, "|");
}

static jnode *parse_tuple(ps *P, int with_condexpr, int explicit_parens) {
    jtok *t = cur(P);
    nvec v = {0};
    int comma = 0;
    for (;;) {
        if (v.n) {
            if (!is_op(cur(P), ",")) break;
            next(P);
            comma = 1;
        }
        if (tuple_ends(P)) break;
        nv_push(P, &v, with_condexpr ? parse_expr(P) : parse_or(P));
    }
    if (!comma) {
        if (v.n) return v.v[0];
        if (!explicit_parens) {
            char b[80];
            pfail(P, cur(P), "Expected an expression, got '%s'", tok_desc(cur(P), b, sizeof b));
        }
    }
    jnode *n = mk(P, N_TUPLE, t);
    n->v = v.v;
    n->nv = v.n;
    return n;
}

/* name, (a, b) / a, b, or with ns: ns.attr */
static jnode *parse_target(ps *P, int with_ns) {
    jtok *t = cur(P);
    nvec v = {0};
    int comma = 0, paren = 0;
    if (is_op(t, "(")) {
        next(P);
        paren = 1;
    }
    for (;;) {
        if (is_op(cur(P), "(")) { /* nested: for a, (b, c) in ... */
            enter(P);
            nv_push(P, &v, parse_target(P, 0));
            leave(P);
            if (!is_op(cur(P), ",")) break;
            next(P);
            comma = 1;
            if (paren && is_op(cur(P), ")")) break;
            continue;
        }
        jtok *nt = expect_name(P);
        jnode *n;
        if (with_ns && is_op(cur(P), ".")) {
            next(P);
            jtok *at = expect_name(P);
            n = mk(P, N_ATTR, nt);
            n->a = mk(P, N_NAME, nt);
            n->a->lit = tok_str(nt);
            n->lit = tok_str(at);
        } else {
            n = mk(P, N_NAME, nt);
            n->lit = tok_str(nt);
            if (is_name(nt, "true") || is_name(nt, "false") || is_name(nt, "none") || is_name(nt, "True") ||
                is_name(nt, "False") || is_name(nt, "None"))
                pfail(P, nt, "Can't assign to a constant");
        }
        nv_push(P, &v, n);
        if (!is_op(cur(P), ",")) break;
        next(P);
        comma = 1;
        if (paren && is_op(cur(P), ")")) break;
    }
    if (paren) expect_op(P, ")");
    if (!comma && !paren) return v.v[0];
    if (v.n == 1 && !comma) return v.v[0];
    jnode *n = mk(P, N_TUPLE, t);
    n->v = v.v;
    n->nv = v.n;
    for (int i = 0; i < n->nv; i++)
        if (n->v[i]->k == N_ATTR) pfail(P, t, "can't assign to a namespace attribute in a tuple");
    return n;
}

static jnode *parse_body(ps *P, const char *const *ends, const char *block, int *which);

static void end_block(ps *P) { expect_kind(P, TK_BLOCK_END, "end of statement block"); }

static jnode *parse_params(ps *P, jnode *node) {
    expect_op(P, "(");
    nvec names = {0}, defs = {0};
    while (!is_op(cur(P), ")")) {
        if (names.n) expect_op(P, ",");
        if (is_op(cur(P), ")")) break;
        jtok *nt = expect_name(P);
        jnode *n = mk(P, N_NAME, nt);
        n->lit = tok_str(nt);
        nv_push(P, &names, n);
        if (is_op(cur(P), "=")) {
            next(P);
            nv_push(P, &defs, parse_expr(P));
        } else {
            if (defs.n && defs.v[defs.n - 1]) pfail(P, nt, "non-default argument follows default argument");
            nv_push(P, &defs, NULL);
        }
    }
    next(P);
    node->v = names.v;
    node->nv = names.n;
    node->w = defs.v;
    node->nw = defs.n;
    return node;
}

static jnode *parse_stmt(ps *P) {
    jtok *t = cur(P); /* the tag name */
    char b[80];
    if (t->k != TK_NAME) pfail(P, t, "tag name expected");
    enter(P);
    jnode *n;
    int outer_soft = P->soft;
    if (!is_name(t, "if") && !is_name(t, "set")) P->soft = 0; /* loops, macros, blocks open a new frame */
    if (is_name(t, "for")) {
        next(P);
        n = mk(P, N_FOR, t);
        n->a = parse_target(P, 0);
        if (!is_name(cur(P), "in")) pfail(P, cur(P), "expected token 'in', got '%s'", tok_desc(cur(P), b, sizeof b));
        next(P);
        n->b = parse_tuple(P, 0, 0);
        if (is_name(cur(P), "if")) {
            next(P);
            n->c = parse_expr(P);
        }
        if (is_name(cur(P), "recursive")) pfail(P, cur(P), "recursive for loops are not supported");
        end_block(P);
        static const char *const e1[] = {"endfor", "else", NULL};
        int w;
        n->d = parse_body(P, e1, "for", &w);
        if (w == 1) {
            next(P);
            end_block(P);
            static const char *const e2[] = {"endfor", NULL};
            n->e = parse_body(P, e2, "for", &w);
        }
        next(P);
        end_block(P);
    } else if (is_name(t, "if")) {
        next(P);
        int was_soft = P->soft;
        P->soft = 1;
        n = mk(P, N_IF, t);
        jnode *c = n;
        for (;;) {
            c->a = parse_tuple(P, 1, 0);
            end_block(P);
            static const char *const e[] = {"elif", "else", "endif", NULL};
            int w;
            c->b = parse_body(P, e, "if", &w);
            if (w == 0) {
                jnode *el = mk(P, N_IF, cur(P));
                next(P);
                c->c = el;
                c = el;
                continue;
            }
            if (w == 1) {
                next(P);
                end_block(P);
                static const char *const e2[] = {"endif", NULL};
                c->c = parse_body(P, e2, "if", &w);
            }
            next(P);
            end_block(P);
            break;
        }
        P->soft = was_soft;
    } else if (is_name(t, "set")) {
        next(P);
        jnode *target = parse_target(P, 1);
        if (is_op(cur(P), "=")) {
            next(P);
            n = mk(P, N_SET, t);
            n->a = target;
            n->b = parse_tuple(P, 1, 0);
            end_block(P);
        } else {
            n = mk(P, N_SETBLOCK, t);
            P->soft = 0;
            n->a = target;
            if (target->k != N_NAME && target->k != N_ATTR) pfail(P, t, "a block set takes a single name");
            nvec fl = {0};
            while (is_op(cur(P), "|")) {
                next(P);
                nv_push(P, &fl, parse_filter(P, NULL));
            }
            n->v = fl.v;
            n->nv = fl.n;
            end_block(P);
            static const char *const e[] = {"endset", NULL};
            int w;
            n->b = parse_body(P, e, "set", &w);
            next(P);
            end_block(P);
        }
    } else if (is_name(t, "macro")) {
        next(P);
        n = mk(P, N_MACRO, t);
        n->lit = tok_str(expect_name(P));
        parse_params(P, n);
        end_block(P);
        static const char *const e[] = {"endmacro", NULL};
        int w;
        n->b = parse_body(P, e, "macro", &w);
        next(P);
        if (cur(P)->k == TK_NAME) next(P); /* {% endmacro name %} */
        end_block(P);
    } else if (is_name(t, "call")) {
        next(P);
        n = mk(P, N_CALLBLOCK, t);
        if (is_op(cur(P), "(")) parse_params(P, n);
        n->a = parse_expr(P);
        if (n->a->k != N_CALL) pfail(P, t, "expected call");
        end_block(P);
        static const char *const e[] = {"endcall", NULL};
        int w;
        n->b = parse_body(P, e, "call", &w);
        next(P);
        end_block(P);
    } else if (is_name(t, "filter")) {
        next(P);
        n = mk(P, N_FILTERBLOCK, t);
        nvec fl = {0};
        nv_push(P, &fl, parse_filter(P, NULL));
        while (is_op(cur(P), "|")) {
            next(P);
            nv_push(P, &fl, parse_filter(P, NULL));
        }
        n->v = fl.v;
        n->nv = fl.n;
        end_block(P);
        static const char *const e[] = {"endfilter", NULL};
        int w;
        n->b = parse_body(P, e, "filter", &w);
        next(P);
        end_block(P);
    } else if (is_name(t, "with")) {
        next(P);
        n = mk(P, N_WITH, t);
        nvec tg = {0}, vals = {0};
        while (cur(P)->k != TK_BLOCK_END) {
            if (tg.n) expect_op(P, ",");
            nv_push(P, &tg, parse_target(P, 0));
            expect_op(P, "=");
            nv_push(P, &vals, parse_expr(P));
        }
        n->v = tg.v;
        n->nv = tg.n;
        n->w = vals.v;
        n->nw = vals.n;
        end_block(P);
        static const char *const e[] = {"endwith", NULL};
        int w;
        n->b = parse_body(P, e, "with", &w);
        next(P);
        end_block(P);
    } else if (is_name(t, "break") || is_name(t, "continue")) {
        next(P);
        n = mk(P, is_name(t, "break") ? N_BREAK : N_CONTINUE, t);
        end_block(P);
    } else {
        pfail(P, t, "Encountered unknown tag '%.*s'.", (int)(t->n > 60 ? 60 : t->n), t->p);
    }
    P->soft = outer_soft;
    leave(P);
    return n;
}

static void fail_ends(ps *P, const jtok *t, const char *const *ends, const char *block, int eof) {
    char looking[200] = "";
    size_t o = 0;
    for (int i = 0; ends && ends[i]; i++)
        o += (size_t)snprintf(looking + o, sizeof looking - o, "%s'%s'", i ? " or " : "", ends[i]);
    if (eof) {
        if (!block) pfail(P, t, "Unexpected end of template.");
        pfail(P, t,
              "Unexpected end of template. Jinja was looking for the following tags: %s. The innermost block that "
              "needs to be closed is '%s'.",
              looking, block);
    }
    if (!block) pfail(P, t, "Encountered unknown tag '%.*s'.", (int)(t->n > 60 ? 60 : t->n), t->p);
    pfail(P, t,
          "Encountered unknown tag '%.*s'. Jinja was looking for the following tags: %s. The innermost block that "
          "needs to be closed is '%s'.",
          (int)(t->n > 60 ? 60 : t->n), t->p, looking, block);
}

static int is_end_tag(const jtok *t) {
    static const char *const all[] = {"endfor", "else", "elif", "endif", "endset", "endmacro", "endcall",
                                      "endfilter", "endwith", "endraw", NULL};
    for (int i = 0; all[i]; i++)
        if (is_name(t, all[i])) return 1;
    return 0;
}

/* Statements up to a block tag named in ends (left as the current token);
 * *which is its index.  ends NULL: up to the end of the template. */
static jnode *parse_body(ps *P, const char *const *ends, const char *block, int *which) {
    enter(P);
    jnode *body = mk(P, N_BODY, cur(P));
    nvec v = {0};
    for (;;) {
        jtok *t = cur(P);
        if (t->k == TK_EOF) {
            if (ends) fail_ends(P, t, ends, block, 1);
            break;
        }
        if (t->k == TK_DATA) {
            next(P);
            jnode *x = mk(P, N_TEXT, t);
            x->lit = jv_str(t->p, t->n);
            nv_push(P, &v, x);
            continue;
        }
        if (t->k == TK_VAR_BEGIN) {
            next(P);
            jnode *x = mk(P, N_OUT, t);
            x->a = parse_tuple(P, 1, 0);
            expect_kind(P, TK_VAR_END, "end of print statement");
            nv_push(P, &v, x);
            continue;
        }
        if (t->k == TK_BLOCK_BEGIN) {
            next(P);
            jtok *nm = cur(P);
            int hit = -1;
            for (int i = 0; ends && ends[i]; i++)
                if (is_name(nm, ends[i])) hit = i;
            if (hit >= 0) {
                *which = hit;
                break;
            }
            if (is_end_tag(nm)) fail_ends(P, nm, ends, block, 0);
            nv_push(P, &v, parse_stmt(P));
            continue;
        }
        char b[80];
        pfail(P, t, "unexpected '%s'", tok_desc(t, b, sizeof b));
    }
    body->v = v.v;
    body->nv = v.n;
    leave(P);
    return body;
}

/* break/continue are only legal inside loops: checked by the evaluator's
 * loop depth at parse time through this walk. */
static void check_loops(ps *P, const jnode *n, int in_loop, int depth) {
    if (!n || depth > 4 * MAX_NEST) return;
    if ((n->k == N_BREAK || n->k == N_CONTINUE) && !in_loop) {
        jtok t = {.line = n->line, .col = n->col};
        pfail(P, &t, "'%s' outside of a loop", n->k == N_BREAK ? "break" : "continue");
    }
    int inner = n->k == N_FOR ? 1 : (n->k == N_MACRO || n->k == N_CALLBLOCK) ? 0 : in_loop;
    if (n->k == N_FOR) {
        check_loops(P, n->d, 1, depth + 1);
        check_loops(P, n->e, in_loop, depth + 1);
        return;
    }
    const jnode *kids[] = {n->a, n->b, n->c, n->d, n->e};
    for (int i = 0; i < 5; i++)
        if (kids[i] && kids[i]->k >= N_BODY) check_loops(P, kids[i], inner, depth + 1);
    if (n->k == N_BODY)
        for (int i = 0; i < n->nv; i++) check_loops(P, n->v[i], inner, depth + 1);
}

int zl_jinja_parse(zl_jinja **out, const char *src, size_t n, zl_err *err) {
    *out = NULL;
    zl_jinja *t = calloc(1, sizeof *t);
    if (!t) return zl_errf(err, ZL_ENOMEM, "out of memory");
    jmp_buf jb;
    zl_err local = {0};
    t->a.jb = &jb;
    t->a.err = err ? err : &local;
    t->a.cap = 0;
    if (setjmp(jb)) {
        int code = t->a.err->code ? t->a.err->code : ZL_EINVAL;
        ja_free(&t->a);
        free(t);
        return code;
    }
    /* newlines: \r\n and \r become \n; one trailing newline is dropped */
    char *s = ja_alloc(&t->a, n + 1);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (src[i] == '\r') {
            s[m++] = '\n';
            if (i + 1 < n && src[i + 1] == '\n') i++;
        } else {
            s[m++] = src[i];
        }
    }
    if (m && s[m - 1] == '\n') m--;
    s[m] = 0;
    jtok *toks;
    size_t nt;
    jlex(&t->a, s, m, &toks, &nt);
    ps P = {.a = &t->a, .t = toks, .n = nt};
    int w;
    P.depth = 0;
    t->root = parse_body(&P, NULL, NULL, &w);
    P.depth = 0;
    check_loops(&P, t->root, 0, 0);
    *out = t;
    return 0;
}

void zl_jinja_free(zl_jinja *t) {
    if (!t) return;
    ja_free(&t->a);
    free(t);
}
