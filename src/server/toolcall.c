/* toolcall.c — tool-call formats (toolcall.h): detection, presentation,
 * call grammars and the streaming parser.
 *
 * Owns the spelling of calls in each format and nothing of the wire APIs:
 * adapters turn zl_tc_call into OpenAI tool_calls or Anthropic tool_use.
 * Never touches tokens, HTTP or the engine. */
#include "toolcall.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/buf.h"
#include "../grammar/grammar.h"

#define TC_OPEN "<tool_call>"
#define TC_CLOSE "</tool_call>"
#define TC_MISTRAL "[TOOL_CALLS]"
#define TC_PYTAG "<|python_tag|>"

zl_tc_format zl_tc_detect(const char *src) {
    if (!src) return ZL_TC_GENERIC;
    if (strstr(src, TC_OPEN)) return ZL_TC_HERMES;
    if (strstr(src, TC_MISTRAL)) return ZL_TC_MISTRAL;
    if (strstr(src, TC_PYTAG) || strstr(src, "ipython")) return ZL_TC_LLAMA3;
    return ZL_TC_GENERIC;
}

const char *zl_tc_format_name(zl_tc_format f) {
    switch (f) {
    case ZL_TC_HERMES: return "hermes";
    case ZL_TC_LLAMA3: return "llama3";
    case ZL_TC_MISTRAL: return "mistral";
    default: return "generic";
    }
}

int zl_tc_template_takes_tools(const char *src) {
    return src && strstr(src, "tools") && zl_tc_detect(src) != ZL_TC_GENERIC;
}

json_t *zl_tc_tools_json(const zl_tool *tools, int n) {
    json_t *arr = json_array();
    for (int i = 0; arr && i < n; i++) {
        json_t *fn = json_object();
        json_object_set_new(fn, "name", json_string(tools[i].name));
        if (tools[i].description) json_object_set_new(fn, "description", json_string(tools[i].description));
        json_object_set_new(fn, "parameters",
                            tools[i].params ? json_deep_copy(tools[i].params) : json_pack("{s:s}", "type", "object"));
        json_array_append_new(arr, json_pack("{s:s,s:o}", "type", "function", "function", fn));
    }
    return arr;
}

char *zl_tc_system_prompt(zl_tc_format f, const zl_tool *tools, int n) {
    zl_buf b = {0};
    json_t *tj = zl_tc_tools_json(tools, n);
    zl_buf_puts(&b, "You can call functions. Their signatures, as JSON, are listed between <tools> and </tools>:\n<tools>");
    for (size_t i = 0; tj && i < json_array_size(tj); i++) {
        char *s = json_dumps(json_array_get(tj, i), JSON_COMPACT);
        zl_buf_puts(&b, "\n");
        if (s) zl_buf_puts(&b, s);
        free(s);
    }
    json_decref(tj);
    if (f == ZL_TC_MISTRAL)
        zl_buf_puts(&b, "\n</tools>\nTo call functions, reply with [TOOL_CALLS] followed by a JSON array of "
                   "{\"name\": <function name>, \"arguments\": <arguments object>} and nothing else.");
    else if (f == ZL_TC_LLAMA3)
        zl_buf_puts(&b, "\n</tools>\nTo call a function, reply with only a JSON object "
                   "{\"name\": <function name>, \"parameters\": <arguments object>}.");
    else
        zl_buf_puts(&b, "\n</tools>\nTo call a function, write a JSON object with its name and arguments between "
                   "<tool_call> and </tool_call>:\n<tool_call>\n{\"name\": <function name>, \"arguments\": "
                   "<arguments object>}\n</tool_call>");
    return zl_buf_take(&b);
}

static void call_json(zl_buf *b, const zl_tc_call *c, const char *args_key) {
    json_t *name = json_string(c->name);
    char *ns = name ? json_dumps(name, JSON_ENCODE_ANY) : NULL;
    zl_buf_puts(b, "{\"name\": ");
    zl_buf_puts(b, ns ? ns : "\"\"");
    zl_buf_puts(b, ", \"");
    zl_buf_puts(b, args_key);
    zl_buf_puts(b, "\": ");
    zl_buf_puts(b, c->args && *c->args ? c->args : "{}");
    zl_buf_puts(b, "}");
    free(ns);
    json_decref(name);
}

char *zl_tc_render_calls(zl_tc_format f, const zl_tc_call *calls, int n) {
    zl_buf b = {0};
    if (f == ZL_TC_MISTRAL) {
        zl_buf_puts(&b, TC_MISTRAL "[");
        for (int i = 0; i < n; i++) {
            if (i) zl_buf_puts(&b, ", ");
            call_json(&b, &calls[i], "arguments");
        }
        zl_buf_puts(&b, "]");
    } else if (f == ZL_TC_LLAMA3) {
        for (int i = 0; i < n; i++) {
            if (i) zl_buf_puts(&b, "\n");
            call_json(&b, &calls[i], "parameters");
        }
    } else {
        for (int i = 0; i < n; i++) {
            if (i) zl_buf_puts(&b, "\n");
            zl_buf_puts(&b, TC_OPEN "\n");
            call_json(&b, &calls[i], "arguments");
            zl_buf_puts(&b, "\n" TC_CLOSE);
        }
    }
    return zl_buf_take(&b);
}

static const char *content_text(const json_t *m) {
    const char *c = json_string_value(json_object_get(m, "content"));
    return c ? c : "";
}

json_t *zl_tc_plain_messages(zl_tc_format f, const json_t *messages, const zl_tool *tools, int n) {
    json_t *out = json_array();
    char *sys = n > 0 ? zl_tc_system_prompt(f, tools, n) : NULL;
    if (!out || (n > 0 && !sys)) {
        json_decref(out);
        free(sys);
        return NULL;
    }
    size_t nm = json_array_size(messages);
    int sys_done = !sys;
    for (size_t i = 0; i < nm; i++) {
        const json_t *m = json_array_get(messages, i);
        const char *role = json_string_value(json_object_get(m, "role"));
        if (!role) role = "user";
        zl_buf b = {0};
        if (!strcmp(role, "system") && !sys_done) {
            zl_buf_puts(&b, content_text(m));
            zl_buf_puts(&b, "\n\n");
            zl_buf_puts(&b, sys);
            sys_done = 1;
        } else if (!strcmp(role, "tool")) {
            role = "user";
            zl_buf_puts(&b, "<tool_response>\n");
            zl_buf_puts(&b, content_text(m));
            zl_buf_puts(&b, "\n</tool_response>");
        } else {
            zl_buf_puts(&b, content_text(m));
            const json_t *tc = json_object_get(m, "tool_calls");
            size_t nc = json_array_size(tc);
            zl_tc_call *calls = nc ? calloc(nc, sizeof *calls) : NULL;
            for (size_t k = 0; calls && k < nc; k++) {
                const json_t *fn = json_object_get(json_array_get(tc, k), "function");
                const json_t *args = json_object_get(fn, "arguments");
                calls[k].name = (char *)json_string_value(json_object_get(fn, "name"));
                if (!calls[k].name) calls[k].name = "";
                calls[k].args = json_is_string(args) ? strdup(json_string_value(args))
                                : args ? json_dumps(args, JSON_COMPACT) : strdup("{}");
            }
            char *text = calls ? zl_tc_render_calls(f, calls, (int)nc) : NULL;
            if (text) {
                if (b.n) zl_buf_puts(&b, "\n");
                zl_buf_puts(&b, text);
            }
            free(text);
            for (size_t k = 0; calls && k < nc; k++) free(calls[k].args);
            free(calls);
        }
        if (!sys_done) { /* no system message: one first */
            json_array_append_new(out, json_pack("{s:s,s:s}", "role", "system", "content", sys));
            sys_done = 1;
        }
        char *t = zl_buf_take(&b);
        json_array_append_new(out, json_pack("{s:s,s:s}", "role", role, "content", t ? t : ""));
        free(t);
    }
    if (!sys_done) json_array_append_new(out, json_pack("{s:s,s:s}", "role", "system", "content", sys));
    free(sys);
    return out;
}

/* ---- grammars ---- */

char *zl_tc_grammar(zl_tc_format f, const zl_tool *tools, int n, const char *only, int parallel, int lazy,
                    const char **trigger, zl_err *err) {
    *trigger = NULL;
    if (lazy && f == ZL_TC_LLAMA3) return NULL;
    zl_buf b = {0};
    const char *args_key = f == ZL_TC_LLAMA3 ? "parameters" : "arguments";
    int n_alt = 0;
    zl_buf_puts(&b, "tc-call ::= ");
    zl_buf rules = {0};
    for (int i = 0; i < n; i++) {
        if (only && strcmp(tools[i].name, only)) continue;
        char prefix[32], top[64], *r = NULL;
        snprintf(prefix, sizeof prefix, "t%d-", i);
        char *schema = tools[i].params ? json_dumps(tools[i].params, JSON_COMPACT) : strdup("{\"type\":\"object\"}");
        int rc = schema ? zl_json_schema_rules(schema, strlen(schema), prefix, &r, top, sizeof top, err)
                        : zl_errf(err, ZL_ENOMEM, "out of memory");
        free(schema);
        if (rc) {
            zl_err_prefix(err, "tool '%.80s' parameters", tools[i].name);
            free(b.p);
            free(rules.p);
            return NULL;
        }
        zl_buf_puts(&rules, r);
        free(r);
        /* {"name": "NAME", "arguments": ARGS} */
        json_t *nm = json_string(tools[i].name);
        char *nj = nm ? json_dumps(nm, JSON_ENCODE_ANY) : NULL;
        json_decref(nm);
        zl_buf head = {0};
        zl_buf_puts(&head, "{\"name\": ");
        zl_buf_puts(&head, nj ? nj : "\"\"");
        zl_buf_puts(&head, ", \"");
        zl_buf_puts(&head, args_key);
        zl_buf_puts(&head, "\": ");
        free(nj);
        char *q = head.p ? zl_gbnf_quote(head.p, head.n) : NULL;
        free(head.p);
        if (n_alt++) zl_buf_puts(&b, " | ");
        zl_buf_puts(&b, q ? q : "\"\"");
        zl_buf_puts(&b, " ");
        zl_buf_puts(&b, top);
        zl_buf_puts(&b, " \"}\"");
        free(q);
    }
    if (!n_alt) {
        free(b.p);
        free(rules.p);
        zl_errf(err, ZL_EINVAL, only ? "tool_choice names '%.80s', which is not among the tools" : "no tools%s",
                only ? only : "");
        return NULL;
    }
    zl_buf_puts(&b, "\n");
    if (f == ZL_TC_MISTRAL) {
        if (lazy) *trigger = TC_MISTRAL;
        zl_buf_puts(&b, lazy ? "root ::= " : "root ::= \"[TOOL_CALLS]\" ");
        zl_buf_puts(&b, parallel ? "\"[\" tc-call ( \", \" tc-call )* \"]\"\n" : "\"[\" tc-call \"]\"\n");
    } else if (f == ZL_TC_LLAMA3) {
        zl_buf_puts(&b, "root ::= tc-call\n");
    } else {
        if (lazy) *trigger = TC_OPEN;
        zl_buf_puts(&b, lazy ? "root ::= \"\\n\" tc-call \"\\n</tool_call>\"" : "root ::= \"<tool_call>\\n\" tc-call \"\\n</tool_call>\"");
        if (!lazy && parallel) zl_buf_puts(&b, " ( \"\\n<tool_call>\\n\" tc-call \"\\n</tool_call>\" )*");
        zl_buf_puts(&b, "\n");
    }
    zl_buf_puts(&b, rules.p ? rules.p : "");
    zl_buf_puts(&b, zl_json_schema_prelude());
    free(rules.p);
    char *out = zl_buf_take(&b);
    if (!out) zl_errf(err, ZL_ENOMEM, "out of memory");
    return out;
}

/* ---- parsing ---- */

enum { TP_OUT = 0, TP_TAG, TP_JSON };

/* Where one call object's parts lie in a body's text, as far as it is
 * written (offsets into the body). */
typedef struct tc_view {
    size_t name_at, name_len; /* the name's JSON string, quotes included (0: not complete yet) */
    size_t args_at, args_len; /* the arguments value so far (0: not begun) */
    int args_done;            /* the arguments value is complete */
} tc_view;

struct zl_tc_parser {
    zl_tc_format f;
    int state;
    int started;  /* some non-space content was seen (LLAMA3 calls come first) */
    int after_call; /* drop one newline that follows a closing tag */
    zl_buf pend;    /* held text */
    zl_tc_call *calls; /* [0, n) complete, [n, n + n_live) being written (rebuilt by every feed) */
    int n, n_live, cap;
    tc_view *views;    /* the body's calls as scanned (scan_body) */
    int cap_views;
};

zl_tc_parser *zl_tc_parser_new(zl_tc_format f) {
    zl_tc_parser *p = calloc(1, sizeof *p);
    if (p) p->f = f;
    return p;
}

void zl_tc_parser_free(zl_tc_parser *p) {
    if (!p) return;
    for (int i = 0; i < p->n + p->n_live; i++) {
        free(p->calls[i].name);
        free(p->calls[i].args);
    }
    free(p->calls);
    free(p->views);
    free(p->pend.p);
    free(p);
}

int zl_tc_n_calls(const zl_tc_parser *p) { return p->n + p->n_live; }
const zl_tc_call *zl_tc_get(const zl_tc_parser *p, int i) {
    return i >= 0 && i < p->n + p->n_live ? &p->calls[i] : NULL;
}

/* Room for one more call at calls[n + n_live].  0 or -1. */
static int calls_grow(zl_tc_parser *p) {
    if (p->n + p->n_live < p->cap) return 0;
    int nc = p->cap ? p->cap * 2 : 4;
    zl_tc_call *t = realloc(p->calls, (size_t)nc * sizeof *t);
    if (!t) return -1;
    p->calls = t;
    p->cap = nc;
    return 0;
}

static int add_call(zl_tc_parser *p, const json_t *o) {
    const json_t *name = json_object_get(o, "name");
    const json_t *args = json_object_get(o, "arguments");
    if (!args) args = json_object_get(o, "parameters");
    if (!json_is_string(name)) return -1;
    json_t *parsed = NULL;
    if (json_is_string(args)) { /* arguments written as a JSON string */
        parsed = json_loads(json_string_value(args), 0, NULL);
        if (!json_is_object(parsed)) {
            json_decref(parsed);
            return -1;
        }
        args = parsed;
    }
    if (args && !json_is_object(args)) return -1;
    if (calls_grow(p)) {
        json_decref(parsed);
        return -1;
    }
    p->calls[p->n].name = strdup(json_string_value(name));
    p->calls[p->n].args = args ? json_dumps(args, JSON_COMPACT) : strdup("{}");
    json_decref(parsed);
    if (!p->calls[p->n].name || !p->calls[p->n].args) {
        free(p->calls[p->n].name);
        free(p->calls[p->n].args);
        return -1;
    }
    p->n++;
    return 0;
}

/* Calls from JSON text: an object or an array of objects; all or none. */
static int parse_calls(zl_tc_parser *p, const char *s, size_t n) {
    json_t *v = json_loadb(s, n, 0, NULL);
    if (!v) return -1;
    int n0 = p->n, rc = 0;
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v) && !rc; i++) rc = add_call(p, json_array_get(v, i));
        if (!json_array_size(v)) rc = -1;
    } else {
        rc = add_call(p, v);
    }
    json_decref(v);
    if (rc) {
        for (int i = n0; i < p->n; i++) {
            free(p->calls[i].name);
            free(p->calls[i].args);
        }
        p->n = n0;
    }
    return rc;
}

/* The string state of a JSON text scanned byte by byte: whether byte c is
 * inside a string (its quotes included: the opening one enters, the closing
 * one leaves after itself). */
typedef struct jstr {
    int in, esc;
} jstr;
static int jstr_step(jstr *j, char c) {
    if (!j->in) return (j->in = c == '"');
    if (j->esc) j->esc = 0;
    else if (c == '\\') j->esc = 1;
    else if (c == '"') j->in = 0;
    return 1;
}

static int is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

/* End of the JSON value starting at s[0] (after spaces), or 0 if it is not
 * complete yet. */
static size_t json_end(const char *s, size_t n) {
    int depth = 0, began = 0;
    jstr js = {0};
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!began && is_ws(c)) continue;
        began = 1;
        if (jstr_step(&js, c)) continue;
        if (c == '{' || c == '[') depth++;
        else if ((c == '}' || c == ']') && --depth == 0) return i + 1;
    }
    return 0;
}

/* ---- calls as they are written ---- */

static size_t skip_ws(const char *s, size_t n, size_t i) {
    while (i < n && is_ws(s[i])) i++;
    return i;
}

/* One past the closing quote of the JSON string at s[i] (a quote), or 0. */
static size_t str_end(const char *s, size_t n, size_t i) {
    for (size_t k = i + 1; k < n; k++) {
        if (s[k] == '\\') k++;
        else if (s[k] == '"') return k + 1;
    }
    return 0;
}

/* One past the JSON value at s[i] (not a space), or 0 when it may go on. */
static size_t value_end(const char *s, size_t n, size_t i) {
    if (s[i] == '"') return str_end(s, n, i);
    if (s[i] == '{' || s[i] == '[') {
        size_t e = json_end(s + i, n - i);
        return e ? i + e : 0;
    }
    for (size_t k = i; k < n; k++)
        if (s[k] == ',' || s[k] == '}' || s[k] == ']' || is_ws(s[k]))
            return k;
    return 0;
}

/* The call object at s[i]: 1 complete (*end one past it), 0 not complete
 * yet, -1 not an object of string keys.  v: its name and arguments as far
 * as they go. */
static int scan_call(const char *s, size_t n, size_t i, tc_view *v, size_t *end) {
    memset(v, 0, sizeof *v);
    i = skip_ws(s, n, i);
    if (i == n) return 0;
    if (s[i] != '{') return -1;
    for (i++;;) {
        i = skip_ws(s, n, i);
        if (i == n) return 0;
        if (s[i] == '}') break;
        if (s[i] != '"') return -1;
        size_t ke = str_end(s, n, i);
        if (!ke) return 0;
        const char *key = s + i + 1;
        size_t kl = ke - i - 2;
        i = skip_ws(s, n, ke);
        if (i == n) return 0;
        if (s[i] != ':') return -1;
        i = skip_ws(s, n, i + 1);
        if (i == n) return 0;
        size_t ve = value_end(s, n, i);
        if (kl == 4 && !memcmp(key, "name", 4)) {
            if (s[i] != '"') return -1;
            if (ve) v->name_at = i, v->name_len = ve - i;
        } else if ((kl == 9 && !memcmp(key, "arguments", 9)) || (kl == 10 && !memcmp(key, "parameters", 10))) {
            v->args_at = i;
            v->args_len = (ve ? ve : n) - i;
            v->args_done = ve != 0;
        }
        if (!ve) return 0;
        i = skip_ws(s, n, ve);
        if (i == n) return 0;
        if (s[i] == ',') {
            i++;
            continue;
        }
        if (s[i] != '}') return -1;
        break;
    }
    *end = i + 1;
    return 1;
}

/* The calls of a body (one object, or an array of them) as far as it is
 * written, into p->views; returns how many (the last may be incomplete). */
static int scan_body(zl_tc_parser *p, const char *s, size_t n) {
    int nv = 0;
    size_t i = skip_ws(s, n, 0), end = 0;
    int array = i < n && s[i] == '[';
    if (array) i++;
    for (;;) {
        i = skip_ws(s, n, i);
        if (i == n || (array && s[i] == ']')) return nv;
        if (nv == p->cap_views) {
            int nc = p->cap_views ? p->cap_views * 2 : 4;
            tc_view *t = realloc(p->views, (size_t)nc * sizeof *t);
            if (!t) return nv;
            p->views = t;
            p->cap_views = nc;
        }
        int r = scan_call(s, n, i, &p->views[nv], &end);
        if (r < 0) return nv;
        nv++;
        if (!r || !array) return nv;
        i = skip_ws(s, n, end);
        if (i == n || s[i] != ',') return nv;
        i++;
    }
}

/* A view that is a call being written: a complete name, an arguments object begun. */
static int view_live(const tc_view *v, const char *s) { return v->name_len && v->args_len && s[v->args_at] == '{'; }

/* JSON text without the white space outside its strings. */
static void minify(zl_buf *b, const char *s, size_t n) {
    jstr js = {0};
    size_t run = 0; /* start of the bytes not yet copied */
    for (size_t i = 0; i < n; i++) {
        if (jstr_step(&js, s[i]) || !is_ws(s[i])) continue;
        zl_buf_put(b, s + run, i - run);
        run = i + 1;
    }
    zl_buf_put(b, s + run, n - run);
}

/* Append view v of body s as a call (name decoded, arguments minified). 0 or -1. */
static int add_view_call(zl_tc_parser *p, const tc_view *v, const char *s) {
    json_t *nm = json_loadb(s + v->name_at, v->name_len, JSON_DECODE_ANY, NULL);
    zl_buf a = {0};
    minify(&a, s + v->args_at, v->args_len);
    char *args = zl_buf_take(&a);
    if (!json_is_string(nm) || !args || calls_grow(p)) {
        json_decref(nm);
        free(args);
        return -1;
    }
    zl_tc_call *c = &p->calls[p->n + p->n_live];
    c->name = strdup(json_string_value(nm));
    c->args = args;
    json_decref(nm);
    if (!c->name) {
        free(args);
        return -1;
    }
    return 0;
}

static void live_clear(zl_tc_parser *p) {
    for (int i = p->n; i < p->n + p->n_live; i++) {
        free(p->calls[i].name);
        free(p->calls[i].args);
    }
    p->n_live = 0;
}

/* The calls of the unfinished body in pend, listed as far as they go. */
static void live_update(zl_tc_parser *p) {
    live_clear(p);
    if (p->state != TP_TAG && p->state != TP_JSON) return;
    const char *s = p->pend.p;
    int nv = scan_body(p, s, p->pend.n);
    for (int k = 0; k < nv && view_live(&p->views[k], s); k++) {
        if (add_view_call(p, &p->views[k], s)) return;
        p->n_live++;
    }
}

/* The body s[0..n) ended: its calls become complete ones.  A body that
 * parses gives its calls, object arguments spelt as they were streamed
 * (minified, never re-encoded: the stream's fragments add up to them); one
 * that does not keeps the calls already listed, as far as they were
 * written.  Returns 0, or -1 when the body holds no call (it stays text). */
static int commit_calls(zl_tc_parser *p, const char *s, size_t n) {
    int nv = scan_body(p, s, n), n0 = p->n;
    int listed = p->n_live;
    zl_tc_call *was = listed ? malloc((size_t)listed * sizeof *was) : NULL;
    if (listed && was) memcpy(was, p->calls + n0, (size_t)listed * sizeof *was);
    else if (listed) live_clear(p);
    p->n_live = 0;
    int rc = parse_calls(p, s, n);
    for (int k = 0; !rc && k < p->n - n0 && k < nv; k++) {
        const tc_view *v = &p->views[k];
        if (!v->args_done || !view_live(v, s)) continue;
        zl_buf a = {0};
        minify(&a, s + v->args_at, v->args_len);
        char *args = zl_buf_take(&a);
        if (!args) continue;
        free(p->calls[n0 + k].args);
        p->calls[n0 + k].args = args;
    }
    if (rc) { /* not valid JSON: the listed calls stay, the longer of what was listed and what is written */
        for (int k = 0; k < nv && view_live(&p->views[k], s); k++) {
            if (add_view_call(p, &p->views[k], s)) break;
            zl_tc_call *c = &p->calls[p->n];
            if (was && k < listed && strlen(was[k].args) > strlen(c->args)) {
                free(c->args);
                c->args = was[k].args;
                was[k].args = NULL;
            }
            p->n++;
        }
        rc = p->n > n0 ? 0 : -1;
    }
    for (int k = 0; was && k < listed; k++) {
        free(was[k].name);
        free(was[k].args);
    }
    free(was);
    return rc;
}

static void out_add(char **content, size_t *len, const char *s, size_t n) {
    if (!n) return;
    char *t = realloc(*content, *len + n + 1);
    if (!t) return;
    memcpy(t + *len, s, n);
    *len += n;
    t[*len] = 0;
    *content = t;
}

/* Length of the longest suffix of s that is a proper prefix of w. */
static size_t partial_suffix(const char *s, size_t n, const char *w) {
    size_t wl = strlen(w);
    for (size_t k = wl - 1 < n ? wl - 1 : n; k > 0; k--)
        if (!memcmp(s + n - k, w, k)) return k;
    return 0;
}

static void pend_drop(zl_tc_parser *p, size_t k) {
    memmove(p->pend.p, p->pend.p + k, p->pend.n - k);
    p->pend.n -= k;
    if (p->pend.p) p->pend.p[p->pend.n] = 0;
}

static const char *opener(zl_tc_format f) { return f == ZL_TC_MISTRAL ? TC_MISTRAL : f == ZL_TC_LLAMA3 ? TC_PYTAG : TC_OPEN; }

static void step(zl_tc_parser *p, char **content, size_t *clen, int final) {
    for (;;) {
        char *s = p->pend.p;
        size_t n = p->pend.n;
        if (!n) return;
        if (p->state == TP_OUT) {
            if (p->after_call) {
                p->after_call = 0;
                if (s[0] == '\n') {
                    pend_drop(p, 1);
                    continue;
                }
            }
            if (p->f != ZL_TC_MISTRAL && !p->started) {
                /* a reply that is one JSON object may be a call written without its tags */
                size_t k = 0;
                while (k < n && (s[k] == ' ' || s[k] == '\n')) k++;
                if (k == n) {
                    if (!final) return;
                    p->started = 1;
                    continue;
                }
                if (s[k] == '{') {
                    p->state = TP_JSON;
                    p->started = 1;
                    continue;
                }
                int py = p->f == ZL_TC_LLAMA3;
                if (py && n - k < strlen(TC_PYTAG) && !memcmp(s + k, TC_PYTAG, n - k) && !final) return;
                if (py && n - k >= strlen(TC_PYTAG) && !memcmp(s + k, TC_PYTAG, strlen(TC_PYTAG))) {
                    pend_drop(p, k + strlen(TC_PYTAG));
                    p->state = TP_JSON;
                    p->started = 1;
                    continue;
                }
                p->started = 1;
            }
            const char *op = opener(p->f);
            char *hit = p->f == ZL_TC_LLAMA3 ? NULL : memmem(s, n, op, strlen(op));
            if (hit) {
                out_add(content, clen, s, (size_t)(hit - s));
                pend_drop(p, (size_t)(hit - s) + strlen(op));
                p->state = p->f == ZL_TC_MISTRAL ? TP_JSON : TP_TAG;
                continue;
            }
            size_t hold = final || p->f == ZL_TC_LLAMA3 ? 0 : partial_suffix(s, n, op);
            out_add(content, clen, s, n - hold);
            pend_drop(p, n - hold);
            return;
        }
        if (p->state == TP_TAG) {
            char *hit = memmem(s, n, TC_CLOSE, strlen(TC_CLOSE));
            if (!hit && !final) return;
            size_t body = hit ? (size_t)(hit - s) : n;
            if (commit_calls(p, s, body)) { /* not a call: it stays text */
                out_add(content, clen, TC_OPEN, strlen(TC_OPEN));
                out_add(content, clen, s, hit ? body + strlen(TC_CLOSE) : body);
            }
            pend_drop(p, hit ? body + strlen(TC_CLOSE) : body);
            p->after_call = 1;
            p->state = TP_OUT;
            continue;
        }
        /* TP_JSON: one JSON value, no closing tag */
        size_t e = json_end(s, n);
        if (!e && !final) return;
        size_t body = e ? e : n;
        if (commit_calls(p, s, body)) {
            if (p->f == ZL_TC_MISTRAL) out_add(content, clen, TC_MISTRAL, strlen(TC_MISTRAL));
            out_add(content, clen, s, body);
        }
        pend_drop(p, body);
        p->state = TP_OUT;
    }
}

int zl_tc_feed(zl_tc_parser *p, const char *text, size_t n, char **content, size_t *content_len) {
    zl_buf_put(&p->pend, text, n);
    if (p->pend.oom) return ZL_ENOMEM;
    step(p, content, content_len, 0);
    live_update(p);
    return 0;
}

int zl_tc_finish(zl_tc_parser *p, char **content, size_t *content_len) {
    step(p, content, content_len, 1);
    live_clear(p);
    return p->pend.oom ? ZL_ENOMEM : 0;
}
