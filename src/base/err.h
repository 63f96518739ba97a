/* err.h — errors as values.
 *
 * Library code never exits or aborts on bad input: it fills a zl_err with a
 * code and a one-line message naming the problem, and returns the code.
 * Callers pass the zl_err down; NULL is allowed and simply drops the message. */
#ifndef ZL_ERR_H
#define ZL_ERR_H

#include <stddef.h>

#ifndef ZL_ERR_TYPES /* also declared, identically, by include/zerolayer.h */
#define ZL_ERR_TYPES
enum {
    ZL_OK = 0,
    ZL_EINVAL = 1,   /* bad argument or malformed input */
    ZL_EIO = 2,      /* file system or I/O failure */
    ZL_ENOMEM = 3,   /* allocation failed */
    ZL_EFORMAT = 4,  /* malformed file contents */
    ZL_EUNSUP = 5,   /* valid but not supported (architecture, tensor type) */
    ZL_ERANGE = 6,   /* value out of range (context full, prompt too long) */
};

typedef struct zl_err {
    int code;
    char msg[512];
} zl_err;
#endif

/* Record an error (printf-style) and return its code. */
int zl_errf(zl_err *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prefix an existing message with context ("loading x: <old message>"). */
int zl_err_prefix(zl_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
