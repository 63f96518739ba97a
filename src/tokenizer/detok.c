/* detok.c — from token ids back to bytes.
 *
 * Owns: the decoded-piece cache built at load time, whole-sequence
 * detokenization and the streaming detokenizer.  Pieces are raw bytes and a
 * UTF-8 character may be spread over several tokens (byte-fallback and
 * byte-level BPE tokens routinely split emoji); the streaming detokenizer
 * therefore holds back a trailing partial character until a later token
 * completes it, so a caller writing each chunk to a terminal or an SSE event
 * never splits a character.  Bytes that cannot start or continue a character
 * are passed through (or replaced with U+FFFD on request), never held. */
#include <stdlib.h>

#include "tok_internal.h"

/* ---- piece cache ---- */

/* "<0xXX>" -> 0..255, else -1 */
static int byte_token_value(const char *s, size_t len) {
    if (len != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* Decode one token's string into out (never longer than the string). */
static size_t decode_piece(const zl_vocab *v, int32_t id, char *out) {
    size_t len;
    const char *s = zl_tok_str(v, id, &len);
    unsigned a = v->attr[id];
    size_t n = 0;
    if (a & (ZL_ATTR_CONTROL | ZL_ATTR_UNKNOWN | ZL_ATTR_USER_DEFINED)) {
        memcpy(out, s, len);
        return len;
    }
    if (a & ZL_ATTR_NORMAL) {
        if (v->kind == ZL_VOCAB_SPM) { /* U+2581 -> ' ' */
            for (size_t i = 0; i < len;) {
                if (len - i >= 3 && memcmp(s + i, "\xE2\x96\x81", 3) == 0) {
                    out[n++] = ' ';
                    i += 3;
                } else {
                    out[n++] = s[i++];
                }
            }
            return n;
        }
        for (size_t i = 0; i < len;) { /* GPT-2 code points -> bytes */
            size_t adv;
            int b = zl_cp_to_byte(zl_utf8_decode((const uint8_t *)s + i, len - i, &adv));
            if (b >= 0) {
                out[n++] = (char)b;
            } else { /* not a byte code point: keep its bytes as written */
                memcpy(out + n, s + i, adv);
                n += adv;
            }
            i += adv;
        }
        return n;
    }
    if (a & ZL_ATTR_BYTE) {
        int b = byte_token_value(s, len);
        if (b < 0) {
            memcpy(out, s, len);
            return len;
        }
        out[0] = (char)b;
        return 1;
    }
    return 0; /* unused / undefined tokens render as nothing */
}

int zl_vocab_build_pieces(zl_vocab *v, zl_err *err) {
    size_t n = (size_t)v->n_tokens;
    v->piece = malloc(v->toff[n] ? v->toff[n] : 1);
    v->poff = malloc((n + 1) * sizeof *v->poff);
    if (!v->piece || !v->poff) return zl_errf(err, ZL_ENOMEM, "out of memory for token pieces");
    uint64_t off = 0;
    for (size_t id = 0; id < n; id++) {
        v->poff[id] = off;
        off += decode_piece(v, (int32_t)id, v->piece + off);
    }
    v->poff[n] = off;
    return 0;
}

/* ---- UTF-8 framing ---- */

/* The sequence at s[0..n): its length if it is one whole valid character;
 * 0 if it is a valid but unfinished prefix that needs more bytes than n;
 * -k if its first k bytes can never be part of a valid character. */
static int utf8_scan(const uint8_t *s, size_t n) {
    uint8_t b = s[0], lo = 0x80, hi = 0xBF;
    int len;
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) {
        len = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
        len = 3;
        if (b == 0xE0) lo = 0xA0; /* no overlong forms */
        if (b == 0xED) hi = 0x9F; /* no surrogates */
    } else if (b >= 0xF0 && b <= 0xF4) {
        len = 4;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F; /* nothing past U+10FFFF */
    } else {
        return -1;
    }
    for (int i = 1; i < len; i++) {
        if ((size_t)i >= n) return 0;
        if (s[i] < lo || s[i] > hi) return -i;
        lo = 0x80, hi = 0xBF;
    }
    return len;
}

/* ---- streaming ---- */

struct zl_detok {
    const zl_vocab *v;
    unsigned flags;
    bool started;   /* a non-empty piece has gone out (for ZL_DETOK_STRIP_SPACE) */
    uint8_t held[4];
    size_t n_held;
    char *out;
    size_t cap;
};

int zl_detok_new(zl_detok **out, const zl_vocab *v, unsigned flags, zl_err *err) {
    *out = NULL;
    if (!v) return zl_errf(err, ZL_EINVAL, "zl_detok_new: no vocabulary");
    zl_detok *d = calloc(1, sizeof *d);
    if (!d) return zl_errf(err, ZL_ENOMEM, "out of memory for a detokenizer");
    d->v = v;
    d->flags = flags;
    *out = d;
    return 0;
}

void zl_detok_free(zl_detok *d) {
    if (!d) return;
    free(d->out);
    free(d);
}

void zl_detok_reset(zl_detok *d) {
    d->started = false;
    d->n_held = 0;
}

static int reserve(zl_detok *d, size_t need, zl_err *err) {
    if (need <= d->cap) return 0;
    size_t cap = d->cap ? d->cap : 64;
    while (cap < need) cap *= 2;
    char *p = realloc(d->out, cap);
    if (!p) return zl_errf(err, ZL_ENOMEM, "out of memory in the detokenizer");
    d->out = p;
    d->cap = cap;
    return 0;
}

/* Append the whole characters of held + s[0..n) to d->out starting at *m,
 * keeping an unfinished trailing character in d->held (unless final). */
static void frame(zl_detok *d, const uint8_t *s, size_t n, size_t *m, bool final) {
    uint8_t tmp[8];
    size_t i = 0;
    /* finish the held character first: it needs at most 3 more bytes */
    while (d->n_held) {
        size_t k = d->n_held, take = n - i < 4 - k ? n - i : 4 - k;
        memcpy(tmp, d->held, k);
        memcpy(tmp + k, s + i, take);
        int r = utf8_scan(tmp, k + take);
        if (r == 0 && !final) { /* still unfinished: keep everything */
            memcpy(d->held + k, s + i, take);
            d->n_held += take;
            return;
        }
        size_t used = r > 0 ? (size_t)r : r < 0 ? (size_t)-r : k + take;
        if (r > 0) {
            memcpy(d->out + *m, tmp, used);
            *m += used;
        } else if (d->flags & ZL_DETOK_REPLACE_INVALID) {
            memcpy(d->out + *m, "\xEF\xBF\xBD", 3);
            *m += 3;
        } else {
            memcpy(d->out + *m, tmp, used);
            *m += used;
        }
        /* the held bytes are always consumed first; advance s past the rest */
        if (used >= k) {
            i += used - k;
            d->n_held = 0;
        } else {
            memmove(d->held, d->held + used, k - used);
            d->n_held = k - used;
        }
    }
    while (i < n) {
        int r = utf8_scan(s + i, n - i);
        if (r == 0 && !final) {
            memcpy(d->held, s + i, n - i);
            d->n_held = n - i;
            return;
        }
        size_t used = r > 0 ? (size_t)r : r < 0 ? (size_t)-r : n - i;
        if (r <= 0 && (d->flags & ZL_DETOK_REPLACE_INVALID)) {
            memcpy(d->out + *m, "\xEF\xBF\xBD", 3);
            *m += 3;
        } else {
            memcpy(d->out + *m, s + i, used);
            *m += used;
        }
        i += used;
    }
}

int zl_detok_feed(zl_detok *d, int32_t id, const char **out, size_t *len, zl_err *err) {
    *out = "";
    *len = 0;
    size_t n;
    const char *p = zl_token_piece(d->v, id, d->flags & ZL_DETOK_SPECIAL, &n);
    if (!p) return zl_errf(err, ZL_EINVAL, "token id %d is outside the vocabulary (%d tokens)", id, d->v->n_tokens);
    if (n && !d->started) {
        d->started = true;
        if ((d->flags & ZL_DETOK_STRIP_SPACE) && d->v->add_space_prefix && p[0] == ' ') p++, n--;
    }
    /* worst case every byte becomes U+FFFD */
    if (reserve(d, 3 * (n + d->n_held) + 1, err)) return ZL_ENOMEM;
    size_t m = 0;
    frame(d, (const uint8_t *)p, n, &m, false);
    d->out[m] = '\0';
    *out = d->out;
    *len = m;
    return 0;
}

int zl_detok_flush(zl_detok *d, const char **out, size_t *len, zl_err *err) {
    *out = "";
    *len = 0;
    if (reserve(d, 3 * d->n_held + 1, err)) return ZL_ENOMEM;
    size_t m = 0;
    frame(d, (const uint8_t *)"", 0, &m, true);
    d->out[m] = '\0';
    *out = d->out;
    *len = m;
    return 0;
}

int zl_detokenize(const zl_vocab *v, const int32_t *ids, size_t n, unsigned flags, char **out, size_t *len,
                  zl_err *err) {
    *out = NULL;
    *len = 0;
    zl_detok *d;
    int rc = zl_detok_new(&d, v, flags, err);
    if (rc) return rc;
    size_t cap = 64, m = 0;
    char *buf = malloc(cap);
    if (!buf) rc = zl_errf(err, ZL_ENOMEM, "out of memory detokenizing %zu tokens", n);
    for (size_t i = 0; i <= n && !rc; i++) {
        const char *p;
        size_t k;
        rc = i < n ? zl_detok_feed(d, ids[i], &p, &k, err) : zl_detok_flush(d, &p, &k, err);
        if (rc) break;
        if (m + k + 1 > cap) {
            while (m + k + 1 > cap) cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                rc = zl_errf(err, ZL_ENOMEM, "out of memory detokenizing %zu tokens", n);
                break;
            }
            buf = nb;
        }
        memcpy(buf + m, p, k);
        m += k;
    }
    zl_detok_free(d);
    if (rc) {
        free(buf);
        return rc;
    }
    buf[m] = '\0';
    *out = buf;
    *len = m;
    return 0;
}
