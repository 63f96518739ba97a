/* coded.c — packing a sequence's state with the learned codec for idle
 * sessions (see coded.h): u32 token count, i32 tokens, the first n_sink
 * positions' K/V rows in f16 (exact), then zl_codec_encode's codes.  Never
 * encrypts (the bytes stay in this process) and never runs the model. */
#include <stdlib.h>
#include <string.h>

#include "../base/err.h"
#include "coded.h"
#include "rows.h"

static size_t sink_bytes(zl_kv_shape sh, int ns) {
    return (size_t)sh.n_layers * 2 * (size_t)ns * sh.n_kv_heads * sh.head_dim * 2;
}

int zl_coded_pack(const zl_codec *c, const zl_seq *s, uint8_t **out, size_t *len, zl_codec_hist *hist, zl_err *err) {
    *out = NULL;
    int n = zl_seq_n_past(s);
    if (zl_seq_n_cached(s) != n) return zl_errf(err, ZL_EUNSUP, "coding a sequence needs the full KV policy");
    zl_kv_shape sh = zl_seq_kv_shape(s);
    int ns = n < c->n_sink ? n : c->n_sink;
    size_t total = 4 + 4 * (size_t)n + sink_bytes(sh, ns) + (size_t)(n - ns) * zl_codec_token_bytes(c);
    uint8_t *b = malloc(total);
    float *row = malloc((size_t)sh.n_kv_heads * sh.head_dim * sizeof *row);
    int rc = b && row ? 0 : zl_errf(err, ZL_ENOMEM, "out of memory");
    if (!rc) {
        uint32_t u = (uint32_t)n;
        int nt;
        memcpy(b, &u, 4);
        memcpy(b + 4, zl_seq_tokens(s, &nt), 4 * (size_t)n);
        uint8_t *p = b + 4 + 4 * (size_t)n;
        rc = zl_rows_put(s, sh, ns, 2, p, row, err);
        if (!rc && n > ns) rc = zl_codec_encode(c, s, ns, n - ns, p + sink_bytes(sh, ns), hist, err);
    }
    free(row);
    if (rc) { free(b); return rc; }
    *out = b;
    *len = total;
    return 0;
}

int zl_coded_unpack(const zl_codec *c, zl_seq *s, const uint8_t *in, size_t len, zl_err *err) {
    uint32_t n = 0;
    if (len >= 4) memcpy(&n, in, 4);
    zl_kv_shape sh = zl_seq_kv_shape(s);
    int ns = (int)n < c->n_sink ? (int)n : c->n_sink;
    if (len < 4 || n > len / 4 ||
        len != 4 + 4 * (size_t)n + sink_bytes(sh, ns) + (size_t)(n - (uint32_t)ns) * zl_codec_token_bytes(c))
    {
        zl_seq_truncate(s, 0);
        return zl_errf(err, ZL_EFORMAT, "coded state of %zu bytes does not match its %u tokens", len, n);
    }
    int32_t *toks = malloc(4 * (size_t)n + 4);
    float *row = malloc((size_t)sh.n_kv_heads * sh.head_dim * sizeof *row);
    int rc = toks && row ? 0 : zl_errf(err, ZL_ENOMEM, "out of memory");
    if (!rc) memcpy(toks, in + 4, 4 * (size_t)n);
    if (!rc) rc = zl_seq_adopt(s, toks, (int)n, err);
    const uint8_t *p = in + 4 + 4 * (size_t)n;
    if (!rc) rc = zl_rows_get(s, sh, ns, 2, p, row, err);
    if (!rc && (int)n > ns) rc = zl_codec_decode(c, s, ns, (int)n - ns, p + sink_bytes(sh, ns), err);
    if (rc) zl_seq_truncate(s, 0);
    free(toks);
    free(row);
    return rc;
}
