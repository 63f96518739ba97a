/* json_schema.c — JSON Schema to grammar text (the subset of grammar.h).
 *
 * Owns the translation of one schema into rules: one rule per schema node,
 * shared json-* rules for the generic values, and the optional-property
 * chains.  A keyword outside the subset is an error naming it and its path:
 * a constraint is never dropped silently.  Never matches text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gjson.h"
#include "grammar.h"

#define JS_MAX_DEPTH 64

#define JS_PRELUDE \
    "json-value ::= json-object | json-array | json-string | json-number | \"true\" | \"false\" | \"null\"\n" \
    "json-object ::= \"{\" ( json-string \":\" sp json-value ( \",\" sp json-string \":\" sp json-value )* )? \"}\"\n" \
    "json-array ::= \"[\" ( json-value ( \",\" sp json-value )* )? \"]\"\n" \
    "json-string ::= \"\\\"\" json-char* \"\\\"\"\n" \
    "json-char ::= [^\"\\\\\\x00-\\x1f] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" json-hex4 )\n" \
    "json-hex4 ::= [1-9a-fA-F] json-hex{3} | \"0\" ( [1-9a-fA-F] json-hex{2} | \"0\" ( [1-9a-fA-F] json-hex | \"0\" [1-9a-fA-F] ) )\n" \
    "json-hex ::= [0-9a-fA-F]\n" \
    "json-int ::= \"0\" | [1-9] [0-9]{0,15}\n" \
    "json-integer ::= \"-\"? json-int\n" \
    "json-number ::= \"-\"? json-int ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?\n" \
    "json-boolean ::= \"true\" | \"false\"\n" \
    "json-null ::= \"null\"\n" \
    "sp ::= \" \"?\n"


static const char *const ANNOTATIONS[] = {"title",    "description", "default",  "examples", "$schema",
                                          "$id",      "$comment",    "format",   "deprecated", "readOnly",
                                          "writeOnly", "strict",     "$defs",    "definitions", NULL};
static const char *const KEYWORDS[] = {"type",     "properties", "required",  "additionalProperties",
                                       "items",    "minItems",   "maxItems",  "minLength",
                                       "maxLength", "enum",      "const",     "anyOf",
                                       "oneOf",    "allOf",      "$ref",      NULL};

typedef struct jsdef {
    char *ref;  /* "#/$defs/x" */
    char rule[64];
} jsdef;

typedef struct jsc {
    const gj *root;
    zl_buf out;
    int next;
    jsdef *defs;
    int ndefs, capdefs;
    zl_err *err;
    int failed;
    const char *prefix; /* of every rule name */
} jsc;

static int jsfail(jsc *C, int code, const char *path, const char *fmt, const char *arg) {
    if (C->failed) return -1;
    char m[300];
    snprintf(m, sizeof m, fmt, arg);
    zl_errf(C->err, code, "schema: %s at %s", m, *path ? path : "/");
    C->failed = 1;
    return -1;
}

static int in_list(const char *const *l, const char *k) {
    for (; *l; l++)
        if (!strcmp(*l, k)) return 1;
    return 0;
}

static void new_rule(jsc *C, char *name) { snprintf(name, 64, "%.40s%d", C->prefix, C->next++); }

/* A GBNF literal for bytes s[0..n). */
static void lit(zl_buf *b, const char *s, size_t n) {
    zl_buf_put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            zl_buf_put(b, "\\", 1);
            zl_buf_put(b, (const char *)&s[i], 1);
        } else if (c < 0x20 || c == 0x7F) {
            zl_buf_printf(b, "\\x%02x", c);
        } else {
            zl_buf_put(b, (const char *)&s[i], 1);
        }
    }
    zl_buf_put(b, "\"", 1);
}

/* A literal for the compact JSON of v. */
static void lit_json(zl_buf *b, const gj *v) {
    zl_buf t = {0};
    gj_write(&t, v);
    if (t.oom) b->oom = 1;
    else lit(b, t.p ? t.p : "", t.n);
    free(t.p);
}

static int compile(jsc *C, const gj *s, const char *path, char *name, int depth);

/* Whether a value holds a string with a NUL byte anywhere inside it.  Output
 * never holds "\u0000" (json-hex4 above): the server's JSON readers refuse
 * it, so a constrained answer must not need it. */
static int holds_nul(const gj *v) {
    if (v->t == GJ_STR) return memchr(v->s, 0, v->len) != NULL;
    for (int k = 0; (v->t == GJ_ARR || v->t == GJ_OBJ) && k < v->n; k++)
        if (holds_nul(v->kid[k])) return 1;
    return 0;
}

static void sub_path(char *dst, const char *path, const char *a, const char *b) {
    if (b) snprintf(dst, 256, "%.120s/%.60s/%.60s", path, a, b);
    else snprintf(dst, 256, "%.120s/%.60s", path, a);
}

static int get_count(jsc *C, const gj *s, const char *key, const char *path, long *v) {
    const gj *x = gj_get(s, key);
    if (!x) return 0;
    char *end = NULL;
    long n = x->t == GJ_NUM ? strtol(x->s, &end, 10) : -1;
    if (x->t != GJ_NUM || (end && *end) || n < 0 || n > 10000)
        return jsfail(C, ZL_EINVAL, path, "'%s' must be an integer from 0 to 10000", key);
    *v = n;
    return 1;
}

static int resolve_ref(jsc *C, const char *ref, const char *path, char *name, int depth) {
    for (int k = 0; k < C->ndefs; k++)
        if (!strcmp(C->defs[k].ref, ref)) {
            strcpy(name, C->defs[k].rule);
            return 0;
        }
    const gj *target = NULL;
    if (!strcmp(ref, "#")) target = C->root;
    else if (!strncmp(ref, "#/$defs/", 8)) target = gj_get(gj_get(C->root, "$defs"), ref + 8);
    else if (!strncmp(ref, "#/definitions/", 14)) target = gj_get(gj_get(C->root, "definitions"), ref + 14);
    if (!target) return jsfail(C, ZL_EUNSUP, path, "$ref '%.100s' is not #, #/$defs/NAME or #/definitions/NAME of this schema", ref);
    if (C->ndefs == C->capdefs) {
        int nc = C->capdefs ? C->capdefs * 2 : 8;
        jsdef *t = realloc(C->defs, (size_t)nc * sizeof *t);
        if (!t) return jsfail(C, ZL_ENOMEM, path, "%s", "out of memory");
        C->defs = t;
        C->capdefs = nc;
    }
    jsdef *d = &C->defs[C->ndefs];
    d->ref = strdup(ref);
    if (!d->ref) return jsfail(C, ZL_ENOMEM, path, "%s", "out of memory");
    C->ndefs++;
    /* the rule is named before it is compiled, so a recursive $ref finds it */
    new_rule(C, d->rule);
    char rule[64];
    strcpy(rule, d->rule);
    char body[64];
    if (compile(C, target, ref + 1, body, depth + 1)) return -1;
    zl_buf_printf(&C->out, "%s ::= %s\n", rule, body);
    strcpy(name, rule);
    return 0;
}

/* Properties p[0..k) with required flags, after "{": the A/B chains
 * (A_i: nothing written yet, B_i: something written, so "," first). */
static int compile_props(jsc *C, const gj *props, const char *req, const char *path, char *name, int depth) {
    int k = props->n;
    char (*val)[64] = malloc((size_t)(k ? k : 1) * sizeof *val);
    if (!val) return jsfail(C, ZL_ENOMEM, path, "%s", "out of memory");
    for (int i = 0; i < k; i++) {
        char sp[256];
        sub_path(sp, path, "properties", props->key[i]);
        if (compile(C, props->kid[i], sp, val[i], depth + 1)) {
            free(val);
            return -1;
        }
    }
    char base[64];
    new_rule(C, base);
    zl_buf *o = &C->out;
    for (int i = k; i >= 0; i--) {
        for (int b = 0; b < 2; b++) {
            zl_buf_printf(o, "%s-%c%d ::= ", base, b ? 'b' : 'a', i);
            if (i == k) {
                zl_buf_puts(o, "\"\"\n");
                continue;
            }
            if (b) zl_buf_puts(o, "\",\" sp ");
            zl_buf t = {0};
            gj_write_string(&t, props->key[i], strlen(props->key[i]));
            lit(o, t.p ? t.p : "", t.n);
            free(t.p);
            zl_buf_printf(o, " \":\" sp %s %s-b%d", val[i], base, i + 1);
            if (!req[i]) zl_buf_printf(o, " | %s-%c%d", base, b ? 'b' : 'a', i + 1);
            zl_buf_puts(o, "\n");
        }
    }
    free(val);
    snprintf(name, 64, "%s-a0", base);
    return 0;
}

static int compile_object(jsc *C, const gj *s, const char *path, zl_buf *alt, int depth) {
    const gj *props = gj_get(s, "properties"), *req = gj_get(s, "required"), *add = gj_get(s, "additionalProperties");
    if (props && props->t != GJ_OBJ) return jsfail(C, ZL_EINVAL, path, "'%s' must be an object", "properties");
    if (req && req->t != GJ_ARR) return jsfail(C, ZL_EINVAL, path, "'%s' must be an array", "required");
    if (add && add->t != GJ_TRUE && add->t != GJ_FALSE && add->t != GJ_OBJ)
        return jsfail(C, ZL_EINVAL, path, "'%s' must be a boolean or a schema", "additionalProperties");
    int k = props ? props->n : 0;
    char *isreq = calloc((size_t)(k ? k : 1), 1);
    if (!isreq) return jsfail(C, ZL_ENOMEM, path, "%s", "out of memory");
    for (int r = 0; req && r < req->n; r++) {
        const gj *x = req->kid[r];
        if (x->t != GJ_STR) {
            free(isreq);
            return jsfail(C, ZL_EINVAL, path, "'%s' must hold strings", "required");
        }
        int found = 0;
        for (int i = 0; i < k; i++)
            if (strlen(props->key[i]) == x->len && !memcmp(props->key[i], x->s, x->len)) isreq[i] = found = 1;
        if (!found) {
            free(isreq);
            return jsfail(C, ZL_EUNSUP, path, "required property '%.100s' is not in properties", x->s);
        }
    }
    int rc = 0;
    if (k) {
        char chain[64];
        rc = compile_props(C, props, isreq, path, chain, depth);
        if (!rc) zl_buf_printf(alt, "\"{\" %s \"}\"", chain);
    } else if (add && add->t == GJ_OBJ) {
        char sp[256], v[64];
        sub_path(sp, path, "additionalProperties", NULL);
        rc = compile(C, add, sp, v, depth + 1);
        if (!rc)
            zl_buf_printf(alt, "\"{\" ( json-string \":\" sp %s ( \",\" sp json-string \":\" sp %s )* )? \"}\"", v, v);
    } else if (add && add->t == GJ_FALSE) {
        zl_buf_puts(alt, "\"{}\"");
    } else {
        zl_buf_puts(alt, "json-object");
    }
    free(isreq);
    return rc;
}

static int compile_array(jsc *C, const gj *s, const char *path, zl_buf *alt, int depth) {
    long mn = 0, mx = -1;
    if (get_count(C, s, "minItems", path, &mn) < 0 || get_count(C, s, "maxItems", path, &mx) < 0) return -1;
    if (mx >= 0 && mx < mn) return jsfail(C, ZL_EINVAL, path, "%s", "maxItems below minItems");
    const gj *items = gj_get(s, "items");
    char it[64] = "json-value";
    if (items) {
        char sp[256];
        sub_path(sp, path, "items", NULL);
        if (items->t != GJ_OBJ && items->t != GJ_TRUE)
            return jsfail(C, ZL_EUNSUP, path, "%s", "'items' must be a schema (tuple forms are not supported)");
        if (items->t == GJ_OBJ && compile(C, items, sp, it, depth + 1)) return -1;
    }
    if (mx == 0) {
        zl_buf_puts(alt, "\"[]\"");
        return 0;
    }
    zl_buf_puts(alt, "\"[\" ");
    if (!mn) zl_buf_puts(alt, "( ");
    zl_buf_printf(alt, "%s ( \",\" sp %s )", it, it);
    long lo = mn ? mn - 1 : 0;
    if (mx < 0) zl_buf_printf(alt, "{%ld,}", lo);
    else zl_buf_printf(alt, "{%ld,%ld}", lo, mx - 1);
    if (!mn) zl_buf_puts(alt, " )?");
    zl_buf_puts(alt, " \"]\"");
    return 0;
}

static int compile_string(jsc *C, const gj *s, const char *path, zl_buf *alt) {
    long mn = 0, mx = -1;
    if (get_count(C, s, "minLength", path, &mn) < 0 || get_count(C, s, "maxLength", path, &mx) < 0) return -1;
    if (mx >= 0 && mx < mn) return jsfail(C, ZL_EINVAL, path, "%s", "maxLength below minLength");
    if (!mn && mx < 0) {
        zl_buf_puts(alt, "json-string");
        return 0;
    }
    if (mx < 0) zl_buf_printf(alt, "\"\\\"\" json-char{%ld,} \"\\\"\"", mn);
    else zl_buf_printf(alt, "\"\\\"\" json-char{%ld,%ld} \"\\\"\"", mn, mx);
    return 0;
}

static int compile_type(jsc *C, const gj *s, const char *t, const char *path, zl_buf *alt, int depth) {
    if (!strcmp(t, "string")) return compile_string(C, s, path, alt);
    if (!strcmp(t, "integer")) zl_buf_puts(alt, "json-integer");
    else if (!strcmp(t, "number")) zl_buf_puts(alt, "json-number");
    else if (!strcmp(t, "boolean")) zl_buf_puts(alt, "json-boolean");
    else if (!strcmp(t, "null")) zl_buf_puts(alt, "json-null");
    else if (!strcmp(t, "object")) return compile_object(C, s, path, alt, depth);
    else if (!strcmp(t, "array")) return compile_array(C, s, path, alt, depth);
    else return jsfail(C, ZL_EINVAL, path, "unknown type '%.60s'", t);
    return 0;
}

static int compile(jsc *C, const gj *s, const char *path, char *name, int depth) {
    if (depth > JS_MAX_DEPTH) return jsfail(C, ZL_EUNSUP, path, "%s", "schema nested too deeply");
    if (s->t == GJ_TRUE) {
        strcpy(name, "json-value");
        return 0;
    }
    if (s->t == GJ_FALSE) return jsfail(C, ZL_EUNSUP, path, "%s", "the schema false matches nothing");
    if (s->t != GJ_OBJ) return jsfail(C, ZL_EINVAL, path, "%s", "a schema must be an object or a boolean");
    int n_kw = 0;
    for (int k = 0; k < s->n; k++) {
        if (in_list(ANNOTATIONS, s->key[k])) continue;
        if (!in_list(KEYWORDS, s->key[k])) return jsfail(C, ZL_EUNSUP, path, "unsupported keyword '%.80s'", s->key[k]);
        n_kw++;
    }
    const gj *ref = gj_get(s, "$ref");
    if (ref) {
        if (ref->t != GJ_STR) return jsfail(C, ZL_EINVAL, path, "'%s' must be a string", "$ref");
        if (n_kw > 1) return jsfail(C, ZL_EUNSUP, path, "%s", "keywords beside '$ref' are not supported");
        return resolve_ref(C, ref->s, path, name, depth);
    }
    zl_buf alt = {0};
    int rc = 0;
    const gj *cst = gj_get(s, "const"), *en = gj_get(s, "enum");
    const gj *any = gj_get(s, "anyOf") ? gj_get(s, "anyOf") : gj_get(s, "oneOf"), *all = gj_get(s, "allOf");
    const char *anykw = gj_get(s, "anyOf") ? "anyOf" : "oneOf";
    if (cst || en) {
        if (n_kw > 1 && !(gj_get(s, "type") && n_kw == 2))
            rc = jsfail(C, ZL_EUNSUP, path, "%s", "keywords beside 'const'/'enum' other than 'type' are not supported");
        else if ((cst && holds_nul(cst)) || (en && holds_nul(en)))
            rc = jsfail(C, ZL_EUNSUP, path, "%s", "a 'const'/'enum' string holding a NUL (\\u0000) is not supported");
        else if (cst) lit_json(&alt, cst);
        else if (en->t != GJ_ARR || !en->n) rc = jsfail(C, ZL_EINVAL, path, "%s", "'enum' must be a non-empty array");
        else
            for (int k = 0; k < en->n; k++) {
                if (k) zl_buf_puts(&alt, " | ");
                lit_json(&alt, en->kid[k]);
            }
    } else if (all) {
        if (all->t != GJ_ARR || all->n != 1 || n_kw > 1)
            rc = jsfail(C, ZL_EUNSUP, path, "%s", "'allOf' is supported with one member and no other keywords");
        else {
            char sp[256];
            sub_path(sp, path, "allOf", "0");
            rc = compile(C, all->kid[0], sp, name, depth + 1);
            return rc;
        }
    } else if (any) {
        if (any->t != GJ_ARR || !any->n) rc = jsfail(C, ZL_EINVAL, path, "'%s' must be a non-empty array", anykw);
        else if (n_kw > 1) rc = jsfail(C, ZL_EUNSUP, path, "keywords beside '%s' are not supported", anykw);
        for (int k = 0; !rc && k < any->n; k++) {
            char sp[256], idx[16], sub[64];
            snprintf(idx, sizeof idx, "%d", k);
            sub_path(sp, path, anykw, idx);
            rc = compile(C, any->kid[k], sp, sub, depth + 1);
            if (!rc) zl_buf_printf(&alt, "%s%s", k ? " | " : "", sub);
        }
    } else {
        const gj *t = gj_get(s, "type");
        if (!t) {
            if (gj_get(s, "properties") || gj_get(s, "additionalProperties") || gj_get(s, "required"))
                rc = compile_type(C, s, "object", path, &alt, depth);
            else if (gj_get(s, "items") || gj_get(s, "minItems") || gj_get(s, "maxItems"))
                rc = compile_type(C, s, "array", path, &alt, depth);
            else if (gj_get(s, "minLength") || gj_get(s, "maxLength"))
                rc = compile_type(C, s, "string", path, &alt, depth);
            else
                zl_buf_puts(&alt, "json-value");
        } else if (t->t == GJ_STR) {
            rc = compile_type(C, s, t->s, path, &alt, depth);
        } else if (t->t == GJ_ARR && t->n) {
            for (int k = 0; !rc && k < t->n; k++) {
                if (t->kid[k]->t != GJ_STR) rc = jsfail(C, ZL_EINVAL, path, "%s", "'type' must name types");
                if (!rc && k) zl_buf_puts(&alt, " | ");
                if (!rc) rc = compile_type(C, s, t->kid[k]->s, path, &alt, depth);
            }
        } else {
            rc = jsfail(C, ZL_EINVAL, path, "%s", "'type' must be a string or a non-empty array");
        }
    }
    if (!rc && alt.oom) rc = jsfail(C, ZL_ENOMEM, path, "%s", "out of memory");
    if (!rc) {
        new_rule(C, name);
        zl_buf_printf(&C->out, "%s ::= %s\n", name, alt.p ? alt.p : "\"\"");
    }
    free(alt.p);
    return rc;
}

int zl_json_schema_rules(const char *schema, size_t n, const char *prefix, char **rules, char *top, size_t top_cap,
                        zl_err *err) {
    *rules = NULL;
    gj *root = NULL;
    int rc = gj_parse(schema, n, &root, err);
    if (rc) return rc;
    jsc C;
    memset(&C, 0, sizeof C);
    C.root = root;
    C.err = err;
    C.prefix = prefix;
    char name[64];
    rc = compile(&C, root, "", name, 0);
    if (rc) rc = err && err->code ? err->code : ZL_EINVAL;
    else if (C.out.oom) rc = zl_errf(err, ZL_ENOMEM, "out of memory");
    else if (!C.out.p) zl_buf_puts(&C.out, "");
    for (int k = 0; k < C.ndefs; k++) free(C.defs[k].ref);
    free(C.defs);
    gj_free(root);
    if (rc || C.out.oom) {
        free(C.out.p);
        return rc ? rc : zl_errf(err, ZL_ENOMEM, "out of memory");
    }
    snprintf(top, top_cap, "%s", name);
    *rules = C.out.p;
    return 0;
}

const char *zl_json_schema_prelude(void) { return JS_PRELUDE; }

char *zl_gbnf_quote(const char *s, size_t n) {
    zl_buf b = {0};
    lit(&b, s, n);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

int zl_json_schema_to_grammar(const char *schema, size_t n, char **out, zl_err *err) {
    *out = NULL;
    char *rules = NULL, top[64];
    int rc = zl_json_schema_rules(schema, n, "s", &rules, top, sizeof top, err);
    if (rc) return rc;
    zl_buf b = {0};
    zl_buf_puts(&b, rules);
    zl_buf_printf(&b, "root ::= %s\n", top);
    zl_buf_puts(&b, JS_PRELUDE);
    free(rules);
    if (b.oom) {
        free(b.p);
        return zl_errf(err, ZL_ENOMEM, "out of memory");
    }
    *out = b.p;
    return 0;
}

const char *zl_json_object_grammar(void) {
    static const char g[] = "root ::= json-object\n" JS_PRELUDE;
    return g;
}
