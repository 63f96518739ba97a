/* openai.h — the OpenAI wire formats' parsers (api_openai.c): a chat or a
 * completions body into a zl_request; the HTTP handlers and the fuzz target
 * call them.  q comes from zl_request_init(q, ZL_REQ_CHAT or
 * ZL_REQ_COMPLETION, b) and is to be freed with zl_request_free either way. */
#ifndef ZL_OPENAI_H
#define ZL_OPENAI_H

#include "pipeline.h"

int zl_oai_parse_chat(json_t *b, zl_request *q, zl_verr *e);
int zl_oai_parse_completion(json_t *b, zl_request *q, zl_verr *e);

#endif
