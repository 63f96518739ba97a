/* snapshot.c — sealing a sequence's state into an encrypted blob and loading
 * one back (see snapshot.h).  Layout (little-endian):
 *   header, 160 bytes, the AEAD's associated data:
 *     0 "ZLSNAP1\0"   8 u32 version (1)   12 u8 kdf (0 server key, 1 scrypt)
 *    13 u8 codec (0 exact, 1 learned)     14 u16 0
 *    16 u64 scrypt N   24 u32 r   28 u32 p   32 salt[16]
 *    48 model fingerprint[32]   80 codec id[32] (zero when exact)
 *   112 tenant digest[32]       144 u32 token count   148 nonce[12]
 *   ciphertext of the payload, then the 16-byte GCM tag.
 *   payload: u32 tokens, u32 history bytes, u8 KV type of the rows (zl_kv_type),
 *     3 zero bytes, i32 tokens[n], history; exact: per layer K rows then V rows
 *     as the cache holds them (keys rotated for their position); learned: the
 *     first min(n, n_sink) positions' K and V rows per layer likewise, then one
 *     code per later position (zl_codec_encode).  Rows are restored only into
 *     a cache of the same type.
 * Reads and writes the cache only through zerolayer.h's state access. */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>

#include "../base/err.h"
#include "../base/f16.h"
#include "rows.h"
#include "snapshot.h"

#define SNAP_VERSION 1
#define SCRYPT_N_DEFAULT (1u << 15)
#define SCRYPT_R 8
#define SCRYPT_P 1
/* what an imported header may ask of scrypt: the header is the client's, so its
 * cost is bounded before any key is derived — memory (128·r·N bytes) at twice
 * and work (N·r·p) at four times the parameters this server seals with */
#define SCRYPT_MAX_MEM ((uint64_t)2 * 128 * SCRYPT_R * SCRYPT_N_DEFAULT)
#define SCRYPT_MAX_WORK ((uint64_t)4 * SCRYPT_N_DEFAULT * SCRYPT_R * SCRYPT_P)
#define PAYLOAD_HEAD 12
static const char k_magic[8] = "ZLSNAP1";

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

static int derive(const zl_snap_keys *k, int kdf, const uint8_t *hdr, uint8_t key[32], zl_err *err) {
    if (kdf == 0) {
        memcpy(key, k->server_key, 32);
        return 0;
    }
    uint64_t n;
    memcpy(&n, hdr + 16, 8);
    uint32_t r = get32(hdr + 24), p = get32(hdr + 28);
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
    /* fuzz builds only: the header was bounded like any other, the derivation is made trivial so the
     * fuzzer spends its time in the parsers, not in scrypt */
    n = 16, r = 1, p = 1;
#endif
    if (EVP_PBE_scrypt(k->passphrase, strlen(k->passphrase), hdr + 32, 16, n, r, p, 2 * SCRYPT_MAX_MEM, key, 32) != 1)
        return zl_errf(err, ZL_ENOMEM, "scrypt failed (N %llu, r %u, p %u)", (unsigned long long)n, r, p);
    return 0;
}

/* AES-256-GCM over in[0..n) into out; tag written (enc) or checked (!enc). */
static int gcm(int enc, const uint8_t key[32], const uint8_t *hdr, const uint8_t *in, size_t n, uint8_t *out,
               uint8_t *tag) {
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    int ok = x && EVP_CipherInit_ex(x, EVP_aes_256_gcm(), NULL, NULL, NULL, enc) == 1 &&
             EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_SET_IVLEN, 12, NULL) == 1 &&
             EVP_CipherInit_ex(x, NULL, NULL, key, hdr + 148, enc) == 1;
    int l = 0;
    ok = ok && EVP_CipherUpdate(x, NULL, &l, hdr, ZL_SNAP_HEADER) == 1;
    for (size_t at = 0; ok && at < n; at += 1u << 30) { /* EVP counts in int */
        int part = (int)(n - at < (1u << 30) ? n - at : (1u << 30));
        ok = EVP_CipherUpdate(x, out + at, &l, in + at, part) == 1 && l == part;
    }
    if (ok && !enc) ok = EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_SET_TAG, ZL_SNAP_TAG, tag) == 1;
    ok = ok && EVP_CipherFinal_ex(x, out + n, &l) == 1;
    if (ok && enc) ok = EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_GET_TAG, ZL_SNAP_TAG, tag) == 1;
    EVP_CIPHER_CTX_free(x);
    return ok ? 0 : -1;
}

static size_t rows_bytes(zl_kv_shape sh, int n, size_t row_bytes) {
    return (size_t)sh.n_layers * 2 * (size_t)n * row_bytes;
}

static size_t payload_bytes(zl_kv_shape sh, const zl_codec *c, int n, size_t hist, size_t row_bytes) {
    size_t b = PAYLOAD_HEAD + 4 * (size_t)n + hist;
    if (!c) return b + rows_bytes(sh, n, row_bytes);
    int ns = n < c->n_sink ? n : c->n_sink;
    return b + rows_bytes(sh, ns, row_bytes) + (size_t)(n - ns) * zl_codec_token_bytes(c);
}

size_t zl_snap_size(zl_kv_shape sh, const zl_codec *c, int n_tokens, size_t history_len) {
    return ZL_SNAP_HEADER + payload_bytes(sh, c, n_tokens, history_len, (size_t)sh.n_kv_heads * sh.head_dim * 2) +
           ZL_SNAP_TAG;
}

zl_snap_result zl_snap_export(const zl_seq *s, const zl_snap_export_opts *o, uint8_t **blob, size_t *len,
                              zl_err *err) {
    *blob = NULL;
    *len = 0;
    int pass = o->keys.passphrase && *o->keys.passphrase;
    if (!pass && !o->keys.server_key) {
        zl_errf(err, ZL_EINVAL, "the server has no --state-key-file: give a `passphrase` to seal the snapshot");
        return ZL_SNAP_NEED_KEY;
    }
    int n = zl_seq_n_past(s);
    if (zl_seq_n_cached(s) != n) {
        zl_errf(err, ZL_EUNSUP, "a snapshot needs the full KV policy (%d of %d tokens cached)", zl_seq_n_cached(s), n);
        return ZL_SNAP_INVALID;
    }
    zl_kv_shape sh = zl_seq_kv_shape(s);
    const zl_codec *c = o->codec;
    int rc = 0;
    size_t rb = zl_seq_kv_row_bytes(s);
    size_t hist = o->history ? o->history_len : 0, pl = payload_bytes(sh, c, n, hist, rb);
    size_t total = ZL_SNAP_HEADER + pl + ZL_SNAP_TAG;
    uint8_t *plain = malloc(pl), *out = malloc(total);
    if (!plain || !out) {
        free(plain); free(out);
        zl_errf(err, ZL_ENOMEM, "out of memory (a snapshot of %zu bytes)", total);
        return ZL_SNAP_INVALID;
    }
    /* payload */
    put32(plain, (uint32_t)n);
    put32(plain + 4, (uint32_t)hist);
    memset(plain + 8, 0, 4);
    plain[8] = (uint8_t)zl_seq_kv_type(s);
    int nt = 0;
    const int32_t *toks = zl_seq_tokens(s, &nt);
    if (n) memcpy(plain + PAYLOAD_HEAD, toks, 4 * (size_t)n); /* an empty session has no token array */
    if (hist) memcpy(plain + PAYLOAD_HEAD + 4 * (size_t)n, o->history, hist);
    uint8_t *rows = plain + PAYLOAD_HEAD + 4 * (size_t)n + hist;
    if (!c) {
        rc = zl_rows_put(s, n, rows, err);
    } else {
        int ns = n < c->n_sink ? n : c->n_sink;
        rc = zl_rows_put(s, ns, rows, err);
        if (!rc && n > ns) rc = zl_codec_encode(c, s, ns, n - ns, rows + rows_bytes(sh, ns, rb), NULL, err);
    }
    /* header */
    uint8_t *h = out;
    memset(h, 0, ZL_SNAP_HEADER);
    memcpy(h, k_magic, 8);
    put32(h + 8, SNAP_VERSION);
    h[12] = (uint8_t)pass;
    h[13] = c != NULL;
    if (pass) {
        uint64_t sn = o->scrypt_n ? o->scrypt_n : SCRYPT_N_DEFAULT;
        memcpy(h + 16, &sn, 8);
        put32(h + 24, SCRYPT_R);
        put32(h + 28, SCRYPT_P);
        if (!rc && RAND_bytes(h + 32, 16) != 1) rc = zl_errf(err, ZL_EIO, "cannot draw a random salt");
    }
    memcpy(h + 48, o->fingerprint, 32);
    if (c) memcpy(h + 80, c->id, 32);
    memcpy(h + 112, o->tenant_digest, 32);
    put32(h + 144, (uint32_t)n);
    if (!rc && RAND_bytes(h + 148, 12) != 1) rc = zl_errf(err, ZL_EIO, "cannot draw a random nonce");
    uint8_t key[32];
    if (!rc) rc = derive(&o->keys, pass, h, key, err);
    if (!rc && gcm(1, key, h, plain, pl, out + ZL_SNAP_HEADER, out + ZL_SNAP_HEADER + pl))
        rc = zl_errf(err, ZL_EIO, "AES-256-GCM failed (OpenSSL)");
    OPENSSL_cleanse(key, sizeof key);
    OPENSSL_cleanse(plain, pl);
    free(plain);
    if (rc) { free(out); return ZL_SNAP_INVALID; }
    *blob = out;
    *len = total;
    return ZL_SNAP_OK;
}

static zl_snap_result invalid(zl_err *err, const char *msg) {
    zl_errf(err, ZL_EINVAL, "invalid_state: %s", msg);
    return ZL_SNAP_INVALID;
}

zl_snap_result zl_snap_import(zl_seq *s, const uint8_t *blob, size_t len, const zl_snap_import_opts *o,
                              zl_snap_info *info, zl_err *err) {
    memset(info, 0, sizeof *info);
    if (len < ZL_SNAP_HEADER + ZL_SNAP_TAG || memcmp(blob, k_magic, 8))
        return invalid(err, "not a zerolayer snapshot");
    const uint8_t *h = blob;
    if (get32(h + 8) != SNAP_VERSION) {
        zl_errf(err, ZL_EUNSUP, "invalid_state: snapshot format version %u (this server reads %d)", get32(h + 8),
                SNAP_VERSION);
        return ZL_SNAP_INVALID;
    }
    int kdf = h[12], learned = h[13];
    if (kdf > 1 || learned > 1 || h[14] || h[15]) return invalid(err, "malformed snapshot header");
    if (memcmp(h + 48, o->fingerprint, 32)) {
        zl_errf(err, ZL_EINVAL, "model_mismatch: the snapshot was made with another model");
        return ZL_SNAP_MODEL;
    }
    if (learned && (!o->codec || memcmp(h + 80, o->codec->id, 32))) {
        zl_errf(err, ZL_EINVAL, "codec_mismatch: the snapshot was coded with a learned codec this server %s",
                o->codec ? "does not have (another codec or ratio)" : "does not have (no --codec)");
        return ZL_SNAP_CODEC;
    }
    const char *pass = o->keys.passphrase && *o->keys.passphrase ? o->keys.passphrase : NULL;
    if (kdf == 1 && !pass) return invalid(err, "the snapshot is sealed with a passphrase: give `passphrase`");
    if (kdf == 0 && !o->keys.server_key) {
        zl_errf(err, ZL_EINVAL, "invalid_state: the snapshot is sealed with a server key and this server has no "
                "--state-key-file");
        return ZL_SNAP_INVALID;
    }
    if (kdf == 1) {
        uint64_t n;
        memcpy(&n, h + 16, 8);
        uint32_t r = get32(h + 24), p = get32(h + 28);
        if (n < 1024 || n > (1u << 20) || (n & (n - 1)) || r < 1 || r > 32 || p < 1 || p > 16 ||
            n * r * 128 > SCRYPT_MAX_MEM || n * r * p > SCRYPT_MAX_WORK)
            return invalid(err, "scrypt parameters out of bounds");
    }
    uint32_t n = get32(h + 144);
    size_t pl = len - ZL_SNAP_HEADER - ZL_SNAP_TAG;
    uint8_t *plain = malloc(pl ? pl : 1), key[32];
    if (!plain) { zl_errf(err, ZL_ENOMEM, "out of memory"); return ZL_SNAP_INVALID; }
    zl_snap_keys k = {o->keys.server_key, pass};
    if (derive(&k, kdf, h, key, err)) { free(plain); return ZL_SNAP_INVALID; }
    uint8_t tag[ZL_SNAP_TAG];
    memcpy(tag, blob + len - ZL_SNAP_TAG, ZL_SNAP_TAG);
    int bad = gcm(0, key, h, blob + ZL_SNAP_HEADER, pl, plain, tag);
    OPENSSL_cleanse(key, sizeof key);
    zl_snap_result res = ZL_SNAP_OK;
    if (bad) {
        res = invalid(err, kdf ? "authentication failed: the snapshot was altered or the passphrase is wrong"
                               : "authentication failed: the snapshot was altered or sealed with another server key");
    } else if (kdf == 0 && memcmp(h + 112, o->tenant_digest, 32)) {
        zl_errf(err, ZL_EINVAL, "the snapshot belongs to another tenant (export it with a passphrase to hand it on)");
        res = ZL_SNAP_TENANT;
    }
    zl_kv_shape sh = zl_seq_kv_shape(s);
    size_t hist = 0, rb = zl_seq_kv_row_bytes(s);
    if (!res) {
        hist = pl >= PAYLOAD_HEAD ? get32(plain + 4) : 0;
        if (pl < PAYLOAD_HEAD || get32(plain) != n || plain[9] || plain[10] || plain[11] || hist > pl || n > pl / 4 ||
            pl != payload_bytes(sh, learned ? o->codec : NULL, (int)n, hist, rb))
            res = invalid(err, "the payload does not match its header");
        else if (plain[8] != zl_seq_kv_type(s))
            res = invalid(err, "the snapshot's rows are of another KV cache type than this server's");
        else if ((int)n > zl_seq_n_ctx(s)) {
            zl_errf(err, ZL_ERANGE, "invalid_state: the snapshot holds %u tokens, more than this server's context "
                    "(%d)", n, zl_seq_n_ctx(s));
            res = ZL_SNAP_INVALID;
        }
    }
    if (!res) {
        int32_t *toks = malloc(4 * (size_t)n + 4);
        int rc = toks ? 0 : zl_errf(err, ZL_ENOMEM, "out of memory");
        if (!rc) memcpy(toks, plain + PAYLOAD_HEAD, 4 * (size_t)n);
        if (!rc) rc = zl_seq_adopt(s, toks, (int)n, err);
        free(toks);
        const uint8_t *rows = plain + PAYLOAD_HEAD + 4 * (size_t)n + hist;
        if (!rc && !learned) rc = zl_rows_get(s, (int)n, rows, err);
        if (!rc && learned) {
            int ns = (int)n < o->codec->n_sink ? (int)n : o->codec->n_sink;
            rc = zl_rows_get(s, ns, rows, err);
            if (!rc && (int)n > ns) rc = zl_codec_decode(o->codec, s, ns, (int)n - ns, rows + rows_bytes(sh, ns, rb), err);
        }
        if (!rc && hist) {
            info->history = malloc(hist + 1);
            if (!info->history) rc = zl_errf(err, ZL_ENOMEM, "out of memory");
            else {
                memcpy(info->history, plain + PAYLOAD_HEAD + 4 * (size_t)n, hist);
                info->history[hist] = 0;
                info->history_len = hist;
            }
        }
        if (rc) {
            zl_err_prefix(err, "invalid_state");
            res = ZL_SNAP_INVALID;
        }
    }
    if (res) zl_seq_truncate(s, 0);
    else {
        info->n_tokens = (int)n;
        info->learned = learned;
        info->passphrase = kdf;
    }
    OPENSSL_cleanse(plain, pl);
    free(plain);
    return res;
}
