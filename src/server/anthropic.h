/* anthropic.h — the parsed form of an Anthropic Messages request, shared by
 * /v1/messages (api_anthropic.c) and Message Batches (batches.c). */
#ifndef ZL_ANTHROPIC_H
#define ZL_ANTHROPIC_H

#include "http.h"

typedef struct zl_ant_req {
    const char *model, *user_id; /* point into the request JSON */
    int stream;
    zl_gen_params gp;
    const char **stops; /* user stop_sequences, then the template's extra stop */
    int n_user_stops;
    zl_buf system;
    zl_buf *texts;
    zl_chat_msg *msgs; /* system (if any) + messages */
    int n_msgs, n_chat;
    int32_t *ids;
    int n_ids;
} zl_ant_req;

/* Validate a request body (count_only: only model/system/messages). */
int zl_ant_parse(zl_srv *srv, json_t *b, int count_only, zl_ant_req *q, zl_verr *e);
/* Render and tokenize; fails when the prompt does not fit the context. */
int zl_ant_tokens(zl_srv *srv, zl_ant_req *q, zl_verr *e);
json_t *zl_ant_message_json(const zl_ant_req *q, zl_gen *g, const char *id, const zl_gen_timing *t);
void zl_ant_free(zl_ant_req *q);

#endif
