/* openai.h — the OpenAI wire format's request side (api_openai.c): a
 * /v1/chat/completions (ZL_REQ_CHAT) or /v1/completions (ZL_REQ_COMPLETION)
 * body into a zl_request. */
#ifndef ZL_OPENAI_H
#define ZL_OPENAI_H

#include "pipeline.h"

/* Validate body into q (kind: which endpoint); 0, or -1 with e naming the
 * field.  q is to be freed with zl_request_free either way. */
int zl_oai_parse(json_t *body, zl_req_kind kind, zl_request *q, zl_verr *e);
/* A chat body's `messages` array into q's turns (developer as system,
 * content as a string or text parts, an assistant's tool_calls, a tool
 * turn's tool_call_id): what /v1/chat/completions and a session's prefill
 * read.  0, or -1 with e naming the field. */
int zl_oai_parse_messages(json_t *msgs, zl_request *q, zl_verr *e);
/* One completions prompt x (text or token ids; param: how the caller named
 * it) appended to q's prompts; 0, or -1 with e naming it. */
int zl_oai_parse_prompt(json_t *x, const char *param, zl_request *q, zl_verr *e);

#endif
