/* toolcall.h — tool calls as a model writes them: presenting tools, the
 * grammar a call must follow, and parsing calls back out of the output.
 *
 * Formats (chosen from the chat template's text, zl_tc_detect):
 *   HERMES   Qwen2.5 / Hermes: <tool_call>\n{"name": N, "arguments": {..}}\n</tool_call>
 *            (the template presents the tools itself)
 *   LLAMA3   Llama 3.1+: the whole reply is {"name": N, "parameters": {..}}
 *            (optionally after <|python_tag|>)
 *   MISTRAL  [TOOL_CALLS][{"name": N, "arguments": {..}}, ...]
 *   GENERIC  templates that know no tools (SmolLM2 and most others): the
 *            tools are described in a system message and calls are written
 *            as HERMES (an object or an array of objects inside the tags).
 * In every format but MISTRAL a reply that is just one call object (the tags
 * left out, as small models do) is a call too.
 * Pure functions of their inputs (jansson values); never HTTP, never tokens. */
#ifndef ZL_TOOLCALL_H
#define ZL_TOOLCALL_H

#include <jansson.h>
#include <stddef.h>

#include "../base/err.h"

typedef enum { ZL_TC_GENERIC = 0, ZL_TC_HERMES, ZL_TC_LLAMA3, ZL_TC_MISTRAL } zl_tc_format;

/* A tool: name, description (may be NULL), JSON Schema of its arguments
 * (NULL: any object).  Borrowed pointers. */
typedef struct zl_tool {
    const char *name;
    const char *description;
    const json_t *params;
} zl_tool;

typedef struct zl_tc_call {
    char *name;
    char *args; /* JSON object text without white space outside strings (a call being written: so far) */
} zl_tc_call;

zl_tc_format zl_tc_detect(const char *jinja_src);
const char *zl_tc_format_name(zl_tc_format f);
/* Whether the template presents tools itself (it reads the `tools` variable). */
int zl_tc_template_takes_tools(const char *jinja_src);

/* The tools in the shape templates iterate ([{type: function, function:
 * {name, description, parameters}}]); new reference. */
json_t *zl_tc_tools_json(const zl_tool *tools, int n);
/* The system text describing the tools for a template that does not take
 * them (malloc'd). */
char *zl_tc_system_prompt(zl_tc_format f, const zl_tool *tools, int n);
/* The text of an assistant turn that made calls, as the format writes it
 * (for templates that cannot render tool_calls; malloc'd). */
char *zl_tc_render_calls(zl_tc_format f, const zl_tc_call *calls, int n);

/* For a template that knows no tools: messages in the OpenAI shape (role,
 * content string, assistant tool_calls [{function: {name, arguments}}] with
 * arguments an object or JSON text, tool results with role "tool") become
 * plain {role, content} turns: the tools' description goes into the system
 * message (a new first one when there is none), calls are written as the
 * format writes them after the turn's text, and tool results become user
 * turns wrapped in <tool_response> tags.  New reference (NULL: out of
 * memory). */
json_t *zl_tc_plain_messages(zl_tc_format f, const json_t *messages, const zl_tool *tools, int n);

/* Grammar text for the calls: only tool `only` when non-NULL, else any of
 * the tools; several calls when parallel.  lazy: the grammar of what follows
 * the opener, with *trigger set to the opener text (the constraint starts
 * when the model writes it); else the whole reply must be calls.  Each
 * tool's arguments follow its schema (an unsupported keyword is ZL_EUNSUP
 * naming the tool).  Formats without an opener (LLAMA3) cannot be lazy:
 * *trigger is NULL and the result is NULL with no error. */
char *zl_tc_grammar(zl_tc_format f, const zl_tool *tools, int n, const char *only, int parallel, int lazy,
                    const char **trigger, zl_err *err);

/* Incremental parser of the model's output.  zl_tc_feed appends the text
 * that is plain content (safe to stream: a possible opener is held back) to
 * *content, and keeps the list of calls: the completed ones, then the ones
 * being written.  A call is in the list as soon as its name is complete and
 * its arguments object has begun; its args then grow with every feed, each
 * value extending the last (the model's own text with the white space
 * outside strings dropped), so a stream can send them as fragments whose
 * concatenation is the final arguments.  zl_tc_finish flushes (an unclosed
 * call whose JSON is complete still counts).  Text that never became such a
 * call (no name, no arguments object, JSON that does not parse) stays
 * content; a listed call stays a call even when the output ends inside it
 * (its arguments as far as they were written). */
typedef struct zl_tc_parser zl_tc_parser;
zl_tc_parser *zl_tc_parser_new(zl_tc_format f);
void zl_tc_parser_free(zl_tc_parser *p);
/* content: grows with malloc'd text; *content may be NULL at first. */
int zl_tc_feed(zl_tc_parser *p, const char *text, size_t n, char **content, size_t *content_len);
int zl_tc_finish(zl_tc_parser *p, char **content, size_t *content_len);
/* Calls listed so far (completed and being written), and call i (valid
 * until the next feed). */
int zl_tc_n_calls(const zl_tc_parser *p);
const zl_tc_call *zl_tc_get(const zl_tc_parser *p, int i);

#endif
