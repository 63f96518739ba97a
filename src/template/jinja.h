/* jinja.h — a Jinja2 subset interpreter for chat templates.
 *
 * Renders the tokenizer.chat_template a model ships exactly as python's
 * jinja2 (3.1) does under the conventions HF transformers uses:
 * ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the
 * loopcontrols extension, a raise_exception(msg) global, strftime_now(fmt),
 * and a tojson filter that keeps non-ASCII text and does not HTML-escape.
 * Autoescaping is off; undefined names behave as jinja2's default Undefined.
 *
 * A template is parsed once (zl_jinja_parse) and rendered many times, from any
 * number of threads, against variables built from JSON (zl_jinja_vars).
 * Every failure — a syntax error (with line and column), an unknown filter, a
 * type error, raise_exception, a limit (output size, loop iterations,
 * recursion depth, memory) — is returned as a zl_err with jinja2's message;
 * a hostile template can neither crash nor hang the caller.  This module
 * never reads files, the clock beyond strftime_now, or anything of the
 * server's. */
#ifndef ZL_JINJA_H
#define ZL_JINJA_H

#include <stddef.h>

#include "../base/err.h"

typedef struct zl_jinja zl_jinja;
typedef struct zl_jinja_vars zl_jinja_vars;

/* Limits of one render; zero fields take the defaults below. */
typedef struct zl_jinja_limits {
    size_t max_output;     /* bytes of rendered text (default 32 MiB) */
    size_t max_memory;     /* bytes of intermediate values (default 256 MiB) */
    long long max_iters;   /* loop iterations over the whole render (default 5,000,000) */
    int max_depth;         /* nested evaluation depth incl. macro calls (default 400) */
} zl_jinja_limits;

/* Compile src (n bytes, need not be NUL-terminated).  Returns 0 with *out,
 * or an error code with err->msg = "line L, column C: <jinja2's message>". */
int zl_jinja_parse(zl_jinja **out, const char *src, size_t n, zl_err *err);
void zl_jinja_free(zl_jinja *t);

/* A set of variables.  NULL on out of memory. */
zl_jinja_vars *zl_jinja_vars_new(void);
void zl_jinja_vars_free(zl_jinja_vars *v);
/* Set name to the value of JSON text; with name NULL the JSON must be an
 * object and each of its keys becomes a variable. */
int zl_jinja_vars_json(zl_jinja_vars *v, const char *name, const char *json, size_t n, zl_err *err);
int zl_jinja_vars_str(zl_jinja_vars *v, const char *name, const char *s, zl_err *err);
int zl_jinja_vars_bool(zl_jinja_vars *v, const char *name, int b, zl_err *err);

/* Render.  Returns 0 with *out (malloc'd, NUL-terminated, *n bytes), or an
 * error code with err->msg: for raise_exception exactly its message, for
 * other errors jinja2's exception text.  lim may be NULL. */
int zl_jinja_render(const zl_jinja *t, const zl_jinja_vars *v, const zl_jinja_limits *lim, char **out, size_t *n,
                    zl_err *err);

#endif
