/* err.c — formatting of error values; see err.h. */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int zl_errf(zl_err *e, int code, const char *fmt, ...) {
    if (!e) return code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    e->code = code;
    return code;
}

int zl_err_prefix(zl_err *e, const char *fmt, ...) {
    if (!e) return ZL_EINVAL;
    char pre[256], old[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    size_t n = strlen(pre);
    if (n > sizeof e->msg - 3) n = sizeof e->msg - 3;
    memcpy(e->msg, pre, n);
    memcpy(e->msg + n, ": ", 2);
    size_t rest = sizeof e->msg - n - 3, ol = strlen(old);
    if (ol > rest) ol = rest;
    memcpy(e->msg + n + 2, old, ol);
    e->msg[n + 2 + ol] = 0;
    return e->code;
}
