/* jinja_json.c — JSON text to template values (the variables a caller
 * passes) and values to JSON text the way python's json.dumps writes it
 * with ensure_ascii=False (the tojson filter HF transformers installs):
 * ", " / ": " separators by default, "," with an indent, floats as python's
 * repr, NaN/Infinity spelled as python does.  Bounded nesting both ways. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_internal.h"

#define JSON_MAX_DEPTH 256

typedef struct jp {
    jarena *a;
    const char *s;
    size_t n, i;
} jp;

_Noreturn static void jpfail(jp *P, const char *what) {
    ja_fail(P->a, ZL_EINVAL, "template variables: invalid JSON at byte %zu: %s", P->i, what);
}

static void skip_ws(jp *P) {
    while (P->i < P->n && (P->s[P->i] == ' ' || P->s[P->i] == '\t' || P->s[P->i] == '\n' || P->s[P->i] == '\r')) P->i++;
}

static int hex4(jp *P, uint32_t *out) {
    if (P->i + 4 > P->n) return -1;
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
        char h = P->s[P->i + k];
        int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + (uint32_t)d;
    }
    P->i += 4;
    *out = v;
    return 0;
}

static jv parse_string(jp *P) {
    P->i++; /* " */
    jbuf b;
    jb_init(&b, P->a);
    jb_put(&b, "", 0);
    for (;;) {
        if (P->i >= P->n) jpfail(P, "unterminated string");
        char c = P->s[P->i++];
        if (c == '"') break;
        if ((unsigned char)c < 0x20) jpfail(P, "control character in string");
        if (c != '\\') { jb_putc(&b, c); continue; }
        if (P->i >= P->n) jpfail(P, "unterminated string");
        char e = P->s[P->i++];
        switch (e) {
        case '"': jb_putc(&b, '"'); break;
        case '\\': jb_putc(&b, '\\'); break;
        case '/': jb_putc(&b, '/'); break;
        case 'b': jb_putc(&b, '\b'); break;
        case 'f': jb_putc(&b, '\f'); break;
        case 'n': jb_putc(&b, '\n'); break;
        case 'r': jb_putc(&b, '\r'); break;
        case 't': jb_putc(&b, '\t'); break;
        case 'u': {
            uint32_t cp;
            if (hex4(P, &cp)) jpfail(P, "bad \\u escape");
            if (cp >= 0xd800 && cp < 0xdc00 && P->i + 6 <= P->n && P->s[P->i] == '\\' && P->s[P->i + 1] == 'u') {
                size_t save = P->i;
                P->i += 2;
                uint32_t lo;
                if (!hex4(P, &lo) && lo >= 0xdc00 && lo < 0xe000) cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                else P->i = save;
            }
            if (cp >= 0xd800 && cp < 0xe000) cp = 0xfffd;
            ju_put(&b, cp);
            break;
        }
        default: jpfail(P, "bad escape");
        }
    }
    return jb_val(&b);
}

static jv parse_value(jp *P, int depth) {
    if (depth > JSON_MAX_DEPTH) jpfail(P, "nested too deeply");
    skip_ws(P);
    if (P->i >= P->n) jpfail(P, "unexpected end");
    char c = P->s[P->i];
    if (c == '"') return parse_string(P);
    if (c == '{') {
        P->i++;
        jv d = jv_newdict(P->a, 0);
        skip_ws(P);
        if (P->i < P->n && P->s[P->i] == '}') { P->i++; return d; }
        for (;;) {
            skip_ws(P);
            if (P->i >= P->n || P->s[P->i] != '"') jpfail(P, "expected a string key");
            jv k = parse_string(P);
            skip_ws(P);
            if (P->i >= P->n || P->s[P->i] != ':') jpfail(P, "expected ':'");
            P->i++;
            jv v = parse_value(P, depth + 1);
            jd_set(P->a, d.u.d, k, v);
            skip_ws(P);
            if (P->i < P->n && P->s[P->i] == ',') { P->i++; continue; }
            if (P->i < P->n && P->s[P->i] == '}') { P->i++; return d; }
            jpfail(P, "expected ',' or '}'");
        }
    }
    if (c == '[') {
        P->i++;
        jv l = jv_newlist(P->a, 0);
        skip_ws(P);
        if (P->i < P->n && P->s[P->i] == ']') { P->i++; return l; }
        for (;;) {
            jl_push(P->a, l.u.l, parse_value(P, depth + 1));
            skip_ws(P);
            if (P->i < P->n && P->s[P->i] == ',') { P->i++; continue; }
            if (P->i < P->n && P->s[P->i] == ']') { P->i++; return l; }
            jpfail(P, "expected ',' or ']'");
        }
    }
    if (P->n - P->i >= 4 && !memcmp(P->s + P->i, "true", 4)) { P->i += 4; return jv_bool(1); }
    if (P->n - P->i >= 5 && !memcmp(P->s + P->i, "false", 5)) { P->i += 5; return jv_bool(0); }
    if (P->n - P->i >= 4 && !memcmp(P->s + P->i, "null", 4)) { P->i += 4; return jv_none(); }
    if (c == '-' || (c >= '0' && c <= '9')) {
        size_t st = P->i;
        int is_float = 0;
        if (P->s[P->i] == '-') P->i++;
        while (P->i < P->n && ((P->s[P->i] >= '0' && P->s[P->i] <= '9') || P->s[P->i] == '.' || P->s[P->i] == 'e' ||
                               P->s[P->i] == 'E' || P->s[P->i] == '+' || P->s[P->i] == '-')) {
            if (strchr(".eE", P->s[P->i])) is_float = 1;
            P->i++;
        }
        char num[64];
        size_t l = P->i - st;
        if (l >= sizeof num) jpfail(P, "number too long");
        memcpy(num, P->s + st, l);
        num[l] = 0;
        char *end;
        if (!is_float) {
            long long v = strtoll(num, &end, 10);
            if (*end == 0 && !(v == LLONG_MAX || v == LLONG_MIN)) return jv_int(v);
        }
        double f = strtod(num, &end);
        if (*end) jpfail(P, "bad number");
        return jv_float(f);
    }
    jpfail(P, "unexpected character");
}

jv jjson_parse(jarena *a, const char *s, size_t n) {
    jp P = {.a = a, .s = s, .n = n};
    jv v = parse_value(&P, 0);
    skip_ws(&P);
    if (P.i != n) jpfail(&P, "trailing characters");
    return v;
}

static void dump_str(jbuf *b, const char *p, size_t n) {
    jb_putc(b, '"');
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        const char *esc = NULL;
        char u[8];
        if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (c == '\n') esc = "\\n";
        else if (c == '\r') esc = "\\r";
        else if (c == '\t') esc = "\\t";
        else if (c == '\b') esc = "\\b";
        else if (c == '\f') esc = "\\f";
        else if (c < 0x20) {
            snprintf(u, sizeof u, "\\u%04x", c);
            esc = u;
        }
        if (!esc) { run++; continue; }
        jb_put(b, p + i - run, run);
        run = 0;
        jb_puts(b, esc);
    }
    jb_put(b, p + n - run, run);
    jb_putc(b, '"');
}

static void newline(jbuf *b, int indent, int depth) {
    jb_putc(b, '\n');
    for (int i = 0; i < indent * depth; i++) jb_putc(b, ' ');
}

static void dump_key(jbuf *b, jv k) {
    switch (k.t) {
    case JT_STR: dump_str(b, k.u.s.p, k.u.s.n); return;
    case JT_BOOL: jb_puts(b, k.u.i ? "\"true\"" : "\"false\""); return;
    case JT_NONE: jb_puts(b, "\"null\""); return;
    case JT_INT: jb_printf(b, "\"%lld\"", (long long)k.u.i); return;
    case JT_FLOAT:
        jb_putc(b, '"');
        jv_float_into(b, k.u.f);
        jb_putc(b, '"');
        return;
    default: ja_fail(b->a, ZL_EINVAL, "keys must be str, int, float, bool or None, not %s", jv_typename(k));
    }
}

static int key_cmp(const void *x, const void *y) {
    const jv *a = *(const jv *const *)x, *b = *(const jv *const *)y;
    size_t m = a->u.s.n < b->u.s.n ? a->u.s.n : b->u.s.n;
    int c = m ? memcmp(a->u.s.p, b->u.s.p, m) : 0;
    return c ? c : (a->u.s.n > b->u.s.n) - (a->u.s.n < b->u.s.n);
}

void jjson_dump(jbuf *b, jv v, int indent, const char *isep, const char *ksep, int sort_keys, int depth) {
    if (depth > JSON_MAX_DEPTH) ja_fail(b->a, ZL_EINVAL, "maximum recursion depth exceeded while encoding a JSON object");
    switch (v.t) {
    case JT_NONE: jb_puts(b, "null"); return;
    case JT_BOOL: jb_puts(b, v.u.i ? "true" : "false"); return;
    case JT_INT: jb_printf(b, "%lld", (long long)v.u.i); return;
    case JT_FLOAT:
        if (isnan(v.u.f)) jb_puts(b, "NaN");
        else if (isinf(v.u.f)) jb_puts(b, v.u.f < 0 ? "-Infinity" : "Infinity");
        else jv_float_into(b, v.u.f);
        return;
    case JT_STR: dump_str(b, v.u.s.p, v.u.s.n); return;
    case JT_LIST:
        if (!v.u.l->n) { jb_puts(b, "[]"); return; }
        jb_putc(b, '[');
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) jb_puts(b, isep);
            if (indent >= 0) newline(b, indent, depth + 1);
            jjson_dump(b, v.u.l->v[i], indent, isep, ksep, sort_keys, depth + 1);
        }
        if (indent >= 0) newline(b, indent, depth);
        jb_putc(b, ']');
        return;
    case JT_DICT: {
        jdict *d = v.u.d;
        if (!d->n) { jb_puts(b, "{}"); return; }
        size_t *order = ja_alloc(b->a, d->n * sizeof *order);
        for (size_t i = 0; i < d->n; i++) order[i] = i;
        if (sort_keys) {
            const jv **ks = ja_alloc(b->a, d->n * sizeof *ks);
            for (size_t i = 0; i < d->n; i++) {
                if (d->k[i].t != JT_STR) ja_fail(b->a, ZL_EINVAL, "'<' not supported between instances of non-str keys");
                ks[i] = &d->k[i];
            }
            qsort(ks, d->n, sizeof *ks, key_cmp);
            for (size_t i = 0; i < d->n; i++) order[i] = (size_t)(ks[i] - d->k);
        }
        jb_putc(b, '{');
        for (size_t j = 0; j < d->n; j++) {
            size_t i = order[j];
            if (j) jb_puts(b, isep);
            if (indent >= 0) newline(b, indent, depth + 1);
            dump_key(b, d->k[i]);
            jb_puts(b, ksep);
            jjson_dump(b, d->v[i], indent, isep, ksep, sort_keys, depth + 1);
        }
        if (indent >= 0) newline(b, indent, depth);
        jb_putc(b, '}');
        return;
    }
    default: ja_fail(b->a, ZL_EINVAL, "Object of type %s is not JSON serializable", jv_typename(v));
    }
}
