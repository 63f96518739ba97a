/* api_misc.c — /health, /metrics, /tokenize, /detokenize, /v1/preheat. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/clock.h"
#include "http.h"
#include "metrics.h"

enum MHD_Result zl_api_health(zl_req *r, json_t *body) {
    (void)body;
    zl_sched_stats st;
    zl_sched_get_stats(r->srv->sched, &st);
    return zl_reply_json(r, 200,
                         json_pack("{s:s, s:s, s:i, s:i, s:i, s:i}", "status", "ok", "model", r->srv->model_id,
                                   "slots_idle", st.n_parallel - st.running, "slots_processing", st.running,
                                   "requests_waiting", st.waiting, "n_ctx", st.n_ctx),
                         NULL);
}

enum MHD_Result zl_api_metrics(zl_req *r, json_t *body) {
    (void)body;
    /* with several models, ?model=ID gives a loaded model's scheduler and session figures (never loads one);
     * without it, the first model's; the request counters are the process's either way */
    enum MHD_Result ret = MHD_NO;
    if (zl_models_select_query(r, 0, &ret)) return ret;
    zl_buf b = {0};
    zl_metrics_render(&b, r->srv->sched);
    if (r->srv->sessions) zl_sessions_metrics(r->srv, &b);
    if (b.oom) { zl_buf_free(&b); return zl_reply_error(r, ZL_E_INTERNAL, NULL, "out of memory"); }
    ret = zl_reply_raw(r, 200, "text/plain; version=0.0.4; charset=utf-8", b.p ? b.p : "", b.n);
    zl_buf_free(&b);
    return ret;
}

enum MHD_Result zl_api_tokenize(zl_req *r, json_t *b) {
    zl_verr e = {{0}, {0}};
    const char *text = NULL;
    int add_special = 0, parse_special = 1, with_pieces = 0;
    if (zl_jv_str(b, "content", "", 1, &text, &e) < 0 || zl_jv_bool(b, "add_special", "", &add_special, &e) < 0 ||
        zl_jv_bool(b, "parse_special", "", &parse_special, &e) < 0 ||
        zl_jv_bool(b, "with_pieces", "", &with_pieces, &e) < 0)
        return zl_reply_error(r, ZL_E_INVALID, e.param, "%s", e.msg);
    int32_t *ids = NULL;
    size_t n = 0;
    zl_err err = {0};
    if (zl_llm_tokenize(r->srv->llm, text, json_string_length(json_object_get(b, "content")), add_special,
                        parse_special, &ids, &n, &err))
        return zl_reply_error(r, ZL_E_INVALID, "content", "content: %s", err.msg);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        if (!with_pieces) { json_array_append_new(arr, json_integer(ids[i])); continue; }
        char *p = NULL;
        size_t pl = 0;
        if (zl_llm_detokenize(r->srv->llm, &ids[i], 1, 1, &p, &pl, NULL)) pl = 0;
        json_array_append_new(arr, json_pack("{s:i, s:o}", "id", ids[i], "piece", zl_json_lossy_string(p ? p : "", pl)));
        free(p);
    }
    free(ids);
    return zl_reply_json(r, 200, json_pack("{s:o}", "tokens", arr), NULL);
}

enum MHD_Result zl_api_detokenize(zl_req *r, json_t *b) {
    json_t *t = json_object_get(b, "tokens");
    if (!t) return zl_reply_error(r, ZL_E_INVALID, "tokens", "tokens: field required");
    int32_t *ids = NULL;
    size_t n = 0;
    zl_verr e = {{0}, {0}};
    int vrc = zl_jv_token_ids(t, "tokens", zl_llm_n_vocab(r->srv->llm), &ids, &n, &e);
    if (vrc) return vrc == -2 ? zl_reply_error(r, ZL_E_INTERNAL, NULL, "out of memory")
                              : zl_reply_error(r, ZL_E_INVALID, "tokens", "%s", e.msg);
    char *s = NULL;
    size_t len = 0;
    zl_err err = {0};
    int rc = zl_llm_detokenize(r->srv->llm, ids, n, 0, &s, &len, &err);
    free(ids);
    if (rc) return zl_reply_error(r, ZL_E_INVALID, "tokens", "tokens: %s", err.msg);
    json_t *j = json_pack("{s:o}", "content", zl_json_lossy_string(s, len));
    free(s);
    return zl_reply_json(r, 200, j, NULL);
}

/* Read the model file once so its pages are in the page cache (and, with the
 * weights mapped, the first requests do not pay for disk reads). */
enum MHD_Result zl_api_preheat(zl_req *r, json_t *body) {
    (void)body;
    double t0 = zl_now_ms();
    int fd = open(r->srv->o.model_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return zl_reply_error(r, ZL_E_INTERNAL, NULL, "cannot open the model: %s", strerror(errno));
    posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
    size_t cap = 8u << 20;
    char *buf = malloc(cap);
    long long total = 0;
    ssize_t n;
    while (buf && (n = read(fd, buf, cap)) > 0) total += n;
    free(buf);
    close(fd);
    double ms = zl_now_ms() - t0;
    return zl_reply_json(r, 200,
                         json_pack("{s:s, s:I, s:f, s:f}", "status", "ok", "bytes", (json_int_t)total, "ms", ms,
                                   "mib_per_s", ms > 0 ? total / 1048576.0 / (ms / 1e3) : 0.0),
                         NULL);
}
