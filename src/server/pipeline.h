/* pipeline.h — the one path of a generation request, from a parsed
 * zl_request to the reply: model selection, ring/KV controls, the session,
 * template rendering, tokenizing, the prompt and context limits, submit,
 * the stream (stop hold-back in gen.c) or the whole body, timings and every
 * error reply.  The adapters call zl_pipeline_run after parsing; Message
 * Batches, which run without a connection, use prepare/submit directly. */
#ifndef ZL_PIPELINE_H
#define ZL_PIPELINE_H

#include "http.h"
#include "request.h"
#include "tools.h"

/* Run q (freed here) and reply in the shape of em. */
enum MHD_Result zl_pipeline_run(zl_req *r, zl_request *q, const zl_emitter *em);
/* Reply to a request the adapter could not parse (400 naming e->param); frees q. */
enum MHD_Result zl_pipeline_reject(zl_req *r, zl_request *q, const zl_verr *e);

/* A request made ready to submit: prompts as tokens, the generation's
 * parameters, the stop list (the caller's, then the template's). */
typedef struct zl_prepared {
    int n_sets, n;        /* distinct prompts; choices (n_sets x the request's n) */
    int32_t *ids[ZL_REQ_MAX_CHOICES];
    int n_ids[ZL_REQ_MAX_CHOICES];
    uint8_t *mask[ZL_REQ_MAX_CHOICES]; /* anchor flags per token, or NULL */
    int n_per_prompt;
    const char *stops[ZL_REQ_MAX_STOPS + 1];
    int n_user_stops;
    zl_gen_params gp;
    zl_tools_plan plan; /* grammar and output split (tools.h) */
} zl_prepared;

/* Template + tokens + limits.  msgs/n_msgs: the conversation to render (chat
 * kinds; NULL: q's own messages); ctl: the request's controls (NULL: the
 * scheduler's defaults).  Returns 0, -1 (400: e names the field) or -2 (out
 * of memory).  p is to be freed with zl_prepared_free either way. */
int zl_pipeline_prepare(zl_srv *srv, const zl_req_ctl *ctl, const zl_request *q, const zl_chat_msg *msgs, int n_msgs,
                        zl_prepared *p, zl_verr *e);
/* Only the tokens of q's conversation (count_tokens): p->n_ids[0]. */
int zl_pipeline_count(zl_srv *srv, const zl_request *q, zl_prepared *p, zl_verr *e);
/* Submit every choice; NULL with *busy = 1 when the queue is full. */
zl_gen *zl_pipeline_submit(zl_sched *s, zl_prepared *p, double t_start, int *busy);

/* The steps of zl_pipeline_run that a session's typing-ahead (api_sessions.c)
 * shares.  ready: the session rules when r runs on a session (r->sess_id),
 * the conversation of a chat kind after sr's stored turns (zl_sess_merge),
 * then zl_pipeline_prepare under ctl (NULL: the scheduler's defaults).
 * start: zl_pipeline_submit with p->gp as the caller left it (hooks set).
 * Both reply on failure (ready: -1; start: NULL); p is to be freed with
 * zl_prepared_free either way. */
int zl_pipeline_ready(zl_req *r, const zl_request *q, zl_sess_req *sr, const zl_req_ctl *ctl, zl_prepared *p);
zl_gen *zl_pipeline_start(zl_req *r, zl_prepared *p);
void zl_prepared_free(zl_prepared *p);
/* A result over g for q/p (id drawn with em->id_prefix). */
void zl_result_init(zl_result *res, const zl_request *q, const zl_prepared *p, zl_gen *g, const zl_emitter *em,
                    const char *model);
/* The timings so far (a stream's timings_per_token; what res->timing holds once every choice has ended). */
void zl_result_timing_now(const zl_result *res, zl_gen_timing *t);
/* Once every choice has ended: res->timing and res->failed. */
void zl_result_finish(zl_result *res);

/* Render a conversation and tokenize it (ctl: anchors under a bounded KV
 * policy, *mask then set; NULL: plain).  Returns 0, -1 (400) or -2 (OOM). */
int zl_pipeline_chat_tokens(zl_srv *srv, const zl_req_ctl *ctl, const zl_chat_msg *msgs, int n, int32_t **ids,
                            uint8_t **mask, size_t *n_ids, zl_verr *e);
/* One prompt of a completion (text or token ids, as the adapter found it)
 * into tokens, anchored under ctl's bounded policy with anchors (*mask then
 * set, else NULL), then the prompt limits.  The completions path and a
 * session's typing-ahead `prompt` both come through here.  Returns 0, -1
 * (400: e names pr->param) or -2 (OOM). */
int zl_pipeline_prompt_tokens(zl_srv *srv, const zl_req_ctl *ctl, const zl_request_prompt *pr, int32_t **ids,
                              uint8_t **mask, size_t *n, zl_verr *e);
/* The one context rule: n prompt tokens fit when n + room <= n_ctx, room
 * being the positions the request needs after its prompt (1 for a
 * generation, which needs one to sample into; 0 for an embedding). */
int zl_prompt_fits(int n_ctx, size_t n, int room);
/* The prompt limits: not empty, and (unless bounded) room for one token more. */
int zl_pipeline_prompt_limit(zl_srv *srv, int bounded, size_t n, const char *param, zl_verr *e);
/* Reply to a -1 / -2 of the functions above. */
enum MHD_Result zl_reply_verr(zl_req *r, int rc, const zl_verr *e);

#endif
