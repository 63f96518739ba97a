/* fuzz_srv.h — the server state the request-parser fuzz targets share: the
 * bundled stories260K model, a one-slot scheduler (nothing is submitted) and
 * the model's chat template, in a zl_srv the pipeline's preparation reads. */
#ifndef ZL_FUZZ_SRV_H
#define ZL_FUZZ_SRV_H

#include <stdlib.h>

#include "server/pipeline.h"

#ifndef ZL_ROOT
#define ZL_ROOT "."
#endif

static zl_srv srv;

static void fuzz_srv_init(void) {
    const char *path = ZL_ROOT "/models/stories260K.gguf";
    zl_llm_opts lo = {.n_threads = 1};
    zl_err err = {0};
    if (zl_llm_open(&srv.llm, path, &lo, &err)) abort();
    zl_sched_opts so = {.n_parallel = 1, .max_queue = 1, .n_ctx = 256, .step_tokens = 64};
    if (zl_sched_new(&srv.sched, srv.llm, &so, &err)) abort();
    if (zl_chat_fmt_setup(&srv.tpl, srv.llm, NULL, NULL, &err)) abort();
    srv.o.max_body = 1 << 20;
}

#endif
