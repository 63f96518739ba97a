/* fuzz_session_token.c — libFuzzer target: the session-token decoder
 * (zl_sess_token_check) on arbitrary strings and on edits of valid tokens.
 * Input: an op byte, then bytes.  op & 1 == 0: the bytes are a token, checked
 * for two tenants.  op & 1 == 1: the bytes (up to the first NUL) name a
 * session id and a creation time; a valid token is minted for tenant A and
 * then edited at the positions/values the rest of the input gives.
 * Checked on every input:
 *   - an accepted token is exactly the one zl_sess_token_make gives for the
 *     id and time it carries and the tenant it was checked for (no second
 *     spelling of a token: case, padding, extra fields);
 *   - a token is never accepted for two tenants, and a minted token is
 *     accepted for its own tenant, rejected for the other, and rejected
 *     once any byte of it is changed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/sess_token.h"

static const unsigned char key[32] = "zerolayer fuzz session key 0123";
static const char *tenant_a = "key:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
static const char *tenant_b = "user:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

/* accepted for tenant t: must be the canonical token */
static void check_one(const char *tok, const char *t, int *accepted) {
    char id[ZL_SESS_ID_CAP];
    *accepted = 0;
    if (zl_sess_token_check(key, sizeof key, tok, t, id, sizeof id)) return;
    *accepted = 1;
    const char *d1 = strchr(tok, '.'), *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
    if (!d1 || !d2 || strncmp(tok, id, strlen(id)) || (size_t)(d1 - tok) != strlen(id)) abort();
    char created[32], again[200];
    if ((size_t)(d2 - d1 - 1) >= sizeof created) abort();
    snprintf(created, sizeof created, "%.*s", (int)(d2 - d1 - 1), d1 + 1);
    if (zl_sess_token_make(key, sizeof key, id, t, created, again, sizeof again) || strcmp(again, tok)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!size) return 0;
    int op = data[0];
    char *s = malloc(size);
    if (!s) abort();
    memcpy(s, data + 1, size - 1);
    s[size - 1] = 0;
    int a, b;
    if (!(op & 1)) {
        check_one(s, tenant_a, &a);
        check_one(s, tenant_b, &b);
        if (a && b) abort();
        free(s);
        return 0;
    }
    /* "id.created" (or just an id, created then being its length) then edits */
    size_t n = strlen(s);
    const uint8_t *edits = data + 1 + n + (n + 1 < size ? 1 : 0);
    size_t n_edits = (size_t)(data + size - edits) / 2;
    char *dot = strchr(s, '.'), created[24];
    if (dot) *dot = 0;
    snprintf(created, sizeof created, "%s", dot ? dot + 1 : "1764633600000");
    char tok[200];
    if (zl_sess_token_make(key, sizeof key, s, tenant_a, created, tok, sizeof tok)) {
        free(s);
        return 0; /* not an id/time the server would mint */
    }
    check_one(tok, tenant_a, &a);
    check_one(tok, tenant_b, &b);
    if (!a || b) abort();
    char orig[200];
    memcpy(orig, tok, sizeof tok);
    size_t len = strlen(tok);
    for (size_t i = 0; i < n_edits; i++) {
        size_t at = edits[2 * i] % (len + 1);
        uint8_t v = edits[2 * i + 1];
        if (at == len) { /* append */
            if (len + 1 < sizeof tok && v) tok[len++] = (char)v, tok[len] = 0;
        } else if (v) {
            tok[at] = (char)v;
        } else { /* delete */
            memmove(tok + at, tok + at + 1, len - at);
            len--;
        }
    }
    check_one(tok, tenant_a, &a);
    check_one(tok, tenant_b, &b);
    if (b || (a && strcmp(tok, orig))) abort();
    free(s);
    return 0;
}
