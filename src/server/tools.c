/* tools.c — tools, structured output and reasoning on the pipeline
 * (tools.h).  Owns the request-level decisions; the formats are
 * toolcall.c's, grammars the grammar layer's, wire shapes the adapters'. */
#include "tools.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../grammar/grammar.h"

typedef struct zl_choice_split {
    zl_outsplit o;
    size_t fed;               /* bytes of the choice's text fed */
    char *reason, *content;   /* everything so far */
    size_t rlen, clen;
    size_t rsent, csent;      /* handed out in events */
    size_t *args_sent;        /* per call: bytes of its arguments handed out */
    int n_heads, cap_calls;   /* calls whose head was handed out; room in args_sent and cd */
    zl_call_delta *cd;        /* the last event's call deltas */
    int done;
    int blocks[3];
} zl_choice_split;

int zl_tools_each(json_t *b, zl_request *q, int (*one)(json_t *t, const char *path, zl_request *q, zl_verr *e),
                  zl_verr *e) {
    json_t *tools = json_object_get(b, "tools");
    if (!tools || json_is_null(tools)) return 0;
    if (!json_is_array(tools)) return zl_verr_set(e, "tools", "tools: expected an array");
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        char f[48];
        snprintf(f, sizeof f, "tools[%zu]", i);
        if (!json_is_object(t)) return zl_verr_set(e, f, "%s: expected an object", f);
        if (one(t, f, q, e) < 0) return -1;
    }
    return 0;
}

int zl_tools_check_choice(const zl_request *q, zl_verr *e) {
    if (q->tool_choice != ZL_TOOLS_AUTO && q->tool_choice != ZL_TOOLS_NONE && !q->n_tools)
        return zl_verr_set(e, "tool_choice", "tool_choice: requires tools");
    return 0;
}

static int grammar_ok(const char *text, const char *param, zl_verr *e) {
    zl_grammar *g = NULL;
    zl_err err = {0};
    if (zl_grammar_parse(&g, text, strlen(text), NULL, &err)) {
        const char *m = !strncmp(err.msg, "grammar: ", 9) ? err.msg + 9 : err.msg;
        return zl_verr_set(e, param, "%s: %s", param, m);
    }
    zl_grammar_free(g);
    return 0;
}

void zl_request_tools_free(zl_request *q) {
    for (int i = 0; q->msgs && i < q->n_msgs; i++) json_decref(q->msgs[i].tool_calls);
    free(q->tools);
    free(q->grammar);
}

int zl_tools_add(zl_request *q, const char *name, const char *desc, json_t *schema, const char *path, zl_verr *e) {
    size_t nl = name ? strlen(name) : 0;
    if (!nl || nl > 64 || strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != nl)
        return zl_verr_set(e, path, "%s.name: must be 1 to 64 letters, digits, '_' or '-'", path);
    if (schema && !json_is_null(schema) && !json_is_object(schema))
        return zl_verr_set(e, path, "%s: the parameters schema must be an object", path);
    for (int i = 0; i < q->n_tools; i++)
        if (!strcmp(q->tools[i].name, name)) return zl_verr_set(e, path, "%s.name: '%s' is defined twice", path, name);
    zl_tool *t = realloc(q->tools, (size_t)(q->n_tools + 1) * sizeof *t);
    if (!t) return zl_verr_set(e, "", "out of memory");
    q->tools = t;
    t[q->n_tools++] = (zl_tool){name, desc, json_is_object(schema) ? schema : NULL};
    /* the schema must compile now: an unsupported keyword is the caller's 400 */
    if (json_is_object(schema)) {
        char *text = json_dumps(schema, JSON_COMPACT), *rules = NULL, top[64];
        zl_err err = {0};
        int rc = text ? zl_json_schema_rules(text, strlen(text), "v", &rules, top, sizeof top, &err) : ZL_ENOMEM;
        free(text);
        free(rules);
        if (rc == ZL_ENOMEM) return zl_verr_set(e, "", "out of memory");
        if (rc) return zl_verr_set(e, path, "%s: %s", path, err.msg);
    }
    return 0;
}

int zl_tools_schema(zl_request *q, json_t *schema, const char *param, zl_verr *e) {
    if (!json_is_object(schema) && !json_is_boolean(schema)) return zl_verr_set(e, param, "%s: expected a JSON Schema object", param);
    char *text = json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY);
    zl_err err = {0};
    free(q->grammar);
    q->grammar = NULL;
    int rc = text ? zl_json_schema_to_grammar(text, strlen(text), &q->grammar, &err) : ZL_ENOMEM;
    free(text);
    if (rc == ZL_ENOMEM) return zl_verr_set(e, "", "out of memory");
    if (rc) return zl_verr_set(e, param, "%s: %s", param, err.msg);
    q->grammar_param = param;
    return 0;
}

int zl_tools_json_object(zl_request *q, const char *param, zl_verr *e) {
    free(q->grammar);
    if (!(q->grammar = strdup(zl_json_object_grammar()))) return zl_verr_set(e, "", "out of memory");
    q->grammar_param = param;
    return 0;
}

int zl_tools_grammar_text(zl_request *q, const char *text, const char *param, zl_verr *e) {
    free(q->grammar);
    if (!(q->grammar = strdup(text))) return zl_verr_set(e, "", "out of memory");
    q->grammar_param = param;
    return grammar_ok(text, param, e);
}

json_t *zl_tools_args_object(json_t *args) {
    if (json_is_object(args)) return json_incref(args);
    if (!json_is_string(args)) return NULL;
    json_t *o = json_loads(json_string_value(args), 0, NULL);
    if (json_is_object(o)) return o;
    json_decref(o);
    return NULL;
}

int zl_tools_add_call(json_t **calls, const char *id, const char *name, json_t *args_obj) {
    if (!*calls && !(*calls = json_array())) return -1;
    json_t *c = json_pack("{s:s, s:s, s:{s:s, s:O}}", "id", id ? id : "", "type", "function", "function", "name", name,
                          "arguments", args_obj);
    return c ? json_array_append_new(*calls, c) : -1;
}

int zl_tools_renders(const zl_request *q) {
    if (q->n_tools) return 1;
    for (int i = 0; i < q->n_msgs; i++)
        if (q->msgs[i].tool_calls || q->msgs[i].tool_call_id || !strcmp(q->msgs[i].role, "tool")) return 1;
    return 0;
}

static json_t *messages_json(const zl_request *q) {
    json_t *arr = json_array();
    for (int i = 0; arr && i < q->n_msgs; i++) {
        const zl_request_msg *m = &q->msgs[i];
        json_t *o = json_pack("{s:s, s:s}", "role", m->role, "content", m->text.p ? m->text.p : "");
        if (!o) {
            json_decref(arr);
            return NULL;
        }
        if (m->tool_calls) json_object_set(o, "tool_calls", m->tool_calls);
        if (m->tool_call_id) json_object_set_new(o, "tool_call_id", json_string(m->tool_call_id));
        json_array_append_new(arr, o);
    }
    return arr;
}

char *zl_tools_render(const zl_chat_fmt *f, const zl_request *q, zl_err *err) {
    json_t *msgs = messages_json(q), *tools = NULL, *plain = NULL;
    char *text = NULL;
    if (!msgs) {
        zl_errf(err, ZL_ENOMEM, "out of memory");
        return NULL;
    }
    if (f->jinja && f->takes_tools) {
        tools = q->n_tools ? zl_tc_tools_json(q->tools, q->n_tools) : NULL;
        text = zl_chat_fmt_render_json(f, msgs, tools, err);
    } else if ((plain = zl_tc_plain_messages((zl_tc_format)f->tc_format, msgs, q->tools, q->n_tools))) {
        text = zl_chat_fmt_render_json(f, plain, NULL, err);
    } else {
        zl_errf(err, ZL_ENOMEM, "out of memory");
    }
    json_decref(msgs);
    json_decref(tools);
    json_decref(plain);
    return text;
}


int zl_tools_plan_make(const zl_chat_fmt *f, const zl_request *q, const char *prompt, zl_tools_plan *pl, zl_verr *e) {
    memset(pl, 0, sizeof *pl);
    pl->format = (zl_tc_format)f->tc_format;
    pl->tools = q->n_tools > 0 && q->tool_choice != ZL_TOOLS_NONE;
    pl->think = f->thinks;
    pl->think_inside = f->thinks && prompt && zl_think_prompt_opens(prompt, strlen(prompt));
    if (q->grammar) {
        if (pl->tools && q->tool_choice != ZL_TOOLS_AUTO)
            return zl_verr_set(e, q->grammar_param, "%s: a structured output and a required tool call exclude each other",
                               q->grammar_param);
        pl->tools = 0; /* the structured answer is the reply */
        if (grammar_ok(q->grammar, q->grammar_param, e)) return -1;
        pl->grammar_param = q->grammar_param;
        pl->grammar = strdup(q->grammar);
        return pl->grammar ? 0 : zl_verr_set(e, "", "out of memory");
    }
    if (!pl->tools) return 0;
    int forced = q->tool_choice == ZL_TOOLS_REQUIRED || q->tool_choice == ZL_TOOLS_NAMED;
    zl_err err = {0};
    pl->grammar = zl_tc_grammar(pl->format, q->tools, q->n_tools, q->tool_choice == ZL_TOOLS_NAMED ? q->tool_name : NULL,
                                q->parallel_tools, !forced, &pl->trigger, &err);
    if (!pl->grammar && err.code)
        return zl_verr_set(e, q->tool_choice == ZL_TOOLS_NAMED && strstr(err.msg, "tool_choice") ? "tool_choice" : "tools",
                           "%s", err.msg);
    pl->grammar_param = "tools";
    if (pl->grammar && grammar_ok(pl->grammar, "tools", e)) return -1; /* the calls' grammar over the work bound */
    if (forced) pl->think = 0; /* a forced call starts at the first token */
    return 0;
}

void zl_tools_plan_free(zl_tools_plan *pl) {
    free(pl->grammar);
    memset(pl, 0, sizeof *pl);
}

int zl_tools_split_init(zl_result *res, const zl_tools_plan *pl) {
    if (!pl->tools && !pl->think) return 0;
    res->split = calloc((size_t)res->n, sizeof *res->split);
    if (!res->split) return -1;
    for (int i = 0; i < res->n; i++)
        if (zl_outsplit_init(&res->split[i].o, pl->think, pl->think_inside, pl->tools, pl->format)) {
            zl_tools_split_free(res);
            return -1;
        }
    return 0;
}

void zl_tools_split_free(zl_result *res) {
    for (int i = 0; res->split && i < res->n; i++) {
        zl_outsplit_free(&res->split[i].o);
        free(res->split[i].reason);
        free(res->split[i].content);
        free(res->split[i].args_sent);
        free(res->split[i].cd);
    }
    free(res->split);
    res->split = NULL;
}

void zl_tools_event(const zl_result *res, int i, int ended, int whole, zl_event *ev) {
    zl_choice_split *sp = &res->split[i];
    const zl_gen_choice *c = &res->g->ch[i];
    if (!sp->done) {
        size_t n = c->text.n > sp->fed ? c->text.n - sp->fed : 0;
        zl_outsplit_feed(&sp->o, c->text.p ? c->text.p + sp->fed : "", n, ended, &sp->reason, &sp->rlen,
                         &sp->content, &sp->clen);
        sp->fed += n;
        if (ended) sp->done = 1;
    }
    int n_calls = sp->o.tc ? zl_tc_n_calls(sp->o.tc) : 0;
    ev->calls = sp->o.tc;
    ev->cd = NULL;
    ev->n_cd = 0;
    if (n_calls > sp->cap_calls) {
        size_t *as = realloc(sp->args_sent, (size_t)n_calls * sizeof *as);
        if (as) sp->args_sent = as;
        zl_call_delta *cd = realloc(sp->cd, (size_t)n_calls * sizeof *cd);
        if (cd) sp->cd = cd;
        if (!as || !cd) n_calls = sp->cap_calls; /* out of memory: the calls beyond wait for the next event */
        else sp->cap_calls = n_calls;
    }
    if (whole) {
        ev->text = sp->content ? sp->content : "";
        ev->len = sp->clen;
        ev->reasoning = sp->reason ? sp->reason : "";
        ev->reasoning_len = sp->rlen;
        for (int k = 0; k < n_calls; k++) {
            const char *a = zl_tc_get(sp->o.tc, k)->args;
            sp->cd[ev->n_cd++] = (zl_call_delta){k, 1, a, strlen(a)};
        }
        ev->cd = sp->cd;
        return;
    }
    ev->text = sp->content ? sp->content + sp->csent : "";
    ev->len = sp->clen - sp->csent;
    ev->reasoning = sp->reason ? sp->reason + sp->rsent : "";
    ev->reasoning_len = sp->rlen - sp->rsent;
    /* per call: its head once, then what its arguments grew by (they only ever grow) */
    for (int k = 0; k < n_calls; k++) {
        int head = k >= sp->n_heads;
        if (head) sp->args_sent[k] = 0;
        const char *a = zl_tc_get(sp->o.tc, k)->args;
        size_t len = strlen(a), from = sp->args_sent[k] < len ? sp->args_sent[k] : len;
        if (!head && from == len) continue;
        sp->cd[ev->n_cd++] = (zl_call_delta){k, head, a + from, len - from};
        sp->args_sent[k] = len;
    }
    if (n_calls > sp->n_heads) sp->n_heads = n_calls;
    ev->cd = sp->cd;
    sp->csent = sp->clen;
    sp->rsent = sp->rlen;
}

int *zl_tools_blocks(const zl_result *res, int i) { return res->split ? res->split[i].blocks : NULL; }

int zl_tools_called(const zl_event *ev) { return ev->calls && zl_tc_n_calls(ev->calls) > 0; }

void zl_tools_call_id(const zl_result *res, int choice, int k, const char *prefix, char *out, size_t cap) {
    const char *id = strchr(res->id, '-') ? strchr(res->id, '-') + 1 : strchr(res->id, '_') ? strchr(res->id, '_') + 1
                                                                                            : res->id;
    snprintf(out, cap, "%s%s%d%d", prefix, id, choice, k);
}
