/* anthropic.h — the Anthropic Messages wire format, shared by /v1/messages
 * (api_anthropic.c) and Message Batches (batches.c): a body into a
 * zl_request, and the emitter that writes Messages results. */
#ifndef ZL_ANTHROPIC_H
#define ZL_ANTHROPIC_H

#include "pipeline.h"

/* Validate a Messages body into q (count_only: only model/system/messages);
 * q is to be freed with zl_request_free either way. */
int zl_ant_parse(json_t *b, int count_only, zl_request *q, zl_verr *e);
extern const zl_emitter zl_ant_emitter;

#endif
