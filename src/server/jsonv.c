/* jsonv.c — body parsing, field validation, UTF-8 (see jsonv.h). */
#include "jsonv.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (0 if invalid or truncated). */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) { len = 2; cp = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; cp = c & 0x0F; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; cp = c & 0x07; }
    else return 0;
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0;
    return len;
}

size_t zl_utf8_valid_prefix(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        size_t l = utf8_seq(u + i, n - i);
        if (!l) break;
        i += l;
    }
    return i;
}

json_t *zl_json_lossy_string(const char *s, size_t n) {
    if (zl_utf8_valid_prefix(s, n) == n) return json_stringn(s, n);
    zl_buf b = {0};
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t l = utf8_seq(u + i, n - i);
        if (l) { zl_buf_put(&b, s + i, l); i += l; }
        else { zl_buf_put(&b, "\xEF\xBF\xBD", 3); i++; }
    }
    json_t *j = b.oom ? NULL : json_stringn(b.p ? b.p : "", b.n);
    zl_buf_free(&b);
    return j;
}

int zl_verr_set(zl_verr *e, const char *param, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    return -1;
}

#define MARK "\xEF\xBF\xBF" /* U+FFFF: a noncharacter no client sends */

static int find_mark(json_t *j, char *path, size_t cap) {
    size_t base = strlen(path);
    if (json_is_string(j)) return memmem(json_string_value(j), json_string_length(j), MARK, 3) != NULL;
    if (json_is_array(j)) {
        size_t i;
        json_t *v;
        json_array_foreach(j, i, v) {
            snprintf(path + base, cap - base, "[%zu]", i);
            if (find_mark(v, path, cap)) return 1;
        }
    } else if (json_is_object(j)) {
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v) {
            snprintf(path + base, cap - base, "%s%s", base ? "." : "", k);
            if (strstr(k, MARK) || find_mark(v, path, cap)) return 1;
        }
    }
    path[base] = 0;
    return 0;
}

static void utf8_error(const char *body, size_t len, zl_verr *e) {
    size_t bad = zl_utf8_valid_prefix(body, len);
    if (memmem(body, len, MARK, 3)) {
        zl_verr_set(e, "", "request body is not valid UTF-8 (byte %zu)", bad);
        return;
    }
    zl_buf b = {0};
    const unsigned char *u = (const unsigned char *)body;
    for (size_t i = 0; i < len;) {
        size_t l = utf8_seq(u + i, len - i);
        if (l) { zl_buf_put(&b, body + i, l); i += l; }
        else { zl_buf_put(&b, MARK, 3); i++; }
    }
    json_t *j = b.oom ? NULL : json_loadb(b.p, b.n, 0, NULL);
    char path[256] = "";
    if (j && find_mark(j, path, sizeof path) && *path)
        zl_verr_set(e, path, "%s: invalid UTF-8", path);
    else
        zl_verr_set(e, "", "request body is not valid UTF-8 (byte %zu)", bad);
    json_decref(j);
    zl_buf_free(&b);
}

json_t *zl_json_parse_body(const char *body, size_t len, zl_verr *e) {
    if (!body || !len) { zl_verr_set(e, "", "request body is empty; expected a JSON object"); return NULL; }
    json_error_t je;
    json_t *j = json_loadb(body, len, 0, &je);
    if (!j) {
        if (zl_utf8_valid_prefix(body, len) < len) utf8_error(body, len, e);
        else zl_verr_set(e, "", "invalid JSON at line %d column %d: %s", je.line, je.column, je.text);
        return NULL;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        zl_verr_set(e, "", "request body must be a JSON object");
        return NULL;
    }
    return j;
}

static const char *fname(const char *path, const char *key, char *buf, size_t cap) {
    if (path && *path) snprintf(buf, cap, "%s.%s", path, key);
    else snprintf(buf, cap, "%s", key);
    return buf;
}

int zl_jv_str(json_t *o, const char *key, const char *path, int required, const char **out, zl_verr *e) {
    char f[160];
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        if (required) return zl_verr_set(e, fname(path, key, f, sizeof f), "%s: field required", f);
        return 0;
    }
    if (!json_is_string(v)) return zl_verr_set(e, fname(path, key, f, sizeof f), "%s: expected a string", f);
    *out = json_string_value(v);
    return 1;
}

int zl_jv_bool(json_t *o, const char *key, const char *path, int *out, zl_verr *e) {
    char f[160];
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) return zl_verr_set(e, fname(path, key, f, sizeof f), "%s: expected a boolean", f);
    *out = json_is_true(v);
    return 1;
}

int zl_jv_int(json_t *o, const char *key, const char *path, int required, long long lo, long long hi, long long *out,
              zl_verr *e) {
    char f[160];
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        if (required) return zl_verr_set(e, fname(path, key, f, sizeof f), "%s: field required", f);
        return 0;
    }
    long long x;
    if (json_is_integer(v)) x = json_integer_value(v);
    else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) && fabs(json_real_value(v)) < 9e15)
        x = (long long)json_real_value(v);
    else return zl_verr_set(e, fname(path, key, f, sizeof f), "%s: expected an integer", f);
    if (x < lo || x > hi)
        return zl_verr_set(e, fname(path, key, f, sizeof f), "%s: %lld is out of range [%lld, %lld]", f, x, lo, hi);
    *out = x;
    return 1;
}

int zl_jv_num(json_t *o, const char *key, const char *path, double lo, double hi, double *out, zl_verr *e) {
    char f[160];
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v)) return zl_verr_set(e, fname(path, key, f, sizeof f), "%s: expected a number", f);
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi))
        return zl_verr_set(e, fname(path, key, f, sizeof f), "%s: %g is out of range [%g, %g]", f, x, lo, hi);
    *out = x;
    return 1;
}

json_t *zl_jv_messages(json_t *b, zl_verr *e) {
    json_t *msgs = json_object_get(b, "messages");
    if (!msgs) return zl_verr_set(e, "messages", "messages: field required"), NULL;
    if (!json_is_array(msgs) || !json_array_size(msgs))
        return zl_verr_set(e, "messages", "messages: expected a non-empty array"), NULL;
    return msgs;
}

int zl_jv_role(json_t *m, const char *path, const char *const *roles, const char *expected, const char **role,
               zl_verr *e) {
    if (!json_is_object(m)) return zl_verr_set(e, path, "%s: expected an object", path);
    if (zl_jv_str(m, "role", path, 1, role, e) < 0) return -1;
    for (const char *const *r = roles; *r; r++)
        if (!strcmp(*r, *role)) return 0;
    return zl_verr_set(e, path, "%s.role: '%s' is not %s", path, *role, expected);
}

int zl_jv_text_parts(json_t *c, const char *path, const char *what, zl_buf *out, zl_verr *e) {
    if (json_is_string(c)) {
        zl_buf_puts(out, json_string_value(c));
        return 0;
    }
    if (!json_is_array(c)) return zl_verr_set(e, path, "%s: expected a string or an array of %s", path, what);
    size_t i;
    json_t *p;
    json_array_foreach(c, i, p) {
        char f[160];
        snprintf(f, sizeof f, "%s[%zu]", path, i);
        const char *type = NULL, *text = NULL;
        if (!json_is_object(p)) return zl_verr_set(e, f, "%s: expected an object", f);
        if (zl_jv_str(p, "type", f, 1, &type, e) < 0) return -1;
        if (strcmp(type, "text")) return zl_verr_set(e, f, "%s.type: '%s' is not supported (only \"text\")", f, type);
        if (zl_jv_str(p, "text", f, 1, &text, e) < 0) return -1;
        zl_buf_puts(out, text);
    }
    return 0;
}

int zl_jv_strings(json_t *a, const char *path, int max, int skip_empty, const char **out, int *n, zl_verr *e) {
    if (!json_is_array(a)) return zl_verr_set(e, path, "%s: expected an array of strings", path);
    if (json_array_size(a) > (size_t)max) return zl_verr_set(e, path, "%s: at most %d sequences", path, max);
    size_t i;
    json_t *x;
    json_array_foreach(a, i, x) {
        char f[64];
        snprintf(f, sizeof f, "%s[%zu]", path, i);
        if (!json_is_string(x)) return zl_verr_set(e, f, "%s: expected a string", f);
        if (!json_string_length(x) && !skip_empty) return zl_verr_set(e, f, "%s: must not be empty", f);
        if (json_string_length(x)) out[(*n)++] = json_string_value(x);
    }
    return 0;
}

int zl_jv_token_ids(json_t *a, const char *path, int n_vocab, int32_t **ids, size_t *n, zl_verr *e) {
    if (!json_is_array(a)) return zl_verr_set(e, path, "%s: expected an array of token ids", path);
    size_t k = json_array_size(a);
    int32_t *v = malloc((k ? k : 1) * sizeof *v);
    if (!v) return zl_verr_set(e, "", "out of memory"), -2;
    for (size_t i = 0; i < k; i++) {
        json_t *t = json_array_get(a, i);
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) >= n_vocab) {
            free(v);
            return zl_verr_set(e, path, "%s[%zu]: expected a token id in [0, %d)", path, i, n_vocab);
        }
        v[i] = (int32_t)json_integer_value(t);
    }
    *ids = v;
    *n = k;
    return 0;
}
