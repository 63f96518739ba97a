/* chat_template.c — hand-written renderers for the common chat families.
 * Recognition is by marker strings because a Jinja interpreter is a larger
 * attack surface than the handful of formats models actually use; see
 * chat_template.h for the plain rendering of template-less models. */
#include "chat_template.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../gguf/gguf.h"

typedef struct tbuf {
    char *p;
    size_t n, cap;
    int oom;
} tbuf;

static void put(tbuf *b, const char *s) {
    size_t l = strlen(s);
    if (b->oom) return;
    if (b->n + l + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + l + 1) nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np) { b->oom = 1; return; }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, l);
    b->n += l;
    b->p[b->n] = 0;
}

static void putv(tbuf *b, int n, ...) {
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) put(b, va_arg(ap, const char *));
    va_end(ap);
}

zl_tpl zl_tpl_detect(const char *j, int *known) {
    if (known) *known = 1;
    if (!j || !*j) return ZL_TPL_PLAIN;
    if (strstr(j, "<|im_start|>")) return ZL_TPL_CHATML;
    if (strstr(j, "<|start_header_id|>")) return ZL_TPL_LLAMA3;
    if (strstr(j, "<start_of_turn>")) return ZL_TPL_GEMMA;
    if (strstr(j, "<|assistant|>") && strstr(j, "<|end|>")) return ZL_TPL_PHI3;
    if (strstr(j, "<|user|>")) return ZL_TPL_ZEPHYR;
    if (strstr(j, "[INST]")) return strstr(j, "<<SYS>>") ? ZL_TPL_LLAMA2 : ZL_TPL_MISTRAL;
    if (known) *known = 0;
    return ZL_TPL_PLAIN;
}

static const char *const names[] = {"plain", "chatml", "llama2", "llama3", "mistral", "phi3", "gemma", "zephyr"};

int zl_tpl_from_name(const char *name) {
    if (!strcmp(name, "qwen") || !strcmp(name, "qwen2")) return ZL_TPL_CHATML;
    for (int i = 0; i < (int)(sizeof names / sizeof *names); i++)
        if (!strcmp(name, names[i])) return i;
    return -1;
}

const char *zl_tpl_name(zl_tpl t) { return (unsigned)t < sizeof names / sizeof *names ? names[t] : "?"; }

const char *zl_tpl_extra_stop(zl_tpl t) { return t == ZL_TPL_PLAIN ? "\nUser:" : NULL; }

static int is_role(const zl_chat_msg *m, const char *r) { return m->role && !strcmp(m->role, r); }

/* Families without a system role fold the system prompt into the first user turn. */
static const char *first_system(const zl_chat_msg *m, int n) {
    return n > 0 && is_role(&m[0], "system") ? m[0].content : NULL;
}

static void render_llama2(tbuf *b, const zl_chat_msg *m, int n, int mistral) {
    const char *sys = first_system(m, n);
    int first_user = 1;
    for (int i = sys ? 1 : 0; i < n; i++) {
        int last = i == n - 1;
        if (is_role(&m[i], "assistant")) {
            put(b, mistral ? "" : " ");
            put(b, m[i].content);
            if (!last) put(b, mistral ? "</s>" : " </s>");
            continue;
        }
        if (!first_user && !mistral) put(b, "<s>");
        put(b, "[INST] ");
        if (first_user && sys) {
            if (mistral) putv(b, 2, sys, "\n\n");
            else putv(b, 3, "<<SYS>>\n", sys, "\n<</SYS>>\n\n");
        }
        putv(b, 2, m[i].content, " [/INST]");
        first_user = 0;
    }
}

static void render_turns(tbuf *b, zl_tpl t, const zl_chat_msg *m, int n) {
    const char *sys = t == ZL_TPL_GEMMA ? first_system(m, n) : NULL;
    for (int i = sys ? 1 : 0; i < n; i++) {
        int open = i == n - 1 && is_role(&m[i], "assistant");
        const char *role = is_role(&m[i], "assistant") ? "assistant" : is_role(&m[i], "system") ? "system" : "user";
        const char *c = m[i].content;
        switch (t) {
        case ZL_TPL_CHATML:
            putv(b, 4, "<|im_start|>", role, "\n", c);
            if (!open) put(b, "<|im_end|>\n");
            break;
        case ZL_TPL_LLAMA3:
            putv(b, 4, "<|start_header_id|>", role, "<|end_header_id|>\n\n", c);
            if (!open) put(b, "<|eot_id|>");
            break;
        case ZL_TPL_PHI3:
            putv(b, 4, "<|", role, "|>\n", c);
            if (!open) put(b, "<|end|>\n");
            break;
        case ZL_TPL_ZEPHYR:
            putv(b, 4, "<|", role, "|>\n", c);
            if (!open) put(b, "</s>\n");
            break;
        case ZL_TPL_GEMMA:
            putv(b, 3, "<start_of_turn>", strcmp(role, "assistant") ? "user" : "model", "\n");
            if (sys && i == 1) putv(b, 2, sys, "\n\n");
            put(b, c);
            if (!open) put(b, "<end_of_turn>\n");
            break;
        default: /* plain */
            if (!strcmp(role, "system")) putv(b, 2, c, "\n\n");
            else {
                putv(b, 3, strcmp(role, "assistant") ? "User: " : "Assistant: ", c, open ? "" : "\n");
            }
            break;
        }
        if (open) return;
    }
    switch (t) {
    case ZL_TPL_CHATML: put(b, "<|im_start|>assistant\n"); break;
    case ZL_TPL_LLAMA3: put(b, "<|start_header_id|>assistant<|end_header_id|>\n\n"); break;
    case ZL_TPL_PHI3:
    case ZL_TPL_ZEPHYR: put(b, "<|assistant|>\n"); break;
    case ZL_TPL_GEMMA: put(b, "<start_of_turn>model\n"); break;
    default: put(b, "Assistant:"); break;
    }
}

char *zl_tpl_render(zl_tpl t, const zl_chat_msg *msgs, int n) {
    tbuf b = {0};
    put(&b, "");
    if (t == ZL_TPL_LLAMA2 || t == ZL_TPL_MISTRAL) render_llama2(&b, msgs, n, t == ZL_TPL_MISTRAL);
    else render_turns(&b, t, msgs, n);
    if (b.oom) { free(b.p); return NULL; }
    return b.p;
}

char *zl_tpl_read_gguf(const char *path) {
    zl_gguf *g = NULL;
    if (zl_gguf_open(&g, path, NULL, NULL)) return NULL;
    zl_str s = {0};
    char *out = NULL;
    if (!zl_gguf_get_str(g, "tokenizer.chat_template", &s) && (out = malloc(s.len + 1))) {
        memcpy(out, s.ptr, s.len);
        out[s.len] = 0;
    }
    zl_gguf_close(g);
    return out;
}
