/* fuzz_openai.c — libFuzzer target: a request body of the OpenAI API
 * through the server's own parsing: zl_json_parse_body (size, UTF-8, JSON),
 * zl_oai_parse (chat or completions) (every field's validation:
 * messages and content parts, tools, stop, logit_bias, n, prompts as text or
 * token ids) and the pipeline's preparation (template render, tokenizer,
 * token-id and context limits: zl_pipeline_prepare), on the bundled
 * stories260K model (fuzz_srv.h).  The first byte picks the form (bit 0:
 * completions); the rest is the body.  Bad bodies must be clean 400s with
 * a message, never crashes. */
#include <stdint.h>
#include <string.h>

#include "fuzz_srv.h"
#include "server/openai.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fuzz_srv_init();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!size) return 0;
    int completion = data[0] & 1;
    zl_verr e = {{0}, {0}};
    json_t *body = zl_json_parse_body((const char *)data + 1, size - 1, &e);
    if (!body) {
        if (!e.msg[0]) abort(); /* a refusal names its reason */
        return 0;
    }
    zl_request q;
    zl_prepared p;
    memset(&e, 0, sizeof e);
    memset(&p, 0, sizeof p);
    if (json_is_object(body)) {
        int rc = zl_oai_parse(body, completion ? ZL_REQ_COMPLETION : ZL_REQ_CHAT, &q, &e);
        if (rc < 0 && !e.msg[0]) abort();
        if (rc == 0 && zl_pipeline_prepare(&srv, NULL, &q, NULL, 0, &p, &e) == -1 && !e.msg[0]) abort();
        zl_prepared_free(&p);
        zl_request_free(&q);
    }
    json_decref(body);
    return 0;
}
