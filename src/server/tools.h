/* tools.h — tools, structured output and reasoning on the one generation
 * pipeline: what the adapters' zl_request fields become.
 *
 *   render   a conversation with tools or tool turns goes to the template
 *            as JSON (OpenAI's shape): a template that takes tools gets
 *            them and the calls as is; another gets plain turns
 *            (zl_tc_plain_messages)
 *   plan     the grammar of the generation: the request's grammar
 *            (response_format, grammar), else the calls' grammar when a
 *            call is required (forced from the first token), else a lazy
 *            grammar that starts at the format's call opener (tool_choice
 *            auto); and whether the output is split into reasoning, answer
 *            and calls
 *   split    per choice, the released text through zl_outsplit; the
 *            adapters read reasoning, content and calls from zl_event
 * Never knows the wire shapes (the adapters') or tokens (the engine's). */
#ifndef ZL_TOOLS_H
#define ZL_TOOLS_H

#include "chat_template.h"
#include "request.h"

void zl_request_tools_free(zl_request *q);

/* ---- parsing helpers shared by the adapters (-1 with e set on failure) ---- */
/* The body's "tools" (absent or null: none): an array of objects, each
 * handed to the adapter's one(t, "tools[i]", q, e), which reads its wire
 * shape and calls zl_tools_add. */
int zl_tools_each(json_t *b, zl_request *q, int (*one)(json_t *t, const char *path, zl_request *q, zl_verr *e),
                  zl_verr *e);
/* A tool_choice that asks for a call needs tools. */
int zl_tools_check_choice(const zl_request *q, zl_verr *e);
/* Add a tool (name [A-Za-z0-9_-]{1,64}; schema NULL or an object, borrowed). */
int zl_tools_add(zl_request *q, const char *name, const char *desc, json_t *schema, const char *path, zl_verr *e);
/* q->grammar from a JSON Schema (param names the field in messages), from
 * "any JSON object", or from grammar text. */
int zl_tools_schema(zl_request *q, json_t *schema, const char *param, zl_verr *e);
int zl_tools_json_object(zl_request *q, const char *param, zl_verr *e);
int zl_tools_grammar_text(zl_request *q, const char *text, const char *param, zl_verr *e);
/* A call's arguments as an object: JSON text is parsed, an object taken
 * (new reference); NULL when neither. */
json_t *zl_tools_args_object(json_t *args);
/* {id, type: function, function: {name, arguments}} of one call (the shape
 * templates read), appended to *calls (created on first use). */
int zl_tools_add_call(json_t **calls, const char *id, const char *name, json_t *args_obj);
/* Whether q renders through the JSON path (tools, calls or tool turns). */
int zl_tools_renders(const zl_request *q);
/* The prompt text of q's conversation (malloc'd) or NULL with err. */
char *zl_tools_render(const zl_chat_fmt *f, const zl_request *q, zl_err *err);

typedef struct zl_tools_plan {
    char *grammar;       /* owned, or NULL */
    const char *trigger; /* lazy grammar's opener (static), or NULL */
    const char *grammar_param; /* the field the grammar came from (static: response_format..., grammar, tools) */
    int tools;           /* parse calls out of the output */
    int think, think_inside;
    zl_tc_format format;
} zl_tools_plan;
/* prompt: the rendered text (where a thinking block may already be open).
 * Returns 0, or -1 with e naming the field (an unsupported schema keyword,
 * an unknown tool name, a grammar that does not parse or whose start is
 * over the matcher's work bound). */
int zl_tools_plan_make(const zl_chat_fmt *f, const zl_request *q, const char *prompt, zl_tools_plan *pl, zl_verr *e);
void zl_tools_plan_free(zl_tools_plan *pl);

/* Per-choice splitting of a result (res->split). */
int zl_tools_split_init(zl_result *res, const zl_tools_plan *pl);
void zl_tools_split_free(zl_result *res);
/* Feed what choice i released since the last call (ended: flush) and fill
 * ev's text, reasoning and calls: what is new (whole = 0) or everything
 * (whole = 1). */
void zl_tools_event(const zl_result *res, int i, int ended, int whole, zl_event *ev);
/* A stream's open content block of choice i (Anthropic's blocks): [0] the
 * next block index, [1] the open block's kind (0: none), [2] the call of an
 * open tool_use block. */
int *zl_tools_blocks(const zl_result *res, int i);
/* Whether choice i made tool calls (the adapters' tool_calls / tool_use finish). */
int zl_tools_called(const zl_event *ev);
/* A call's id, unique within the response: prefix + result id + index. */
void zl_tools_call_id(const zl_result *res, int choice, int k, const char *prefix, char *out, size_t cap);

#endif
