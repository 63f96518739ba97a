/* api_state.c — session state over HTTP: `POST /v1/sessions/{id}/snapshot`
 * seals an idle session's state (src/state/snapshot.h) and returns it in
 * base64; `POST /v1/sessions` with `state` restores one into a new,
 * independent session.  Owns the server's state key (--state-key-file: the
 * SHA-256 of at least 32 bytes), the learned codec (--codec FILE.zlc, checked
 * against the model's fingerprint at start) and the model fingerprint,
 * computed once when the server sets up a model.  Maps snapshot results to
 * statuses: 400 invalid_state (and 400 naming `passphrase` without a key),
 * 403 forbidden (another tenant), 409 model_mismatch / codec_mismatch.
 * Never runs a forward pass: it copies an idle session's rows under the
 * store's lock and seals the copy on the HTTP thread. */
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/clock.h"
#include "../base/err.h"
#include "../codec/codec.h"
#include "../codec/fingerprint.h"
#include "../state/coded.h"
#include "../state/snapshot.h"
#include "http.h"
#include "metrics.h"
#include "routes.h"

struct zl_srv_state {
    uint8_t fingerprint[32];
    uint8_t key[32];
    int has_key;
    zl_codec *codec;
};

int zl_state_setup(zl_srv *srv, zl_err *err) {
    zl_srv_state *st = calloc(1, sizeof *st);
    if (!st) return zl_errf(err, ZL_ENOMEM, "out of memory");
    int rc = zl_fingerprint_llm(srv->llm, st->fingerprint, err);
    const char *kf = srv->o.state_key_file, *cf = srv->o.codec_file;
    if (!rc && kf) {
        FILE *f = fopen(kf, "rb");
        unsigned char buf[4096];
        size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
        if (f) fclose(f);
        if (!f) rc = zl_errf(err, ZL_EIO, "--state-key-file: cannot open %s", kf);
        else if (n < 32) rc = zl_errf(err, ZL_EINVAL, "--state-key-file: %s holds %zu bytes; at least 32 are needed", kf, n);
        else {
            SHA256(buf, n, st->key);
            st->has_key = 1;
        }
        OPENSSL_cleanse(buf, sizeof buf);
    }
    if (!rc && cf) {
        rc = zl_codec_load(&st->codec, cf, err);
        if (!rc) rc = zl_codec_check_model(st->codec, st->fingerprint, zl_llm_kv_shape(srv->llm), err);
        if (rc) zl_err_prefix(err, "--codec %s", cf);
    }
    if (rc) {
        zl_codec_free(st->codec);
        free(st);
        return rc;
    }
    srv->state = st;
    return 0;
}

/* ---------------- idle sessions coded (--compress-idle) ---------------- */

static int idle_encode(void *ud, const zl_seq *seq, uint8_t **out, size_t *bytes) {
    const zl_codec *c = ud;
    zl_codec_hist h;
    if (zl_codec_hist_new(&h, c, NULL)) return ZL_ENOMEM;
    int rc = zl_coded_pack(c, seq, out, bytes, &h, NULL);
    if (!rc && h.n_tokens) zl_metrics_state_entropy(zl_codec_hist_entropy(&h, c));
    zl_codec_hist_free(&h);
    if (!rc) zl_metrics_codec(*bytes, 0);
    return rc;
}

static int idle_decode(void *ud, zl_seq *seq, const uint8_t *in, size_t bytes) {
    int rc = zl_coded_unpack(ud, seq, in, bytes, NULL);
    if (!rc) zl_metrics_codec(0, bytes);
    return rc;
}

int zl_state_idle_codec(const zl_srv *srv, zl_sessions_codec *out, zl_err *err) {
    memset(out, 0, sizeof *out);
    if (srv->o.compress_idle_s > 0 && !srv->state->codec)
        return zl_errf(err, ZL_EINVAL, "--compress-idle needs --codec FILE.zlc (the codec idle sessions are kept in)");
    if (!srv->state->codec) return 0;
    double idle = srv->o.compress_idle_s > 0 ? srv->o.compress_idle_s : 30; /* the default with a codec */
    *out = (zl_sessions_codec){idle_encode, idle_decode, srv->state->codec, idle};
    return 0;
}

const uint8_t *zl_state_key(const zl_srv *srv) { return srv->state && srv->state->has_key ? srv->state->key : NULL; }
const uint8_t *zl_state_fingerprint(const zl_srv *srv) { return srv->state->fingerprint; }
const zl_codec *zl_state_codec(const zl_srv *srv) { return srv->state ? srv->state->codec : NULL; }

void zl_state_free(zl_srv *srv) {
    zl_state_store_free(srv);
    if (!srv->state) return;
    zl_codec_free(srv->state->codec);
    OPENSSL_cleanse(srv->state, sizeof *srv->state);
    free(srv->state);
    srv->state = NULL;
}

/* ---------------- base64 ---------------- */

static char *b64_encode(const uint8_t *p, size_t n, size_t *len) {
    if (n > ((size_t)1 << 31)) return NULL;
    char *out = malloc(4 * ((n + 2) / 3) + 1);
    if (!out) return NULL;
    *len = (size_t)EVP_EncodeBlock((unsigned char *)out, p, (int)n);
    return out;
}

/* Strict standard base64 (padding required); NULL when malformed. */
static uint8_t *b64_decode(const char *s, size_t n, size_t *len) {
    if (!n || n % 4 || n > ((size_t)1 << 31)) return NULL;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/' ||
                 (c == '=' && i >= n - 2 && (i == n - 1 || s[n - 1] == '='));
        if (!ok) return NULL;
    }
    uint8_t *out = malloc(n / 4 * 3 + 1);
    if (!out) return NULL;
    int got = EVP_DecodeBlock(out, (const unsigned char *)s, (int)n);
    if (got < 0) { free(out); return NULL; }
    *len = (size_t)got - (s[n - 1] == '=') - (s[n - 2] == '=');
    return out;
}

/* ---------------- helpers ---------------- */

static void tenant_digest(const char *tenant, uint8_t out[32]) {
    SHA256((const unsigned char *)tenant, strlen(tenant), out);
}

/* Only these fields (and the ones every session route reads, `model` picking
 * the model with several) may be present. */
static int check_fields(zl_req *r, json_t *b, const char *const *allowed) {
    const char *k;
    json_t *v;
    json_object_foreach(b, k, v) {
        int ok = !strcmp(k, "user") || !strcmp(k, "metadata") || !strcmp(k, "session") || !strcmp(k, "model");
        for (int i = 0; !ok && allowed[i]; i++) ok = !strcmp(k, allowed[i]);
        if (!ok) {
            zl_reply_error(r, ZL_E_INVALID, k, "%s: unknown field (allowed: %s%s%s, user)", k, allowed[0],
                           allowed[1] ? ", " : "", allowed[1] ? allowed[1] : "");
            return -1;
        }
    }
    return 0;
}

/* The optional passphrase: 0 and *out (NULL when absent), or -1 after replying 400. */
static int passphrase_of(zl_req *r, json_t *b, const char **out) {
    *out = NULL;
    json_t *p = b ? json_object_get(b, "passphrase") : NULL;
    if (!p || json_is_null(p)) return 0;
    if (!json_is_string(p) || !json_string_length(p) || json_string_length(p) > 1024) {
        zl_reply_error(r, ZL_E_INVALID, "passphrase", "passphrase: expected a non-empty string of at most 1024 bytes");
        return -1;
    }
    *out = json_string_value(p);
    return 0;
}

static enum MHD_Result snap_error(zl_req *r, zl_snap_result res, const zl_err *e) {
    switch (res) {
    case ZL_SNAP_MODEL: return zl_sess_error(r, ZL_E_CONFLICT, "model_mismatch", "%s", e->msg);
    case ZL_SNAP_CODEC: return zl_sess_error(r, ZL_E_CONFLICT, "codec_mismatch", "%s", e->msg);
    case ZL_SNAP_TENANT: return zl_sess_error(r, ZL_E_FORBIDDEN, "forbidden", "%s", e->msg);
    case ZL_SNAP_NEED_KEY: return zl_reply_error(r, ZL_E_INVALID, "passphrase", "%s", e->msg);
    default: return zl_sess_error(r, ZL_E_INVALID, "invalid_state", "%s", e->msg);
    }
}

static int new_seq(zl_srv *srv, zl_seq **out, zl_err *err) {
    zl_seq_opts so = {zl_sched_n_ctx(srv->sched), ZL_KV_F16, zl_sampling_defaults()};
    return zl_seq_new(out, srv->llm, &so, err);
}

static void seq_drop(zl_seq *q) {
    if (!q) return;
    zl_seq_truncate(q, 0); /* zero the copied rows before the memory goes back */
    zl_seq_free(q);
}

/* ---------------- routes ---------------- */

enum MHD_Result zl_api_snapshot(zl_req *r, json_t *b, const char *id, const char *tenant) {
    zl_srv *srv = r->srv;
    zl_srv_state *st = srv->state;
    static const char *const allowed[] = {"passphrase", "codec", NULL};
    if (b && check_fields(r, b, allowed)) return MHD_YES;
    const char *pass, *codec = NULL;
    if (passphrase_of(r, b, &pass)) return MHD_YES;
    json_t *cj = b ? json_object_get(b, "codec") : NULL;
    if (cj && !json_is_null(cj)) {
        codec = json_string_value(cj);
        if (!codec || (strcmp(codec, "exact") && strcmp(codec, "learned")))
            return zl_reply_error(r, ZL_E_INVALID, "codec", "codec: expected \"exact\" or \"learned\"");
        if (!strcmp(codec, "learned") && !st->codec)
            return zl_reply_error(r, ZL_E_INVALID, "codec", "codec: \"learned\" needs a server started with --codec "
                                                            "FILE.zlc");
    }
    int learned = codec ? !strcmp(codec, "learned") : st->codec != NULL;
    if (!pass && !st->has_key)
        return zl_reply_error(r, ZL_E_INVALID, "passphrase", "this server has no --state-key-file: give a "
                                                             "`passphrase` to seal the snapshot");
    zl_err err = {0};
    zl_seq *copy = NULL;
    if (new_seq(srv, &copy, &err)) return zl_reply_error(r, ZL_E_INTERNAL, NULL, "%s", err.msg);
    char *hist = NULL;
    zl_sess_status ss = zl_sessions_copy_state(srv->sessions, id, tenant, copy, &hist);
    if (ss != ZL_SESS_OK) {
        seq_drop(copy);
        return zl_sess_status_reply(r, ss, id);
    }
    uint8_t td[32];
    tenant_digest(tenant, td);
    zl_snap_export_opts eo = {{st->has_key ? st->key : NULL, pass}, st->fingerprint, learned ? st->codec : NULL, td,
                              hist, hist ? strlen(hist) : 0, 0};
    uint8_t *blob = NULL;
    size_t len = 0;
    double t0 = zl_now_s();
    zl_snap_result res = zl_snap_export(copy, &eo, &blob, &len, &err);
    double secs = zl_now_s() - t0;
    int n = zl_seq_n_past(copy);
    seq_drop(copy);
    free(hist);
    if (res) return snap_error(r, res, &err);
    if (zl_ctype_is(zl_req_header(r->conn, "Accept"), "application/octet-stream")) { /* the sealed bytes themselves */
        char tokens[16], ms[32];
        snprintf(tokens, sizeof tokens, "%d", n);
        snprintf(ms, sizeof ms, "%.3f", secs * 1e3);
        const char *h[] = {"X-Zerolayer-State-Tokens", tokens, "X-Zerolayer-State-Codec", learned ? "learned" : "exact",
                           "X-Zerolayer-State-Model", srv->model_id, "X-Zerolayer-State-Seal-Ms", ms, NULL};
        zl_metrics_snapshot(ZL_SNAPM_EXPORTED, len, 0);
        enum MHD_Result ret = zl_reply_bytes(r, 200, "application/octet-stream", blob, len, h, 0);
        OPENSSL_cleanse(blob, len);
        free(blob);
        return ret;
    }
    size_t b64n = 0;
    char *b64 = b64_encode(blob, len, &b64n);
    OPENSSL_cleanse(blob, len);
    free(blob);
    if (!b64) return zl_reply_error(r, ZL_E_INTERNAL, NULL, "out of memory");
    zl_metrics_snapshot(ZL_SNAPM_EXPORTED, len, 0);
    json_t *j = json_pack("{s:s%, s:I, s:i, s:f, s:s, s:s, s:s, s:f}", "state", b64, b64n, "bytes", (json_int_t)len,
                          "tokens", n, "bytes_per_token", n ? (double)len / n : 0.0, "codec",
                          learned ? "learned" : "exact", "model", srv->model_id, "sealed_with",
                          pass ? "passphrase" : "server_key", "seal_ms", secs * 1e3);
    free(b64);
    return zl_reply_json(r, 200, j, NULL);
}

/* The passphrase of a raw (application/octet-stream) restore: the
 * X-Zerolayer-Passphrase header; 0 and *out (NULL when absent), or -1 after replying 400. */
static int header_passphrase(zl_req *r, const char **out) {
    *out = zl_req_header(r->conn, "X-Zerolayer-Passphrase");
    if (*out && (!**out || strlen(*out) > 1024)) {
        zl_reply_error(r, ZL_E_INVALID, "passphrase",
                       "X-Zerolayer-Passphrase: expected a non-empty string of at most 1024 bytes");
        return -1;
    }
    return 0;
}

int zl_state_restore(zl_req *r, json_t *b, const char *tenant, zl_seq **out, zl_snap_info *info) {
    *out = NULL;
    zl_srv *srv = r->srv;
    zl_srv_state *st = srv->state;
    const char *pass;
    size_t len = 0;
    uint8_t *blob = NULL;
    const uint8_t *sealed;
    if (r->body_blob) { /* the sealed bytes themselves: no JSON string, no base64 */
        if (header_passphrase(r, &pass)) return -1;
        sealed = (const uint8_t *)r->body.p;
        len = r->body.n;
    } else {
        static const char *const allowed[] = {"state", "passphrase", NULL};
        if (check_fields(r, b, allowed)) return -1;
        if (passphrase_of(r, b, &pass)) return -1;
        json_t *sj = json_object_get(b, "state");
        if (!json_is_string(sj)) {
            zl_reply_error(r, ZL_E_INVALID, "state", "state: expected the base64 string a snapshot returned");
            return -1;
        }
        blob = b64_decode(json_string_value(sj), json_string_length(sj), &len);
        if (!blob) {
            zl_metrics_snapshot(ZL_SNAPM_INVALID, 0, 0);
            zl_sess_error(r, ZL_E_INVALID, "invalid_state", "state: not valid base64");
            return -1;
        }
        sealed = blob;
    }
    zl_err err = {0};
    zl_seq *q = NULL;
    if (new_seq(srv, &q, &err)) {
        free(blob);
        zl_reply_error(r, ZL_E_INTERNAL, NULL, "%s", err.msg);
        return -1;
    }
    uint8_t td[32];
    tenant_digest(tenant, td);
    zl_snap_import_opts io = {{st->has_key ? st->key : NULL, pass}, st->fingerprint, st->codec, td};
    zl_snap_result res = zl_snap_import(q, sealed, len, &io, info, &err);
    free(blob);
    if (res) {
        zl_metrics_snapshot(res == ZL_SNAP_TENANT ? ZL_SNAPM_FORBIDDEN
                            : res == ZL_SNAP_MODEL || res == ZL_SNAP_CODEC ? ZL_SNAPM_MISMATCH
                                                                           : ZL_SNAPM_INVALID, 0, 0);
        seq_drop(q);
        snap_error(r, res, &err);
        return -1;
    }
    zl_metrics_snapshot(ZL_SNAPM_RESTORED, 0, len);
    *out = q;
    return 0;
}

void zl_state_seq_free(zl_seq *q) { seq_drop(q); }
