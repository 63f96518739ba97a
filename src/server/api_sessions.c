/* api_sessions.c — sessions over HTTP: create/get/delete/flush, typing-ahead
 * prefill, and the per-request glue that puts every generation through the
 * session store and the tenant's prefix cache (runtime/session.h).
 *
 * Tenants: the API key when keys are configured, otherwise the body's `user`
 * / `metadata.user_id`, else the X-Zerolayer-User header, else "anonymous";
 * always kept as "key:" / "user:" + the hex SHA-256 of the whole identity,
 * so a tenant string has a fixed size and two identities never share one
 * however long they are (zl_tenant_derive).
 *
 * Tokens (sess_token.h) are HMACs of id, tenant and creation time; another
 * tenant's (or an altered, or forged) token fails the MAC -> 403.
 * The secret is random per start unless --session-secret-file names a file
 * (its SHA-256 is the key), which lets tokens survive a restart's checks
 * and be checked by every replica; the sessions themselves survive only in a
 * state store (state_store.c), from which a replica loads a session it does
 * not hold. */
#include <ctype.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../base/clock.h"
#include "../base/err.h"
#include "../runtime/store.h"
#include "../state/snapshot.h"
#include "lease.h"
#include "openai.h"
#include "pipeline.h"
#include "routes.h"
#include "sess_token.h"

struct zl_sess_req {
    zl_srv *srv;
    char tenant[ZL_TENANT_CAP];
    char id[80];
    int append;
    int prefill; /* typing-ahead: the job is evaluated, never sampled (zl_job_lease) */
    json_t *conv; /* this request's whole conversation, [{role, content}] */
    json_t *hist; /* stored conversation (append mode); owns strings that merged messages point to */
};

/* ---------------- setup, tenants, tokens ---------------- */

int zl_sessions_setup(zl_srv *srv, zl_err *err) {
    const zl_server_opts *o = &srv->o;
    if (o->session_secret_file) {
        FILE *f = fopen(o->session_secret_file, "rb");
        if (!f) return zl_errf(err, ZL_EIO, "--session-secret-file: cannot open %s", o->session_secret_file);
        unsigned char buf[4096];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        if (n < 16)
            return zl_errf(err, ZL_EINVAL, "--session-secret-file: %s holds %zu bytes; at least 16 are needed",
                           o->session_secret_file, n);
        SHA256(buf, n, srv->sess_secret);
        OPENSSL_cleanse(buf, sizeof buf);
    } else if (RAND_bytes(srv->sess_secret, sizeof srv->sess_secret) != 1) {
        return zl_errf(err, ZL_EIO, "cannot draw a random session secret");
    }
    srv->sess_secret_len = sizeof srv->sess_secret;
    zl_sessions_opts so = {
        .ttl_s = o->session_ttl_s,
        .prefill_idle_s = o->prefill_idle_s,
        .max_per_tenant = o->sessions_per_tenant,
        .kv_budget = o->session_kv_budget,
        .pcache_bytes = o->prefix_cache_bytes < 0 ? 0 : o->prefix_cache_bytes ? (size_t)o->prefix_cache_bytes : (size_t)256 << 20,
        .pcache_block = 16,
    };
    int rc = zl_state_setup(srv, err);
    if (!rc) rc = zl_state_idle_codec(srv, &so.codec, err);
    if (!rc) rc = zl_state_store_setup(srv, &so.persist, err);
    if (!rc) zl_state_store_spill(srv, &so.spill);
    if (!rc) rc = zl_sessions_new(&srv->sessions, &so, err);
    if (rc) zl_state_free(srv);
    return rc;
}

static void hex(const unsigned char *b, size_t n, char *out) {
    for (size_t i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", b[i]);
}

void zl_tenant_derive(const char *api_key, const char *user, char out[ZL_TENANT_CAP]) {
    unsigned char d[32];
    char h[65];
    const char *id = api_key ? api_key : user;
    if (!api_key && (!user || !*user)) {
        snprintf(out, ZL_TENANT_CAP, "anonymous");
        return;
    }
    SHA256((const unsigned char *)id, strlen(id), d);
    hex(d, 32, h);
    snprintf(out, ZL_TENANT_CAP, "%s:%s", api_key ? "key" : "user", h);
}

void zl_tenant_of(zl_req *r, const char *user, char out[ZL_TENANT_CAP]) {
    if (r->srv->o.n_api_keys) {
        const char *key = zl_req_api_key(zl_req_header, r->conn);
        zl_tenant_derive(key ? key : "", NULL, out);
        return;
    }
    if (!user || !*user) user = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-Zerolayer-User");
    zl_tenant_derive(NULL, user, out);
}

/* ---------------- errors ---------------- */

/* Session errors are the API's own error shape (zl_error_json_code) with the
 * store's reason as the code. */
enum MHD_Result zl_sess_error(zl_req *r, zl_ekind kind, const char *reason, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int status;
    json_t *j = zl_error_json_code(r->api, kind, NULL, reason, msg, &status);
    return zl_reply_json(r, status, j, NULL);
}

json_t *zl_sess_status_json(zl_api api, zl_sess_status st, const char *id, double ttl_s, int *status) {
    /* per status: the error kind, the reason code and the message (%s: the id; EXPIRED: then the ttl) */
    static const struct { zl_sess_status st; zl_ekind kind; const char *reason, *fmt; } t[] = {
        {ZL_SESS_UNKNOWN, ZL_E_NOT_FOUND, "not_found", "session %s does not exist"},
        {ZL_SESS_TENANT, ZL_E_FORBIDDEN, "forbidden", "session %s belongs to another tenant"},
        {ZL_SESS_EXPIRED, ZL_E_GONE, "expired", "session %s expired after %.0f s idle; create a new one"},
        {ZL_SESS_EVICTED, ZL_E_GONE, "evicted",
         "session %s was evicted (KV memory budget or per-tenant session bound); create a new one"},
        {ZL_SESS_DELETED, ZL_E_GONE, "deleted", "session %s was deleted"},
        {ZL_SESS_BUSY, ZL_E_CONFLICT, "busy", "session %s is running another request; one request at a time"},
        {ZL_SESS_LIMIT, ZL_E_RATE_LIMIT, "limit", "this tenant has the most sessions allowed and all of them are busy%s"},
    };
    char msg[512];
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        if (t[i].st != st) continue;
        if (st == ZL_SESS_EXPIRED) snprintf(msg, sizeof msg, t[i].fmt, id, ttl_s);
        else if (st == ZL_SESS_LIMIT) snprintf(msg, sizeof msg, t[i].fmt, "");
        else snprintf(msg, sizeof msg, t[i].fmt, id);
        return zl_error_json_code(api, t[i].kind, NULL, t[i].reason, msg, status);
    }
    return zl_error_json_code(api, ZL_E_INTERNAL, NULL, "internal", "session error", status);
}

static enum MHD_Result status_reply(zl_req *r, zl_sess_status st, const char *id) {
    int status;
    json_t *j = zl_sess_status_json(r->api, st, id, zl_sessions_get_opts(r->srv->sessions)->ttl_s, &status);
    return zl_reply_json(r, status, j, NULL);
}

enum MHD_Result zl_sess_status_reply(zl_req *r, zl_sess_status st, const char *id) { return status_reply(r, st, id); }

static enum MHD_Result bad_token(zl_req *r) {
    return zl_sess_error(r, ZL_E_FORBIDDEN, "invalid_token",
                      "session token rejected: it is malformed, altered, forged, or belongs to another tenant");
}

/* ---------------- sessions held elsewhere (the state store) ---------------- */

/* A session this replica does not hold (never had, or evicted for memory)
 * may be in the state store: another replica wrote it, or this one did
 * before it restarted.  Load it, then look again.  *down: the store did not
 * answer, so "unknown" is not known. */
static int held_or_loaded(zl_srv *srv, const char *id, const char *tenant, int *down) {
    *down = 0;
    if (!srv->store) return 0;
    zl_session_info in;
    zl_sess_status st = zl_sessions_info(srv->sessions, id, tenant, &in);
    if (st != ZL_SESS_UNKNOWN && st != ZL_SESS_EVICTED) return 0;
    zl_fetch_result fr = zl_state_store_fetch(srv, id, tenant);
    *down = fr == ZL_FETCH_DOWN;
    return fr == ZL_FETCH_LOADED;
}

static enum MHD_Result store_down(zl_req *r, const char *id) {
    return zl_reply_error(r, ZL_E_UNAVAILABLE, NULL,
                          "session %s is not on this replica and the state store does not answer; retry shortly", id);
}

/* ---------------- per generation request ---------------- */

static const char *token_from(zl_req *r, json_t *body) {
    const char *t = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-Zerolayer-Session");
    json_t *b = body ? json_object_get(body, "session") : NULL;
    if (!t && b && json_is_string(b)) t = json_string_value(b);
    return t;
}

static void sess_req_free(zl_sess_req *c) {
    if (!c) return;
    json_decref(c->conv);
    json_decref(c->hist);
    free(c);
}

int zl_sess_open(zl_req *r, json_t *body, const char *user, zl_sess_req **out) {
    *out = NULL;
    zl_sess_req *c = calloc(1, sizeof *c);
    if (!c) { zl_reply_error(r, ZL_E_INTERNAL, NULL, "out of memory"); return -1; }
    c->srv = r->srv;
    zl_tenant_of(r, user, c->tenant);
    json_t *bs = body ? json_object_get(body, "session") : NULL;
    if (bs && !json_is_string(bs) && !json_is_null(bs)) {
        zl_reply_error(r, ZL_E_INVALID, "session", "session: expected a session token string");
        free(c);
        return -1;
    }
    const char *mode = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-Zerolayer-Session-Mode");
    if (mode && strcasecmp(mode, "append") && strcasecmp(mode, "full")) {
        zl_reply_error(r, ZL_E_INVALID, NULL, "X-Zerolayer-Session-Mode: '%s' is not \"append\" or \"full\"", mode);
        free(c);
        return -1;
    }
    c->append = mode && !strcasecmp(mode, "append");
    const char *tok = token_from(r, body);
    if (!tok && c->append) {
        zl_reply_error(r, ZL_E_INVALID, NULL, "X-Zerolayer-Session-Mode: append needs a session");
        free(c);
        return -1;
    }
    if (tok) {
        if (zl_sess_token_check(r->srv->sess_secret, r->srv->sess_secret_len, tok, c->tenant, c->id, sizeof c->id)) {
            bad_token(r);
            free(c);
            return -1;
        }
        int down = 0;
        zl_sess_status st = zl_sessions_begin(r->srv->sessions, c->id, c->tenant);
        if ((st == ZL_SESS_UNKNOWN || st == ZL_SESS_EVICTED) && held_or_loaded(r->srv, c->id, c->tenant, &down))
            st = zl_sessions_begin(r->srv->sessions, c->id, c->tenant);
        if (st != ZL_SESS_OK) {
            if (down && st == ZL_SESS_UNKNOWN) store_down(r, c->id);
            else status_reply(r, st, c->id);
            free(c);
            return -1;
        }
        snprintf(r->sess_id, sizeof r->sess_id, "%s", c->id);
        zl_seq_opts so = {zl_sched_n_ctx(r->srv->sched), ZL_KV_F16, zl_sampling_defaults()}; /* as the engine's */
        zl_sessions_rebuild(r->srv->sessions, c->id, r->srv->llm, &so); /* decoded here, not on the engine thread */
    }
    *out = c;
    return 0;
}

int zl_sess_merge(zl_sess_req *c, zl_req *r, const zl_chat_msg *msgs, int n, zl_chat_msg **all, int *n_all) {
    *all = NULL;
    *n_all = 0;
    if (c->append && c->id[0]) {
        char *h = zl_sessions_history(r->srv->sessions, c->id, c->tenant);
        if (h) c->hist = json_loads(h, 0, NULL);
        free(h);
    }
    int nh = c->hist ? (int)json_array_size(c->hist) : 0;
    /* the stored conversation already has its system prompt */
    int skip = nh > 0 && n > 0 && !strcmp(msgs[0].role, "system");
    zl_chat_msg *m = calloc((size_t)(nh + n + 1), sizeof *m);
    c->conv = json_array();
    if (!m || !c->conv) {
        free(m);
        zl_reply_error(r, ZL_E_INTERNAL, NULL, "out of memory");
        return -1;
    }
    int k = 0;
    for (int i = 0; i < nh; i++) {
        json_t *x = json_array_get(c->hist, (size_t)i);
        const char *role = json_string_value(json_object_get(x, "role"));
        const char *content = json_string_value(json_object_get(x, "content"));
        if (role && content) m[k++] = (zl_chat_msg){role, content};
    }
    for (int i = skip; i < n; i++) m[k++] = msgs[i];
    for (int i = 0; i < k; i++)
        json_array_append_new(c->conv, json_pack("{s:s, s:s}", "role", m[i].role, "content", m[i].content));
    *all = m;
    *n_all = k;
    return 0;
}

static int hook_job(void *ud, zl_job *j, int choice) {
    zl_sess_req *c = ud;
    return zl_job_lease(j, c->srv->sessions, c->tenant, choice == 0 && c->id[0] ? c->id : NULL, c->prefill);
}

static void on_end(zl_gen *g, void *ud) {
    zl_sess_req *c = ud;
    if (c->id[0] && g) { /* before the session ends: still this request's figures */
        zl_session_restore ri;
        zl_sessions_restore_info(c->srv->sessions, c->id, &ri);
        g->state = (zl_gen_state){(int)ri.from, ri.ok, ri.tokens, (double)ri.bytes, (double)ri.exact_bytes,
                                  ri.store_ms, ri.load_ms};
    }
    if (c->id[0]) {
        char *hist = NULL;
        if (g && c->conv && g->n == 1 &&
            (g->ch[0].end == ZL_GEN_EOG || g->ch[0].end == ZL_GEN_LENGTH || g->ch[0].end == ZL_GEN_STOP)) {
            const zl_buf *t = &g->ch[0].text;
            json_array_append_new(c->conv, json_pack("{s:s, s:o}", "role", "assistant", "content",
                                                     zl_json_lossy_string(t->p ? t->p : "", t->n)));
            hist = json_dumps(c->conv, JSON_COMPACT);
        }
        zl_sessions_end(c->srv->sessions, c->id, hist, hist ? strlen(hist) : 0);
        free(hist);
    }
    sess_req_free(c);
}

void zl_sess_params(zl_sess_req *c, zl_gen_params *gp) {
    gp->hook_job = hook_job;
    gp->hook_ud = c;
    gp->on_end = on_end;
    gp->end_ud = c;
}

void zl_sess_close(zl_sess_req *c) {
    if (!c) return;
    if (c->id[0]) zl_sessions_end(c->srv->sessions, c->id, NULL, 0);
    sess_req_free(c);
}

/* ---------------- routes ---------------- */

static json_t *info_json(const zl_session_info *in) {
    return json_pack("{s:s, s:s, s:I, s:I, s:I, s:i, s:i, s:I, s:b}", "id", in->id, "object", "session",
                     "created_at", (json_int_t)in->created_unix, "last_used_at", (json_int_t)in->last_used_unix,
                     "expires_at", (json_int_t)(in->expires_unix + 0.999), "cached_tokens", in->n_tokens,
                     "committed_tokens", in->committed, "kv_bytes", (json_int_t)in->kv_bytes, "busy", in->busy);
}

static const char *body_user(json_t *b) {
    if (!b) return NULL;
    const char *u = json_string_value(json_object_get(b, "user"));
    if (!u) u = json_string_value(json_object_get(json_object_get(b, "metadata"), "user_id"));
    return u;
}

static enum MHD_Result sess_create(zl_req *r, json_t *b) {
    char tenant[ZL_TENANT_CAP], id[80], created[24];
    zl_tenant_of(r, body_user(b), tenant);
    zl_rand_id(id, sizeof id, "zs_");
    long long ms = zl_wall_ms();
    snprintf(created, sizeof created, "%lld", ms);
    zl_session_info in;
    zl_seq *restored = NULL; /* POST {"state"}: the session starts from a snapshot (api_state.c) */
    zl_snap_info si = {0};
    if (((b && json_object_get(b, "state")) || r->body_blob) && zl_state_restore(r, b, tenant, &restored, &si))
        return MHD_YES;
    zl_sess_status st = restored ? zl_sessions_create_with(r->srv->sessions, id, tenant, (double)ms / 1e3, restored,
                                                           si.history, si.history_len, &in)
                                 : zl_sessions_create(r->srv->sessions, id, tenant, (double)ms / 1e3, &in);
    free(si.history);
    if (st != ZL_SESS_OK) zl_state_seq_free(restored);
    if (st != ZL_SESS_OK) return status_reply(r, st, id);
    /* With a shared state store the new session goes there at once and does not stay here: the load balancer
     * routes its requests by the token, which may lead to another replica, and a copy kept here would go stale.
     * If the store does not answer, the session is local only (store.c warned). */
    if (r->srv->store && !zl_state_store_write_now(r->srv, id, tenant, (double)ms / 1e3) &&
        zl_store_shared(r->srv->store))
        zl_sessions_forget(r->srv->sessions, id, tenant);
    char token[200];
    if (zl_sess_token_make(r->srv->sess_secret, r->srv->sess_secret_len, id, tenant, created, token, sizeof token))
        return zl_reply_error(r, ZL_E_INTERNAL, NULL, "cannot mint a token for session %s", id);
    json_t *j = info_json(&in);
    json_object_set_new(j, "token", json_string(token));
    if (restored) {
        json_object_set_new(j, "tokens", json_integer(si.n_tokens));
        json_object_set_new(j, "codec", json_string(si.learned ? "learned" : "exact"));
    }
    return zl_reply_json(r, 200, j, NULL);
}

/* The prefill body's turns into q: an optional top-level `system` (a string
 * or text parts), `messages` as the chat route reads them (full history or,
 * in append mode, the new ones; empty before `text`), then `text` (a partial
 * user turn). */
static int prefill_turns(json_t *b, zl_request *q, zl_verr *e) {
    json_t *msgs = json_object_get(b, "messages"), *text = json_object_get(b, "text"), *sys = json_object_get(b, "system");
    if (text && !json_is_string(text)) return zl_verr_set(e, "text", "text: expected a string");
    if (!msgs && !text) return zl_verr_set(e, "messages", "prefill needs `messages`, `text` or `prompt`");
    zl_buf *t;
    if (sys && !json_is_null(sys)) {
        if (!(t = zl_request_add_msg(q, "system"))) return zl_verr_set(e, "", "out of memory");
        if (zl_jv_text_parts(sys, "system", "content parts", t, e) < 0) return -1;
        zl_buf_puts(t, "");
        if (t->oom) return zl_verr_set(e, "", "out of memory");
    }
    if (msgs && !(text && json_is_array(msgs) && !json_array_size(msgs)) &&
        (!zl_jv_messages(b, e) || zl_oai_parse_messages(msgs, q, e) < 0))
        return -1;
    if (text && (!(t = zl_request_add_msg(q, "user")) || (zl_buf_puts(t, json_string_value(text)), t->oom)))
        return zl_verr_set(e, "", "out of memory");
    return 0;
}

/* The counts of a finished typing-ahead generation g on session id. */
static enum MHD_Result prefill_reply(zl_req *r, zl_gen *g, const char *id) {
    zl_job_report t;
    zl_job_get_report(r->srv->sched, g->ch[0].job, &t);
    if (g->ch[0].end == ZL_GEN_ERROR) return zl_sess_error(r, ZL_E_INTERNAL, "internal", "prefill failed: %s", t.error);
    int n = g->n_prompt[0];
    return zl_reply_json(r, 200,
                         json_pack("{s:s, s:s, s:i, s:i, s:i, s:f}", "object", "session.prefill", "id", id,
                                   "cached_tokens", n, "reused_tokens", t.n_cached, "prefilled_tokens", n - t.n_cached,
                                   "prefill_ms", t.t_done > t.t_admit ? t.t_done - t.t_admit : 0.0),
                         NULL);
}

/* Typing-ahead on session id: `prompt` (text or token ids, read as a
 * completion's), else the turns of prefill_turns after the session's stored
 * ones in append mode (the X-Zerolayer-Session-Mode header, or `text`
 * alone).  The pipeline renders, tokenizes, limits and submits it as a
 * request on the session (full KV: no controls, no anchors); the job is
 * evaluated, never sampled, and kept uncommitted (zl_job_lease). */
static enum MHD_Result sess_prefill(zl_req *r, json_t *b, const char *id, const char *tenant) {
    const char *mode = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-Zerolayer-Session-Mode");
    json_t *prompt = json_object_get(b, "prompt");
    zl_sess_req c = {.srv = r->srv, .prefill = 1};
    snprintf(c.id, sizeof c.id, "%s", id);
    snprintf(c.tenant, sizeof c.tenant, "%s", tenant);
    c.append = (mode && !strcasecmp(mode, "append")) || (!json_object_get(b, "messages") && json_object_get(b, "text"));
    snprintf(r->sess_id, sizeof r->sess_id, "%s", id);
    enum MHD_Result ret = MHD_YES;
    zl_verr e = {{0}, {0}};
    zl_request q;
    zl_prepared p;
    memset(&p, 0, sizeof p);
    zl_request_init(&q, prompt ? ZL_REQ_COMPLETION : ZL_REQ_CHAT, b);
    q.sampling.temp = 0; /* nothing is sampled */
    q.max_tokens = 1;
    if (prompt ? zl_oai_parse_prompt(prompt, "prompt", &q, &e) : prefill_turns(b, &q, &e)) {
        ret = zl_reply_verr(r, -1, &e);
        goto out;
    }
    if (zl_pipeline_ready(r, &q, &c, NULL, &p)) goto out; /* replied */
    p.gp.hook_job = hook_job;
    p.gp.hook_ud = &c;
    zl_gen *g = zl_pipeline_start(r, &p);
    if (!g) goto out;
    ret = zl_gen_wait_all(r, g) ? MHD_NO : prefill_reply(r, g, id);
    zl_gen_free(g);
out:
    zl_prepared_free(&p);
    zl_request_free(&q);
    json_decref(c.conv);
    json_decref(c.hist);
    return ret;
}

typedef enum { SESS_GET, SESS_DELETE, SESS_FLUSH, SESS_PREFILL, SESS_SNAPSHOT } sess_op;

/* The routes on one session (r->path_id): the token must be the caller's
 * for that session. */
static enum MHD_Result sess_op_run(zl_req *r, json_t *b, sess_op op) {
    const char *id = r->path_id;
    char tenant[ZL_TENANT_CAP], tid[80];
    zl_tenant_of(r, body_user(b), tenant);
    const char *tok = token_from(r, b);
    zl_sessions *ss = r->srv->sessions;
    zl_sess_status st;
    if (!tok) return zl_sess_error(r, ZL_E_FORBIDDEN, "missing_token", "this route needs the session token (X-Zerolayer-Session)");
    if (zl_sess_token_check(r->srv->sess_secret, r->srv->sess_secret_len, tok, tenant, tid, sizeof tid) || strcmp(tid, id)) return bad_token(r);
    int down = 0;
    held_or_loaded(r->srv, id, tenant, &down);
    if (down && zl_sessions_info(ss, id, tenant, &(zl_session_info){0}) == ZL_SESS_UNKNOWN) return store_down(r, id);
    switch (op) {
    case SESS_GET: {
        zl_session_info in;
        st = zl_sessions_info(ss, id, tenant, &in);
        return st ? status_reply(r, st, id) : zl_reply_json(r, 200, info_json(&in), NULL);
    }
    case SESS_DELETE:
        st = zl_sessions_delete(ss, id, tenant);
        if (!st) zl_state_store_drop(r->srv, id, tenant);
        return st ? status_reply(r, st, id)
                  : zl_reply_json(r, 200, json_pack("{s:s, s:s, s:b}", "id", id, "object", "session", "deleted", 1),
                                  NULL);
    case SESS_FLUSH:
        st = zl_sessions_flush(ss, id, tenant);
        return st ? status_reply(r, st, id)
                  : zl_reply_json(r, 200, json_pack("{s:s, s:s, s:b, s:i}", "id", id, "object", "session", "flushed",
                                                    1, "cached_tokens", 0),
                                  NULL);
    case SESS_SNAPSHOT:
        return zl_api_snapshot(r, b, id, tenant);
    case SESS_PREFILL:
        break;
    }
    if (!b) return zl_reply_error(r, ZL_E_INVALID, NULL, "prefill needs a JSON body with `messages` or `text`");
    if ((st = zl_sessions_begin(ss, id, tenant))) return status_reply(r, st, id);
    enum MHD_Result ret = sess_prefill(r, b, id, tenant);
    zl_sessions_end(ss, id, NULL, 0);
    return ret;
}

enum MHD_Result zl_api_session_create(zl_req *r, json_t *b) { return sess_create(r, b); }
enum MHD_Result zl_api_session_get(zl_req *r, json_t *b) { return sess_op_run(r, b, SESS_GET); }
enum MHD_Result zl_api_session_delete(zl_req *r, json_t *b) { return sess_op_run(r, b, SESS_DELETE); }
enum MHD_Result zl_api_session_flush(zl_req *r, json_t *b) { return sess_op_run(r, b, SESS_FLUSH); }
enum MHD_Result zl_api_session_prefill(zl_req *r, json_t *b) { return sess_op_run(r, b, SESS_PREFILL); }
enum MHD_Result zl_api_session_snapshot(zl_req *r, json_t *b) { return sess_op_run(r, b, SESS_SNAPSHOT); }

void zl_sessions_metrics(zl_srv *srv, zl_buf *o) {
    zl_sessions_stats st;
    zl_sessions_stats_get(srv->sessions, &st);
    zl_buf_printf(o,
                  "# HELP zerolayer_prefix_cache_hit_tokens_total Prompt tokens served from the prefix cache.\n"
                  "# TYPE zerolayer_prefix_cache_hit_tokens_total counter\nzerolayer_prefix_cache_hit_tokens_total %llu\n"
                  "# HELP zerolayer_prefix_cache_query_tokens_total Prompt tokens looked up in the prefix cache.\n"
                  "# TYPE zerolayer_prefix_cache_query_tokens_total counter\nzerolayer_prefix_cache_query_tokens_total %llu\n"
                  "# HELP zerolayer_prefix_cache_bytes KV bytes held by the prefix cache.\n"
                  "# TYPE zerolayer_prefix_cache_bytes gauge\nzerolayer_prefix_cache_bytes %zu\n"
                  "# HELP zerolayer_prefix_cache_entries Snapshots in the prefix cache.\n"
                  "# TYPE zerolayer_prefix_cache_entries gauge\nzerolayer_prefix_cache_entries %d\n"
                  "# HELP zerolayer_sessions_active Live sessions.\n"
                  "# TYPE zerolayer_sessions_active gauge\nzerolayer_sessions_active %d\n"
                  "# HELP zerolayer_sessions_expired_total Sessions expired after their idle TTL.\n"
                  "# TYPE zerolayer_sessions_expired_total counter\nzerolayer_sessions_expired_total %llu\n"
                  "# HELP zerolayer_sessions_evicted_total Sessions evicted (KV budget or per-tenant bound).\n"
                  "# TYPE zerolayer_sessions_evicted_total counter\nzerolayer_sessions_evicted_total %llu\n"
                  "# HELP zerolayer_sessions_kv_bytes KV bytes held by idle sessions (coded ones: their code).\n"
                  "# TYPE zerolayer_sessions_kv_bytes gauge\nzerolayer_sessions_kv_bytes %zu\n"
                  "# HELP zerolayer_sessions_coded Idle sessions held coded (--compress-idle).\n"
                  "# TYPE zerolayer_sessions_coded gauge\nzerolayer_sessions_coded %d\n"
                  "# HELP zerolayer_sessions_coded_total Idle sessions coded so far.\n"
                  "# TYPE zerolayer_sessions_coded_total counter\nzerolayer_sessions_coded_total %llu\n"
                  "# HELP zerolayer_sessions_decoded_total Coded sessions rebuilt for a request so far.\n"
                  "# TYPE zerolayer_sessions_decoded_total counter\nzerolayer_sessions_decoded_total %llu\n"
                  "# HELP zerolayer_codec_encode_seconds_total Time spent coding idle sessions.\n"
                  "# TYPE zerolayer_codec_encode_seconds_total counter\nzerolayer_codec_encode_seconds_total %.6f\n"
                  "# HELP zerolayer_codec_decode_seconds_total Time spent rebuilding coded sessions.\n"
                  "# TYPE zerolayer_codec_decode_seconds_total counter\nzerolayer_codec_decode_seconds_total %.6f\n"
                  "# HELP zerolayer_sessions_spilled Idle sessions spilled to --state-dir past --session-kv-mb.\n"
                  "# TYPE zerolayer_sessions_spilled gauge\nzerolayer_sessions_spilled %d\n"
                  "# HELP zerolayer_sessions_spilled_total Sessions spilled so far.\n"
                  "# TYPE zerolayer_sessions_spilled_total counter\nzerolayer_sessions_spilled_total %llu\n"
                  "# HELP zerolayer_sessions_unspilled_total Spilled sessions brought back by their next request.\n"
                  "# TYPE zerolayer_sessions_unspilled_total counter\nzerolayer_sessions_unspilled_total %llu\n"
                  "# HELP zerolayer_sessions_spill_failed_total Spills that failed (the session was evicted).\n"
                  "# TYPE zerolayer_sessions_spill_failed_total counter\nzerolayer_sessions_spill_failed_total %llu\n"
                  "# HELP zerolayer_sessions_spill_seconds_total Time spent spilling sessions.\n"
                  "# TYPE zerolayer_sessions_spill_seconds_total counter\nzerolayer_sessions_spill_seconds_total %.6f\n"
                  "# HELP zerolayer_sessions_unspill_seconds_total Time spent bringing spilled sessions back.\n"
                  "# TYPE zerolayer_sessions_unspill_seconds_total counter\nzerolayer_sessions_unspill_seconds_total %.6f\n"
                  "# HELP zerolayer_sessions_coded_ratio Bytes of the idle sessions' codes over the exact K+V bytes they stand for.\n"
                  "# TYPE zerolayer_sessions_coded_ratio gauge\nzerolayer_sessions_coded_ratio %.6f\n",
                  (unsigned long long)st.pcache.hit_tokens, (unsigned long long)st.pcache.query_tokens, st.pcache.bytes,
                  st.pcache.entries, st.active, (unsigned long long)st.expired_total,
                  (unsigned long long)st.evicted_total, st.kv_bytes, st.coded, (unsigned long long)st.coded_total,
                  (unsigned long long)st.decoded_total, st.encode_ms / 1e3, st.decode_ms / 1e3, st.spilled,
                  (unsigned long long)st.spilled_total, (unsigned long long)st.unspilled_total,
                  (unsigned long long)st.spill_failed_total, st.spill_ms / 1e3, st.unspill_ms / 1e3,
                  st.encoded_exact_bytes ? (double)st.encoded_bytes / (double)st.encoded_exact_bytes : 0.0);
    if (srv->store)
        zl_buf_printf(o,
                      "# HELP zerolayer_sessions_persisted_total Idle or every-N-turns writes of a session to the state store.\n"
                      "# TYPE zerolayer_sessions_persisted_total counter\nzerolayer_sessions_persisted_total %llu\n"
                      "# HELP zerolayer_sessions_persist_failed_total Such writes that failed (retried later).\n"
                      "# TYPE zerolayer_sessions_persist_failed_total counter\nzerolayer_sessions_persist_failed_total %llu\n"
                      "# HELP zerolayer_sessions_persist_seal_seconds_total Time sealing sessions for the state store.\n"
                      "# TYPE zerolayer_sessions_persist_seal_seconds_total counter\nzerolayer_sessions_persist_seal_seconds_total %.6f\n",
                      (unsigned long long)st.persisted_total, (unsigned long long)st.persist_failed_total,
                      st.persist_seal_ms / 1e3);
    zl_state_store_metrics(srv, o);
}
