/* gjson.h — a small JSON reader and compact writer for the grammar layer
 * (schemas arrive as text; the library links no JSON library).
 *
 * Owns parsing (RFC 8259: strings decoded to UTF-8, numbers kept as their
 * source text, nesting bounded), lookup and compact re-serialization.
 * Never interprets what the JSON means. */
#ifndef ZL_GJSON_H
#define ZL_GJSON_H

#include <stddef.h>

#include "../base/buf.h"
#include "../base/err.h"

typedef enum { GJ_NULL, GJ_FALSE, GJ_TRUE, GJ_NUM, GJ_STR, GJ_ARR, GJ_OBJ } gj_type;

typedef struct gj {
    gj_type t;
    char *s;           /* GJ_STR: decoded bytes; GJ_NUM: the number's text (NUL-terminated) */
    size_t len;
    struct gj **kid;   /* GJ_ARR / GJ_OBJ members */
    char **key;        /* GJ_OBJ: decoded keys (NUL-terminated; keys holding NUL are rejected) */
    int n;
} gj;


int gj_parse(const char *s, size_t n, gj **out, zl_err *err);
void gj_free(gj *v);
/* Member of an object by key, or NULL. */
const gj *gj_get(const gj *obj, const char *key);
/* Compact JSON text of v (JSON.stringify spelling: no spaces, strings with
 * \" \\ \b \f \n \r \t and \u00XX for other control bytes). */
void gj_write(zl_buf *b, const gj *v);
/* JSON-quoted form of bytes s[0..n). */
void gj_write_string(zl_buf *b, const char *s, size_t n);

#endif
