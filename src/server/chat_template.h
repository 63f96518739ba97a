/* chat_template.h — render a conversation into the prompt text a chat model
 * was trained on.
 *
 * GGUF files carry the template as Jinja source (tokenizer.chat_template).
 * We do not run Jinja: the family is recognised from marker strings in the
 * source and rendered by hand-written C, which covers the families below.
 * The rendered text contains special-token text ("<|im_start|>") and must be
 * tokenized with parse_special; BOS is not part of the text (the tokenizer
 * adds it as the model's metadata asks).
 *
 * Plain rendering (base models without a template, e.g. stories260K): the
 * system prompt, if any, then a blank line, then one line per message as
 * "User: ..." / "Assistant: ...", ending with "Assistant:" (no trailing
 * space).  The server adds "\nUser:" as a stop sequence for this family so a
 * base model cannot answer on the user's behalf. */
#ifndef ZL_CHAT_TEMPLATE_H
#define ZL_CHAT_TEMPLATE_H

#include <stddef.h>

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
/* tokenizer.chat_template of a GGUF file (malloc'd) or NULL. */
char *zl_tpl_read_gguf(const char *path);

#endif
