/* fusion.c — state_fusion_mode: the additive mode's merging of older rows
 * (see fusion.h).  Reads and writes a cache only through zerolayer.h's state
 * access; never evaluates the model. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/err.h"
#include "fusion.h"

static const char *const k_names[] = {[ZL_FUSION_CROSS_ATTENTION] = "cross_attention", [ZL_FUSION_ADDITIVE] = "additive"};

const char *zl_fusion_name(zl_fusion_mode mode) {
    return mode == ZL_FUSION_ADDITIVE ? k_names[ZL_FUSION_ADDITIVE] : k_names[ZL_FUSION_CROSS_ATTENTION];
}

int zl_fusion_from_name(const char *name, zl_fusion_mode *mode) {
    for (int m = 0; name && m < 2; m++)
        if (!strcmp(name, k_names[m])) { *mode = (zl_fusion_mode)m; return 0; }
    return -1;
}

zl_fusion zl_fusion_defaults(zl_fusion_mode mode) {
    zl_fusion f = {mode, 4, 3, 0.7f, ZL_CODEC_SINKS, 0};
    return f;
}

int zl_fusion_check(const zl_fusion *f, zl_err *err) {
    if (f->merge < 2 || f->merge > 64) return zl_errf(err, ZL_EINVAL, "merge %d is not in [2, 64]", f->merge);
    if (f->window < 0 || f->window > 4096) return zl_errf(err, ZL_EINVAL, "window %d is not in [0, 4096] chunks", f->window);
    if (!(f->decay > 0 && f->decay <= 1)) return zl_errf(err, ZL_EINVAL, "decay %g is not in (0, 1]", (double)f->decay);
    if (f->n_sink < 0) return zl_errf(err, ZL_EINVAL, "n_sink %d is negative", f->n_sink);
    return 0;
}

/* rows[0..span) of one layer's part -> rows[0..groups) merged, then the tail
 * rows[span..n) moved down behind them. */
static void merge_rows(float *rows, int n, int span, int m, int d, const float *w) {
    int groups = span / m;
    for (int g = 0; g < groups; g++) {
        float *dst = rows + (size_t)g * d; /* g * d <= g * m * d: never ahead of what is read */
        const float *src = rows + (size_t)g * m * d;
        for (int j = 0; j < d; j++) {
            float acc = 0;
            for (int i = 0; i < m; i++) acc += w[i] * src[(size_t)i * d + j];
            dst[j] = acc;
        }
    }
    memmove(rows + (size_t)groups * d, rows + (size_t)span * d, (size_t)(n - span) * d * sizeof *rows);
}

int zl_fusion_apply(zl_fusion *f, zl_seq *s, const zl_codec *c, int *merged_rows, zl_err *err) {
    if (merged_rows) *merged_rows = 0;
    if (f->mode != ZL_FUSION_ADDITIVE) return 0;
    int rc = zl_fusion_check(f, err);
    if (rc) return rc;
    int n = zl_seq_n_cached(s), lo = f->n_sink + f->merged, m = f->merge;
    int excess = n - lo - f->window * m;
    if (lo >= n || excess < m) return 0;
    int groups = excess / m, span = groups * m, rest = n - lo; /* rows [lo, n) are rewritten */
    zl_kv_shape sh = zl_seq_kv_shape(s);
    int d = sh.n_kv_heads * sh.head_dim;
    float w[64], sum = 0;
    for (int i = m - 1, k = 0; i >= 0; i--, k++) sum += w[i] = powf(f->decay, (float)k); /* newest: 1 */
    for (int i = 0; i < m; i++) w[i] /= sum;
    float *rows = malloc((size_t)rest * d * sizeof *rows);
    if (!rows) return zl_errf(err, ZL_ENOMEM, "out of memory");
    for (int l = 0; l < sh.n_layers && !rc; l++)
        for (int part = 0; part < 2 && !rc; part++) {
            zl_state_part p = part ? ZL_STATE_V : ZL_STATE_K_PRE_ROPE;
            if ((rc = zl_seq_kv_read(s, l, p, lo, rest, rows, err))) break;
            merge_rows(rows, rest, span, m, d, w);
            rc = zl_seq_kv_write(s, l, p, lo, rest - span + groups, rows, err); /* keys rotated for their new slots */
        }
    free(rows);
    if (!rc) rc = zl_seq_kv_shorten(s, n - span + groups, err);
    if (!rc && c) {
        size_t tb = zl_codec_token_bytes(c);
        uint8_t *code = calloc((size_t)groups, tb ? tb : 1);
        if (!code) return zl_errf(err, ZL_ENOMEM, "out of memory");
        rc = zl_codec_encode(c, s, lo, groups, code, NULL, err);
        if (!rc) rc = zl_codec_decode(c, s, lo, groups, code, err);
        free(code);
    }
    if (rc) return rc;
    f->merged += groups;
    if (merged_rows) *merged_rows = groups;
    return 0;
}
