/* request.h — one generation request as every API asks for it (zl_request),
 * and what comes back (zl_result, zl_event) through an API's emitter.
 *
 * The adapters (api_openai.c, api_anthropic.c) own their wire formats: they
 * fill a zl_request from a body (zl_verr naming the field on failure) and
 * provide a zl_emitter that writes results in their shape.  They never
 * render templates, tokenize, check limits or submit: pipeline.c does, once.
 * Nothing here knows HTTP. */
#ifndef ZL_REQUEST_H
#define ZL_REQUEST_H

#include <jansson.h>

#include "gen.h"
#include "jsonv.h"
#include "outsplit.h"
#include "toolcall.h"

#define ZL_REQ_MAX_STOPS 16
#define ZL_REQ_MAX_CHOICES 64
#define ZL_REQ_MAX_LOGIT_BIAS 1024

typedef enum {
    ZL_REQ_CHAT = 0,   /* OpenAI chat: messages through the chat template */
    ZL_REQ_COMPLETION, /* OpenAI completions: raw prompts */
    ZL_REQ_MESSAGES,   /* Anthropic messages: messages through the chat template */
} zl_req_kind;

/* One turn, normalized: its role (system, user, assistant, tool) and its
 * text parts concatenated.  Tool calls of an assistant turn and the call a
 * tool turn answers become fields beside text (docs/DESIGN.md). */
typedef struct zl_request_msg {
    const char *role; /* static or borrowed from the body */
    zl_buf text;      /* owned, NUL-terminated */
    json_t *tool_calls;       /* assistant: [{id, type, function: {name, arguments (an object)}}], owned; or NULL */
    const char *tool_call_id; /* tool: the call it answers (borrowed), or NULL */
} zl_request_msg;

/* What the caller allows the model to call (tools.c). */
typedef enum {
    ZL_TOOLS_AUTO = 0, /* the model chooses (OpenAI auto, Anthropic auto) */
    ZL_TOOLS_NONE,     /* no calls (the tools are still shown) */
    ZL_TOOLS_REQUIRED, /* at least one call (OpenAI required, Anthropic any) */
    ZL_TOOLS_NAMED,    /* a call of tool_name */
} zl_tool_choice;

/* One completions prompt: text, or a JSON array of token ids (checked
 * against the vocabulary by the pipeline). */
typedef struct zl_request_prompt {
    const char *text; /* borrowed from the body, or NULL */
    size_t len;
    json_t *ids;      /* borrowed array, or NULL */
    char param[32];   /* how the caller named it: "prompt", "prompt[2]" */
} zl_request_prompt;

typedef struct zl_request {
    zl_req_kind kind;
    json_t *body;      /* borrowed: session, controls (zerolayer.*) are read from it by the pipeline */
    const char *model; /* as the body names it, or NULL: the server's */
    const char *user;  /* tenant identity (OpenAI user, Anthropic metadata.user_id), or NULL */
    zl_buf system;     /* Anthropic top-level system (first message when set) */
    zl_request_msg *msgs; /* chat / messages (owned array) */
    int n_msgs;
    zl_request_prompt prompts[ZL_REQ_MAX_CHOICES]; /* completions */
    int n_prompts;
    zl_sampling sampling; /* the seed is drawn by the adapter when the body sets none */
    zl_logit_bias *bias;  /* owned; sampling.logit_bias points here */
    long long max_tokens; /* 0: up to the context */
    const char *stops[ZL_REQ_MAX_STOPS]; /* the caller's, borrowed */
    int n_stops;
    int n;             /* samples per prompt */
    int stream, include_usage;
    int timings_per_token; /* llama-server's field: every stream chunk carries the timings so far */
    int n_logprobs;    /* -1: none */
    int stream_buffer; /* body field; 0: the X-Zerolayer-Stream-Buffer header's */
    /* tools, structured output, reasoning (tools.c) */
    zl_tool *tools;    /* owned array; names, descriptions, schemas borrowed from the body */
    int n_tools;
    zl_tool_choice tool_choice;
    const char *tool_name;  /* ZL_TOOLS_NAMED */
    int parallel_tools;     /* several calls in one turn (default 1) */
    char *grammar;          /* owned grammar text (response_format, grammar), or NULL */
    const char *grammar_param; /* the field it came from, for messages */
    int reasoning_budget;   /* most thinking tokens; -1: no bound */
} zl_request;

/* What a request that sets no sampling field gets (the seed is drawn per request by the adapter). */
zl_sampling zl_request_sampling_defaults(void);
/* An empty request of kind over body: zl_request_sampling_defaults, n = 1, no logprobs. */
void zl_request_init(zl_request *q, zl_req_kind kind, json_t *body);
void zl_request_free(zl_request *q);
/* Append a message (role static or borrowed); returns its text buffer, or NULL when out of memory. */
zl_buf *zl_request_add_msg(zl_request *q, const char *role);

/* One choice's state as an emitter sees it: in a delta, the text and tokens
 * released since the last one; in a whole result, all of them. */
/* What an event brings of one tool call: the call's head (id and name) the
 * first time, then the fragments of its arguments as they are written; the
 * fragments of a call add up to its final arguments text. */
typedef struct zl_call_delta {
    int k;            /* the call's index in its choice */
    int head;         /* first time out: its id and name go with this fragment */
    const char *args; /* the arguments text new since the last event (whole in a whole result) */
    size_t args_len;
} zl_call_delta;

typedef struct zl_event {
    int choice;
    const char *text;
    size_t len;
    const zl_job_tok *toks; /* with logprobs, else NULL */
    int n_toks;
    zl_gen_end end;   /* ZL_GEN_RUNNING while the choice goes on */
    const char *stop; /* the caller's stop sequence that ended it, or NULL */
    const char *reasoning;  /* thinking text released with this event (outsplit.h) */
    size_t reasoning_len;
    const zl_tc_parser *calls; /* the choice's tool calls, or NULL when the request has no tools */
    const zl_call_delta *cd;   /* what is new of the calls in this event (every call, whole, in a whole result) */
    int n_cd;
} zl_event;

typedef struct zl_result {
    zl_gen *g;           /* the generations (token pieces for logprobs) */
    zl_req_kind kind;
    char id[64];
    char model[256];
    long long created;   /* unix seconds */
    int n;               /* choices */
    int n_per_prompt;    /* the request's n: usage counts a prompt once */
    int include_usage, logprobs, timings_per_token;
    int n_user_stops;    /* stops[0..n_user_stops) are the caller's */
    int prompt_tokens;   /* of the first choice, known before the generation */
    int failed;          /* some choice ended with an error */
    const char *grammar_param; /* the field the generation's grammar came from (static), or NULL */
    zl_gen_timing timing; /* filled once every choice has ended */
    struct zl_choice_split *split; /* per choice: reasoning / answer / calls, or NULL (tools.c) */
} zl_result;

/* Timings (and usage counters) as the "timings" object of both APIs' results,
 * and as a Server-Timing header value. */
json_t *zl_timings_json(const zl_gen_timing *t);
void zl_server_timing(const zl_gen_timing *t, char *buf, size_t cap);

/* Choice i of a whole result (all its text). */
void zl_result_choice(const zl_result *res, int i, zl_event *ev);
/* How the API reports a failed choice i (pipeline.c): the kind (http.h:
 * ZL_E_INVALID naming *param when the request's grammar went over the
 * matcher's work bound mid-generation, ZL_E_UNAVAILABLE when the failure was
 * transient and came before any token, else ZL_E_INTERNAL) and msg
 * ("generation failed: <the job's reason>"). */
int zl_result_error(const zl_result *res, int i, const char **param, char *msg, size_t cap);

struct zl_sse;
/* An API's output shape.  Streams: start once, delta whenever a choice has
 * new text or tokens or has just ended, error when a choice failed, end
 * once every choice has ended (res->timing set, res->failed told).  body:
 * the non-streamed reply (NULL when out of memory). */
typedef struct zl_emitter {
    const char *id_prefix;
    void (*start)(struct zl_sse *s, const zl_result *res);
    void (*delta)(struct zl_sse *s, const zl_result *res, const zl_event *ev);
    void (*error)(struct zl_sse *s, const zl_result *res, int choice);
    void (*end)(struct zl_sse *s, const zl_result *res);
    json_t *(*body)(const zl_result *res);
} zl_emitter;

#endif
