/* sess_token.h — session tokens: "<id>.<created ms>.<hex HMAC-SHA256(key,
 * id \n tenant \n created)>".  The tenant is not in the token: it is what
 * the request authenticates as, so another tenant's, an altered or a forged
 * token fails the MAC.  Pure functions of their arguments (no server state). */
#ifndef ZL_SESS_TOKEN_H
#define ZL_SESS_TOKEN_H

#include <stddef.h>

#define ZL_SESS_ID_CAP 80 /* a session id and its NUL */

/* Write the token of (id, tenant, created) to out (cap bytes, 200 is always
 * enough); -1 if id is not [A-Za-z0-9_]{1,79}, created not 1..20 digits or
 * the token does not fit. */
int zl_sess_token_make(const unsigned char *key, size_t key_len, const char *id, const char *tenant,
                       const char *created, char *out, size_t cap);
/* 0 and the session id in id (cap bytes) when tok is a token of this tenant
 * under key, else -1 (id untouched).  Compares the MAC in constant time. */
int zl_sess_token_check(const unsigned char *key, size_t key_len, const char *tok, const char *tenant, char *id,
                        size_t cap);

#endif
