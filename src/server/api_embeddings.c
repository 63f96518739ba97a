/* api_embeddings.c — OpenAI-compatible POST /v1/embeddings.
 *
 * input: a string, an array of strings, an array of token ids, or an array
 * of token-id arrays (at most MAX_INPUTS, each within the context);
 * encoding_format float (default) or base64 (little-endian float32);
 * `dimensions` is refused (the vectors have the model's width).  Pooling:
 * --pooling, else the file's <arch>.pooling_type, else mean; vectors are
 * L2-normalised.  The forward passes run on the engine thread between its
 * batched steps (zl_sched_run), so generation keeps streaming.  Validation
 * names the offending field; never formats anything but this endpoint. */
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "pipeline.h"

#define MAX_INPUTS 2048

zl_pooling zl_srv_pooling(const zl_srv *s) {
    const char *p = s->o.pooling;
    if (p && !strcmp(p, "cls")) return ZL_POOL_CLS;
    if (p && !strcmp(p, "last")) return ZL_POOL_LAST;
    if (p) return ZL_POOL_MEAN;
    int f = zl_llm_pooling(s->llm);
    return f >= 0 ? (zl_pooling)f : ZL_POOL_MEAN;
}

typedef struct emb_task {
    zl_embedder *e;
    int step_tokens;
    zl_err err;
} emb_task;

static int emb_step(void *ud) {
    emb_task *t = ud;
    int done = 0;
    if (zl_embedder_step(t->e, t->step_tokens, &done, &t->err)) return -1;
    return done;
}

/* One input into ids; replies 400 and returns -1 when it is not valid. */
static int input_ids(zl_req *r, json_t *x, const char *f, int32_t **ids, int *n) {
    zl_llm *llm = r->srv->llm;
    int nv = zl_llm_n_vocab(llm), n_ctx = zl_sched_n_ctx(r->srv->sched);
    size_t k = 0;
    if (json_is_string(x)) {
        if (!json_string_length(x)) {
            zl_reply_error(r, ZL_E_INVALID, "input", "%s: an empty string has no embedding", f);
            return -1;
        }
        zl_err err = {0};
        if (zl_llm_tokenize(llm, json_string_value(x), json_string_length(x), 1, 0, ids, &k, &err)) {
            zl_reply_error(r, ZL_E_INVALID, "input", "%s: %s", f, err.msg);
            return -1;
        }
    } else {
        k = json_array_size(x);
        if (!k) {
            zl_reply_error(r, ZL_E_INVALID, "input", "%s: an empty token array has no embedding", f);
            return -1;
        }
        if (!(*ids = malloc(k * sizeof **ids))) {
            zl_reply_error(r, ZL_E_INTERNAL, NULL, "out of memory");
            return -1;
        }
        for (size_t i = 0; i < k; i++) {
            json_t *t = json_array_get(x, i);
            if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) >= nv) {
                zl_reply_error(r, ZL_E_INVALID, "input", "%s[%zu]: expected a token id in [0, %d)", f, i, nv);
                return -1;
            }
            (*ids)[i] = (int32_t)json_integer_value(t);
        }
    }
    if (!k) {
        zl_reply_error(r, ZL_E_INVALID, "input", "%s: no tokens", f);
        return -1;
    }
    if (!zl_prompt_fits(n_ctx, k, 0)) {
        zl_reply_error(r, ZL_E_INVALID, "input", "%s: %zu tokens exceed the context of %d", f, k, n_ctx);
        return -1;
    }
    *n = (int)k;
    return 0;
}

static json_t *base64_floats(const float *v, int n) {
    size_t bytes = (size_t)n * sizeof *v;
    unsigned char *raw = malloc(bytes), *out = malloc(4 * ((bytes + 2) / 3) + 1);
    json_t *j = NULL;
    if (raw && out) {
        for (int i = 0; i < n; i++) { /* little-endian float32, whatever the host */
            uint32_t u;
            memcpy(&u, &v[i], 4);
            for (int b = 0; b < 4; b++) raw[4 * i + b] = (unsigned char)(u >> (8 * b));
        }
        int len = EVP_EncodeBlock(out, raw, (int)bytes);
        j = json_stringn((const char *)out, (size_t)len);
    }
    free(raw);
    free(out);
    return j;
}

enum MHD_Result zl_api_embeddings(zl_req *r, json_t *b) {
    zl_verr e = {{0}, {0}};
    const char *model = r->srv->model_id, *fmt = "float";
    if (zl_jv_str(b, "model", "", 0, &model, &e) < 0 || zl_jv_str(b, "encoding_format", "", 0, &fmt, &e) < 0)
        return zl_reply_error(r, ZL_E_INVALID, e.param, "%s", e.msg);
    int b64 = !strcmp(fmt, "base64");
    if (!b64 && strcmp(fmt, "float"))
        return zl_reply_error(r, ZL_E_INVALID, "encoding_format", "encoding_format: '%.64s' is not float or base64", fmt);
    json_t *dims = json_object_get(b, "dimensions");
    if (dims && !json_is_null(dims))
        return zl_reply_error(r, ZL_E_INVALID, "dimensions",
                              "dimensions: not supported (this model's embeddings have %d dimensions)",
                              zl_llm_n_embd(r->srv->llm));
    json_t *in = json_object_get(b, "input");
    if (!in || json_is_null(in)) return zl_reply_error(r, ZL_E_INVALID, "input", "input: field required");
    /* shapes: "text" | ["text", ...] | [ids...] | [[ids...], ...] */
    json_t *items[MAX_INPUTS];
    int n_in = 0, single = 0;
    if (json_is_string(in) || (json_is_array(in) && json_array_size(in) && json_is_integer(json_array_get(in, 0)))) {
        items[n_in++] = in;
        single = 1;
    } else if (json_is_array(in) && json_array_size(in)) {
        if (json_array_size(in) > MAX_INPUTS)
            return zl_reply_error(r, ZL_E_INVALID, "input", "input: at most %d inputs per request, not %zu", MAX_INPUTS,
                                  json_array_size(in));
        size_t i;
        json_t *x;
        json_array_foreach(in, i, x) {
            if (!json_is_string(x) && !json_is_array(x))
                return zl_reply_error(r, ZL_E_INVALID, "input",
                                      "input[%zu]: expected a string or an array of token ids", i);
            items[n_in++] = x;
        }
    } else {
        return zl_reply_error(r, ZL_E_INVALID, "input",
                              "input: expected a string, an array of strings, an array of token ids or an array of "
                              "token-id arrays");
    }
    int32_t **ids = calloc((size_t)n_in, sizeof *ids);
    int *n = calloc((size_t)n_in, sizeof *n);
    enum MHD_Result ret = MHD_YES;
    emb_task t = {NULL, r->srv->o.sched.step_tokens, {0}};
    long long total = 0;
    if (!ids || !n) { ret = zl_reply_error(r, ZL_E_INTERNAL, NULL, "out of memory"); goto out; }
    for (int i = 0; i < n_in; i++) {
        char f[32];
        snprintf(f, sizeof f, single ? "input" : "input[%d]", i);
        if (input_ids(r, items[i], f, &ids[i], &n[i])) goto out;
        total += n[i];
    }
    if (zl_embedder_new(&t.e, r->srv->llm, (const int32_t *const *)ids, n, n_in, zl_srv_pooling(r->srv), &t.err)) {
        ret = zl_reply_error(r, ZL_E_INVALID, "input", "%s", t.err.msg);
        goto out;
    }
    int rc = zl_sched_run(r->srv->sched, emb_step, &t);
    if (rc != 1) {
        ret = rc == ZL_SCHED_STOPPED ? zl_reply_error(r, ZL_E_BUSY, NULL, "the server is shutting down")
                                     : zl_reply_error(r, ZL_E_INTERNAL, NULL, "embedding failed: %s", t.err.msg);
        goto out;
    }
    int dim = zl_llm_n_embd(r->srv->llm);
    json_t *data = json_array();
    for (int i = 0; i < n_in; i++) {
        const float *v = zl_embedder_vector(t.e, i);
        json_t *vec;
        if (b64) {
            vec = base64_floats(v, dim);
        } else {
            vec = json_array();
            for (int d = 0; d < dim; d++) json_array_append_new(vec, json_real(v[d]));
        }
        json_array_append_new(data, json_pack("{s:s, s:i, s:o}", "object", "embedding", "index", i, "embedding", vec));
    }
    ret = zl_reply_json(r, 200,
                        json_pack("{s:s, s:o, s:s, s:{s:I, s:I}}", "object", "list", "data", data, "model", model,
                                  "usage", "prompt_tokens", (json_int_t)total, "total_tokens", (json_int_t)total),
                        NULL);
out:
    zl_embedder_free(t.e);
    for (int i = 0; ids && i < n_in; i++) free(ids[i]);
    free(ids);
    free(n);
    return ret;
}
