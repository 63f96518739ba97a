/* state_store.c — sessions kept outside the process, in a state store
 * (runtime/store.h): a directory (--state-dir DIR) or Redis (--state-store
 * redis://HOST:PORT[/DB]).  One mechanism for both:
 *   - write: a session is sealed (an exact snapshot under the server key,
 *     bound to its tenant, src/state/snapshot.h) into one record and put
 *     under its key, by the sessions' sweeper once it has been idle
 *     --store-idle seconds or every --store-every turns
 *     (zl_sessions_persist), and for every live session at shutdown;
 *   - read: a request naming a session this replica does not hold loads it
 *     (zl_state_store_fetch), so any replica with the same --state-key-file
 *     and --session-secret-file continues the conversation; a directory
 *     (one replica's own) is also read whole at start;
 *   - spill: past --session-kv-mb the sweeper hands an idle session's state
 *     here instead of evicting it (zl_state_store_spill): it is sealed into
 *     the same record under the same key (learned codes with --codec, else
 *     exact), so a spilled session is a written one too, and its next turn
 *     reads the record back; the record stays (it is the session as last
 *     written) until the session is deleted or flushed.
 * Keys are "zerolayer:session:<model>:<tenant>:<id>", the model being the
 * first 16 hex digits of its fingerprint and the tenant the digest string of
 * zl_tenant_of: one model's keys never name another's (each model of a
 * server lists, loads and cleans up its own; the sealed header binds the
 * record to the whole fingerprint), one tenant's never name another's, and
 * a record whose id or tenant differ from its key's is refused.  Values are
 * TTL'd with the session TTL (Redis) and carry their last use, so an
 * expired one is never loaded.  A store that does not answer is an outage,
 * never a failed request (store.c): writes are retried later, a miss is a
 * miss.  Record: "ZLSESS1\n", u32 id length, id, u32 tenant length, tenant,
 * f64 created, f64 last used (unix s), u64 blob length, the sealed blob. */
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/clock.h"
#include "../base/err.h"
#include "../codec/fingerprint.h"
#include "../runtime/store.h"
#include "../state/coded.h"
#include "../state/snapshot.h"
#include "http.h"
#include "metrics.h"
#include "store_redis.h"

static const char k_magic[8] = "ZLSESS1\n";
#define KEY_PREFIX "zerolayer:session:"

static int id_ok(const char *id, size_t n) {
    if (!n || n >= 80) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') || (id[i] >= '0' && id[i] <= '9') ||
              id[i] == '_'))
            return 0;
    return 1;
}

/* "zerolayer:session:<model>:": the keys of srv's model. */
static void model_prefix(const zl_srv *srv, char out[64]) {
    char hex[65];
    zl_fingerprint_hex(zl_state_fingerprint(srv), hex);
    snprintf(out, 64, KEY_PREFIX "%.16s:", hex);
}

static void store_key(const zl_srv *srv, const char *tenant, const char *id, char *out, size_t cap) {
    char pre[64];
    model_prefix(srv, pre);
    snprintf(out, cap, "%s%s:%s", pre, tenant, id);
}

/* What the messages call the store. */
static const char *flag_of(const zl_srv *srv) { return srv->o.state_store ? "--state-store" : "--state-dir"; }

static void put_bytes(uint8_t **p, const void *v, size_t n) {
    memcpy(*p, v, n);
    *p += n;
}

static zl_seq *new_seq(const zl_srv *srv, zl_err *err) {
    zl_seq_opts so = {zl_sched_n_ctx(srv->sched), ZL_KV_F16, zl_sampling_defaults()};
    zl_seq *q = NULL;
    return zl_seq_new(&q, srv->llm, &so, err) ? NULL : q;
}

static void seq_zero_free(zl_seq *q) {
    if (!q) return;
    zl_seq_truncate(q, 0);
    zl_seq_free(q);
}

/* Seal seq (+ history) of ref into one record (malloc'd): rows exact, or
 * coded by c. */
static int seal_record(const zl_srv *srv, const zl_session_ref *ref, const zl_seq *seq, const char *hist,
                       const zl_codec *c, uint8_t **out, size_t *out_n, zl_err *err) {
    uint8_t td[32], *blob = NULL;
    size_t len = 0;
    SHA256((const unsigned char *)ref->tenant, strlen(ref->tenant), td);
    zl_snap_export_opts eo = {{zl_state_key(srv), NULL}, zl_state_fingerprint(srv), c, td, hist,
                              hist ? strlen(hist) : 0, 0};
    if (zl_snap_export(seq, &eo, &blob, &len, err) != ZL_SNAP_OK) return err->code ? err->code : ZL_EINVAL;
    uint32_t il = (uint32_t)strlen(ref->id), tl = (uint32_t)strlen(ref->tenant);
    uint64_t bl = len;
    size_t n = 8 + 4 + il + 4 + tl + 16 + 8 + len;
    uint8_t *buf = malloc(n), *p = buf;
    if (!buf) {
        free(blob);
        return zl_errf(err, ZL_ENOMEM, "out of memory");
    }
    put_bytes(&p, k_magic, 8);
    put_bytes(&p, &il, 4), put_bytes(&p, ref->id, il);
    put_bytes(&p, &tl, 4), put_bytes(&p, ref->tenant, tl);
    put_bytes(&p, &ref->created_unix, 8), put_bytes(&p, &ref->last_used_unix, 8);
    put_bytes(&p, &bl, 8), put_bytes(&p, blob, len);
    free(blob);
    *out = buf;
    *out_n = n;
    return 0;
}

static double ttl_of(const zl_srv *srv) { return zl_sessions_get_opts(srv->sessions)->ttl_s; }

static int put_record(zl_srv *srv, const zl_session_ref *ref, const uint8_t *v, size_t n, zl_err *err) {
    char key[320];
    store_key(srv, ref->tenant, ref->id, key, sizeof key);
    int rc = zl_store_put(srv->store, key, v, n, ttl_of(srv), err);
    zl_metrics_store_write(rc == 0, n);
    return rc;
}

/* ---------------- the sweeper's hooks (zl_sessions_persist) ---------------- */

static int hook_seal(void *ud, const zl_session_ref *ref, const zl_seq *seq, const char *history, uint8_t **out,
                     size_t *n) {
    zl_err err = {0};
    int rc = seal_record(ud, ref, seq, history, NULL, out, n, &err);
    if (rc) fprintf(stderr, "zerolayer: %s: session %s not written: %s\n", flag_of(ud), ref->id, err.msg);
    return rc;
}

static int hook_put(void *ud, const zl_session_ref *ref, const uint8_t *v, size_t n) {
    zl_err err = {0};
    int rc = put_record(ud, ref, v, n, &err);
    if (rc && rc != ZL_EIO) fprintf(stderr, "zerolayer: %s: session %s: %s\n", flag_of(ud), ref->id, err.msg);
    return rc; /* an outage is reported once, by store.c */
}

int zl_state_store_setup(zl_srv *srv, zl_sessions_persist *p, zl_err *err) {
    memset(p, 0, sizeof *p);
    const zl_server_opts *o = &srv->o;
    if (!o->state_dir && !o->state_store) {
        if (o->store_idle_s || o->store_every)
            return zl_errf(err, ZL_EINVAL, "--store-idle / --store-every need a state store: --state-store "
                                           "redis://HOST:PORT or --state-dir DIR");
        return 0;
    }
    if (o->state_dir && o->state_store)
        return zl_errf(err, ZL_EINVAL, "--state-dir and --state-store: give one (both are the session state store)");
    if (!zl_state_key(srv))
        return zl_errf(err, ZL_EINVAL, "%s needs --state-key-file (sessions are sealed with the server key)", flag_of(srv));
    int rc = o->state_dir ? zl_store_dir_open(&srv->store, o->state_dir, err)
                          : zl_store_redis_open(&srv->store, o->state_store, err);
    if (rc) return rc;
    *p = (zl_sessions_persist){hook_seal, hook_put, srv, o->store_idle_s < 0 ? 0 : o->store_idle_s ? o->store_idle_s : 5,
                               o->store_every};
    return 0;
}

void zl_state_store_free(zl_srv *srv) {
    zl_store_close(srv->store);
    srv->store = NULL;
}

/* ---------------- shutdown: every live session ---------------- */

/* Seal one session (copied under the store's lock) and put it; 0 when written. */
static int save_one(zl_srv *srv, const zl_session_ref *ref) {
    zl_err err = {0};
    zl_seq *copy = new_seq(srv, &err);
    if (!copy) return -1;
    char *hist = NULL;
    int rc = -1;
    if (zl_sessions_copy_state(srv->sessions, ref->id, ref->tenant, copy, &hist) == ZL_SESS_OK) {
        uint8_t *rec = NULL;
        size_t n = 0;
        rc = seal_record(srv, ref, copy, hist, NULL, &rec, &n, &err);
        if (!rc) rc = put_record(srv, ref, rec, n, &err);
        if (rc) fprintf(stderr, "zerolayer: %s: session %s: %s\n", flag_of(srv), ref->id, err.msg);
        if (rec) OPENSSL_cleanse(rec, n);
        free(rec);
    }
    free(hist);
    seq_zero_free(copy);
    return rc;
}

int zl_state_store_write_now(zl_srv *srv, const char *id, const char *tenant, double created_unix) {
    if (!srv->store) return 0;
    zl_session_ref ref;
    snprintf(ref.id, sizeof ref.id, "%s", id);
    snprintf(ref.tenant, sizeof ref.tenant, "%s", tenant);
    ref.created_unix = created_unix;
    ref.last_used_unix = zl_wall_s();
    return save_one(srv, &ref);
}

void zl_state_store_save_all(zl_srv *srv) {
    if (!srv->store || !srv->sessions) return;
    zl_session_ref *refs;
    int n = zl_sessions_list(srv->sessions, &refs), saved = 0, clean = 0;
    for (int i = 0; i < n; i++) {
        if (!refs[i].unsaved) clean++; /* the store has it as it is */
        else saved += save_one(srv, &refs[i]) == 0;
    }
    /* a store of our own (listable): drop the records of sessions that ended since they were written */
    char **keys = NULL, pre[64];
    int nk = 0;
    model_prefix(srv, pre);
    if (!zl_store_list(srv->store, pre, &keys, &nk, NULL)) {
        for (int k = 0; k < nk; k++) {
            int live = 0;
            for (int i = 0; i < n && !live; i++) {
                char key[320];
                store_key(srv, refs[i].tenant, refs[i].id, key, sizeof key);
                live = !strcmp(key, keys[k]);
            }
            if (!live) zl_store_del(srv->store, keys[k], NULL);
        }
        zl_store_keys_free(keys, nk);
    }
    fprintf(stderr, "zerolayer: %s: saved %d of %d sessions to %s (%d unchanged since their last write; model '%s')\n",
            flag_of(srv), saved, n < 0 ? 0 : n - clean, srv->o.state_dir ? srv->o.state_dir : srv->store->desc, clean,
            srv->model_id);
    free(refs);
}

/* ---------------- loading ---------------- */

/* A record's fields; blob points into the record's bytes. */
typedef struct sess_record {
    char id[80], tenant[ZL_SESS_TENANT_MAX];
    double created, last;
    const uint8_t *blob;
    size_t blob_len;
} sess_record;

/* Check a record's framing; 0 or -1. */
static int parse_record(const uint8_t *b, size_t n, sess_record *r) {
    const uint8_t *p = b, *end = b + n;
    uint32_t il = 0, tl = 0;
    uint64_t bl = 0;
    memset(r, 0, sizeof *r);
    int ok = n >= 12 && !memcmp(p, k_magic, 8);
    if (ok) { memcpy(&il, p + 8, 4); p += 12; }
    ok = ok && il < sizeof r->id && (size_t)(end - p) >= (size_t)il + 4 && id_ok((const char *)p, il);
    if (ok) { memcpy(r->id, p, il); r->id[il] = 0; p += il; memcpy(&tl, p, 4); p += 4; }
    ok = ok && tl < sizeof r->tenant && (size_t)(end - p) >= (size_t)tl + 24;
    if (ok) {
        memcpy(r->tenant, p, tl); r->tenant[tl] = 0; p += tl;
        memcpy(&r->created, p, 8); memcpy(&r->last, p + 8, 8); memcpy(&bl, p + 16, 8); p += 24;
        ok = bl == (uint64_t)(end - p);
    }
    if (!ok) return -1;
    r->blob = p;
    r->blob_len = (size_t)bl;
    return 0;
}

/* Unseal r's blob into q (a fresh sequence): exact rows, or learned codes
 * when this server has the codec they were made with. */
static zl_snap_result unseal(const zl_srv *srv, const sess_record *r, zl_seq *q, zl_snap_info *info, zl_err *err) {
    uint8_t td[32];
    SHA256((const unsigned char *)r->tenant, strlen(r->tenant), td);
    zl_snap_import_opts io = {{zl_state_key(srv), NULL}, zl_state_fingerprint(srv), zl_state_codec(srv), td};
    return zl_snap_import(q, r->blob, r->blob_len, &io, info, err);
}

/* Restore one record into a session; 0, or an error with *why set.  want_id /
 * want_tenant (may be NULL: a directory read at start) must match the record. */
static int load_record(zl_srv *srv, const uint8_t *b, size_t n, const char *want_id, const char *want_tenant,
                       int *tokens, char *why, size_t cap) {
    sess_record r;
    if (parse_record(b, n, &r)) return snprintf(why, cap, "not a session file (or truncated)"), ZL_EFORMAT;
    if ((want_id && strcmp(want_id, r.id)) || (want_tenant && strcmp(want_tenant, r.tenant)))
        return snprintf(why, cap, "the record names another session"), ZL_EFORMAT;
    if (zl_wall_s() - r.last > ttl_of(srv)) return snprintf(why, cap, "expired"), ZL_ERANGE;
    zl_err err = {0};
    zl_seq *q = new_seq(srv, &err);
    if (!q) return snprintf(why, cap, "%s", err.msg), err.code ? err.code : ZL_ENOMEM;
    zl_snap_info info;
    if (unseal(srv, &r, q, &info, &err)) {
        zl_seq_free(q);
        return snprintf(why, cap, "%s", err.msg), ZL_EINVAL;
    }
    zl_session_info in;
    zl_sess_status st = zl_sessions_create_with(srv->sessions, r.id, r.tenant, r.created, q, info.history,
                                                info.history_len, &in);
    free(info.history);
    if (st != ZL_SESS_OK) {
        seq_zero_free(q);
        return snprintf(why, cap, "session store: %s", zl_sess_status_name(st)), st == ZL_SESS_BUSY ? ZL_ERANGE : ZL_EINVAL;
    }
    *tokens = info.n_tokens;
    return 0;
}

int zl_state_store_load_all(zl_srv *srv, zl_err *err) {
    if (!srv->store) return 0;
    char **keys = NULL, pre[64];
    int nk = 0;
    model_prefix(srv, pre);
    int rc = zl_store_list(srv->store, pre, &keys, &nk, err);
    if (rc == ZL_EUNSUP) return 0; /* a shared store: sessions load when a request names them */
    if (rc) return rc;
    int restored = 0, skipped = 0;
    long tokens = 0;
    const char *dir = srv->o.state_dir;
    for (int k = 0; k < nk; k++) {
        char why[512];
        uint8_t *v = NULL;
        size_t n = 0;
        zl_err ge = {0};
        int t = 0;
        if (zl_store_get(srv->store, keys[k], &v, &n, &ge) || !v)
            snprintf(why, sizeof why, "%s", v ? ge.msg : "cannot read it");
        else if (!load_record(srv, v, n, NULL, NULL, &t, why, sizeof why)) {
            restored++;
            tokens += t;
            free(v);
            continue;
        }
        free(v);
        fprintf(stderr, "zerolayer: %s: %s/%s" ZL_STORE_DIR_EXT " not restored: %s\n", flag_of(srv), dir ? dir : "",
                keys[k], why);
        skipped++;
    }
    zl_store_keys_free(keys, nk);
    fprintf(stderr, "zerolayer: %s: restored %d sessions (%ld tokens) from %s, %d not (model '%s')\n", flag_of(srv),
            restored, tokens, dir ? dir : srv->store->desc, skipped, srv->model_id);
    return 0;
}

zl_fetch_result zl_state_store_fetch(zl_srv *srv, const char *id, const char *tenant) {
    if (!srv->store) return ZL_FETCH_MISS;
    char key[320], why[512];
    store_key(srv, tenant, id, key, sizeof key);
    uint8_t *v = NULL;
    size_t n = 0;
    zl_err err = {0};
    double t0 = zl_now_ms();
    int rc = zl_store_get(srv->store, key, &v, &n, &err);
    if (rc) {
        zl_metrics_store_load(ZL_FETCH_DOWN, 0);
        return ZL_FETCH_DOWN;
    }
    if (!v) {
        zl_metrics_store_load(ZL_FETCH_MISS, 0);
        return ZL_FETCH_MISS;
    }
    int t = 0;
    rc = load_record(srv, v, n, id, tenant, &t, why, sizeof why);
    OPENSSL_cleanse(v, n);
    free(v);
    zl_fetch_result res = !rc ? ZL_FETCH_LOADED : rc == ZL_ERANGE ? ZL_FETCH_MISS : ZL_FETCH_BAD;
    if (res == ZL_FETCH_BAD) fprintf(stderr, "zerolayer: %s: session %s not loaded: %s\n", flag_of(srv), id, why);
    zl_metrics_store_load(res, zl_now_ms() - t0);
    return res;
}

void zl_state_store_drop(zl_srv *srv, const char *id, const char *tenant) {
    if (!srv->store) return;
    char key[320];
    store_key(srv, tenant, id, key, sizeof key);
    zl_store_del(srv->store, key, NULL);
}

/* ---------------- spilling (the session store's hooks) ---------------- */

static int spill_put(void *ud, const char *id, const char *tenant, double created, double last, const zl_seq *seq,
                     const uint8_t *code, size_t code_bytes, const char *hist, size_t *stored) {
    zl_srv *srv = ud;
    zl_session_ref ref = {.created_unix = created, .last_used_unix = last};
    snprintf(ref.id, sizeof ref.id, "%s", id);
    snprintf(ref.tenant, sizeof ref.tenant, "%s", tenant);
    const zl_codec *c = zl_state_codec(srv);
    zl_err err = {0};
    zl_seq *rows = NULL;
    int rc = 0;
    if (!seq) { /* held coded in memory: its rows are rebuilt to be sealed (coding them again loses nothing more) */
        if (!c) rc = zl_errf(&err, ZL_EINVAL, "a coded session but no codec");
        else if (!(rows = new_seq(srv, &err))) rc = err.code ? err.code : ZL_ENOMEM;
        else rc = zl_coded_unpack(c, rows, code, code_bytes, &err);
        seq = rows;
    }
    uint8_t *rec = NULL;
    size_t n = 0;
    if (!rc) rc = seal_record(srv, &ref, seq, hist, c, &rec, &n, &err);
    if (!rc) rc = put_record(srv, &ref, rec, n, &err);
    if (!rc) *stored = n;
    else if (rc != ZL_EIO) /* an outage is reported once, by store.c */
        fprintf(stderr, "zerolayer: %s: session %s not spilled (evicted): %s\n", flag_of(srv), id, err.msg);
    if (rec) OPENSSL_cleanse(rec, n);
    free(rec);
    seq_zero_free(rows);
    return rc;
}

static int spill_get(void *ud, const char *id, const char *tenant, zl_seq *seq) {
    zl_srv *srv = ud;
    char key[320];
    store_key(srv, tenant, id, key, sizeof key);
    uint8_t *v = NULL;
    size_t n = 0;
    zl_err err = {0};
    sess_record r;
    zl_snap_info info = {0};
    int rc = zl_store_get(srv->store, key, &v, &n, &err);
    if (!rc && !v) rc = zl_errf(&err, ZL_EINVAL, "its record is gone from the store");
    else if (!rc && parse_record(v, n, &r)) rc = zl_errf(&err, ZL_EFORMAT, "not a session record (or truncated)");
    else if (!rc && (strcmp(r.id, id) || strcmp(r.tenant, tenant)))
        rc = zl_errf(&err, ZL_EFORMAT, "the record names another session");
    else if (!rc && unseal(srv, &r, seq, &info, &err)) rc = err.code ? err.code : ZL_EINVAL;
    if (rc) fprintf(stderr, "zerolayer: %s: spilled session %s not read back: %s\n",
                    flag_of(srv), id, err.msg);
    free(info.history); /* the session store kept the conversation in memory */
    if (v) OPENSSL_cleanse(v, n);
    free(v);
    return rc;
}

static void spill_drop(void *ud, const char *id, const char *tenant) { zl_state_store_drop(ud, id, tenant); }

void zl_state_store_spill(zl_srv *srv, zl_sessions_spill *out) {
    memset(out, 0, sizeof *out);
    if (srv->store) *out = (zl_sessions_spill){spill_put, spill_get, spill_drop, srv};
}

void zl_state_store_metrics(zl_srv *srv, zl_buf *o) {
    if (!srv->store) return;
    zl_store_stats st;
    zl_store_stats_get(srv->store, &st);
    zl_buf_printf(o,
                  "# HELP zerolayer_state_store_up Whether the state store answered its last call (1) or not (0).\n"
                  "# TYPE zerolayer_state_store_up gauge\nzerolayer_state_store_up %d\n"
                  "# HELP zerolayer_state_store_errors_total State store calls that failed (outage: sessions local).\n"
                  "# TYPE zerolayer_state_store_errors_total counter\nzerolayer_state_store_errors_total %llu\n"
                  "# HELP zerolayer_state_store_put_bytes_total Bytes of sealed sessions written to the state store.\n"
                  "# TYPE zerolayer_state_store_put_bytes_total counter\nzerolayer_state_store_put_bytes_total %llu\n"
                  "# HELP zerolayer_state_store_put_seconds_total Time spent writing to the state store.\n"
                  "# TYPE zerolayer_state_store_put_seconds_total counter\nzerolayer_state_store_put_seconds_total %.6f\n"
                  "# HELP zerolayer_state_store_get_seconds_total Time spent reading the state store.\n"
                  "# TYPE zerolayer_state_store_get_seconds_total counter\nzerolayer_state_store_get_seconds_total %.6f\n",
                  st.up, (unsigned long long)st.errors, (unsigned long long)st.put_bytes, st.put_ms / 1e3,
                  st.get_ms / 1e3);
}
