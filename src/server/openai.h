/* openai.h — the OpenAI wire format's request side (api_openai.c): a
 * /v1/chat/completions (ZL_REQ_CHAT) or /v1/completions (ZL_REQ_COMPLETION)
 * body into a zl_request. */
#ifndef ZL_OPENAI_H
#define ZL_OPENAI_H

#include "pipeline.h"

/* Validate body into q (kind: which endpoint); 0, or -1 with e naming the
 * field.  q is to be freed with zl_request_free either way. */
int zl_oai_parse(json_t *body, zl_req_kind kind, zl_request *q, zl_verr *e);

#endif
