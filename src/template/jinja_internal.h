/* jinja_internal.h — what the interpreter's files share: the arena, the value
 * type, the syntax tree and the render state.
 *
 * Memory: a template's tree lives in the template's arena, a render's values
 * in the render's arena; both are freed whole, so no value is ever freed on
 * its own.  Errors: every failure formats its message and longjmps to the
 * entry point (zl_jinja_parse / zl_jinja_render / zl_jinja_vars_json), which
 * frees the arena and returns the error as a value.  Nothing here may hold a
 * resource outside the arena across a call that can fail. */
#ifndef ZL_JINJA_INTERNAL_H
#define ZL_JINJA_INTERNAL_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include "jinja.h"

/* ---------------- arena + unwinding ---------------- */

typedef struct jchunk {
    struct jchunk *next;
    size_t used, cap;
    char data[];
} jchunk;

typedef struct jarena {
    jchunk *head;
    size_t total, cap; /* bytes handed out; cap 0: unlimited */
    jmp_buf *jb;       /* where failures unwind to */
    zl_err *err;
} jarena;

void *ja_alloc(jarena *a, size_t n); /* zeroed; unwinds when over cap */
void ja_free(jarena *a);
char *ja_strdup(jarena *a, const char *s, size_t n); /* NUL-terminated copy */
_Noreturn void ja_fail(jarena *a, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---------------- values ---------------- */

typedef enum {
    JT_UNDEF = 0, /* u.s: the message an operation on it raises */
    JT_NONE,
    JT_BOOL,
    JT_INT,
    JT_FLOAT,
    JT_STR,
    JT_LIST, /* tuple flag: repr with parentheses */
    JT_DICT,
    JT_NS,     /* namespace(): a dict whose attributes can be set */
    JT_MACRO,  /* macro or caller */
    JT_FUNC,   /* a global function: fn = JF_* */
    JT_METHOD, /* a bound method: u.bound, name */
    JT_LOOP,   /* the loop variable */
} jtype;

struct jlist;
struct jdict;
struct jmacro;
struct jloop;

typedef struct jv {
    uint8_t t;
    uint8_t tuple;
    uint16_t fn;
    const char *name; /* JT_METHOD: method name */
    union {
        int64_t i;
        double f;
        struct {
            const char *p;
            size_t n;
        } s;
        struct jlist *l;
        struct jdict *d;
        struct jmacro *m;
        struct jloop *lp;
        struct jv *bound;
    } u;
} jv;

typedef struct jlist {
    jv *v;
    size_t n, cap;
} jlist;

typedef struct jdict {
    jv *k, *v;
    size_t n, cap;
} jdict;

enum { JF_RAISE = 1, JF_RANGE, JF_NAMESPACE, JF_DICT, JF_STRFTIME, JF_CYCLER, JF_JOINER };

static inline jv jv_undef_msg(const char *p, size_t n) {
    jv v = {.t = JT_UNDEF};
    v.u.s.p = p;
    v.u.s.n = n;
    return v;
}
static inline jv jv_none(void) { return (jv){.t = JT_NONE}; }
static inline jv jv_bool(int b) { jv v = {.t = JT_BOOL}; v.u.i = !!b; return v; }
static inline jv jv_int(int64_t i) { jv v = {.t = JT_INT}; v.u.i = i; return v; }
static inline jv jv_float(double f) { jv v = {.t = JT_FLOAT}; v.u.f = f; return v; }
static inline jv jv_str(const char *p, size_t n) { jv v = {.t = JT_STR}; v.u.s.p = p; v.u.s.n = n; return v; }

jv jv_cstr(const char *s);
jv jv_newlist(jarena *a, size_t cap);
jv jv_newdict(jarena *a, size_t cap);
void jl_push(jarena *a, jlist *l, jv x);
void jd_set(jarena *a, jdict *d, jv k, jv x); /* replaces an equal key */
jv *jd_get(const jdict *d, jv k);              /* NULL if absent */
jv *jd_gets(const jdict *d, const char *k, size_t n);

int jv_truthy(jv v);
int jv_equal(jv a, jv b);
int jv_is_num(jv v); /* int, float or bool */
double jv_num(jv v);
const char *jv_typename(jv v); /* python's type name: 'str', 'int', 'dict', ... */

/* a growable byte buffer in an arena; len bounded by *limit when set */
typedef struct jbuf {
    jarena *a;
    char *p;
    size_t n, cap;
    size_t *total, limit; /* shared running count of rendered bytes */
} jbuf;
void jb_init(jbuf *b, jarena *a);
void jb_put(jbuf *b, const char *s, size_t n);
void jb_puts(jbuf *b, const char *s);
void jb_putc(jbuf *b, char c);
void jb_printf(jbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
jv jb_val(jbuf *b);

/* python str() and repr() */
void jv_str_into(jbuf *b, jv v);
void jv_repr_into(jbuf *b, jv v);
void jv_float_into(jbuf *b, double f); /* python repr of a float */
jv jv_tostr(jarena *a, jv v);          /* str(v) as a JT_STR */

/* UTF-8 */
size_t ju_len(const char *p, size_t n);                      /* code points */
uint32_t ju_next(const char *p, size_t n, size_t *i);         /* decode at *i, advance */
void ju_put(jbuf *b, uint32_t cp);
int ju_isspace(uint32_t cp);
uint32_t ju_upper(uint32_t cp);
uint32_t ju_lower(uint32_t cp);
int ju_isalpha(uint32_t cp);
int ju_isdigit(uint32_t cp);

/* JSON (jinja_json.c) */
jv jjson_parse(jarena *a, const char *s, size_t n);
void jjson_dump(jbuf *b, jv v, int indent, const char *item_sep, const char *key_sep, int sort_keys, int depth);

/* ---------------- syntax tree ---------------- */

typedef enum {
    /* expressions */
    N_LIT = 1, N_NAME, N_ATTR, N_ITEM, N_SLICE, N_CALL, N_KW, N_FILTER, N_TEST, N_NEG, N_POS, N_NOT, N_BIN, N_AND,
    N_OR, N_CMP, N_CMPOP, N_COND, N_LIST, N_TUPLE, N_DICT,
    /* statements */
    N_BODY, N_TEXT, N_OUT, N_IF, N_FOR, N_SET, N_SETBLOCK, N_MACRO, N_CALLBLOCK, N_FILTERBLOCK, N_WITH, N_BREAK,
    N_CONTINUE,
} jnkind;

typedef enum {
    OP_ADD = 1, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CONCAT,
    OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN,
} jop;

typedef struct jnode {
    uint16_t k, op;
    int line, col;
    jv lit;                 /* literal; name (JT_STR) of a name, attribute, filter, test, keyword, macro */
    struct jnode *a, *b, *c, *d, *e;
    struct jnode **v, **w;
    int nv, nw;
} jnode;

/* ---------------- lexer ---------------- */

typedef enum { TK_EOF = 0, TK_DATA, TK_VAR_BEGIN, TK_VAR_END, TK_BLOCK_BEGIN, TK_BLOCK_END, TK_NAME, TK_STRING,
               TK_INT, TK_FLOAT, TK_OP } jtkind;

typedef struct jtok {
    uint8_t k;
    char op[3]; /* TK_OP */
    int line, col;
    const char *p; /* TK_DATA, TK_NAME, TK_STRING (decoded): text */
    size_t n;
    int64_t i;
    double f;
} jtok;

/* Tokens of src (newlines already normalised to \n) into *toks; unwinds on error. */
void jlex(jarena *a, const char *src, size_t n, jtok **toks, size_t *ntoks);

struct zl_jinja {
    jarena a;
    jnode *root;
};

/* ---------------- render state ---------------- */

typedef struct jframe {
    struct jframe *parent;
    jdict vars;
} jframe;

typedef struct jmacro {
    const jnode *node; /* N_MACRO or N_CALLBLOCK (its caller) */
    jframe *closure;
    jv caller; /* for a macro invoked by {% call %} */
} jmacro;

typedef struct jloop {
    jlist *items;
    size_t i;
    int depth;
    jv cycle_dummy;
} jloop;

typedef struct jstate {
    jarena a;
    jbuf *out;
    size_t total_out;
    zl_jinja_limits lim;
    long long iters;
    int depth;
    int loop_depth;
} jstate;

jv jeval(jstate *st, const jnode *n, jframe *f);
jv jcall_value(jstate *st, jv callee, jv *args, int nargs, const char **kwn, jv *kwv, int nkw, const jnode *at);
_Noreturn void jfail(jstate *st, const jnode *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
_Noreturn void jfail_undef(jstate *st, const jnode *at, jv u);

/* filters and tests (jinja_filters.c); args exclude the subject */
jv jfilter(jstate *st, const jnode *at, const char *name, jv x, jv *args, int nargs, const char **kwn, jv *kwv, int nkw);
int jtest(jstate *st, const jnode *at, const char *name, jv x, jv *args, int nargs);
int jfilter_known(const char *name);
int jtest_known(const char *name);

/* attribute access and methods (jinja_methods.c) */
jv jgetattr(jstate *st, const jnode *at, jv obj, const char *name, size_t n);
jv jgetitem(jstate *st, const jnode *at, jv obj, jv key);
jv jcall_method(jstate *st, const jnode *at, jv self, const char *name, jv *args, int nargs, const char **kwn, jv *kwv,
                int nkw);
/* the items of an iterable (list, tuple, dict keys, string characters); unwinds for others */
jlist *jiter(jstate *st, const jnode *at, jv x);
/* python's `x in hay` */
int jv_contains(jstate *st, const jnode *at, jv hay, jv x);
/* python's ordering of two values: -1, 0, 1; unwinds for unorderable types (op names the operator) */
int jv_order(jstate *st, const jnode *at, int op, jv a, jv b);
/* a Python-style keyword/positional argument: 1 and *out when given */
int jarg(jv *args, int nargs, const char **kwn, jv *kwv, int nkw, int pos, const char *name, jv *out);
/* python str methods shared with filters */
jv jstr_strip(jstate *st, jv s, jv chars, int left, int right);
jv jstr_replace(jstate *st, jv s, jv old, jv new_, int64_t count);
jv jstr_case(jstate *st, jv s, int mode);
/* python's fmt % args (args a tuple or one value) */
jv jstr_percent(jstate *st, const jnode *at, jv fmt, jv args); /* 0 lower, 1 upper, 2 capitalize, 3 python title */

#endif
