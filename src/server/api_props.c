/* api_props.c — GET /props in the shape of llama.cpp's server (what its web
 * UI and several clients read before they start): the context per slot, the
 * slots, the chat template the server renders with (its Jinja source, or the
 * name of the built-in family when it renders without one), the defaults a
 * request that sets no sampling field gets, the model and the build.  Every
 * value is read from the running server; fields llama.cpp has and zerolayer
 * does not (mirostat, DRY, XTC, ...) are left out rather than faked.  The
 * "zerolayer" object carries what llama.cpp's shape has no field for.
 * With several models, GET /props?model=ID describes that one.  Read-only:
 * POST /props is not served. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "request.h"

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0, got;
    char chunk[65536];
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (n + got + 1 > cap) {
            cap = (n + got + 1) * 2;
            char *nb = realloc(buf, cap);
            if (!nb) { free(buf); fclose(f); return NULL; }
            buf = nb;
        }
        memcpy(buf + n, chunk, got);
        n += got;
    }
    fclose(f);
    if (!buf && !(buf = calloc(1, 1))) return NULL;
    buf[n] = 0;
    return buf;
}

static json_t *token_text(const zl_llm *llm, int32_t id) {
    if (id < 0) return json_string("");
    char *t = NULL;
    size_t n = 0;
    json_t *j = zl_llm_detokenize(llm, &id, 1, 1, &t, &n, NULL) ? json_string("")
                                                                : zl_json_lossy_string(t ? t : "", n);
    free(t);
    return j;
}

enum MHD_Result zl_api_props(zl_req *r, json_t *body) {
    (void)body;
    /* with several models, ?model=ID (llama.cpp's router mode) picks one: loaded if need be, held for the reply */
    enum MHD_Result ret = MHD_NO;
    if (zl_models_select_query(r, 1, &ret)) return ret;
    zl_srv *s = r->srv;
    zl_sched_stats st;
    zl_sched_get_stats(s->sched, &st);
    zl_sampling d = zl_request_sampling_defaults();
    const zl_job_ctl *ctl = zl_sched_ctl(s->sched);
    /* the template the server renders with: the Jinja source it compiled, else the family's name */
    char *src = NULL;
    const char *kind = "family";
    if (s->tpl.jinja) {
        src = s->o.chat_template_file ? slurp(s->o.chat_template_file) : zl_tpl_model_source(s->llm);
        kind = s->o.chat_template_file ? "jinja (--chat-template-file)" : "jinja (the model's tokenizer.chat_template)";
    }
    json_t *tpl = src ? json_string(src) : json_string(zl_tpl_name(s->tpl.family));
    free(src);
    json_t *params = json_pack(
        "{s:i, s:i, s:I, s:f, s:i, s:f, s:f, s:f, s:i, s:f, s:f, s:f, s:b, s:i, s:[], s:b, s:[s, s, s, s, s]}",
        "n_predict", -1, "max_tokens", -1,
        "seed", (json_int_t)0xFFFFFFFFu, /* llama.cpp's "random": every request without a seed draws one */
        "temperature", (double)d.temp, "top_k", d.top_k, "top_p", (double)d.top_p, "min_p", (double)d.min_p,
        "typical_p", 1.0, "repeat_last_n", d.repeat_last_n, "repeat_penalty", (double)d.repeat_penalty,
        "presence_penalty", (double)d.presence_penalty, "frequency_penalty", (double)d.frequency_penalty,
        "stream", 0, "n_probs", 0, "stop", "ignore_eos", 0, "samplers", "penalties", "top_k", "top_p", "min_p",
        "temperature");
    json_object_set_new(params, "speculative", json_boolean(ctl->spec != ZL_SPEC_OFF));
    json_t *dgs = json_pack("{s:i, s:o}", "n_ctx", st.n_ctx, "params", params);
    json_t *zl = json_pack("{s:s, s:s, s:i, s:i, s:i, s:s, s:s, s:I, s:i, s:s}", "architecture", zl_llm_arch(s->llm),
                           "description", zl_llm_desc(s->llm), "n_ctx_train", zl_llm_n_ctx_train(s->llm), "n_vocab",
                           zl_llm_n_vocab(s->llm), "n_embd", zl_llm_n_embd(s->llm), "embedding_pooling",
                           zl_pooling_name(zl_srv_pooling(s)), "chat_template_kind", kind, "weight_bytes",
                           (json_int_t)zl_llm_weight_bytes(s->llm), "completions_max_tokens", 16,
                           "kv_policy", zl_kv_policy_name(ctl->kv_policy));
    json_t *j = json_pack("{s:o, s:i, s:s, s:s, s:o, s:{s:b, s:b}, s:o, s:o, s:s, s:b, s:b, s:b, s:b, s:o}",
                          "default_generation_settings", dgs, "total_slots", st.n_parallel, "model_alias", s->model_id,
                          "model_path", s->o.model_path, "chat_template", tpl, "modalities", "vision", 0, "audio", 0,
                          "bos_token", token_text(s->llm, zl_llm_bos(s->llm)), "eos_token",
                          token_text(s->llm, zl_llm_eos(s->llm)), "build_info",
                          "zerolayer " ZEROLAYER_VERSION " (built with C compiler " __VERSION__ ")", "is_sleeping", 0, "endpoint_slots", 0,
                          "endpoint_props", 0, "endpoint_metrics", 1, "zerolayer", zl);
    if (!j) return zl_reply_error(r, ZL_E_INTERNAL, NULL, "out of memory");
    return zl_reply_json(r, 200, j, NULL);
}
