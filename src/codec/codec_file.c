/* codec_file.c — the .zlc file of a state codec: serialise and parse, every
 * field checked with a message naming it.  Layout (little-endian):
 *   "ZLCODEC\0", u32 version (1), u32 max bits (ZL_CODEC_MAX_BITS),
 *   fingerprint[32], f32 ratio, u32 n_layers, n_kv_heads, head_dim, n_sink,
 *   then per table (layer, KV head, K then V): f32 mean[hd], basis[hd][hd],
 *   var[hd], step[hd][max bits], mse[hd][max bits + 1], u8 bits[hd];
 *   then "ZLCEND\0\0".
 * Never trusts a length or count before checking it against the bytes left. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/err.h"
#include "codec.h"

#define ZLC_VERSION 1
static const char k_magic[8] = "ZLCODEC", k_end[8] = "ZLCEND";
enum { HEADER = 8 + 4 + 4 + 32 + 4 + 16 };

static size_t table_floats(int hd) {
    return (size_t)hd * (1 + (size_t)hd + 1 + ZL_CODEC_MAX_BITS + ZL_CODEC_MAX_BITS + 1);
}

static size_t file_bytes(int nl, int nh, int hd) {
    return HEADER + (size_t)nl * nh * 2 * (table_floats(hd) * 4 + (size_t)hd) + sizeof k_end;
}

static void put32(uint8_t **p, uint32_t v) { memcpy(*p, &v, 4); *p += 4; }

int zl_codec_serialize(const zl_codec *c, uint8_t **buf, size_t *len, zl_err *err) {
    int hd = c->head_dim;
    size_t n = file_bytes(c->n_layers, c->n_kv_heads, hd), nt = (size_t)c->n_layers * c->n_kv_heads * 2;
    uint8_t *b = malloc(n), *p = b;
    if (!b) return zl_errf(err, ZL_ENOMEM, "out of memory");
    memcpy(p, k_magic, 8), p += 8;
    put32(&p, ZLC_VERSION);
    put32(&p, ZL_CODEC_MAX_BITS);
    memcpy(p, c->fingerprint, 32), p += 32;
    memcpy(p, &c->ratio, 4), p += 4;
    put32(&p, (uint32_t)c->n_layers);
    put32(&p, (uint32_t)c->n_kv_heads);
    put32(&p, (uint32_t)hd);
    put32(&p, (uint32_t)c->n_sink);
    for (size_t i = 0; i < nt; i++) {
        const zl_codec_table *t = &c->t[i];
        /* the table's float fields are consecutive in the arena, in file order */
        memcpy(p, t->mean, table_floats(hd) * 4), p += table_floats(hd) * 4;
        memcpy(p, t->bits, (size_t)hd), p += hd;
    }
    memcpy(p, k_end, 8), p += 8;
    *buf = b;
    *len = (size_t)(p - b);
    return 0;
}

int zl_codec_save(const zl_codec *c, const char *path, zl_err *err) {
    uint8_t *b;
    size_t n;
    int rc = zl_codec_serialize(c, &b, &n, err);
    if (rc) return rc;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) { free(b); return zl_errf(err, ZL_EIO, "cannot create %s: %s", tmp, strerror(errno)); }
    int ok = fwrite(b, 1, n, f) == n;
    ok = (fflush(f) == 0) && ok;
    ok = (fclose(f) == 0) && ok;
    free(b);
    if (!ok || rename(tmp, path)) {
        int e = errno;
        remove(tmp);
        return zl_errf(err, ZL_EIO, "writing %s failed: %s", path, strerror(e));
    }
    return 0;
}

static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

static const char *part_name(size_t i) { return i % 2 ? "V" : "K"; }

int zl_codec_parse(zl_codec **out, const uint8_t *buf, size_t len, zl_err *err) {
    *out = NULL;
    if (len < 8 || memcmp(buf, k_magic, 8))
        return zl_errf(err, ZL_EFORMAT, "not a zerolayer codec file (no ZLCODEC magic)");
    if (len < HEADER) return zl_errf(err, ZL_EFORMAT, "codec file truncated: %zu bytes, the header needs %d", len, HEADER);
    uint32_t version = get32(buf + 8), max_bits = get32(buf + 12);
    if (version != ZLC_VERSION)
        return zl_errf(err, ZL_EUNSUP, "codec file version %u is not supported (this build reads version %d)", version,
                       ZLC_VERSION);
    if (max_bits != ZL_CODEC_MAX_BITS)
        return zl_errf(err, ZL_EFORMAT, "codec file: %u bits at most per coefficient, this build uses %d", max_bits,
                       ZL_CODEC_MAX_BITS);
    float ratio;
    memcpy(&ratio, buf + 48, 4);
    uint32_t nl = get32(buf + 52), nh = get32(buf + 56), hd = get32(buf + 60), n_sink = get32(buf + 64);
    if (!(ratio > 0 && ratio <= 1)) return zl_errf(err, ZL_EFORMAT, "codec file: ratio %g is not in (0, 1]", ratio);
    if (nl < 1 || nl > 4096 || nh < 1 || nh > 1024 || hd < 2 || hd > 1024)
        return zl_errf(err, ZL_EFORMAT, "codec file: shape %u layers x %u KV heads x %u is out of range", nl, nh, hd);
    if (n_sink > 1024) return zl_errf(err, ZL_EFORMAT, "codec file: %u exact sink positions, more than 1024", n_sink);
    size_t want = file_bytes((int)nl, (int)nh, (int)hd);
    if (len < want) return zl_errf(err, ZL_EFORMAT, "codec file truncated: %zu bytes, its tables need %zu", len, want);
    if (len > want) return zl_errf(err, ZL_EFORMAT, "codec file has %zu bytes after its tables", len - want);
    if (memcmp(buf + want - 8, k_end, 8)) return zl_errf(err, ZL_EFORMAT, "codec file: no ZLCEND marker after the tables");
    zl_codec *c;
    int rc = zl_codec_new(&c, (int)nl, (int)nh, (int)hd, err);
    if (rc) return rc;
    memcpy(c->fingerprint, buf + 16, 32);
    c->ratio = ratio;
    c->n_sink = (int)n_sink;
    long budget = zl_codec_table_budget(c, ratio);
    const uint8_t *p = buf + HEADER;
    size_t nt = (size_t)nl * nh * 2, tf = table_floats((int)hd);
    for (size_t i = 0; i < nt && !rc; i++) {
        zl_codec_table *t = &c->t[i];
        memcpy(t->mean, p, tf * 4), p += tf * 4;
        memcpy(t->bits, p, hd), p += hd;
        int layer = (int)(i / (2 * nh)), head = (int)(i / 2 % nh);
        const char *pn = part_name(i);
        long spent = 0;
        for (size_t j = 0; j < tf && !rc; j++)
            if (!isfinite(t->mean[j]))
                rc = zl_errf(err, ZL_EFORMAT, "codec file: table (layer %d, head %d, %s) has a value that is not finite",
                             layer, head, pn);
        for (uint32_t k = 0; k < hd && !rc; k++) {
            double norm = 0;
            for (uint32_t j = 0; j < hd; j++) norm += (double)t->basis[k * hd + j] * t->basis[k * hd + j];
            if (fabs(norm - 1) > 1e-3)
                rc = zl_errf(err, ZL_EFORMAT, "codec file: table (layer %d, head %d, %s) direction %u has norm %g, not 1",
                             layer, head, pn, k, sqrt(norm));
            else if (t->var[k] < 0)
                rc = zl_errf(err, ZL_EFORMAT, "codec file: table (layer %d, head %d, %s) variance %u is negative", layer,
                             head, pn, k);
            else if (t->bits[k] > ZL_CODEC_MAX_BITS)
                rc = zl_errf(err, ZL_EFORMAT, "codec file: table (layer %d, head %d, %s) gives coefficient %u %u bits, "
                             "more than %d", layer, head, pn, k, t->bits[k], ZL_CODEC_MAX_BITS);
            for (int b = 0; b < ZL_CODEC_MAX_BITS && !rc; b++)
                if (!(t->step[k * ZL_CODEC_MAX_BITS + b] > 0))
                    rc = zl_errf(err, ZL_EFORMAT, "codec file: table (layer %d, head %d, %s) quantiser step %u/%d is not "
                                 "positive", layer, head, pn, k, b + 1);
            for (int b = 0; b <= ZL_CODEC_MAX_BITS && !rc; b++)
                if (t->mse[k * (ZL_CODEC_MAX_BITS + 1) + b] < 0)
                    rc = zl_errf(err, ZL_EFORMAT, "codec file: table (layer %d, head %d, %s) distortion %u/%d is negative",
                                 layer, head, pn, k, b);
            spent += t->bits[k];
        }
        if (!rc && spent > budget)
            rc = zl_errf(err, ZL_EFORMAT, "codec file: table (layer %d, head %d, %s) spends %ld bits, more than ratio %g "
                         "allows (%ld)", layer, head, pn, spent, ratio, budget);
    }
    if (rc) { zl_codec_free(c); return rc; }
    zl_codec_refresh(c);
    *out = c;
    return 0;
}

int zl_codec_load(zl_codec **out, const char *path, zl_err *err) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return zl_errf(err, ZL_EIO, "cannot open codec %s: %s", path, strerror(errno));
    uint8_t *b = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (;;) {
        if (n == cap) {
            if (cap >= ((size_t)1 << 31)) { rc = zl_errf(err, ZL_EFORMAT, "codec %s is larger than 2 GiB", path); break; }
            uint8_t *nb = realloc(b, cap = cap ? 2 * cap : 1 << 16);
            if (!nb) { rc = zl_errf(err, ZL_ENOMEM, "out of memory"); break; }
            b = nb;
        }
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) rc = zl_errf(err, ZL_EIO, "reading codec %s failed", path);
            break;
        }
    }
    fclose(f);
    if (!rc) {
        rc = zl_codec_parse(out, b, n, err);
        if (rc) zl_err_prefix(err, "%s", path);
    }
    free(b);
    return rc;
}
