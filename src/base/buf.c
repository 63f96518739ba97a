/* buf.c — see buf.h. */
#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void zl_buf_put(zl_buf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n + 1) nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void zl_buf_puts(zl_buf *b, const char *s) { zl_buf_put(b, s, strlen(s)); }

void zl_buf_printf(zl_buf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        zl_buf_put(b, tmp, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    zl_buf_put(b, big, (size_t)n);
    free(big);
}

void zl_buf_free(zl_buf *b) {
    free(b->p);
    *b = (zl_buf){0};
}

char *zl_buf_take(zl_buf *b) {
    char *p = b->p;
    int oom = b->oom;
    *b = (zl_buf){0};
    if (oom) {
        free(p);
        return NULL;
    }
    return p ? p : strdup("");
}
