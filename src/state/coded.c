/* coded.c — packing a sequence's state with the learned codec for idle
 * sessions (see coded.h): u32 token count, i32 tokens, the first n_sink
 * positions' K/V rows as the cache holds them (exact), then
 * zl_codec_encode's codes.  Never
 * encrypts (the bytes stay in this process) and never runs the model. */
#include <stdlib.h>
#include <string.h>

#include "../base/err.h"
#include "coded.h"
#include "rows.h"


int zl_coded_pack(const zl_codec *c, const zl_seq *s, uint8_t **out, size_t *len, zl_codec_hist *hist, zl_err *err) {
    *out = NULL;
    int n = zl_seq_n_past(s);
    if (zl_seq_n_cached(s) != n) return zl_errf(err, ZL_EUNSUP, "coding a sequence needs the full KV policy");
    int ns = n < c->n_sink ? n : c->n_sink;
    size_t total = 4 + 4 * (size_t)n + zl_rows_bytes(s, ns) + (size_t)(n - ns) * zl_codec_token_bytes(c);
    uint8_t *b = malloc(total);
    int rc = b ? 0 : zl_errf(err, ZL_ENOMEM, "out of memory");
    if (!rc) {
        uint32_t u = (uint32_t)n;
        int nt;
        memcpy(b, &u, 4);
        memcpy(b + 4, zl_seq_tokens(s, &nt), 4 * (size_t)n);
        uint8_t *p = b + 4 + 4 * (size_t)n;
        rc = zl_rows_put(s, ns, p, err);
        if (!rc && n > ns) rc = zl_codec_encode(c, s, ns, n - ns, p + zl_rows_bytes(s, ns), hist, err);
    }
    if (rc) { free(b); return rc; }
    *out = b;
    *len = total;
    return 0;
}

int zl_coded_unpack(const zl_codec *c, zl_seq *s, const uint8_t *in, size_t len, zl_err *err) {
    uint32_t n = 0;
    if (len >= 4) memcpy(&n, in, 4);
    int ns = (int)n < c->n_sink ? (int)n : c->n_sink;
    if (len < 4 || n > len / 4 ||
        len != 4 + 4 * (size_t)n + zl_rows_bytes(s, ns) + (size_t)(n - (uint32_t)ns) * zl_codec_token_bytes(c))
    {
        zl_seq_truncate(s, 0);
        return zl_errf(err, ZL_EFORMAT, "coded state of %zu bytes does not match its %u tokens", len, n);
    }
    int32_t *toks = malloc(4 * (size_t)n + 4);
    int rc = toks ? 0 : zl_errf(err, ZL_ENOMEM, "out of memory");
    if (!rc) memcpy(toks, in + 4, 4 * (size_t)n);
    if (!rc) rc = zl_seq_adopt(s, toks, (int)n, err);
    const uint8_t *p = in + 4 + 4 * (size_t)n;
    if (!rc) rc = zl_rows_get(s, ns, p, err);
    if (!rc && (int)n > ns) rc = zl_codec_decode(c, s, ns, (int)n - ns, p + zl_rows_bytes(s, ns), err);
    if (rc) zl_seq_truncate(s, 0);
    free(toks);
    return rc;
}
