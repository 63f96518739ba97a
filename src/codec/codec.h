/* codec.h — the learned KV state codec of one frozen model (transform coding).
 *
 * Per layer, KV head and part (pre-RoPE keys, values) a table holds the mean
 * and the principal directions of that head's rows over real text (a
 * rotation), the variance of each coefficient, and for every bit count
 * 1..ZL_CODEC_MAX_BITS the step of a uniform quantiser fitted to the
 * coefficients with the distortion it leaves.  A ratio of the f16 bytes is met
 * by giving each table ratio * 16 * head_dim bits, one at a time, to the
 * coefficient whose distortion drops most (greedy reverse water-filling: bits
 * follow the variance); a coefficient with no bits is decoded as the mean.
 * A token's code is its rows' quantiser indices packed, layer by layer, K then
 * V, head by head, in a whole number of bytes (zl_codec_token_bytes).
 * The first n_sink positions (attention sinks: outliers that every later
 * token attends to) are never coded: whoever codes a cache keeps their rows
 * exact, and fitting leaves them out.
 *
 * The codec is bound to one model by its fingerprint (codec/fingerprint.h)
 * and never changes the model; it reads and writes a sequence's cache only
 * through zerolayer.h's state access (zl_seq_kv_read / zl_seq_kv_write).
 * The .zlc file (codec_file.c) and the fitting (codec_fit.c) are beside it. */
#ifndef ZL_CODEC_H
#define ZL_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "zerolayer.h"

#define ZL_CODEC_MAX_BITS 12
#define ZL_CODEC_SINKS 4

typedef struct zl_codec_table {
    float *mean;   /* [hd] */
    float *basis;  /* [hd][hd]: row i is the i-th principal direction (unit), by decreasing variance */
    float *var;    /* [hd] variance of coefficient i */
    float *step;   /* [hd][MAX_BITS]: quantiser step at b = 1..MAX_BITS bits */
    float *mse;    /* [hd][MAX_BITS + 1]: mean squared error at b = 0..MAX_BITS bits (b = 0: var) */
    uint8_t *bits; /* [hd] bits of coefficient i at the codec's ratio */
    float *basis_t; /* [hd][hd]: basis transposed (zl_codec_refresh), for the projection */
} zl_codec_table;

typedef struct zl_codec {
    uint8_t fingerprint[32]; /* the model's (codec/fingerprint.h) */
    uint8_t id[32];          /* sha256 of the serialised codec at its ratio: names it in snapshots */
    float ratio;             /* code bytes / f16 bytes at most */
    int n_sink;              /* positions [0, n_sink) stay exact (ZL_CODEC_SINKS when fitted) */
    int n_layers, n_kv_heads, head_dim;
    zl_codec_table *t; /* [n_layers][n_kv_heads][2] (0: K pre-RoPE, 1: V), zl_codec_tab */
    float *arena;
    uint8_t *bits_arena;
    float *basis_t_arena;
    long bits_per_token;
} zl_codec;

static inline zl_codec_table *zl_codec_tab(const zl_codec *c, int layer, int head, int part) {
    return &c->t[((size_t)layer * c->n_kv_heads + head) * 2 + part];
}

/* An empty codec of this shape (tables zero, bits zero). */
int zl_codec_new(zl_codec **out, int n_layers, int n_kv_heads, int head_dim, zl_err *err);
void zl_codec_free(zl_codec *c);
/* Bits of one table at `ratio` (0 < ratio <= 1): ratio * 16 * head_dim. */
long zl_codec_table_budget(const zl_codec *c, double ratio);
/* Re-allocate every table's bits for `ratio` from its distortion curves
 * (c->bits, ratio, bits_per_token and id change). */
int zl_codec_set_ratio(zl_codec *c, double ratio, zl_err *err);
/* Bytes of one token's code, and of one token's f16 K+V rows. */
size_t zl_codec_token_bytes(const zl_codec *c);
size_t zl_codec_f16_token_bytes(const zl_codec *c);
/* Recompute c->id, bits_per_token and the transposed bases after the tables changed. */
void zl_codec_refresh(zl_codec *c);
/* 0 when the codec fits llm (same fingerprint and KV shape), else a
 * ZL_EINVAL naming both fingerprints. */
int zl_codec_check_model(const zl_codec *c, const uint8_t fingerprint[32], zl_kv_shape shape, zl_err *err);

/* Symbol counts of the coded coefficients (for the empirical entropy). */
typedef struct zl_codec_hist {
    uint64_t *count; /* per coefficient with bits > 0: 2^bits counters */
    size_t *off;     /* [tables][hd] offset into count, or SIZE_MAX */
    uint64_t n_tokens;
} zl_codec_hist;
int zl_codec_hist_new(zl_codec_hist *h, const zl_codec *c, zl_err *err);
void zl_codec_hist_free(zl_codec_hist *h);
/* Entropy of the counted symbols, summed over coefficients, per element of
 * a token's K+V rows (bits per element; the allocation spends ratio * 16). */
double zl_codec_hist_entropy(const zl_codec_hist *h, const zl_codec *c);

/* Code positions [pos, pos + n) of s into out (n * zl_codec_token_bytes
 * bytes); counts symbols into hist when not NULL. */
int zl_codec_encode(const zl_codec *c, const zl_seq *s, int pos, int n, uint8_t *out, zl_codec_hist *hist,
                    zl_err *err);
/* Write the decoded rows of n token codes over positions [pos, pos + n) of s. */
int zl_codec_decode(const zl_codec *c, zl_seq *s, int pos, int n, const uint8_t *in, zl_err *err);

/* Fit a codec to the rows s caches (positions [ZL_CODEC_SINKS, n_cached)) at
 * ratio; fingerprint is the model's. */
int zl_codec_fit(zl_codec **out, const zl_seq *s, const uint8_t fingerprint[32], double ratio, zl_err *err);

/* The .zlc file: serialise / parse (every field checked, precise errors). */
int zl_codec_save(const zl_codec *c, const char *path, zl_err *err);
int zl_codec_serialize(const zl_codec *c, uint8_t **buf, size_t *len, zl_err *err);
int zl_codec_parse(zl_codec **out, const uint8_t *buf, size_t len, zl_err *err);
int zl_codec_load(zl_codec **out, const char *path, zl_err *err);

#endif
