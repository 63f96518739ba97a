/* snapshot.h — a sequence's state as one encrypted, authenticated blob:
 * tokens, the conversation text, and the KV rows either exact (the cache's
 * own bytes) or coded by a learned codec (its sink positions exact).  AES-256-GCM (OpenSSL EVP) under the server's key or a key derived
 * from a passphrase with scrypt (random salt, parameters in the header); a
 * fresh random nonce per blob; the header (format version, model fingerprint,
 * codec id, tenant digest, token count, KDF parameters, nonce) is the
 * associated data, so altering any byte of the blob fails authentication.
 *
 * Knows nothing of HTTP, JSON, base64 or sessions: the server maps results
 * to statuses (ZL_SNAP_INVALID 400, ZL_SNAP_MODEL / ZL_SNAP_CODEC 409,
 * ZL_SNAP_TENANT 403).  Import loads nothing unless the whole blob checks. */
#ifndef ZL_SNAPSHOT_H
#define ZL_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "../codec/codec.h"
#include "zerolayer.h"

#define ZL_SNAP_HEADER 160
#define ZL_SNAP_TAG 16

typedef enum {
    ZL_SNAP_OK = 0,
    ZL_SNAP_INVALID, /* not a snapshot, altered, wrong key or passphrase, or does not fit */
    ZL_SNAP_MODEL,   /* made with another model */
    ZL_SNAP_CODEC,   /* coded with a codec this server does not have */
    ZL_SNAP_TENANT,  /* bound to another tenant (made without a passphrase) */
    ZL_SNAP_NEED_KEY /* no server key and no passphrase */
} zl_snap_result;

typedef struct zl_snap_keys {
    const uint8_t *server_key; /* 32 bytes, or NULL when the server has none */
    const char *passphrase;    /* NULL or "": the server key */
} zl_snap_keys;

typedef struct zl_snap_export_opts {
    zl_snap_keys keys;
    const uint8_t *fingerprint;   /* the model's, 32 bytes */
    const zl_codec *codec;        /* NULL: exact rows */
    const uint8_t *tenant_digest; /* 32 bytes */
    const char *history;          /* conversation text kept with the state (may be NULL) */
    size_t history_len;
    uint64_t scrypt_n;            /* 0: the default (2^15); r = 8, p = 1 */
} zl_snap_export_opts;

/* *blob is malloc'd. */
zl_snap_result zl_snap_export(const zl_seq *s, const zl_snap_export_opts *o, uint8_t **blob, size_t *len,
                              zl_err *err);

typedef struct zl_snap_import_opts {
    zl_snap_keys keys;
    const uint8_t *fingerprint;   /* this server's model */
    const zl_codec *codec;        /* this server's codec, or NULL */
    const uint8_t *tenant_digest; /* the importing tenant */
} zl_snap_import_opts;

typedef struct zl_snap_info {
    int n_tokens;
    int learned;    /* coded with the learned codec */
    int passphrase; /* sealed with a passphrase (not bound to a tenant) */
    char *history;  /* malloc'd, NUL-terminated, or NULL */
    size_t history_len;
} zl_snap_info;

/* Load a blob into s (a fresh sequence of the same model, full KV policy).
 * On any failure s holds nothing (truncated to 0). */
zl_snap_result zl_snap_import(zl_seq *s, const uint8_t *blob, size_t len, const zl_snap_import_opts *o,
                              zl_snap_info *info, zl_err *err);

/* Bytes a blob of n tokens takes (exact rows in f16, or coded), for reports. */
size_t zl_snap_size(zl_kv_shape sh, const zl_codec *c, int n_tokens, size_t history_len);

#endif
