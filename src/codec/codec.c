/* codec.c — the state codec's tables, bit allocation, and coding of a
 * sequence's cached rows (see codec.h for the scheme).  Reads and writes a
 * cache only through zerolayer.h's state access; never touches files or
 * HTTP, never changes a model. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../base/err.h"
#include "codec.h"
#include "fingerprint.h"

int zl_codec_new(zl_codec **out, int n_layers, int n_kv_heads, int head_dim, zl_err *err) {
    *out = NULL;
    if (n_layers <= 0 || n_kv_heads <= 0 || head_dim <= 0 || n_layers > 4096 || n_kv_heads > 1024 || head_dim > 1024)
        return zl_errf(err, ZL_EINVAL, "codec shape %d layers x %d KV heads x %d out of range", n_layers, n_kv_heads,
                       head_dim);
    zl_codec *c = calloc(1, sizeof *c);
    size_t nt = (size_t)n_layers * n_kv_heads * 2, hd = (size_t)head_dim;
    size_t per = hd + hd * hd + hd + hd * ZL_CODEC_MAX_BITS + hd * (ZL_CODEC_MAX_BITS + 1);
    if (c) {
        c->t = calloc(nt, sizeof *c->t);
        c->arena = calloc(nt * per, sizeof *c->arena);
        c->bits_arena = calloc(nt * hd, 1);
        c->basis_t_arena = calloc(nt * hd * hd, sizeof *c->basis_t_arena);
    }
    if (!c || !c->t || !c->arena || !c->bits_arena || !c->basis_t_arena) {
        zl_codec_free(c);
        return zl_errf(err, ZL_ENOMEM, "out of memory");
    }
    c->n_layers = n_layers;
    c->n_kv_heads = n_kv_heads;
    c->head_dim = head_dim;
    for (size_t i = 0; i < nt; i++) {
        float *p = c->arena + i * per;
        zl_codec_table *t = &c->t[i];
        t->mean = p, p += hd;
        t->basis = p, p += hd * hd;
        t->var = p, p += hd;
        t->step = p, p += hd * ZL_CODEC_MAX_BITS;
        t->mse = p;
        t->bits = c->bits_arena + i * hd;
        t->basis_t = c->basis_t_arena + i * hd * hd;
    }
    *out = c;
    return 0;
}

void zl_codec_free(zl_codec *c) {
    if (!c) return;
    free(c->t);
    free(c->arena);
    free(c->bits_arena);
    free(c->basis_t_arena);
    free(c);
}

static size_t n_tables(const zl_codec *c) { return (size_t)c->n_layers * c->n_kv_heads * 2; }

long zl_codec_table_budget(const zl_codec *c, double ratio) {
    return (long)floor(ratio * 16.0 * c->head_dim + 1e-9);
}

/* Greedy integer reverse water-filling over one table: each bit goes to the
 * coefficient whose measured distortion drops most from it. */
static void allocate(const zl_codec *c, zl_codec_table *t, long budget) {
    int hd = c->head_dim;
    memset(t->bits, 0, (size_t)hd);
    for (long spent = 0; spent < budget; spent++) {
        int best = -1;
        double gain = 0;
        for (int i = 0; i < hd; i++) {
            int b = t->bits[i];
            if (b >= ZL_CODEC_MAX_BITS) continue;
            const float *m = t->mse + (size_t)i * (ZL_CODEC_MAX_BITS + 1);
            double g = (double)m[b] - m[b + 1];
            if (g > gain) { gain = g; best = i; }
        }
        if (best < 0) break; /* no bit lowers the distortion any more */
        t->bits[best]++;
    }
}

void zl_codec_refresh(zl_codec *c) {
    size_t hd = (size_t)c->head_dim;
    for (size_t i = 0; i < n_tables(c); i++)
        for (size_t k = 0; k < hd; k++)
            for (size_t j = 0; j < hd; j++) c->t[i].basis_t[j * hd + k] = c->t[i].basis[k * hd + j];
    long bits = 0;
    for (size_t i = 0; i < n_tables(c) * (size_t)c->head_dim; i++) bits += c->bits_arena[i];
    c->bits_per_token = bits;
    uint8_t *buf;
    size_t len;
    if (!zl_codec_serialize(c, &buf, &len, NULL)) {
        zl_fingerprint_bytes(buf, len, c->id, NULL);
        free(buf);
    }
}

int zl_codec_set_ratio(zl_codec *c, double ratio, zl_err *err) {
    if (!(ratio > 0 && ratio <= 1)) return zl_errf(err, ZL_EINVAL, "ratio %g is not in (0, 1]", ratio);
    long budget = zl_codec_table_budget(c, ratio);
    if (budget < 1)
        return zl_errf(err, ZL_EINVAL, "ratio %g leaves no bit for a head of %d values (the least is %g)", ratio,
                       c->head_dim, 1.0 / (16.0 * c->head_dim));
    for (size_t i = 0; i < n_tables(c); i++) allocate(c, &c->t[i], budget);
    c->ratio = (float)ratio;
    zl_codec_refresh(c);
    return 0;
}

size_t zl_codec_token_bytes(const zl_codec *c) { return (size_t)(c->bits_per_token + 7) / 8; }
size_t zl_codec_f16_token_bytes(const zl_codec *c) { return n_tables(c) * (size_t)c->head_dim * 2; }

int zl_codec_check_model(const zl_codec *c, const uint8_t fingerprint[32], zl_kv_shape shape, zl_err *err) {
    if (memcmp(c->fingerprint, fingerprint, 32)) {
        char a[65], b[65];
        zl_fingerprint_hex(c->fingerprint, a);
        zl_fingerprint_hex(fingerprint, b);
        return zl_errf(err, ZL_EINVAL, "model_mismatch: the codec was trained for model %.16s..., this model is %.16s...",
                       a, b);
    }
    if (shape.n_layers != c->n_layers || shape.n_kv_heads != c->n_kv_heads || shape.head_dim != c->head_dim)
        return zl_errf(err, ZL_EINVAL, "model_mismatch: the codec has %d layers x %d KV heads x %d, the model %d x %d x %d",
                       c->n_layers, c->n_kv_heads, c->head_dim, shape.n_layers, shape.n_kv_heads, shape.head_dim);
    return 0;
}

/* ---- symbols ---- */

int zl_codec_hist_new(zl_codec_hist *h, const zl_codec *c, zl_err *err) {
    memset(h, 0, sizeof *h);
    size_t n = n_tables(c) * (size_t)c->head_dim, total = 0;
    h->off = malloc(n * sizeof *h->off);
    if (!h->off) return zl_errf(err, ZL_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        int b = c->bits_arena[i];
        h->off[i] = b ? total : SIZE_MAX;
        total += b ? (size_t)1 << b : 0;
    }
    h->count = calloc(total ? total : 1, sizeof *h->count);
    if (!h->count) { free(h->off); h->off = NULL; return zl_errf(err, ZL_ENOMEM, "out of memory"); }
    return 0;
}

void zl_codec_hist_free(zl_codec_hist *h) {
    free(h->count);
    free(h->off);
    memset(h, 0, sizeof *h);
}

double zl_codec_hist_entropy(const zl_codec_hist *h, const zl_codec *c) {
    if (!h->n_tokens) return 0;
    double bits = 0;
    size_t n = n_tables(c) * (size_t)c->head_dim;
    for (size_t i = 0; i < n; i++) {
        if (h->off[i] == SIZE_MAX) continue;
        const uint64_t *cnt = h->count + h->off[i];
        for (size_t q = 0; q < (size_t)1 << c->bits_arena[i]; q++)
            if (cnt[q]) {
                double p = (double)cnt[q] / (double)h->n_tokens;
                bits -= p * log2(p);
            }
    }
    return bits / (double)n;
}

/* ---- coding ---- */

/* b <= 16 bits at bit offset *at (little-endian bit order): at most three bytes. */
static void put_bits(uint8_t *buf, size_t *at, uint32_t v, int b) {
    uint8_t *p = buf + (*at >> 3);
    int sh = (int)(*at & 7), end = sh + b;
    uint32_t w = v << sh;
    p[0] |= (uint8_t)w;
    if (end > 8) p[1] |= (uint8_t)(w >> 8);
    if (end > 16) p[2] |= (uint8_t)(w >> 16);
    *at += (size_t)b;
}

static uint32_t get_bits(const uint8_t *buf, size_t *at, int b) {
    const uint8_t *p = buf + (*at >> 3);
    int sh = (int)(*at & 7), end = sh + b;
    uint32_t w = p[0];
    if (end > 8) w |= (uint32_t)p[1] << 8;
    if (end > 16) w |= (uint32_t)p[2] << 16;
    *at += (size_t)b;
    return (w >> sh) & ((1u << b) - 1);
}

static uint32_t quantise(float y, float step, int b) {
    long levels = 1L << b;
    double q = floor((double)y / step) + (double)(levels / 2);
    if (q < 0) q = 0;
    if (q > levels - 1) q = (double)(levels - 1);
    return (uint32_t)q;
}

static float dequantise(uint32_t q, float step, int b) {
    return ((float)((long)q - (1L << b) / 2) + 0.5f) * step;
}

/* Bit offset of (layer, part) within a token's code: layers in order, K then V. */
static size_t part_offset(const zl_codec *c, int layer, int part) {
    size_t at = 0, hd = (size_t)c->head_dim;
    for (size_t i = 0; i < ((size_t)layer * 2 + part) * c->n_kv_heads; i++) {
        int l = (int)(i / (2 * c->n_kv_heads)), rest = (int)(i % (2 * c->n_kv_heads));
        const zl_codec_table *t = zl_codec_tab(c, l, rest % c->n_kv_heads, rest / c->n_kv_heads);
        for (size_t j = 0; j < hd; j++) at += t->bits[j];
    }
    return at;
}

int zl_codec_encode(const zl_codec *c, const zl_seq *s, int pos, int n, uint8_t *out, zl_codec_hist *hist,
                    zl_err *err) {
    int hd = c->head_dim, d = c->n_kv_heads * hd;
    size_t tb = zl_codec_token_bytes(c);
    float *rows = malloc((size_t)n * d * sizeof *rows), *y = malloc((size_t)hd * sizeof *y);
    if (!rows || !y) { free(rows); free(y); return zl_errf(err, ZL_ENOMEM, "out of memory"); }
    memset(out, 0, (size_t)n * tb);
    int rc = 0;
    for (int l = 0; l < c->n_layers && !rc; l++)
        for (int part = 0; part < 2 && !rc; part++) {
            if ((rc = zl_seq_kv_read(s, l, part ? ZL_STATE_V : ZL_STATE_K_PRE_ROPE, pos, n, rows, err))) break;
            size_t base = part_offset(c, l, part);
            for (int i = 0; i < n; i++) {
                size_t at = (size_t)i * tb * 8 + base;
                for (int h = 0; h < c->n_kv_heads; h++) {
                    const zl_codec_table *t = zl_codec_tab(c, l, h, part);
                    const float *r = rows + (size_t)i * d + (size_t)h * hd;
                    /* y = basis (r - mean), as a sum of the transposed basis' rows (vectorises) */
                    memset(y, 0, (size_t)hd * sizeof *y);
                    for (int j = 0; j < hd; j++) {
                        float xj = r[j] - t->mean[j];
                        const float *bt = t->basis_t + (size_t)j * hd;
                        for (int k = 0; k < hd; k++) y[k] += xj * bt[k];
                    }
                    for (int k = 0; k < hd; k++) {
                        int b = t->bits[k];
                        if (!b) continue;
                        uint32_t q = quantise(y[k], t->step[(size_t)k * ZL_CODEC_MAX_BITS + b - 1], b);
                        put_bits(out, &at, q, b);
                        if (hist) {
                            size_t ti = (size_t)(t - c->t) * hd + (size_t)k;
                            hist->count[hist->off[ti] + q]++;
                        }
                    }
                }
            }
        }
    if (!rc && hist) hist->n_tokens += (uint64_t)n;
    free(rows);
    free(y);
    return rc;
}

int zl_codec_decode(const zl_codec *c, zl_seq *s, int pos, int n, const uint8_t *in, zl_err *err) {
    int hd = c->head_dim, d = c->n_kv_heads * hd;
    size_t tb = zl_codec_token_bytes(c);
    float *rows = malloc((size_t)n * d * sizeof *rows);
    if (!rows) return zl_errf(err, ZL_ENOMEM, "out of memory");
    int rc = 0;
    for (int l = 0; l < c->n_layers && !rc; l++)
        for (int part = 0; part < 2 && !rc; part++) {
            size_t base = part_offset(c, l, part);
            for (int i = 0; i < n; i++) {
                size_t at = (size_t)i * tb * 8 + base;
                for (int h = 0; h < c->n_kv_heads; h++) {
                    const zl_codec_table *t = zl_codec_tab(c, l, h, part);
                    float *r = rows + (size_t)i * d + (size_t)h * hd;
                    memcpy(r, t->mean, (size_t)hd * sizeof *r);
                    for (int k = 0; k < hd; k++) {
                        int b = t->bits[k];
                        if (!b) continue;
                        float v = dequantise(get_bits(in, &at, b), t->step[(size_t)k * ZL_CODEC_MAX_BITS + b - 1], b);
                        const float *e = t->basis + (size_t)k * hd;
                        for (int j = 0; j < hd; j++) r[j] += v * e[j];
                    }
                }
            }
            rc = zl_seq_kv_write(s, l, part ? ZL_STATE_V : ZL_STATE_K_PRE_ROPE, pos, n, rows, err);
        }
    free(rows);
    return rc;
}
