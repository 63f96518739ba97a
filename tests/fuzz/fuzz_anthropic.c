/* fuzz_anthropic.c — libFuzzer target: a request body of the Anthropic
 * Messages API through the server's own parsing: zl_json_parse_body (size,
 * UTF-8, JSON), zl_ant_parse (every field's validation; count_tokens and
 * messages forms) and the pipeline's preparation (the chat template render,
 * the tokenizer and the limits: zl_pipeline_count / zl_pipeline_prepare), on the bundled stories260K model.  The first byte picks the
 * form; the rest is the body.  Bad bodies must be clean 400s, never crashes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/anthropic.h"

#ifndef ZL_ROOT
#define ZL_ROOT "."
#endif

static zl_srv srv;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *path = ZL_ROOT "/models/stories260K.gguf";
    zl_llm_opts lo = {.n_threads = 1};
    zl_err err = {0};
    if (zl_llm_open(&srv.llm, path, &lo, &err)) abort();
    zl_sched_opts so = {.n_parallel = 1, .max_queue = 1, .n_ctx = 256, .step_tokens = 64};
    if (zl_sched_new(&srv.sched, srv.llm, &so, &err)) abort();
    if (zl_chat_fmt_setup(&srv.tpl, srv.llm, path, NULL, NULL, &err)) abort();
    srv.o.max_body = 1 << 20;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!size) return 0;
    int count_only = data[0] & 1;
    zl_verr e = {{0}, {0}};
    json_t *body = zl_json_parse_body((const char *)data + 1, size - 1, &e);
    if (!body) return 0;
    zl_request q;
    zl_prepared p;
    memset(&e, 0, sizeof e);
    memset(&p, 0, sizeof p);
    if (json_is_object(body) && zl_ant_parse(body, count_only, &q, &e) == 0) {
        if (count_only) zl_pipeline_count(&srv, &q, &p, &e);
        else zl_pipeline_prepare(&srv, NULL, &q, NULL, 0, &p, &e);
    }
    zl_prepared_free(&p);
    if (json_is_object(body)) zl_request_free(&q);
    json_decref(body);
    return 0;
}
