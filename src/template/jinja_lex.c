/* jinja_lex.c — template source to tokens, as jinja2's lexer does it:
 * {{ }}, {% %}, {# #} with '-' / '+' whitespace control, trim_blocks (the
 * first newline after a block or comment tag goes) and lstrip_blocks (spaces
 * and tabs before a block or comment tag on its own line go), {% raw %},
 * end tags recognised only while brackets are balanced, python string
 * escapes.  Never evaluates anything. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_internal.h"

typedef struct lx {
    jarena *a;
    const char *s;
    size_t n, pos;
    jtok *t;
    size_t nt, cap;
    size_t cpos; /* line/column cache: position cpos is at cline:ccol */
    int cline, ccol;
} lx;

static void pos_of(lx *L, size_t at, int *line, int *col) {
    int l = 1, c = 1;
    size_t i = 0;
    if (L->cline && at >= L->cpos) {
        i = L->cpos;
        l = L->cline;
        c = L->ccol;
    }
    for (; i < at && i < L->n; i++) {
        if (L->s[i] == '\n') { l++; c = 1; }
        else c++;
    }
    L->cpos = i;
    L->cline = l;
    L->ccol = c;
    *line = l;
    *col = c;
}

_Noreturn static void lfail(lx *L, size_t at, const char *msg) {
    int line, col;
    pos_of(L, at, &line, &col);
    ja_fail(L->a, ZL_EINVAL, "line %d, column %d: %s", line, col, msg);
}

static jtok *emit(lx *L, int k, size_t at) {
    if (L->nt == L->cap) {
        size_t nc = L->cap ? L->cap * 2 : 256;
        jtok *nt = ja_alloc(L->a, nc * sizeof *nt);
        if (L->nt) memcpy(nt, L->t, L->nt * sizeof *nt);
        L->t = nt;
        L->cap = nc;
    }
    jtok *t = &L->t[L->nt++];
    memset(t, 0, sizeof *t);
    t->k = (uint8_t)k;
    pos_of(L, at, &t->line, &t->col);
    return t;
}

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

static void emit_data(lx *L, const char *p, size_t n, size_t at) {
    if (!n) return;
    jtok *t = emit(L, TK_DATA, at);
    t->p = p;
    t->n = n;
}

/* text before a tag, after '-' stripping or lstrip_blocks */
static size_t strip_text(const char *p, size_t n, int sign, int lstrip, int line_starting) {
    if (sign == '-') {
        while (n && is_ws(p[n - 1])) n--;
        return n;
    }
    if (sign == '+' || !lstrip) return n;
    size_t l = n;
    while (l && p[l - 1] != '\n') l--;
    if (l == 0 && !line_starting) return n;
    if (l == n) return n;
    for (size_t i = l; i < n; i++)
        if (!is_ws(p[i])) return n;
    return l;
}

/* python unicode-escape decoding of a string literal's body */
static void decode_string(lx *L, jtok *t, const char *p, size_t n) {
    jbuf b;
    jb_init(&b, L->a);
    jb_put(&b, "", 0);
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c != '\\' || i + 1 >= n) { jb_putc(&b, c); continue; }
        char e = p[++i];
        switch (e) {
        case 'n': jb_putc(&b, '\n'); break;
        case 't': jb_putc(&b, '\t'); break;
        case 'r': jb_putc(&b, '\r'); break;
        case '\\': jb_putc(&b, '\\'); break;
        case '\'': jb_putc(&b, '\''); break;
        case '"': jb_putc(&b, '"'); break;
        case 'a': jb_putc(&b, '\a'); break;
        case 'b': jb_putc(&b, '\b'); break;
        case 'f': jb_putc(&b, '\f'); break;
        case 'v': jb_putc(&b, '\v'); break;
        case '\n': break;
        case 'x':
        case 'u':
        case 'U': {
            int want = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t cp = 0;
            int k;
            for (k = 0; k < want && i + 1 + (size_t)k < n; k++) {
                char h = p[i + 1 + k];
                int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                if (d < 0) break;
                cp = cp * 16 + (uint32_t)d;
            }
            if (k < want || cp > 0x10ffff) lfail(L, (size_t)(p + i - L->s), "invalid escape in string literal");
            ju_put(&b, cp);
            i += (size_t)want;
            break;
        }
        default:
            if (e >= '0' && e <= '7') {
                uint32_t cp = (uint32_t)(e - '0');
                for (int k = 0; k < 2 && i + 1 < n && p[i + 1] >= '0' && p[i + 1] <= '7'; k++) cp = cp * 8 + (uint32_t)(p[++i] - '0');
                ju_put(&b, cp);
            } else {
                jb_putc(&b, '\\');
                jb_putc(&b, e);
            }
        }
    }
    t->p = b.p;
    t->n = b.n;
}

static const char *const ops3[] = {"//", "**", "==", "!=", "<=", ">=", NULL};
static const char ops1[] = "+-/*%~[](){}<>=.:|,;";

/* Tokens of one tag's inside up to its end; returns the end-tag kind consumed. */
static void lex_tag(lx *L, int kind, size_t tag_at, int *line_starting) {
    char stack[256];
    int sp = 0;
    const char *end = kind == TK_VAR_BEGIN ? "}}" : "%}";
    for (;;) {
        if (L->pos >= L->n) {
            lfail(L, tag_at, kind == TK_VAR_BEGIN ? "unexpected end of template, expected 'end of print statement'."
                                                  : "unexpected end of template, expected 'end of statement block'.");
        }
        const char *s = L->s + L->pos;
        size_t left = L->n - L->pos;
        if (sp == 0) {
            int sign = 0;
            size_t k = 0;
            if ((s[0] == '-' || (s[0] == '+' && kind == TK_BLOCK_BEGIN)) && left >= 3 && !memcmp(s + 1, end, 2)) {
                sign = s[0];
                k = 1;
            }
            if (left >= k + 2 && !memcmp(s + k, end, 2)) {
                emit(L, kind == TK_VAR_BEGIN ? TK_VAR_END : TK_BLOCK_END, L->pos);
                L->pos += k + 2;
                if (sign == '-') {
                    while (L->pos < L->n && is_ws(L->s[L->pos])) L->pos++;
                } else if (sign != '+' && kind == TK_BLOCK_BEGIN && L->pos < L->n && L->s[L->pos] == '\n') {
                    L->pos++;
                }
                *line_starting = L->pos > 0 && L->s[L->pos - 1] == '\n';
                return;
            }
        }
        char c = s[0];
        if (is_ws(c)) { L->pos++; continue; }
        size_t at = L->pos;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
            size_t k = 1;
            while (k < left && ((s[k] >= 'a' && s[k] <= 'z') || (s[k] >= 'A' && s[k] <= 'Z') || s[k] == '_' ||
                                (s[k] >= '0' && s[k] <= '9')))
                k++;
            jtok *t = emit(L, TK_NAME, at);
            t->p = s;
            t->n = k;
            L->pos += k;
            continue;
        }
        if (c >= '0' && c <= '9') {
            size_t k = 0;
            char num[64];
            size_t nn = 0;
            int is_float = 0;
            while (k < left && ((s[k] >= '0' && s[k] <= '9') || s[k] == '_')) { if (s[k] != '_' && nn < 63) num[nn++] = s[k]; k++; }
            if (k + 1 < left && s[k] == '.' && s[k + 1] >= '0' && s[k + 1] <= '9' && !(L->nt && L->t[L->nt - 1].k == TK_OP && L->t[L->nt - 1].op[0] == '.' && 0)) {
                is_float = 1;
                if (nn < 63) num[nn++] = '.';
                k++;
                while (k < left && ((s[k] >= '0' && s[k] <= '9') || s[k] == '_')) { if (s[k] != '_' && nn < 63) num[nn++] = s[k]; k++; }
            }
            if (k < left && (s[k] == 'e' || s[k] == 'E')) {
                size_t q = k + 1;
                if (q < left && (s[q] == '+' || s[q] == '-')) q++;
                if (q < left && s[q] >= '0' && s[q] <= '9') {
                    is_float = 1;
                    if (nn < 63) num[nn++] = 'e';
                    if (s[k + 1] == '-' && nn < 63) num[nn++] = '-';
                    k = q;
                    while (k < left && s[k] >= '0' && s[k] <= '9') { if (nn < 63) num[nn++] = s[k]; k++; }
                }
            }
            num[nn] = 0;
            /* a number right after '.' is an attribute index (foo.0.1): keep it an integer */
            if (is_float && L->nt && L->t[L->nt - 1].k == TK_OP && !strcmp(L->t[L->nt - 1].op, ".")) {
                is_float = 0;
                k = 0;
                nn = 0;
                while (k < left && s[k] >= '0' && s[k] <= '9') { if (nn < 63) num[nn++] = s[k]; k++; }
                num[nn] = 0;
            }
            jtok *t = emit(L, is_float ? TK_FLOAT : TK_INT, at);
            if (is_float) t->f = strtod(num, NULL);
            else t->i = strtoll(num, NULL, 10);
            L->pos += k;
            continue;
        }
        if (c == '\'' || c == '"') {
            size_t k = 1;
            while (k < left && s[k] != c) k += s[k] == '\\' ? 2 : 1;
            if (k >= left) lfail(L, at, "unexpected char '\\'' or '\"': unterminated string");
            jtok *t = emit(L, TK_STRING, at);
            decode_string(L, t, s + 1, k - 1);
            L->pos += k + 1;
            continue;
        }
        int matched = 0;
        for (int i = 0; ops3[i]; i++)
            if (left >= 2 && s[0] == ops3[i][0] && s[1] == ops3[i][1]) {
                jtok *t = emit(L, TK_OP, at);
                memcpy(t->op, ops3[i], 2);
                L->pos += 2;
                matched = 1;
                break;
            }
        if (matched) continue;
        if (strchr(ops1, c)) {
            if (c == '(' || c == '[' || c == '{') {
                if (sp >= (int)sizeof stack) lfail(L, at, "brackets nested too deeply");
                stack[sp++] = c == '(' ? ')' : c == '[' ? ']' : '}';
            } else if (c == ')' || c == ']' || c == '}') {
                if (sp == 0) {
                    char m[64];
                    snprintf(m, sizeof m, "unexpected '%c'", c);
                    lfail(L, at, m);
                }
                if (stack[sp - 1] != c) {
                    char m[64];
                    snprintf(m, sizeof m, "unexpected '%c', expected '%c'", c, stack[sp - 1]);
                    lfail(L, at, m);
                }
                sp--;
            }
            jtok *t = emit(L, TK_OP, at);
            t->op[0] = c;
            L->pos++;
            continue;
        }
        char m[64];
        snprintf(m, sizeof m, "unexpected char '%c' at %zu", c, at);
        lfail(L, at, m);
    }
}

/* {% raw %} at L->pos (just after "{%" and its sign): returns 1 when it was one */
static int lex_raw(lx *L, size_t *i, int *line_starting) {
    size_t p = *i;
    while (p < L->n && is_ws(L->s[p])) p++;
    if (L->n - p < 3 || memcmp(L->s + p, "raw", 3)) return 0;
    p += 3;
    size_t q = p;
    while (q < L->n && is_ws(L->s[q])) q++;
    int sign = 0;
    if (q < L->n && L->s[q] == '-') { sign = '-'; q++; }
    if (L->n - q < 2 || memcmp(L->s + q, "%}", 2)) return 0;
    if (q == p && !sign && p < L->n && L->s[p] != '%') return 0;
    q += 2;
    if (sign == '-') while (q < L->n && is_ws(L->s[q])) q++;
    /* body up to {%[-+]? endraw [-+]?%} */
    size_t b = q;
    for (size_t k = b; k + 1 < L->n; k++) {
        if (L->s[k] != '{' || L->s[k + 1] != '%') continue;
        size_t r = k + 2;
        int s2 = 0;
        if (r < L->n && (L->s[r] == '-' || L->s[r] == '+')) s2 = L->s[r++];
        while (r < L->n && is_ws(L->s[r])) r++;
        if (L->n - r < 6 || memcmp(L->s + r, "endraw", 6)) continue;
        r += 6;
        while (r < L->n && is_ws(L->s[r])) r++;
        int s3 = 0;
        if (r < L->n && (L->s[r] == '-' || L->s[r] == '+')) s3 = L->s[r++];
        if (L->n - r < 2 || memcmp(L->s + r, "%}", 2)) continue;
        r += 2;
        size_t len = strip_text(L->s + b, k - b, s2, 1, 0);
        emit_data(L, L->s + b, len, b);
        if (s3 == '-') while (r < L->n && is_ws(L->s[r])) r++;
        else if (s3 != '+' && r < L->n && L->s[r] == '\n') r++;
        *i = r;
        *line_starting = r > 0 && L->s[r - 1] == '\n';
        return 1;
    }
    lfail(L, *i, "Missing end of raw directive");
}

void jlex(jarena *a, const char *src, size_t n, jtok **toks, size_t *ntoks) {
    lx L = {.a = a, .s = src, .n = n};
    int line_starting = 1;
    while (L.pos < n) {
        size_t at = L.pos;
        const char *hit = NULL;
        for (size_t i = L.pos; i + 1 < n; i++) {
            if (src[i] == '{' && (src[i + 1] == '{' || src[i + 1] == '%' || src[i + 1] == '#')) {
                hit = src + i;
                break;
            }
        }
        if (!hit) {
            emit_data(&L, src + at, n - at, at);
            break;
        }
        size_t tag = (size_t)(hit - src);
        char kind = hit[1];
        int sign = tag + 2 < n && (src[tag + 2] == '-' || src[tag + 2] == '+') ? src[tag + 2] : 0;
        size_t len = strip_text(src + at, tag - at, sign, kind != '{', line_starting);
        emit_data(&L, src + at, len, at);
        size_t body = tag + 2 + (sign ? 1 : 0);
        if (kind == '%') {
            size_t r = body;
            if (lex_raw(&L, &r, &line_starting)) {
                L.pos = r;
                continue;
            }
        }
        if (kind == '#') {
            size_t p = body;
            while (p + 1 < n && !(src[p] == '#' && src[p + 1] == '}')) p++;
            if (p + 1 >= n) lfail(&L, tag, "Missing end of comment tag");
            int s2 = p > body && (src[p - 1] == '-' || src[p - 1] == '+') ? src[p - 1] : 0;
            p += 2;
            if (s2 == '-') while (p < n && is_ws(src[p])) p++;
            else if (s2 != '+' && p < n && src[p] == '\n') p++;
            L.pos = p;
            line_starting = p > 0 && src[p - 1] == '\n';
            continue;
        }
        emit(&L, kind == '{' ? TK_VAR_BEGIN : TK_BLOCK_BEGIN, tag);
        L.pos = body;
        lex_tag(&L, kind == '{' ? TK_VAR_BEGIN : TK_BLOCK_BEGIN, tag, &line_starting);
    }
    emit(&L, TK_EOF, n);
    *toks = L.t;
    *ntoks = L.nt;
}
