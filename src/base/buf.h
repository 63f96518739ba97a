/* buf.h — the growable byte buffer every layer writes text into.
 *
 * Owns: one NUL-terminated, growable byte string (p[0..n), p[n] = 0 once
 * anything was put) whose out-of-memory is sticky: after a failed growth
 * every put is a no-op and oom stays set, so a writer checks once at the
 * end.  Knows nothing of what the bytes mean. */
#ifndef ZL_BUF_H
#define ZL_BUF_H

#include <stddef.h>

typedef struct zl_buf {
    char *p;
    size_t n, cap;
    int oom;
} zl_buf;

void zl_buf_put(zl_buf *b, const char *s, size_t n);
void zl_buf_puts(zl_buf *b, const char *s);
void zl_buf_printf(zl_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void zl_buf_free(zl_buf *b);
/* The text, handed to the caller (malloc'd; "" when nothing was put), or NULL
 * after an out-of-memory; either way b is empty again. */
char *zl_buf_take(zl_buf *b);

#endif
