/* models.c — several models behind one server, picked by the request's
 * `model` field.
 *
 * The first -m is the server's own zl_srv (loaded at start, never unloaded;
 * sessions, batches and /props belong to it).  Every other model gets a
 * zl_srv of its own (model, chat template from its file, engine thread,
 * session store), loaded on the first request that names it.  At most
 * --models-max are loaded at once: to load one more, the least recently
 * used loaded model that no request holds and whose engine is idle is
 * unloaded; the same to keep the loaded weights within --models-mb; when
 * every one is busy the request gets 429/529.  With --models-idle S a
 * sweeper thread unloads a model (not the first) nobody used for S seconds.  A request
 * holds its model from selection until its response is done (a stream until
 * its last byte: the hold moves to the stream).  With one model the field is
 * not looked at: any value keeps working.
 *
 * State belongs to its model.  Each --codec file names the fingerprint of
 * the model it was fitted on and goes to the served model with that
 * fingerprint (fingerprinted at start only when a file is not the first
 * model's); a file matching none, or two files for one model, stop the
 * start.  Session routes go to the model holding the session (the {id} in
 * the path or the session token's id, among the loaded models), else to the
 * body's `model`; a session request naming another model than the one
 * holding its session is a 409 model_mismatch.  Every model has the state
 * store (its records keyed by its fingerprint, state_store.c): a model
 * restores its sessions when it loads and writes them when it unloads.
 * Never formats generations. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "../base/clock.h"
#include "../codec/codec.h"
#include "../codec/fingerprint.h"
#include "http.h"
#include "metrics.h"
#include "sess_token.h"

typedef struct zl_model_slot {
    zl_models *ms;
    char id[256];
    const char *path;
    zl_srv *srv;      /* NULL while unloaded; slot 0 is the server's own */
    int refs;         /* requests and streams holding it */
    int loading;
    double last_used; /* zl_now_ms */
    uint64_t bytes;   /* the file's size: what loading it maps */
    const char *codec; /* its --codec file, or NULL */
} zl_model_slot;

struct zl_models {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* a load finished */
    zl_model_slot *m;
    int n, max_loaded;
    uint64_t budget;   /* bytes of loaded model files at most (0: no bound) */
    double idle_ms;    /* unload after this long unused (0: never) */
    pthread_t sweeper;
    int has_sweeper, stop;
    pthread_cond_t sweep_cv;
};

static uint64_t file_bytes(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

static void *sweep_main(void *arg);

static const char *base_name(const char *path) {
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

/* The model id of a path: its file name without .gguf. */
static void id_of(const char *path, char *out, size_t cap) {
    const char *b = base_name(path);
    size_t n = strlen(b);
    if (n > 5 && !strcmp(b + n - 5, ".gguf")) n -= 5;
    snprintf(out, cap, "%.*s", (int)n, b);
}

/* The fingerprint of the model at path (opened and closed again). */
static int fingerprint_path(const zl_server_opts *o, const char *path, uint8_t fp[32], zl_err *err) {
    zl_llm *llm = NULL;
    int rc = zl_llm_open(&llm, path, &o->llm_opts, err);
    if (!rc) rc = zl_fingerprint_llm(llm, fp, err);
    zl_llm_close(llm);
    return rc;
}

/* Attach each --codec file to the model whose fingerprint it names: one
 * model, its one file; several, every model fingerprinted as far as needed.
 * A file naming no served model, or a second file for a model, is an error;
 * zl_state_setup checks the file against its model again when that loads. */
static int assign_codecs(zl_srv *home, zl_models *ms, zl_err *err) {
    zl_server_opts *o = &home->o;
    if (o->n_codec_files <= 0) return 0;
    if (!ms) {
        if (o->n_codec_files > 1)
            return zl_errf(err, ZL_EINVAL, "--codec: %d files but one model is served (each file is one model's)",
                           o->n_codec_files);
        o->codec_file = o->codec_files[0];
        return 0;
    }
    uint8_t (*fp)[32] = calloc((size_t)ms->n, sizeof *fp);
    int *known = calloc((size_t)ms->n, sizeof *known), rc = 0;
    if (!fp || !known) rc = zl_errf(err, ZL_ENOMEM, "out of memory");
    if (!rc && !(rc = zl_fingerprint_llm(home->llm, fp[0], err))) known[0] = 1;
    for (int f = 0; !rc && f < o->n_codec_files; f++) {
        const char *path = o->codec_files[f];
        zl_codec *c = NULL;
        rc = zl_codec_load(&c, path, err);
        int hit = -1;
        for (int i = 0; !rc && hit < 0 && i < ms->n; i++) {
            if (!known[i] && !(rc = fingerprint_path(o, ms->m[i].path, fp[i], err))) known[i] = 1;
            if (!rc && !memcmp(c->fingerprint, fp[i], 32)) hit = i;
        }
        char hex[65] = "";
        if (c) zl_fingerprint_hex(c->fingerprint, hex);
        zl_codec_free(c);
        if (!rc && hit < 0) {
            rc = zl_errf(err, ZL_EINVAL, "model_mismatch: it was fitted on the model with fingerprint %.16s..., "
                                         "none of the %d models served", hex, ms->n);
        } else if (!rc && ms->m[hit].codec) {
            rc = zl_errf(err, ZL_EINVAL, "model '%s' has a codec already (%s)", ms->m[hit].id, ms->m[hit].codec);
        } else if (!rc) {
            ms->m[hit].codec = path;
            fprintf(stderr, "zerolayer: --codec %s: model '%s'\n", path, ms->m[hit].id);
        }
        if (rc) zl_err_prefix(err, "--codec %s", path);
    }
    if (!rc) o->codec_file = ms->m[0].codec;
    free(fp);
    free(known);
    return rc;
}

int zl_models_setup(zl_srv *home, zl_err *err) {
    const zl_server_opts *o = &home->o;
    if (o->n_models <= 0) return assign_codecs(home, NULL, err);
    zl_models *ms = calloc(1, sizeof *ms);
    if (!ms || !(ms->m = calloc((size_t)o->n_models + 1, sizeof *ms->m))) {
        free(ms);
        return zl_errf(err, ZL_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&ms->mu, NULL);
    pthread_cond_init(&ms->cv, NULL);
    ms->m[0] = (zl_model_slot){ms, {0}, o->model_path, home, 0, 0, 0, 0, NULL};
    if (!o->model_id) id_of(o->model_path, home->model_id, sizeof home->model_id); /* ids drop .gguf once there are several */
    snprintf(ms->m[0].id, sizeof ms->m[0].id, "%s", home->model_id);
    ms->n = 1;
    for (int i = 0; i < o->n_models; i++) {
        zl_model_slot *s = &ms->m[ms->n];
        s->ms = ms;
        s->path = o->models[i];
        if (o->model_aliases && o->model_aliases[i]) snprintf(s->id, sizeof s->id, "%s", o->model_aliases[i]);
        else id_of(s->path, s->id, sizeof s->id);
        for (int k = 0; k < ms->n; k++)
            if (!strcmp(ms->m[k].id, s->id)) {
                zl_errf(err, ZL_EINVAL, "two models have the id '%s' (give one --alias NAME)", s->id);
                free(ms->m);
                free(ms);
                return ZL_EINVAL;
            }
        ms->n++;
    }
    for (int i = 0; i < ms->n; i++) ms->m[i].bytes = file_bytes(ms->m[i].path);
    ms->max_loaded = o->models_max > 0 ? o->models_max : ms->n;
    ms->budget = o->models_budget;
    ms->idle_ms = o->models_idle_s * 1e3;
    pthread_cond_init(&ms->sweep_cv, NULL);
    home->models = ms;
    int rc = assign_codecs(home, ms, err);
    if (rc) {
        zl_models_free(home);
        return rc;
    }
    if (ms->idle_ms > 0 && pthread_create(&ms->sweeper, NULL, sweep_main, ms) == 0) ms->has_sweeper = 1;
    return 0;
}

/* ---- one model's server state ---- */

/* save: a loaded model's sessions go to the state store first (its next
 * load restores them); not after a failed load, whose store was never read. */
static void srv_free(zl_srv *c, int save) {
    if (!c) return;
    if (save) zl_state_store_save_all(c);
    zl_llm *llm = c->llm; /* this model's own, opened by srv_load */
    zl_srv_teardown(c);
    zl_llm_close(llm);
}

static int srv_load(const zl_srv *home, const zl_model_slot *m, zl_srv **out, zl_err *err) {
    *out = NULL;
    zl_srv *c = calloc(1, sizeof *c);
    if (!c) return zl_errf(err, ZL_ENOMEM, "out of memory");
    c->o = home->o;
    c->o.model_path = m->path;
    c->o.model_id = NULL;
    c->o.chat_template = NULL; /* --chat-template(-file) shape the first model's prompts only */
    c->o.chat_template_file = NULL;
    c->o.codec_file = m->codec;
    c->o.n_models = 0;
    c->started = (long long)time(NULL);
    snprintf(c->model_id, sizeof c->model_id, "%s", m->id);
    int rc = zl_llm_open(&c->llm, m->path, &home->o.llm_opts, err);
    if (!rc) rc = zl_chat_fmt_setup(&c->tpl, c->llm, NULL, NULL, err);
    if (!rc) rc = zl_sessions_setup(c, err);
    if (!rc) {
        zl_sched_opts so = home->o.sched;
        int train = zl_llm_n_ctx_train(c->llm);
        if (train > 0 && so.n_ctx > train) so.n_ctx = train;
        so.draft = NULL; /* the draft model matches the first model's vocabulary */
        so.ring_cost = NULL;
        so.n_ring_cost = 0;
        so.on_step = zl_srv_on_step;
        so.on_step_ud = c;
        rc = zl_sched_new(&c->sched, c->llm, &so, err);
    }
    if (!rc) rc = zl_state_store_load_all(c, err);
    if (rc) {
        zl_err_prefix(err, "model '%s' (%s)", m->id, m->path);
        srv_free(c, 0);
        return rc;
    }
    fprintf(stderr, "zerolayer: loaded model '%s': %s\n", m->id, zl_llm_desc(c->llm));
    *out = c;
    return 0;
}

/* Under mu: a loaded slot that can go (idle, not the server's own), least recently used first. */
static zl_model_slot *victim(zl_models *ms) {
    zl_model_slot *best = NULL;
    for (int i = 1; i < ms->n; i++) {
        zl_model_slot *s = &ms->m[i];
        if (!s->srv || s->refs || s->loading) continue;
        zl_sched_stats st;
        zl_sched_get_stats(s->srv->sched, &st);
        if (st.running || st.waiting) continue;
        if (!best || s->last_used < best->last_used) best = s;
    }
    return best;
}

static int n_loaded(const zl_models *ms) {
    int k = 0;
    for (int i = 0; i < ms->n; i++) k += ms->m[i].srv != NULL || ms->m[i].loading;
    return k;
}

static uint64_t loaded_bytes(const zl_models *ms) {
    uint64_t b = 0;
    for (int i = 0; i < ms->n; i++) b += ms->m[i].srv || ms->m[i].loading ? ms->m[i].bytes : 0;
    return b;
}

/* Under mu: room for s (a count and a byte budget). */
static int room_for(const zl_models *ms, const zl_model_slot *s) {
    return n_loaded(ms) < ms->max_loaded && (!ms->budget || loaded_bytes(ms) + s->bytes <= ms->budget);
}

/* Under mu (released while freeing): unload slot out. */
static void unload(zl_models *ms, zl_model_slot *out, const char *why) {
    zl_srv *gone = out->srv;
    out->srv = NULL;
    pthread_mutex_unlock(&ms->mu);
    fprintf(stderr, "zerolayer: unloading model '%s' (%s)\n", out->id, why);
    srv_free(gone, 1);
    pthread_mutex_lock(&ms->mu);
}

static void *sweep_main(void *arg) {
    zl_models *ms = arg;
    pthread_mutex_lock(&ms->mu);
    while (!ms->stop) {
        struct timespec ts = zl_deadline_ms(250);
        pthread_cond_timedwait(&ms->sweep_cv, &ms->mu, &ts);
        double now = zl_now_ms();
        for (int i = 1; i < ms->n && !ms->stop; i++) {
            zl_model_slot *s = &ms->m[i];
            if (!s->srv || s->refs || s->loading || now - s->last_used < ms->idle_ms) continue;
            zl_sched_stats st;
            zl_sched_get_stats(s->srv->sched, &st);
            if (st.running || st.waiting) continue;
            unload(ms, s, "idle past --models-idle");
        }
    }
    pthread_mutex_unlock(&ms->mu);
    return NULL;
}

/* The session a request is about: the {id} of a session route, else the id
 * in front of its session token (header or body); "" when none. */
static void session_of(const zl_req *r, json_t *body, char *out, size_t cap) {
    const char *t = r->path_id[0] ? r->path_id : zl_req_header(r->conn, "X-Zerolayer-Session");
    json_t *bs = body ? json_object_get(body, "session") : NULL;
    if (!t && json_is_string(bs)) t = json_string_value(bs);
    size_t n = t ? strcspn(t, ".") : 0;
    snprintf(out, cap, "%.*s", n < cap ? (int)n : 0, t ? t : "");
}

/* The loaded model holding session sid, or NULL. */
static zl_model_slot *holder_of(zl_models *ms, const char *sid) {
    zl_model_slot *held = NULL;
    if (!sid[0]) return NULL;
    pthread_mutex_lock(&ms->mu);
    for (int i = 0; i < ms->n && !held; i++)
        if (ms->m[i].srv && zl_sessions_check(ms->m[i].srv->sessions, sid) != ZL_SESS_UNKNOWN) held = &ms->m[i];
    pthread_mutex_unlock(&ms->mu);
    return held;
}

/* the slot the request names, or NULL having replied 404 */
static zl_model_slot *named(zl_req *r, zl_models *ms, const char *id, enum MHD_Result *ret) {
    for (int i = 0; i < ms->n; i++)
        if (!strcmp(ms->m[i].id, id)) return &ms->m[i];
    *ret = zl_reply_error(r, ZL_E_MODEL_NOT_FOUND, "model", "The model '%.200s' does not exist (GET /v1/models lists %d)",
                          id, ms->n);
    return NULL;
}

int zl_models_select(zl_req *r, json_t *body, enum MHD_Result *ret) {
    zl_models *ms = r->srv->models;
    if (!ms || ms->n < 2 || r->model_slot) return 0;
    json_t *mj = body ? json_object_get(body, "model") : NULL;
    const char *id = json_is_string(mj) ? json_string_value(mj) : NULL;
    if (!id && !json_is_string(mj)) /* a body without `model` (or none: GET, DELETE) may name it as ?model=ID */
        id = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "model");
    char sid[ZL_SESS_ID_CAP];
    session_of(r, body, sid, sizeof sid);
    zl_model_slot *s = holder_of(ms, sid);
    if (s && id && strcmp(s->id, id)) {
        *ret = zl_sess_error(r, ZL_E_CONFLICT, "model_mismatch", "session %s is on model '%s', not '%.200s'", sid,
                             s->id, id);
        return -1;
    }
    if (s) {
        /* the model holding the session */
    } else if (!id) {
        s = &ms->m[0]; /* no model named: the first */
    } else if (!(s = named(r, ms, id, ret))) {
        return -1;
    }
    pthread_mutex_lock(&ms->mu);
    while (s->loading) pthread_cond_wait(&ms->cv, &ms->mu);
    if (!s->srv) {
        zl_model_slot *out = NULL;
        while (!room_for(ms, s) && (out = victim(ms))) unload(ms, out, "least recently used: making room");
        if (!room_for(ms, s)) {
            uint64_t first = ms->m[0].bytes;
            pthread_mutex_unlock(&ms->mu);
            if (ms->budget && first + s->bytes > ms->budget)
                *ret = zl_reply_error(r, ZL_E_INVALID, "model",
                                      "model '%s' (%.1f MiB) does not fit --models-mb %.0f beside the first model "
                                      "(%.1f MiB)", s->id, s->bytes / 1048576.0, ms->budget / 1048576.0,
                                      first / 1048576.0);
            else
                *ret = zl_reply_error(r, ZL_E_BUSY, NULL,
                                      "model '%s' is not loaded and the loaded models are in use (--models-max %d%s); "
                                      "retry shortly", s->id, ms->max_loaded, ms->budget ? ", --models-mb" : "");
            return -1;
        }
        s->loading = 1;
        pthread_mutex_unlock(&ms->mu);
        zl_err err = {0};
        zl_srv *c = NULL;
        int rc = srv_load(r->srv, s, &c, &err);
        pthread_mutex_lock(&ms->mu);
        s->loading = 0;
        s->srv = c;
        pthread_cond_broadcast(&ms->cv);
        if (rc) {
            pthread_mutex_unlock(&ms->mu);
            *ret = zl_reply_error(r, ZL_E_INTERNAL, NULL, "cannot load %s", err.msg);
            return -1;
        }
    }
    s->refs++;
    s->last_used = zl_now_ms();
    pthread_mutex_unlock(&ms->mu);
    r->model_slot = s;
    r->srv = s->srv;
    return 0;
}

int zl_models_select_query(zl_req *r, int load, enum MHD_Result *ret) {
    zl_models *ms = r->srv->models;
    const char *id = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "model");
    if (!id || !ms || r->model_slot) return 0;
    if (load) {
        json_t *b = json_pack("{s:s}", "model", id);
        if (!b) { *ret = zl_reply_error(r, ZL_E_INTERNAL, NULL, "out of memory"); return -1; }
        int rc = zl_models_select(r, b, ret);
        json_decref(b);
        return rc;
    }
    zl_model_slot *s = named(r, ms, id, ret);
    if (!s) return -1;
    pthread_mutex_lock(&ms->mu);
    if (!s->srv || s->loading) {
        pthread_mutex_unlock(&ms->mu);
        *ret = zl_reply_error(r, ZL_E_CONFLICT, "model", "model '%s' is not loaded: its figures exist while it is loaded",
                              s->id);
        return -1;
    }
    s->refs++;
    pthread_mutex_unlock(&ms->mu);
    r->model_slot = s;
    r->srv = s->srv;
    return 0;
}

void zl_models_release(struct zl_model_slot *s) {
    if (!s) return;
    zl_models *ms = s->ms;
    pthread_mutex_lock(&ms->mu);
    s->refs--;
    s->last_used = zl_now_ms();
    pthread_mutex_unlock(&ms->mu);
}

json_t *zl_models_list(zl_srv *home, int anthropic) {
    zl_models *ms = home->models;
    json_t *data = json_array();
    pthread_mutex_lock(&ms->mu);
    for (int i = 0; i < ms->n; i++) {
        zl_model_slot *s = &ms->m[i];
        const char *status = s->srv ? "loaded" : s->loading ? "loading" : "unloaded";
        if (anthropic) {
            char created[32];
            time_t t = (time_t)home->started;
            strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
            json_array_append_new(data, json_pack("{s:s, s:s, s:s, s:s}", "type", "model", "id", s->id, "display_name",
                                                  s->id, "created_at", created));
        } else {
            json_t *meta = json_pack("{s:s, s:s}", "path", s->path, "status", status);
            if (s->srv) {
                json_object_set_new(meta, "description", json_string(zl_llm_desc(s->srv->llm)));
                json_object_set_new(meta, "n_ctx", json_integer(zl_sched_n_ctx(s->srv->sched)));
                json_object_set_new(meta, "n_vocab", json_integer(zl_llm_n_vocab(s->srv->llm)));
            }
            json_array_append_new(data, json_pack("{s:s, s:s, s:I, s:s, s:o}", "id", s->id, "object", "model", "created",
                                                  (json_int_t)home->started, "owned_by", "zerolayer", "meta", meta));
        }
    }
    const char *first = ms->m[0].id, *last = ms->m[ms->n - 1].id;
    json_t *j = anthropic ? json_pack("{s:o, s:b, s:s, s:s}", "data", data, "has_more", 0, "first_id", first, "last_id", last)
                          : json_pack("{s:s, s:o}", "object", "list", "data", data);
    pthread_mutex_unlock(&ms->mu);
    return j;
}

void zl_models_free(zl_srv *home) {
    zl_models *ms = home->models;
    if (!ms) return;
    if (ms->has_sweeper) {
        pthread_mutex_lock(&ms->mu);
        ms->stop = 1;
        pthread_cond_signal(&ms->sweep_cv);
        pthread_mutex_unlock(&ms->mu);
        pthread_join(ms->sweeper, NULL);
    }
    pthread_cond_destroy(&ms->sweep_cv);
    for (int i = 1; i < ms->n; i++) srv_free(ms->m[i].srv, 1);
    pthread_mutex_destroy(&ms->mu);
    pthread_cond_destroy(&ms->cv);
    free(ms->m);
    free(ms);
    home->models = NULL;
}
