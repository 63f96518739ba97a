/* chat_template.c — the server's chat formatting: the model's Jinja
 * template through src/template, or hand-written renderers for the common
 * families (recognised by marker strings) when there is none; see
 * chat_template.h for the plain rendering of template-less models.  Knows
 * nothing of HTTP: render errors are returned for the adapters to report. */
#include "chat_template.h"
#include "toolcall.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../template/jinja.h"
#include "jsonv.h"
#include "zerolayer.h"

typedef zl_buf tbuf;

static void put(tbuf *b, const char *s) { zl_buf_puts(b, s); }

/* s without leading/trailing whitespace when trim (python's str.strip on ASCII) */
static void put_trimmed(tbuf *b, const char *s, int trim) {
    size_t a = 0, e = strlen(s);
    while (trim && a < e && strchr(" \t\n\r\v\f", s[a])) a++;
    while (trim && e > a && strchr(" \t\n\r\v\f", s[e - 1])) e--;
    zl_buf_put(b, s + a, e - a);
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
            put_trimmed(b, m[i].content, !mistral);
            if (!last) put(b, mistral ? "</s>" : " </s>");
            continue;
        }
        if (!first_user && !mistral) put(b, "<s>");
        put(b, "[INST] ");
        if (first_user && sys) {
            if (mistral) putv(b, 2, sys, "\n\n");
            else putv(b, 3, "<<SYS>>\n", sys, "\n<</SYS>>\n\n");
        }
        put_trimmed(b, m[i].content, !mistral);
        put(b, " [/INST]");
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
            putv(b, 3, "<|start_header_id|>", role, "<|end_header_id|>\n\n");
            put_trimmed(b, c, 1);
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
            put_trimmed(b, c, 1);
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

char *zl_tpl_model_source(const zl_llm *llm) {
    const char *s;
    size_t n;
    if (!llm || zl_llm_meta_str(llm, "tokenizer.chat_template", &s, &n)) return NULL;
    char *out = malloc(n + 1);
    if (out) {
        memcpy(out, s, n);
        out[n] = 0;
    }
    return out;
}

zl_tpl zl_tpl_for_arch(const char *arch, size_t len) {
    return arch && len >= 5 && !memcmp(arch, "gemma", 5) ? ZL_TPL_GEMMA : ZL_TPL_PLAIN;
}

static zl_tpl model_family(const zl_llm *llm) {
    const char *arch = NULL;
    size_t len = 0;
    if (llm) zl_llm_meta_str(llm, "general.architecture", &arch, &len);
    return zl_tpl_for_arch(arch, len);
}

/* ---------------- zl_chat_fmt ---------------- */

void zl_chat_fmt_free(zl_chat_fmt *f) {
    zl_jinja_free(f->jinja);
    free(f->bos);
    free(f->eos);
    memset(f, 0, sizeof *f);
}

static char *dupz(const char *s) {
    size_t n = strlen(s ? s : "");
    char *p = malloc(n + 1);
    if (p) memcpy(p, s ? s : "", n + 1);
    return p;
}

int zl_chat_fmt_jinja(zl_chat_fmt *f, const char *src, size_t n, const char *bos, const char *eos, int strip_bos,
                      int strip_eos, zl_err *err) {
    memset(f, 0, sizeof *f);
    int rc = zl_jinja_parse(&f->jinja, src, n, err);
    if (rc) return rc;
    f->bos = dupz(bos);
    f->eos = dupz(eos);
    if (!f->bos || !f->eos) {
        zl_chat_fmt_free(f);
        return zl_errf(err, ZL_ENOMEM, "out of memory");
    }
    f->strip_bos = strip_bos && *f->bos;
    f->strip_eos = strip_eos && *f->eos;
    f->family = ZL_TPL_CHATML; /* unused with a template; anything but plain */
    snprintf(f->name, sizeof f->name, "jinja");
    /* what the template does with tools and thinking, from its text */
    char *z = malloc(n + 1);
    if (z) {
        memcpy(z, src, n);
        z[n] = 0;
        f->tc_format = (int)zl_tc_detect(z);
        f->takes_tools = zl_tc_template_takes_tools(z);
        f->thinks = strstr(z, "<think>") != NULL;
        free(z);
    }
    return 0;
}

/* special-token text of one id ("" when the vocabulary has none) */
static char *token_text(const zl_llm *llm, int32_t id) {
    char *s = NULL;
    size_t n = 0;
    if (id < 0 || zl_llm_detokenize(llm, &id, 1, 1, &s, &n, NULL)) return dupz("");
    return s;
}

/* whether tokenizing with add_special puts BOS first / EOS last */
static void adds_special(const zl_llm *llm, int *bos, int *eos) {
    int32_t *ids = NULL;
    size_t n = 0;
    *bos = *eos = 0;
    if (zl_llm_tokenize(llm, "a", 1, 1, 0, &ids, &n, NULL)) return;
    *bos = n > 0 && zl_llm_bos(llm) >= 0 && ids[0] == zl_llm_bos(llm);
    *eos = n > 1 && zl_llm_eos(llm) >= 0 && ids[n - 1] == zl_llm_eos(llm);
    free(ids);
}

static char *read_file(const char *path, size_t *n, zl_err *err) {
    FILE *fp = fopen(path, "rb");
    if (!fp) { zl_errf(err, ZL_EIO, "--chat-template-file %s: cannot open it", path); return NULL; }
    char *p = NULL;
    size_t cap = 0;
    *n = 0;
    for (;;) {
        if (*n + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            if (cap > (64u << 20)) { fclose(fp); free(p); zl_errf(err, ZL_EINVAL, "--chat-template-file %s: larger than 64 MiB", path); return NULL; }
            char *np = realloc(p, cap);
            if (!np) { fclose(fp); free(p); zl_errf(err, ZL_ENOMEM, "out of memory"); return NULL; }
            p = np;
        }
        size_t k = fread(p + *n, 1, 4096, fp);
        *n += k;
        if (k < 4096) break;
    }
    int bad = ferror(fp);
    fclose(fp);
    if (bad) { free(p); zl_errf(err, ZL_EIO, "--chat-template-file %s: read error", path); return NULL; }
    p[*n] = 0;
    return p;
}

int zl_chat_fmt_setup(zl_chat_fmt *f, const zl_llm *llm, const char *family_name, const char *template_file,
                      zl_err *err) {
    memset(f, 0, sizeof *f);
    if (family_name) {
        int t = zl_tpl_from_name(family_name);
        if (t < 0) return zl_errf(err, ZL_EINVAL, "--chat-template: unknown template '%s'", family_name);
        f->family = (zl_tpl)t;
        snprintf(f->name, sizeof f->name, "%s (--chat-template)", zl_tpl_name(f->family));
        return 0;
    }
    size_t n = 0;
    char *src = NULL;
    if (template_file) {
        if (!(src = read_file(template_file, &n, err))) return err ? err->code : ZL_EIO;
    } else if ((src = zl_tpl_model_source(llm))) {
        n = strlen(src);
    }
    if (!src) {
        f->family = model_family(llm);
        snprintf(f->name, sizeof f->name, "%s (the model has no template)", zl_tpl_name(f->family));
        return 0;
    }
    int add_bos = 0, add_eos = 0;
    if (llm) adds_special(llm, &add_bos, &add_eos);
    char *bos = llm ? token_text(llm, zl_llm_bos(llm)) : dupz("");
    char *eos = llm ? token_text(llm, zl_llm_eos(llm)) : dupz("");
    zl_err perr = {0};
    int rc = bos && eos ? zl_chat_fmt_jinja(f, src, n, bos, eos, add_bos, add_eos, &perr)
                        : zl_errf(&perr, ZL_ENOMEM, "out of memory");
    free(bos);
    free(eos);
    if (rc == 0) {
        snprintf(f->name, sizeof f->name, "jinja (%s)", template_file ? template_file : "the model's tokenizer.chat_template");
        free(src);
        return 0;
    }
    if (template_file || rc == ZL_ENOMEM) {
        free(src);
        return zl_errf(err, rc, "%s: %s", template_file ? template_file : "chat template", perr.msg);
    }
    int known = 1;
    f->family = zl_tpl_detect(src, &known);
    free(src);
    fprintf(stderr, "zerolayer: warning: the model's chat template does not parse (%s); using the %s rendering\n",
            perr.msg, zl_tpl_name(f->family));
    snprintf(f->name, sizeof f->name, "%s (fallback: the model's template does not parse)", zl_tpl_name(f->family));
    return 0;
}

int zl_chat_fmt_parse_special(const zl_chat_fmt *f) { return f->jinja || f->family != ZL_TPL_PLAIN; }

const char *zl_chat_fmt_extra_stop(const zl_chat_fmt *f) { return f->jinja ? NULL : zl_tpl_extra_stop(f->family); }

char *zl_chat_fmt_render(const zl_chat_fmt *f, const zl_chat_msg *msgs, int n, zl_err *err) {
    if (!f->jinja) {
        char *s = zl_tpl_render(f->family, msgs, n);
        if (!s) zl_errf(err, ZL_ENOMEM, "out of memory");
        return s;
    }
    json_t *arr = json_array();
    for (int i = 0; arr && i < n; i++) {
        json_t *m = json_pack("{s:s,s:s}", "role", msgs[i].role ? msgs[i].role : "user", "content",
                              msgs[i].content ? msgs[i].content : "");
        if (!m || json_array_append_new(arr, m)) { json_decref(arr); arr = NULL; }
    }
    if (!arr) {
        zl_errf(err, ZL_ENOMEM, "out of memory");
        return NULL;
    }
    char *res = zl_chat_fmt_render_json(f, arr, NULL, err);
    json_decref(arr);
    return res;
}

char *zl_chat_fmt_render_json(const zl_chat_fmt *f, const json_t *messages, const json_t *tools, zl_err *err) {
    size_t n = json_array_size(messages);
    const json_t *last = n ? json_array_get(messages, n - 1) : NULL;
    const char *last_role = json_string_value(json_object_get(last, "role"));
    /* a trailing assistant message (without calls) is the open turn: render
     * the rest with the generation prompt, then its text */
    int prefill = last_role && !strcmp(last_role, "assistant") && !json_object_get(last, "tool_calls");
    const char *tail = prefill ? json_string_value(json_object_get(last, "content")) : NULL;
    if (!tail) tail = "";
    if (!f->jinja) { /* a built-in family: role and text only */
        zl_chat_msg *m = calloc(n + 1, sizeof *m);
        if (!m) {
            zl_errf(err, ZL_ENOMEM, "out of memory");
            return NULL;
        }
        for (size_t i = 0; i < n; i++) {
            const json_t *x = json_array_get(messages, i);
            m[i].role = json_string_value(json_object_get(x, "role"));
            m[i].content = json_string_value(json_object_get(x, "content"));
            if (!m[i].content) m[i].content = "";
        }
        char *s = zl_tpl_render(f->family, m, (int)n);
        free(m);
        if (!s) zl_errf(err, ZL_ENOMEM, "out of memory");
        return s;
    }
    json_t *arr = json_array();
    for (size_t i = 0; arr && i + (prefill ? 1 : 0) < n; i++) json_array_append(arr, json_array_get(messages, i));
    char *js = arr ? json_dumps(arr, JSON_COMPACT) : NULL;
    char *tj = tools && json_array_size(tools) ? json_dumps(tools, JSON_COMPACT) : NULL;
    json_decref(arr);
    zl_jinja_vars *v = js ? zl_jinja_vars_new() : NULL;
    char *out = NULL;
    size_t len = 0;
    int rc = !v || (tools && json_array_size(tools) && !tj) ? zl_errf(err, ZL_ENOMEM, "out of memory") : 0;
    if (!rc) rc = zl_jinja_vars_json(v, "messages", js, strlen(js), err);
    if (!rc && tj) rc = zl_jinja_vars_json(v, "tools", tj, strlen(tj), err);
    if (!rc) rc = zl_jinja_vars_str(v, "bos_token", f->bos, err);
    if (!rc) rc = zl_jinja_vars_str(v, "eos_token", f->eos, err);
    if (!rc) rc = zl_jinja_vars_bool(v, "add_generation_prompt", 1, err);
    if (!rc) rc = zl_jinja_render(f->jinja, v, NULL, &out, &len, err);
    zl_jinja_vars_free(v);
    free(js);
    free(tj);
    if (rc) return NULL;
    size_t bl = strlen(f->bos), el = strlen(f->eos), start = 0;
    if (f->strip_bos && len >= bl && !memcmp(out, f->bos, bl)) start = bl;
    if (f->strip_eos && !prefill && len - start >= el && !memcmp(out + len - el, f->eos, el)) len -= el;
    size_t tl = strlen(tail);
    char *res = malloc(len - start + tl + 1);
    if (!res) { free(out); zl_errf(err, ZL_ENOMEM, "out of memory"); return NULL; }
    memcpy(res, out + start, len - start);
    memcpy(res + len - start, tail, tl + 1);
    free(out);
    return res;
}
