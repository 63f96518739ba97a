/* fuzz_detok.c — libFuzzer target: the streaming detokenizer (zl_detok_feed /
 * flush / reset) against two independent references.  Input: a flags byte
 * (bits 0-2: ZL_DETOK_SPECIAL, STRIP_SPACE, REPLACE_INVALID; bit 3: ids taken
 * modulo the vocabulary; bit 4: flush + reset halfway), then token ids as
 * little-endian int16.  The vocabulary is stories260K's (byte-fallback
 * tokens <0xXX> split characters at any byte) or ZL_FUZZ_VOCAB=PATH.
 * Checked on every input:
 *   - an id outside the vocabulary is ZL_EINVAL with a message and changes
 *     nothing (the stream goes on as if it had not been fed);
 *   - the chunks of a stream concatenate to zl_detokenize's whole result;
 *   - without REPLACE_INVALID they are exactly the token pieces' bytes (one
 *     leading space dropped under STRIP_SPACE where the vocabulary adds one);
 *     with it, those bytes decoded by the WHATWG UTF-8 decoder below (one
 *     U+FFFD per maximal invalid subpart), and every chunk is valid UTF-8. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/vocab.h"

#ifndef ZL_ROOT
#define ZL_ROOT "."
#endif

static zl_vocab *voc;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *path = getenv("ZL_FUZZ_VOCAB") ? getenv("ZL_FUZZ_VOCAB") : ZL_ROOT "/models/stories260K.gguf";
    zl_err err = {0};
    static zl_gguf *g; /* kept open for the life of the process */
    if (zl_gguf_open(&g, path, NULL, &err) || zl_vocab_load(&voc, g, &err)) abort();
    return 0;
}

typedef struct { uint8_t *p; size_t n, cap; } buf;

static void put(buf *b, const void *s, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 16;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
}

/* The WHATWG Encoding Standard's UTF-8 decoder (replacement mode). */
static void whatwg_decode(const uint8_t *s, size_t n, buf *out) {
    static const uint8_t fffd[3] = {0xEF, 0xBF, 0xBD};
    uint32_t need = 0, seen = 0, lo = 0x80, hi = 0xBF;
    size_t start = 0;
    for (size_t i = 0; i < n;) {
        uint8_t b = s[i];
        if (!need) {
            start = i;
            if (b <= 0x7F) { put(out, &b, 1); i++; continue; }
            if (b >= 0xC2 && b <= 0xDF) need = 1;
            else if (b >= 0xE0 && b <= 0xEF) { need = 2; if (b == 0xE0) lo = 0xA0; if (b == 0xED) hi = 0x9F; }
            else if (b >= 0xF0 && b <= 0xF4) { need = 3; if (b == 0xF0) lo = 0x90; if (b == 0xF4) hi = 0x8F; }
            else { put(out, fffd, 3); i++; continue; }
            seen = 0;
            i++;
            continue;
        }
        if (b < lo || b > hi) { /* the subpart so far is one U+FFFD; b is read again */
            need = seen = 0, lo = 0x80, hi = 0xBF;
            put(out, fffd, 3);
            continue;
        }
        lo = 0x80, hi = 0xBF;
        seen++;
        i++;
        if (seen == need) {
            put(out, s + start, i - start);
            need = seen = 0;
        }
    }
    if (need) put(out, fffd, 3);
}

static int valid_utf8(const uint8_t *s, size_t n) {
    buf d = {0};
    whatwg_decode(s, n, &d);
    int ok = d.n == n && (!n || !memcmp(d.p, s, n));
    free(d.p);
    return ok;
}

/* What one stream (ids[0..n), all valid) must produce. */
static void expected(const int32_t *ids, size_t n, unsigned flags, buf *out) {
    buf raw = {0};
    int started = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *p = zl_token_piece(voc, ids[i], flags & ZL_DETOK_SPECIAL, &len);
        if (len && !started) {
            started = 1;
            if ((flags & ZL_DETOK_STRIP_SPACE) && voc->add_space_prefix && p[0] == ' ') p++, len--;
        }
        put(&raw, p, len);
    }
    if (flags & ZL_DETOK_REPLACE_INVALID) whatwg_decode(raw.p, raw.n, out);
    else put(out, raw.p, raw.n);
    free(raw.p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!size) return 0;
    unsigned flags = data[0] & 7, mod = data[0] & 8, halve = data[0] & 16;
    size_t n = (size - 1) / 2;
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids), *valid = malloc((n ? n : 1) * sizeof *valid);
    if (!ids || !valid) abort();
    int nv = voc->n_tokens;
    for (size_t i = 0; i < n; i++) {
        int16_t x;
        memcpy(&x, data + 1 + 2 * i, 2);
        ids[i] = mod ? (int32_t)((uint16_t)x % (uint32_t)nv) : x;
    }
    zl_detok *d;
    zl_err err = {0};
    if (zl_detok_new(&d, voc, flags, &err)) abort();
    buf got = {0}, want = {0};
    size_t nvalid = 0, from = 0, half = n / 2;
    for (size_t i = 0; i <= n; i++) {
        const char *p;
        size_t len;
        if (halve && i == half) { /* end the first stream here */
            if (zl_detok_flush(d, &p, &len, &err)) abort();
            put(&got, p, len);
            expected(valid + from, nvalid - from, flags, &want);
            from = nvalid;
            zl_detok_reset(d);
        }
        if (i == n) break;
        memset(&err, 0, sizeof err);
        int rc = zl_detok_feed(d, ids[i], &p, &len, &err);
        if (ids[i] < 0 || ids[i] >= nv) {
            if (rc != ZL_EINVAL || !err.msg[0] || len) abort();
            continue;
        }
        if (rc) abort();
        if ((flags & ZL_DETOK_REPLACE_INVALID) && !valid_utf8((const uint8_t *)p, len)) abort();
        put(&got, p, len);
        valid[nvalid++] = ids[i];
    }
    const char *p;
    size_t len;
    if (zl_detok_flush(d, &p, &len, &err)) abort();
    if ((flags & ZL_DETOK_REPLACE_INVALID) && !valid_utf8((const uint8_t *)p, len)) abort();
    put(&got, p, len);
    expected(valid + from, nvalid - from, flags, &want);
    if (got.n != want.n || (got.n && memcmp(got.p, want.p, got.n))) abort();
    if (!halve) { /* the whole-sequence call agrees */
        char *all;
        size_t alen;
        if (zl_detokenize(voc, valid, nvalid, flags, &all, &alen, &err)) abort();
        if (alen != got.n || (alen && memcmp(all, got.p, alen))) abort();
        free(all);
    }
    zl_detok_free(d);
    free(got.p);
    free(want.p);
    free(ids);
    free(valid);
    return 0;
}
