/* test_server_token.c — session tokens (server/sess_token.h) against an
 * independent HMAC: the expected token below is Python's
 *   hmac.new(KEY, b"zs_4f9a0c\n" + TENANT + b"\n1764633600000", hashlib.sha256).hexdigest()
 * and every other spelling of it (case, a leading zero, a field more or
 * less, another tenant, an id too long for the store) is refused. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "server/sess_token.h"

static const unsigned char KEY[32] = "zerolayer fuzz session key 0123";
#define TENANT "key:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
#define MAC "20c8105da66293829c2c8e7cb4cdb4c55e87fd58bd5b1acf937a39961d82e96d"

static int check(const char *tok, const char *tenant) {
    char id[ZL_SESS_ID_CAP] = "untouched";
    int rc = zl_sess_token_check(KEY, sizeof KEY, tok, tenant, id, sizeof id);
    if (rc) cr_expect_str_eq(id, "untouched", "a refused token wrote the id");
    else cr_expect_str_eq(id, "zs_4f9a0c");
    return rc;
}

Test(session_token, matches_an_independent_hmac) {
    char tok[200];
    cr_assert_eq(zl_sess_token_make(KEY, sizeof KEY, "zs_4f9a0c", TENANT, "1764633600000", tok, sizeof tok), 0);
    cr_expect_str_eq(tok, "zs_4f9a0c.1764633600000." MAC);
    cr_expect_eq(check(tok, TENANT), 0);
}

Test(session_token, every_other_spelling_is_refused) {
    static const char *bad[] = {
        "ZS_4F9A0C.1764633600000." MAC,                   /* id case */
        "zs_4f9a0c.01764633600000." MAC,                  /* time with a leading zero */
        "zs_4f9a0c.1764633600000.20C8105DA66293829C2C8E7CB4CDB4C55E87FD58BD5B1ACF937A39961D82E96D",
        "zs_4f9a0c.1764633600000." MAC ".x",              /* a field more */
        "zs_4f9a0c." MAC,                                 /* a field less */
        "zs_4f9a0c.1764633600000." MAC "0",               /* a MAC byte more */
        "zs_4f9a0c.1764633600001." MAC,                   /* another time */
        ".1764633600000." MAC, "zs_4f9a0c.." MAC, "zs-4f9a0c.1764633600000." MAC, "", ".", "..",
        "zs_4f9a0c.123456789012345678901." MAC,           /* 21 digits */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) cr_expect_neq(check(bad[i], TENANT), 0, "accepted: %s", bad[i]);
    cr_expect_neq(check("zs_4f9a0c.1764633600000." MAC, "user:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"), 0,
                  "another tenant's token");
    /* ids the store could not hold, and a tenant too long for the MAC's message, are refused, never cut */
    char id[120], tok[400];
    memset(id, 'a', 100);
    id[100] = 0;
    cr_expect_neq(zl_sess_token_make(KEY, sizeof KEY, id, TENANT, "1", tok, sizeof tok), 0);
    snprintf(tok, sizeof tok, "%s.1.%s", id, MAC);
    cr_expect_neq(check(tok, TENANT), 0);
    char tenant[600];
    memset(tenant, 't', 599);
    tenant[599] = 0;
    cr_expect_neq(zl_sess_token_make(KEY, sizeof KEY, "zs_1", tenant, "1", tok, sizeof tok), 0);
    cr_expect_neq(zl_sess_token_make(KEY, sizeof KEY, "zs_4f9a0c", TENANT, "1764633600000", tok, 88), 0, "cut to fit");
}
