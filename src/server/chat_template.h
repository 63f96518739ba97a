/* chat_template.h — render a conversation into the prompt text a chat model
 * was trained on.
 *
 * GGUF files carry the template as Jinja source (tokenizer.chat_template).
 * The server renders that source with the interpreter of src/template
 * (zl_chat_fmt below) exactly as python's jinja2 would; the hand-written C
 * families below are the fallback for models without a template (chosen by
 * architecture: gemma3 -> gemma), for a template that does not parse, and for
 * --chat-template NAME.  The rendered text contains special-token text
 * ("<|im_start|>") and must be tokenized with parse_special; BOS is not part of
 * the text (the tokenizer adds it as the model's metadata asks: a template's
 * leading bos_token text is dropped, as llama.cpp does).
 *
 * Plain rendering (base models without a template, e.g. stories260K): the
 * system prompt, if any, then a blank line, then one line per message as
 * "User: ..." / "Assistant: ...", ending with "Assistant:" (no trailing
 * space).  The server adds "\nUser:" as a stop sequence for this family so a
 * base model cannot answer on the user's behalf. */
#ifndef ZL_CHAT_TEMPLATE_H
#define ZL_CHAT_TEMPLATE_H

#include <stddef.h>

#include "../base/err.h"

typedef enum {
    ZL_TPL_PLAIN = 0,
    ZL_TPL_CHATML,
    ZL_TPL_LLAMA2,
    ZL_TPL_LLAMA3,
    ZL_TPL_MISTRAL,
    ZL_TPL_PHI3,
    ZL_TPL_GEMMA,
    ZL_TPL_ZEPHYR,
} zl_tpl;

typedef struct zl_chat_msg {
    const char *role; /* "system", "user", "assistant" (others render as user) */
    const char *content;
} zl_chat_msg;

/* Family of a Jinja template source; NULL, empty or unknown -> PLAIN
 * (*known is set to 0 for an unknown non-empty template). */
zl_tpl zl_tpl_detect(const char *jinja, int *known);
/* By name ("chatml", "qwen", "llama2", "llama3", "mistral", "phi3", "gemma",
 * "zephyr", "plain"); -1 if unknown. */
int zl_tpl_from_name(const char *name);
const char *zl_tpl_name(zl_tpl t);
/* Render; when the last message is from the assistant its turn is left open
 * (the model continues it), otherwise the assistant's turn is opened.
 * Returns malloc'd text or NULL when out of memory. */
char *zl_tpl_render(zl_tpl t, const zl_chat_msg *msgs, int n);
/* A stop string the family needs beyond the model's end-of-turn token, or NULL. */
const char *zl_tpl_extra_stop(zl_tpl t);
struct zl_llm;
/* The model's tokenizer.chat_template (malloc'd), or NULL (none, or llm NULL). */
char *zl_tpl_model_source(const struct zl_llm *llm);
/* The family for a model without a template, by its general.architecture
 * (len bytes; NULL: unknown). */
zl_tpl zl_tpl_for_arch(const char *arch, size_t len);

/* ---------------- what the server renders with ---------------- */

struct zl_jinja;

typedef struct zl_chat_fmt {
    zl_tpl family;          /* used when jinja is NULL */
    struct zl_jinja *jinja; /* the model's (or --chat-template-file's) template */
    char *bos, *eos;        /* special-token text the template sees */
    int strip_bos, strip_eos; /* the tokenizer adds these itself: drop them from the text */
    char name[96];          /* for the start-up line */
    int tc_format;          /* zl_tc_format its text suggests (toolcall.h); 0 (generic) for a family */
    int takes_tools;        /* it presents `tools` and renders tool_calls / tool turns itself */
    int thinks;             /* it writes <think> blocks */
} zl_chat_fmt;

/* Choose: template_file (Jinja source; must parse), else a forced family
 * name, else the model's tokenizer.chat_template (one that does not parse
 * falls back to the family its markers suggest, with a warning on stderr),
 * else the family of the model's architecture.  0 or an error code. */
int zl_chat_fmt_setup(zl_chat_fmt *f, const struct zl_llm *llm, const char *family_name, const char *template_file,
                      zl_err *err);
/* Jinja source directly (tests): bos/eos text, whether the tokenizer adds them. */
int zl_chat_fmt_jinja(zl_chat_fmt *f, const char *src, size_t n, const char *bos, const char *eos, int strip_bos,
                      int strip_eos, zl_err *err);
void zl_chat_fmt_free(zl_chat_fmt *f);
/* The prompt text (malloc'd) or NULL with err: ZL_ENOMEM, or ZL_EINVAL with
 * the template's own message (raise_exception) — the request's fault.
 * messages are dicts {role, content}; add_generation_prompt is true; a
 * trailing assistant message is rendered as the open assistant turn. */
char *zl_chat_fmt_render(const zl_chat_fmt *f, const zl_chat_msg *msgs, int n, zl_err *err);
/* The same from messages as JSON (OpenAI's shape: role, content, tool_calls
 * with arguments as objects, tool_call_id) and tools (the template's
 * `tools`, or NULL).  A built-in family reads role and content only. */
struct json_t;
char *zl_chat_fmt_render_json(const zl_chat_fmt *f, const struct json_t *messages, const struct json_t *tools,
                              zl_err *err);
int zl_chat_fmt_parse_special(const zl_chat_fmt *f);
const char *zl_chat_fmt_extra_stop(const zl_chat_fmt *f);

#endif
