/* gjson.c — the grammar layer's JSON reader and compact writer (gjson.h).
 * Owns JSON syntax only; never knows schemas. */
#include "gjson.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GJ_MAX_DEPTH 128

typedef struct jr {
    const char *s;
    size_t n, i;
    zl_err *err;
    int depth;
} jr;

static int jfail(jr *R, const char *what) {
    return zl_errf(R->err, ZL_EINVAL, "schema: invalid JSON at byte %zu: %s", R->i, what);
}

static void ws(jr *R) {
    while (R->i < R->n && (R->s[R->i] == ' ' || R->s[R->i] == '\t' || R->s[R->i] == '\n' || R->s[R->i] == '\r'))
        R->i++;
}

static int hex4(jr *R, unsigned *v) {
    if (R->i + 4 > R->n) return jfail(R, "short \\u escape");
    unsigned x = 0;
    for (int k = 0; k < 4; k++) {
        char c = R->s[R->i++];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return jfail(R, "bad \\u escape");
        x = x * 16 + (unsigned)d;
    }
    *v = x;
    return 0;
}

static void put_utf8(zl_buf *b, unsigned cp) {
    char o[4];
    int n;
    if (cp < 0x80) {
        o[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        o[0] = (char)(0xF0 | (cp >> 18));
        o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    zl_buf_put(b, o, (size_t)n);
}

/* The length of the well-formed UTF-8 sequence at p (RFC 3629: no overlong
 * forms, no surrogates, nothing past U+10FFFF), or 0. */
static size_t utf8_len(const char *p, size_t n) {
    const unsigned char *u = (const unsigned char *)p;
    size_t need = u[0] >= 0xC2 && u[0] <= 0xDF ? 2 : u[0] >= 0xE0 && u[0] <= 0xEF ? 3 : u[0] >= 0xF0 && u[0] <= 0xF4 ? 4 : 0;
    if (!need || n < need) return 0;
    for (size_t k = 1; k < need; k++)
        if ((u[k] & 0xC0) != 0x80) return 0;
    if (u[0] == 0xE0 && u[1] < 0xA0) return 0; /* overlong */
    if (u[0] == 0xED && u[1] > 0x9F) return 0; /* a surrogate */
    if (u[0] == 0xF0 && u[1] < 0x90) return 0; /* overlong */
    if (u[0] == 0xF4 && u[1] > 0x8F) return 0; /* past U+10FFFF */
    return need;
}

static int read_string(jr *R, char **out, size_t *len) {
    R->i++; /* " */
    zl_buf b = {0};
    zl_buf_put(&b, "", 0);
    while (1) {
        if (R->i >= R->n) {
            free(b.p);
            return jfail(R, "unterminated string");
        }
        unsigned char c = (unsigned char)R->s[R->i];
        if (c == '"') {
            R->i++;
            break;
        }
        if (c < 0x20) {
            free(b.p);
            return jfail(R, "control character in a string");
        }
        if (c != '\\') {
            size_t len = c < 0x80 ? 1 : utf8_len(R->s + R->i, R->n - R->i);
            if (!len) {
                free(b.p);
                return jfail(R, "invalid UTF-8 in a string");
            }
            zl_buf_put(&b, R->s + R->i, len);
            R->i += len;
            continue;
        }
        R->i++;
        if (R->i >= R->n) {
            free(b.p);
            return jfail(R, "unterminated escape");
        }
        char e = R->s[R->i++];
        const char *rep = e == '"' ? "\"" : e == '\\' ? "\\" : e == '/' ? "/" : e == 'b' ? "\b" : e == 'f' ? "\f"
                        : e == 'n' ? "\n" : e == 'r' ? "\r" : e == 't' ? "\t" : NULL;
        if (rep) {
            zl_buf_put(&b, rep, 1);
            continue;
        }
        if (e != 'u') {
            free(b.p);
            return jfail(R, "unknown escape");
        }
        unsigned cp, lo;
        if (hex4(R, &cp)) {
            free(b.p);
            return ZL_EINVAL;
        }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (R->i + 2 > R->n || R->s[R->i] != '\\' || R->s[R->i + 1] != 'u') {
                free(b.p);
                return jfail(R, "lone surrogate");
            }
            R->i += 2;
            if (hex4(R, &lo) || lo < 0xDC00 || lo > 0xDFFF) {
                free(b.p);
                return jfail(R, "lone surrogate");
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            free(b.p);
            return jfail(R, "lone surrogate");
        }
        put_utf8(&b, cp);
    }
    if (b.oom) {
        free(b.p);
        return zl_errf(R->err, ZL_ENOMEM, "out of memory");
    }
    *out = b.p;
    *len = b.n;
    return 0;
}

static int read_value(jr *R, gj **out);

static int add_kid(gj *v, gj *k, char *key) {
    if (!(v->n & (v->n - 1)) || !v->n) {
        size_t nc = v->n ? (size_t)v->n * 2 : 4;
        gj **t = realloc(v->kid, nc * sizeof *t);
        if (!t) return -1;
        v->kid = t;
        if (v->t == GJ_OBJ) {
            char **tk = realloc(v->key, nc * sizeof *tk);
            if (!tk) return -1;
            v->key = tk;
        }
    }
    v->kid[v->n] = k;
    if (v->t == GJ_OBJ) v->key[v->n] = key;
    v->n++;
    return 0;
}

static int read_value(jr *R, gj **out) {
    ws(R);
    if (R->i >= R->n) return jfail(R, "expected a value");
    gj *v = calloc(1, sizeof *v);
    if (!v) return zl_errf(R->err, ZL_ENOMEM, "out of memory");
    char c = R->s[R->i];
    int rc = 0;
    if (c == '{' || c == '[') {
        if (++R->depth > GJ_MAX_DEPTH) {
            free(v);
            return jfail(R, "nested too deeply");
        }
        v->t = c == '{' ? GJ_OBJ : GJ_ARR;
        char close = c == '{' ? '}' : ']';
        R->i++;
        ws(R);
        if (R->i < R->n && R->s[R->i] == close) {
            R->i++;
        } else {
            while (!rc) {
                char *key = NULL;
                size_t klen = 0;
                if (v->t == GJ_OBJ) {
                    ws(R);
                    if (R->i >= R->n || R->s[R->i] != '"') {
                        rc = jfail(R, "expected a key");
                        break;
                    }
                    if ((rc = read_string(R, &key, &klen))) break;
                    if (strlen(key) != klen) {
                        free(key);
                        rc = jfail(R, "key holding a NUL");
                        break;
                    }
                    ws(R);
                    if (R->i >= R->n || R->s[R->i] != ':') {
                        free(key);
                        rc = jfail(R, "expected ':'");
                        break;
                    }
                    R->i++;
                }
                gj *k = NULL;
                if ((rc = read_value(R, &k))) {
                    free(key);
                    break;
                }
                if (add_kid(v, k, key)) {
                    gj_free(k);
                    free(key);
                    rc = zl_errf(R->err, ZL_ENOMEM, "out of memory");
                    break;
                }
                ws(R);
                if (R->i < R->n && R->s[R->i] == ',') {
                    R->i++;
                    continue;
                }
                if (R->i < R->n && R->s[R->i] == close) {
                    R->i++;
                    break;
                }
                rc = jfail(R, v->t == GJ_OBJ ? "expected ',' or '}'" : "expected ',' or ']'");
            }
        }
        R->depth--;
    } else if (c == '"') {
        v->t = GJ_STR;
        rc = read_string(R, &v->s, &v->len);
    } else if (R->n - R->i >= 4 && !strncmp(R->s + R->i, "true", 4)) {
        v->t = GJ_TRUE;
        R->i += 4;
    } else if (R->n - R->i >= 5 && !strncmp(R->s + R->i, "false", 5)) {
        v->t = GJ_FALSE;
        R->i += 5;
    } else if (R->n - R->i >= 4 && !strncmp(R->s + R->i, "null", 4)) {
        v->t = GJ_NULL;
        R->i += 4;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        size_t st = R->i;
        if (R->s[R->i] == '-') R->i++;
        size_t d0 = R->i;
        while (R->i < R->n && R->s[R->i] >= '0' && R->s[R->i] <= '9') R->i++;
        int ok = R->i > d0 && !(R->s[d0] == '0' && R->i - d0 > 1);
        if (ok && R->i < R->n && R->s[R->i] == '.') {
            size_t f0 = ++R->i;
            while (R->i < R->n && R->s[R->i] >= '0' && R->s[R->i] <= '9') R->i++;
            ok = R->i > f0;
        }
        if (ok && R->i < R->n && (R->s[R->i] == 'e' || R->s[R->i] == 'E')) {
            R->i++;
            if (R->i < R->n && (R->s[R->i] == '+' || R->s[R->i] == '-')) R->i++;
            size_t e0 = R->i;
            while (R->i < R->n && R->s[R->i] >= '0' && R->s[R->i] <= '9') R->i++;
            ok = R->i > e0;
        }
        if (!ok) {
            rc = jfail(R, "malformed number");
        } else {
            v->t = GJ_NUM;
            v->len = R->i - st;
            v->s = malloc(v->len + 1);
            if (!v->s) rc = zl_errf(R->err, ZL_ENOMEM, "out of memory");
            else {
                memcpy(v->s, R->s + st, v->len);
                v->s[v->len] = 0;
            }
        }
    } else {
        rc = jfail(R, "unexpected character");
    }
    if (rc) {
        gj_free(v);
        return rc;
    }
    *out = v;
    return 0;
}

int gj_parse(const char *s, size_t n, gj **out, zl_err *err) {
    *out = NULL;
    jr R = {s, n, 0, err, 0};
    gj *v = NULL;
    int rc = read_value(&R, &v);
    if (rc) return rc;
    ws(&R);
    if (R.i != R.n) {
        gj_free(v);
        return jfail(&R, "text after the value");
    }
    *out = v;
    return 0;
}

void gj_free(gj *v) {
    if (!v) return;
    for (int k = 0; k < v->n; k++) {
        gj_free(v->kid[k]);
        if (v->key) free(v->key[k]);
    }
    free(v->kid);
    free(v->key);
    free(v->s);
    free(v);
}

const gj *gj_get(const gj *obj, const char *key) {
    if (!obj || obj->t != GJ_OBJ) return NULL;
    for (int k = obj->n - 1; k >= 0; k--) /* the last duplicate wins, as in most parsers */
        if (!strcmp(obj->key[k], key)) return obj->kid[k];
    return NULL;
}

void gj_write_string(zl_buf *b, const char *s, size_t n) {
    zl_buf_put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *e = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : c == '\n' ? "\\n"
                      : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
        if (e) zl_buf_puts(b, e);
        else if (c < 0x20) zl_buf_printf(b, "\\u%04x", c);
        else zl_buf_put(b, (const char *)&s[i], 1);
    }
    zl_buf_put(b, "\"", 1);
}

void gj_write(zl_buf *b, const gj *v) {
    switch (v->t) {
    case GJ_NULL: zl_buf_puts(b, "null"); break;
    case GJ_TRUE: zl_buf_puts(b, "true"); break;
    case GJ_FALSE: zl_buf_puts(b, "false"); break;
    case GJ_NUM: zl_buf_put(b, v->s, v->len); break;
    case GJ_STR: gj_write_string(b, v->s, v->len); break;
    case GJ_ARR:
    case GJ_OBJ:
        zl_buf_puts(b, v->t == GJ_ARR ? "[" : "{");
        for (int k = 0; k < v->n; k++) {
            if (k) zl_buf_puts(b, ",");
            if (v->t == GJ_OBJ) {
                gj_write_string(b, v->key[k], strlen(v->key[k]));
                zl_buf_puts(b, ":");
            }
            gj_write(b, v->kid[k]);
        }
        zl_buf_puts(b, v->t == GJ_ARR ? "]" : "}");
        break;
    }
}
