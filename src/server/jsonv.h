/* jsonv.h — request-body parsing and validation for the API adapters.
 *
 * Every check names the offending field the way the caller wrote it
 * ("messages[2].content", "stop_sequences[0]") so a 400 tells the client
 * exactly what to fix.  Also UTF-8 helpers (the byte buffer is base/buf.h). */
#ifndef ZL_JSONV_H
#define ZL_JSONV_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/buf.h"


/* Length of the longest prefix of s[0..n) that is valid UTF-8. */
size_t zl_utf8_valid_prefix(const char *s, size_t n);
/* A JSON string from bytes that may be invalid UTF-8 (bad bytes -> U+FFFD). */
json_t *zl_json_lossy_string(const char *s, size_t n);

/* A validation failure: message and the field it concerns ("" if none). */
typedef struct zl_verr {
    char msg[384];
    char param[128];
} zl_verr;

int zl_verr_set(zl_verr *e, const char *param, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Parse a request body: must be a JSON object.  Invalid UTF-8 is reported
 * with the path of the string that holds it. */
json_t *zl_json_parse_body(const char *body, size_t len, zl_verr *e);

/* Typed getters.  Return 0 when the field is absent/null (out untouched,
 * or an error if required), 1 when present and valid, -1 on error. */
int zl_jv_str(json_t *o, const char *key, const char *path, int required, const char **out, zl_verr *e);
int zl_jv_bool(json_t *o, const char *key, const char *path, int *out, zl_verr *e);
int zl_jv_int(json_t *o, const char *key, const char *path, int required, long long lo, long long hi, long long *out,
              zl_verr *e);
int zl_jv_num(json_t *o, const char *key, const char *path, double lo, double hi, double *out, zl_verr *e);

/* The body's "messages": a non-empty array, or NULL with e set. */
json_t *zl_jv_messages(json_t *body, zl_verr *e);
/* messages[i] (path) is an object whose required string "role" is one of
 * roles (NULL-terminated; expected: how an error lists them).  Returns 0 or -1. */
int zl_jv_role(json_t *m, const char *path, const char *const *roles, const char *expected, const char **role,
               zl_verr *e);
/* Message content: a string, or an array of {"type": "text", "text": ...}
 * parts (what: how the API calls them, "content parts"), appended to out.
 * Returns 0 or -1. */
int zl_jv_text_parts(json_t *c, const char *path, const char *what, zl_buf *out, zl_verr *e);
/* An array of at most max strings (stop sequences) appended to out[*n]:
 * an empty string is skipped (skip_empty) or an error.  Returns 0 or -1. */
int zl_jv_strings(json_t *a, const char *path, int max, int skip_empty, const char **out, int *n, zl_verr *e);
/* An array of token ids, each in [0, n_vocab), into *ids (malloc'd, *n of
 * them).  Returns 0, -1 (e names path[i]) or -2 (out of memory). */
int zl_jv_token_ids(json_t *a, const char *path, int n_vocab, int32_t **ids, size_t *n, zl_verr *e);

#endif
