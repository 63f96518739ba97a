/* batches.c — Anthropic Message Batches, kept in memory.
 *
 * Each batch gets a worker thread that feeds its requests to the scheduler
 * as fast as the queue accepts them, so they run concurrently with each
 * other and with live traffic (continuous batching does the rest), and
 * collects one result per request.  Results are served as JSONL once the
 * batch has ended.
 *
 * Every batch belongs to the tenant that created it (zl_tenant_of: the API
 * key's digest, else the user's); every route looks batches up by id AND
 * tenant, so another tenant's batch is "not found" on get, results, cancel
 * and absent from its list.  Ended batches are dropped after the retention
 * time; a tenant holds at most batches_per_tenant batches (at the bound its
 * oldest ended batch gives way, and when none has ended a new one is 429),
 * and the server at most ZL_BATCHES_TOTAL, the same way.
 * The requests' sequences go back through the scheduler, which zeroes their
 * KV before freeing it (sched.h). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../base/clock.h"
#include "anthropic.h"

/* Batches the server holds at once, all tenants together. */
#define ZL_BATCHES_TOTAL 1024

typedef struct batch {
    char id[64];
    char tenant[ZL_TENANT_CAP]; /* owner */
    long long created, ended, cancel_at;
    int n;
    char **custom_ids;
    json_t **params;  /* owned references */
    json_t **results; /* NULL until known */
    int succeeded, errored, canceled;
    int ended_flag;
    atomic_int cancel;
    pthread_t thread;
    zl_srv *srv;
    struct batch *next;
} batch;

struct zl_batches {
    pthread_mutex_t mu;
    batch *head;
};

static struct zl_batches *batches_of(zl_srv *srv) {
    static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&init_mu);
    if (!srv->batches && (srv->batches = calloc(1, sizeof *srv->batches)))
        pthread_mutex_init(&srv->batches->mu, NULL);
    pthread_mutex_unlock(&init_mu);
    return srv->batches;
}

static json_t *iso_time(long long t) {
    if (!t) return json_null();
    char buf[32];
    time_t tt = (time_t)t;
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", gmtime(&tt));
    return json_string(buf);
}

static json_t *err_result(const char *type, const char *msg) {
    return json_pack("{s:s, s:{s:s, s:{s:s, s:s}}}", "type", "errored", "error", "type", "error", "error", "type", type,
                     "message", msg);
}

/* Under the batches mutex. */
static void set_result(batch *b, int i, json_t *res) {
    const char *t = json_string_value(json_object_get(res, "type"));
    if (!strcmp(t, "succeeded")) b->succeeded++;
    else if (!strcmp(t, "canceled")) b->canceled++;
    else b->errored++;
    b->results[i] = res;
}

static void *batch_main(void *arg) {
    batch *b = arg;
    zl_srv *srv = b->srv;
    struct zl_batches *bs = srv->batches;
    zl_gen **gens = calloc((size_t)b->n, sizeof *gens);
    zl_request *reqs = calloc((size_t)b->n, sizeof *reqs);
    zl_prepared *preps = calloc((size_t)b->n, sizeof *preps);
    int next = 0, in_flight = 0, done = 0;
    while (gens && reqs && preps && done < b->n) {
        unsigned long long seen = zl_sched_progress(srv->sched); /* before reading: no lost wake-up */
        int cancel = atomic_load(&b->cancel);
        /* start what the queue takes */
        while (!cancel && next < b->n) {
            zl_verr e = {{0}, {0}};
            zl_request *q = &reqs[next];
            int rc = zl_ant_parse(b->params[next], 0, q, &e);
            if (!rc) rc = zl_pipeline_prepare(srv, NULL, q, NULL, 0, &preps[next], &e);
            if (rc) {
                pthread_mutex_lock(&bs->mu);
                set_result(b, next, err_result(rc == -2 ? "api_error" : "invalid_request_error", e.msg));
                pthread_mutex_unlock(&bs->mu);
                zl_prepared_free(&preps[next]);
                zl_request_free(q);
                next++;
                done++;
                continue;
            }
            int busy = 0;
            gens[next] = zl_pipeline_submit(srv->sched, &preps[next], zl_now_ms(), &busy);
            if (!gens[next]) {
                zl_prepared_free(&preps[next]);
                zl_request_free(q);
                if (busy) break; /* queue full: parsed again after some finish */
                pthread_mutex_lock(&bs->mu);
                set_result(b, next, err_result("api_error", "out of memory"));
                pthread_mutex_unlock(&bs->mu);
                done++;
            } else {
                in_flight++;
            }
            next++;
        }
        if (cancel) {
            pthread_mutex_lock(&bs->mu);
            for (; next < b->n; next++, done++) set_result(b, next, json_pack("{s:s}", "type", "canceled"));
            pthread_mutex_unlock(&bs->mu);
        }
        if (!in_flight) {
            if (done < b->n) zl_sched_wait_since(srv->sched, seen, 100);
            continue;
        }
        for (int i = 0; i < next; i++) {
            zl_gen *g = gens[i];
            if (!g) continue;
            if (cancel) zl_gen_cancel(g);
            if (!zl_gen_poll(g, 0)) continue;
            json_t *res;
            if (g->ch[0].end == ZL_GEN_CANCEL && cancel) res = json_pack("{s:s}", "type", "canceled");
            else if (g->ch[0].end == ZL_GEN_ERROR || g->ch[0].end == ZL_GEN_CANCEL)
                res = err_result("api_error", "generation failed");
            else {
                zl_result rs;
                zl_result_init(&rs, &reqs[i], &preps[i], g, &zl_ant_emitter, reqs[i].model);
                zl_result_finish(&rs);
                res = json_pack("{s:s, s:o}", "type", "succeeded", "message", zl_ant_emitter.body(&rs));
            }
            pthread_mutex_lock(&bs->mu);
            set_result(b, i, res);
            pthread_mutex_unlock(&bs->mu);
            zl_gen_free(g);
            zl_prepared_free(&preps[i]);
            zl_request_free(&reqs[i]);
            gens[i] = NULL;
            in_flight--;
            done++;
        }
        zl_sched_wait_since(srv->sched, seen, 100);
    }
    pthread_mutex_lock(&bs->mu);
    for (int i = 0; i < b->n; i++)
        if (!b->results[i]) set_result(b, i, err_result("api_error", "out of memory"));
    b->ended = (long long)time(NULL);
    b->ended_flag = 1;
    pthread_mutex_unlock(&bs->mu);
    free(gens);
    free(reqs);
    free(preps);
    return NULL;
}

/* Under the mutex. */
static json_t *batch_json(zl_req *r, const batch *b) {
    int processing = b->n - b->succeeded - b->errored - b->canceled;
    json_t *url = json_null();
    if (b->ended_flag) {
        const char *host = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Host");
        char u[512];
        snprintf(u, sizeof u, "http://%s/v1/messages/batches/%s/results", host ? host : "127.0.0.1", b->id);
        json_decref(url);
        url = json_string(u);
    }
    const char *status = b->ended_flag ? "ended" : atomic_load(&b->cancel) ? "canceling" : "in_progress";
    return json_pack("{s:s, s:s, s:s, s:{s:i, s:i, s:i, s:i, s:i}, s:o, s:o, s:o, s:n, s:o, s:o}", "id", b->id,
                     "type", "message_batch", "processing_status", status, "request_counts", "processing", processing,
                     "succeeded", b->succeeded, "errored", b->errored, "canceled", b->canceled, "expired", 0,
                     "ended_at", iso_time(b->ended), "created_at", iso_time(b->created), "expires_at",
                     iso_time(b->created + 86400), "archived_at", "cancel_initiated_at", iso_time(b->cancel_at),
                     "results_url", url);
}

static void batch_free(batch *b) {
    for (int i = 0; i < b->n; i++) {
        if (b->custom_ids) free(b->custom_ids[i]);
        if (b->params) json_decref(b->params[i]);
        if (b->results) json_decref(b->results[i]);
    }
    free(b->custom_ids);
    free(b->params);
    free(b->results);
    free(b);
}

static double retention_s(const zl_srv *srv) {
    return srv->o.batch_retention_s > 0 ? srv->o.batch_retention_s : 3600;
}

/* Under the mutex: unlink and free the ended batches past their retention
 * (their threads have finished or are returning: the join is short). */
static void prune(struct zl_batches *bs, const zl_srv *srv) {
    long long now = (long long)time(NULL);
    double keep = retention_s(srv);
    for (batch **pp = &bs->head; *pp;) {
        batch *b = *pp;
        if (b->ended_flag && (double)(now - b->ended) >= keep) {
            *pp = b->next;
            pthread_join(b->thread, NULL);
            batch_free(b);
        } else {
            pp = &b->next;
        }
    }
}

/* Under the mutex: drop the oldest ended batch of `tenant` (NULL: of any
 * tenant) when it holds `max` batches or more.  0 when it is at the bound
 * and none of them has ended. */
static int bound(struct zl_batches *bs, const char *tenant, int max) {
    int n = 0;
    batch **oldest = NULL;
    for (batch **pp = &bs->head; *pp; pp = &(*pp)->next) {
        batch *b = *pp;
        if (tenant && strcmp(b->tenant, tenant)) continue;
        n++;
        if (b->ended_flag && (!oldest || b->ended <= (*oldest)->ended)) oldest = pp;
    }
    if (n < max) return 1;
    if (!oldest) return 0;
    batch *b = *oldest;
    *oldest = b->next;
    pthread_join(b->thread, NULL);
    batch_free(b);
    return 1;
}

/* Room for one more batch of `tenant`: its own bound, then the server's
 * (tenants without API keys are only what the clients say they are). */
static int make_room(struct zl_batches *bs, const zl_srv *srv, const char *tenant) {
    int per = srv->o.batches_per_tenant > 0 ? srv->o.batches_per_tenant : 64;
    return bound(bs, tenant, per) && bound(bs, NULL, ZL_BATCHES_TOTAL);
}

typedef struct { const char *s; int i; } cid_ref;

static int cmp_cid(const void *a, const void *b) {
    const cid_ref *x = a, *y = b;
    int c = strcmp(x->s, y->s);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

/* The first request (in order) whose custom_id an earlier one already uses,
 * or -1: one sort, O(n log n). */
static int first_duplicate(char *const *ids, int n) {
    cid_ref *v = malloc((size_t)n * sizeof *v);
    if (!v) return -2;
    for (int i = 0; i < n; i++) v[i] = (cid_ref){ids[i], i};
    qsort(v, (size_t)n, sizeof *v, cmp_cid);
    int dup = -1;
    for (int k = 1; k < n; k++)
        if (!strcmp(v[k].s, v[k - 1].s) && (dup < 0 || v[k].i < dup)) dup = v[k].i;
    free(v);
    return dup;
}

enum MHD_Result zl_api_batches_create(zl_req *r, json_t *body) {
    json_t *reqs = json_object_get(body, "requests");
    if (!reqs) return zl_reply_error(r, ZL_E_INVALID, "requests", "requests: field required");
    if (!json_is_array(reqs) || !json_array_size(reqs))
        return zl_reply_error(r, ZL_E_INVALID, "requests", "requests: expected a non-empty array");
    if (json_array_size(reqs) > 100000)
        return zl_reply_error(r, ZL_E_INVALID, "requests", "requests: at most 100000 requests per batch");
    struct zl_batches *bs = batches_of(r->srv);
    batch *b = calloc(1, sizeof *b);
    if (!bs || !b) { free(b); return zl_reply_error(r, ZL_E_INTERNAL, NULL, "out of memory"); }
    b->n = (int)json_array_size(reqs);
    b->custom_ids = calloc((size_t)b->n, sizeof *b->custom_ids);
    b->params = calloc((size_t)b->n, sizeof *b->params);
    b->results = calloc((size_t)b->n, sizeof *b->results);
    if (!b->custom_ids || !b->params || !b->results) {
        batch_free(b);
        return zl_reply_error(r, ZL_E_INTERNAL, NULL, "out of memory");
    }
    for (int i = 0; i < b->n; i++) {
        json_t *q = json_array_get(reqs, (size_t)i);
        char f[48];
        snprintf(f, sizeof f, "requests[%d]", i);
        const char *cid = NULL;
        zl_verr e = {{0}, {0}};
        if (!json_is_object(q)) { batch_free(b); return zl_reply_error(r, ZL_E_INVALID, f, "%s: expected an object", f); }
        if (zl_jv_str(q, "custom_id", f, 1, &cid, &e) < 0) { batch_free(b); return zl_reply_error(r, ZL_E_INVALID, e.param, "%s", e.msg); }
        json_t *p = json_object_get(q, "params");
        if (!json_is_object(p)) { batch_free(b); return zl_reply_error(r, ZL_E_INVALID, f, "%s.params: expected an object", f); }
        b->custom_ids[i] = strdup(cid);
        b->params[i] = json_deep_copy(p);
        if (!b->custom_ids[i] || !b->params[i]) { batch_free(b); return zl_reply_error(r, ZL_E_INTERNAL, NULL, "out of memory"); }
    }
    int dup = first_duplicate(b->custom_ids, b->n);
    if (dup == -2) { batch_free(b); return zl_reply_error(r, ZL_E_INTERNAL, NULL, "out of memory"); }
    if (dup >= 0) {
        char f[48];
        snprintf(f, sizeof f, "requests[%d]", dup);
        enum MHD_Result ret =
            zl_reply_error(r, ZL_E_INVALID, f, "%s.custom_id: '%.128s' is used twice", f, b->custom_ids[dup]);
        batch_free(b);
        return ret;
    }
    zl_rand_id(b->id, sizeof b->id, "msgbatch_");
    zl_tenant_of(r, NULL, b->tenant);
    b->created = (long long)time(NULL);
    b->srv = r->srv;
    atomic_init(&b->cancel, 0);
    pthread_mutex_lock(&bs->mu);
    prune(bs, r->srv);
    if (!make_room(bs, r->srv, b->tenant)) {
        pthread_mutex_unlock(&bs->mu);
        batch_free(b);
        r->api = ZL_API_ANTHROPIC;
        return zl_reply_json(r, 429,
                             json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "type", "rate_limit_error",
                                       "message", "this tenant holds the most message batches allowed and none of "
                                                  "them has ended; retry when one ends"),
                             NULL);
    }
    if (pthread_create(&b->thread, NULL, batch_main, b) != 0) {
        pthread_mutex_unlock(&bs->mu);
        batch_free(b);
        return zl_reply_error(r, ZL_E_INTERNAL, NULL, "cannot start the batch");
    }
    b->next = bs->head;
    bs->head = b;
    json_t *j = batch_json(r, b);
    pthread_mutex_unlock(&bs->mu);
    return zl_reply_json(r, 200, j, NULL);
}

/* Under the mutex: the batch with this id owned by this tenant (another
 * tenant's batch is not found: its existence is not revealed). */
static batch *find(struct zl_batches *bs, const char *id, const char *tenant) {
    for (batch *b = bs ? bs->head : NULL; b; b = b->next)
        if (!strcmp(b->id, id) && !strcmp(b->tenant, tenant)) return b;
    return NULL;
}

/* The batches store locked and pruned, and the caller's tenant; NULL after a 500. */
static struct zl_batches *store_locked(zl_req *r, char tenant[ZL_TENANT_CAP]) {
    struct zl_batches *bs = batches_of(r->srv);
    if (!bs) return NULL;
    zl_tenant_of(r, NULL, tenant);
    pthread_mutex_lock(&bs->mu);
    prune(bs, r->srv);
    return bs;
}

static enum MHD_Result no_batch(zl_req *r) {
    return zl_reply_error(r, ZL_E_NOT_FOUND, NULL, "no message batch with id '%s'", r->path_id);
}

enum MHD_Result zl_api_batches_list(zl_req *r, json_t *body) {
    (void)body;
    char tenant[ZL_TENANT_CAP];
    struct zl_batches *bs = store_locked(r, tenant);
    if (!bs) return zl_reply_error(r, ZL_E_INTERNAL, NULL, "out of memory");
    json_t *data = json_array();
    for (batch *b = bs->head; b; b = b->next)
        if (!strcmp(b->tenant, tenant)) json_array_append_new(data, batch_json(r, b));
    pthread_mutex_unlock(&bs->mu);
    size_t n = json_array_size(data);
    json_t *first = n ? json_incref(json_object_get(json_array_get(data, 0), "id")) : json_null();
    json_t *last = n ? json_incref(json_object_get(json_array_get(data, n - 1), "id")) : json_null();
    return zl_reply_json(r, 200, json_pack("{s:o, s:b, s:o, s:o}", "data", data, "has_more", 0, "first_id", first,
                                           "last_id", last), NULL);
}

/* GET /v1/messages/batches/{id} (cancel = 0) and POST .../cancel (cancel = 1). */
static enum MHD_Result batch_one(zl_req *r, int cancel) {
    char tenant[ZL_TENANT_CAP];
    struct zl_batches *bs = store_locked(r, tenant);
    if (!bs) return zl_reply_error(r, ZL_E_INTERNAL, NULL, "out of memory");
    batch *b = find(bs, r->path_id, tenant);
    if (b && cancel && !b->ended_flag && !atomic_exchange(&b->cancel, 1)) b->cancel_at = (long long)time(NULL);
    json_t *j = b ? batch_json(r, b) : NULL;
    pthread_mutex_unlock(&bs->mu);
    return j ? zl_reply_json(r, 200, j, NULL) : no_batch(r);
}

enum MHD_Result zl_api_batches_get(zl_req *r, json_t *body) {
    (void)body;
    return batch_one(r, 0);
}

enum MHD_Result zl_api_batches_cancel(zl_req *r, json_t *body) {
    (void)body;
    return batch_one(r, 1);
}

enum MHD_Result zl_api_batches_results(zl_req *r, json_t *body) {
    (void)body;
    char tenant[ZL_TENANT_CAP];
    struct zl_batches *bs = store_locked(r, tenant);
    if (!bs) return zl_reply_error(r, ZL_E_INTERNAL, NULL, "out of memory");
    zl_buf out = {0};
    batch *b = find(bs, r->path_id, tenant);
    int ended = b && b->ended_flag;
    for (int i = 0; ended && i < b->n; i++) {
        json_t *line = json_pack("{s:s, s:O}", "custom_id", b->custom_ids[i], "result", b->results[i]);
        char *s = json_dumps(line, JSON_COMPACT);
        json_decref(line);
        if (s) { zl_buf_puts(&out, s); zl_buf_puts(&out, "\n"); }
        free(s);
    }
    pthread_mutex_unlock(&bs->mu);
    enum MHD_Result ret;
    if (!b) ret = no_batch(r);
    else if (!ended) ret = zl_reply_error(r, ZL_E_INVALID, NULL, "message batch '%s' is still in progress", r->path_id);
    else ret = zl_reply_raw(r, 200, "application/x-jsonl", out.p ? out.p : "", out.n);
    zl_buf_free(&out);
    return ret;
}

void zl_batches_free(struct zl_batches *bs) {
    if (!bs) return;
    for (batch *b = bs->head; b; b = b->next) atomic_store(&b->cancel, 1);
    for (batch *b = bs->head, *n; b; b = n) {
        n = b->next;
        pthread_join(b->thread, NULL);
        batch_free(b);
    }
    pthread_mutex_destroy(&bs->mu);
    free(bs);
}
