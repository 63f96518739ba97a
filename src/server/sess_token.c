/* sess_token.c — minting and checking session tokens (sess_token.h).
 *
 * Owns: the token's syntax and its MAC.  Must never accept a token that is
 * not byte for byte the one zl_sess_token_make gives for the same id,
 * tenant and time, nor read past a field it has not bounded. */
#include "sess_token.h"

#include <ctype.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <string.h>

/* hex HMAC of "id \n tenant \n created"; -1 if the message does not fit */
static int token_mac(const unsigned char *key, size_t key_len, const char *id, const char *tenant,
                     const char *created, char out[65]) {
    char msg[512];
    int n = snprintf(msg, sizeof msg, "%s\n%s\n%s", id, tenant, created);
    if (n < 0 || (size_t)n >= sizeof msg) return -1;
    unsigned char mac[32];
    unsigned int ml = 0;
    if (!HMAC(EVP_sha256(), key, (int)key_len, (const unsigned char *)msg, (size_t)n, mac, &ml) || ml != 32) return -1;
    for (int i = 0; i < 32; i++) sprintf(out + 2 * i, "%02x", mac[i]);
    return 0;
}

static int id_ok(const char *s, size_t n) {
    if (n < 1 || n >= ZL_SESS_ID_CAP) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_') return 0;
    return 1;
}

static int created_ok(const char *s, size_t n) {
    if (n < 1 || n > 20) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i])) return 0;
    return 1;
}

int zl_sess_token_make(const unsigned char *key, size_t key_len, const char *id, const char *tenant,
                       const char *created, char *out, size_t cap) {
    char mac[65];
    if (!id_ok(id, strlen(id)) || !created_ok(created, strlen(created)) ||
        token_mac(key, key_len, id, tenant, created, mac))
        return -1;
    int n = snprintf(out, cap, "%s.%s.%s", id, created, mac);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

int zl_sess_token_check(const unsigned char *key, size_t key_len, const char *tok, const char *tenant, char *id,
                        size_t cap) {
    const char *d1 = strchr(tok, '.'), *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
    if (!d1 || !d2 || !id_ok(tok, (size_t)(d1 - tok)) || (size_t)(d1 - tok) >= cap ||
        !created_ok(d1 + 1, (size_t)(d2 - d1 - 1)) || strlen(d2 + 1) != 64)
        return -1;
    char sid[ZL_SESS_ID_CAP], created[24], want[65];
    snprintf(sid, sizeof sid, "%.*s", (int)(d1 - tok), tok);
    snprintf(created, sizeof created, "%.*s", (int)(d2 - d1 - 1), d1 + 1);
    if (token_mac(key, key_len, sid, tenant, created, want) || CRYPTO_memcmp(want, d2 + 1, 64)) return -1;
    snprintf(id, cap, "%s", sid);
    return 0;
}
