/* test_server_toolcall.c — tool-call formats and the <think> splitter.
 * Every parse is run on every split of its input into two chunks and one
 * byte at a time: streaming must give what one whole feed gives. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "server/outsplit.h"
#include "server/reasoning.h"
#include "server/toolcall.h"

static char *slurp(const char *rel) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", ZL_ROOT, rel);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    cr_assert_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = 0;
    fclose(f);
    return s;
}

Test(toolcall, detect_from_templates) {
    char *q = slurp("tests/fixtures/templates/tpl/qwen2.5-coder-0.5b.jinja");
    char *s = slurp("tests/fixtures/templates/tpl/smollm2-135m.jinja");
    cr_assert_eq(zl_tc_detect(q), ZL_TC_HERMES);
    cr_assert(zl_tc_template_takes_tools(q));
    cr_assert_eq(zl_tc_detect(s), ZL_TC_GENERIC);
    cr_assert(!zl_tc_template_takes_tools(s));
    cr_assert_eq(zl_tc_detect("{{ '[TOOL_CALLS]' }}"), ZL_TC_MISTRAL);
    cr_assert_eq(zl_tc_detect("{{ '<|python_tag|>' }}"), ZL_TC_LLAMA3);
    free(q);
    free(s);
}

typedef struct parsed {
    char *content;
    size_t clen;
    int n;
    char names[4][32];
    char args[4][128];
} parsed;

/* Feed text in chunks of `chunk` bytes (0: at split point `split`). */
static parsed run(zl_tc_format f, const char *text, size_t chunk, size_t split) {
    parsed r;
    memset(&r, 0, sizeof r);
    zl_tc_parser *p = zl_tc_parser_new(f);
    size_t n = strlen(text);
    if (chunk) {
        /* byte by byte, the calls listed while being written: a name never changes, arguments only grow */
        char seen_name[4][32] = {{0}}, seen_args[4][128] = {{0}};
        int seen = 0;
        for (size_t i = 0; i < n; i += chunk) {
            zl_tc_feed(p, text + i, i + chunk > n ? n - i : chunk, &r.content, &r.clen);
            int k = zl_tc_n_calls(p);
            cr_assert_geq(k, seen, "a listed call went away at byte %zu of '%s'", i, text);
            for (int c = 0; c < k && c < 4; c++) {
                const zl_tc_call *tc = zl_tc_get(p, c);
                if (c < seen) {
                    cr_assert_str_eq(tc->name, seen_name[c], "byte %zu", i);
                    cr_assert_eq(strncmp(tc->args, seen_args[c], strlen(seen_args[c])), 0,
                                 "byte %zu: args '%s' do not extend '%s'", i, tc->args, seen_args[c]);
                }
                snprintf(seen_name[c], sizeof seen_name[c], "%s", tc->name);
                snprintf(seen_args[c], sizeof seen_args[c], "%s", tc->args);
            }
            seen = k;
        }
        zl_tc_finish(p, &r.content, &r.clen);
        cr_assert_geq(zl_tc_n_calls(p), seen);
        for (int c = 0; c < seen && c < 4; c++)
            cr_assert_eq(strncmp(zl_tc_get(p, c)->args, seen_args[c], strlen(seen_args[c])), 0,
                         "final args '%s' do not extend the streamed '%s'", zl_tc_get(p, c)->args, seen_args[c]);
    } else {
        zl_tc_feed(p, text, split, &r.content, &r.clen);
        zl_tc_feed(p, text + split, n - split, &r.content, &r.clen);
        zl_tc_finish(p, &r.content, &r.clen);
    }
    r.n = zl_tc_n_calls(p);
    for (int i = 0; i < r.n && i < 4; i++) {
        snprintf(r.names[i], sizeof r.names[i], "%s", zl_tc_get(p, i)->name);
        snprintf(r.args[i], sizeof r.args[i], "%s", zl_tc_get(p, i)->args);
    }
    zl_tc_parser_free(p);
    return r;
}

static void check_all_splits(zl_tc_format f, const char *text, const char *content, int n, const char *const *names,
                             const char *const *args) {
    size_t len = strlen(text);
    for (size_t k = 0; k <= len + 1; k++) {
        parsed r = k <= len ? run(f, text, 0, k) : run(f, text, 1, 0);
        cr_assert_str_eq(r.content ? r.content : "", content, "split %zu of '%s'", k, text);
        cr_assert_eq(r.n, n, "split %zu: %d calls", k, r.n);
        for (int i = 0; i < n; i++) {
            cr_assert_str_eq(r.names[i], names[i]);
            cr_assert_str_eq(r.args[i], args[i]);
        }
        free(r.content);
    }
}

Test(toolcall, hermes_stream) {
    const char *names[] = {"get_weather", "get_time"};
    const char *args[] = {"{\"city\":\"Paris\"}", "{\"tz\":\"UTC\",\"n\":[1,2]}"};
    check_all_splits(ZL_TC_HERMES,
                     "Sure <b>.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
                     "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": \"{\\\"tz\\\": \\\"UTC\\\", "
                     "\\\"n\\\": [1, 2]}\"}\n</tool_call>",
                     "Sure <b>.", 2, names, args);
    /* not a call: the text stays content */
    check_all_splits(ZL_TC_HERMES, "a<tool_call>{oops</tool_call>b", "a<tool_call>{oops</tool_call>b", 0, NULL, NULL);
    /* the end of generation before the closing tag */
    check_all_splits(ZL_TC_HERMES, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}",
                     "", 1, names, args);
    /* generic: an array inside the tags */
    check_all_splits(ZL_TC_GENERIC,
                     "<tool_call>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]</tool_call>", "",
                     1, names, args);
}

/* A call is listed from the moment its name is complete and its arguments
 * object has begun, its arguments growing with every byte; the output may end
 * inside it (max_tokens) and it stays a call, arguments as far as written. */
Test(toolcall, calls_listed_while_written) {
    const char *text = "Ok <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa ris\", \"n\": [1, 2]}}";
    zl_tc_parser *p = zl_tc_parser_new(ZL_TC_HERMES);
    char *content = NULL;
    size_t clen = 0, n = strlen(text);
    const char *at_args = strstr(text, "{\"city");
    for (size_t i = 0; i < n; i++) {
        zl_tc_feed(p, text + i, 1, &content, &clen);
        int listed = text + i >= at_args;
        cr_assert_eq(zl_tc_n_calls(p), listed, "byte %zu", i);
        if (listed) cr_assert_str_eq(zl_tc_get(p, 0)->name, "get_weather");
        if (text + i == at_args + 11) cr_assert_str_eq(zl_tc_get(p, 0)->args, "{\"city\":\"Pa");
    }
    cr_assert_str_eq(zl_tc_get(p, 0)->args, "{\"city\":\"Pa ris\",\"n\":[1,2]}");
    zl_tc_finish(p, &content, &clen);
    cr_assert_eq(zl_tc_n_calls(p), 1);
    cr_assert_str_eq(zl_tc_get(p, 0)->args, "{\"city\":\"Pa ris\",\"n\":[1,2]}");
    cr_assert_str_eq(content, "Ok ");
    zl_tc_parser_free(p);
    /* cut inside the arguments: the listed call stays, as far as it was written */
    const char *names[] = {"get_weather"};
    const char *cut[] = {"{\"city\":\"Pa"};
    check_all_splits(ZL_TC_HERMES, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa", "", 1,
                     names, cut);
    /* a name alone is not a call yet; cut there it stays text */
    check_all_splits(ZL_TC_HERMES, "<tool_call>\n{\"name\": \"get_weather\"", "<tool_call>\n{\"name\": \"get_weather\"", 0,
                     NULL, NULL);
    /* arguments written as a JSON string are not streamed: the call appears whole */
    const char *sargs[] = {"{\"tz\":\"UTC\"}"};
    const char *snames[] = {"t"};
    check_all_splits(ZL_TC_HERMES, "<tool_call>{\"name\": \"t\", \"arguments\": \"{\\\"tz\\\": \\\"UTC\\\"}\"}</tool_call>", "", 1,
                     snames, sargs);
}

Test(toolcall, mistral_and_llama3) {
    const char *names[] = {"get_weather", "get_weather"};
    const char *args[] = {"{\"city\":\"Paris\"}", "{\"city\":\"Tokyo\"}"};
    check_all_splits(ZL_TC_MISTRAL,
                     "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, "
                     "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Tokyo\"}}]",
                     "", 2, names, args);
    check_all_splits(ZL_TC_LLAMA3, " {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", "", 1,
                     names, args);
    check_all_splits(ZL_TC_LLAMA3, "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
                     "", 1, names, args);
    check_all_splits(ZL_TC_LLAMA3, "Paris is {sunny}.", "Paris is {sunny}.", 0, NULL, NULL);
}

static int gmatches(const char *gtext, const char *s) {
    zl_grammar *g = NULL;
    zl_err e = {0};
    cr_assert_eq(zl_grammar_parse(&g, gtext, strlen(gtext), NULL, &e), 0, "%s\n%s", e.msg, gtext);
    zl_gmatch *m = NULL;
    zl_gmatch_new(&m, g, NULL);
    int ok = zl_gmatch_feed(m, s, strlen(s)) == 0 && zl_gmatch_accepting(m);
    zl_gmatch_free(m);
    zl_grammar_free(g);
    return ok;
}

Test(toolcall, grammars_accept_rendered_calls) {
    json_t *p1 = json_loads("{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}", 0, NULL);
    json_t *p2 = json_loads("{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}}}", 0, NULL);
    zl_tool tools[2] = {{"get_weather", "Weather", p1}, {"count", NULL, p2}};
    zl_tc_call calls[2] = {{"get_weather", "{\"city\":\"Paris\"}"}, {"count", "{\"n\":3}"}};
    const zl_tc_format fs[] = {ZL_TC_HERMES, ZL_TC_GENERIC, ZL_TC_MISTRAL, ZL_TC_LLAMA3};
    for (int k = 0; k < 4; k++) {
        const char *trig = NULL;
        zl_err e = {0};
        char *g = zl_tc_grammar(fs[k], tools, 2, NULL, fs[k] != ZL_TC_LLAMA3, 0, &trig, &e);
        cr_assert_not_null(g, "%s", e.msg);
        cr_assert_null(trig);
        char *one = zl_tc_render_calls(fs[k], calls, 1);
        cr_assert(gmatches(g, one), "%s: %s", zl_tc_format_name(fs[k]), one);
        /* the rendered text parses back */
        parsed r = run(fs[k], one, 0, strlen(one));
        cr_assert_eq(r.n, 1);
        cr_assert_str_eq(r.args[0], "{\"city\":\"Paris\"}");
        free(r.content);
        if (fs[k] != ZL_TC_LLAMA3) {
            char *two = zl_tc_render_calls(fs[k], calls, 2);
            cr_assert(gmatches(g, two), "%s: %s", zl_tc_format_name(fs[k]), two);
            free(two);
        }
        cr_assert(!gmatches(g, "hello"));
        free(one);
        free(g);
        /* only one named tool */
        g = zl_tc_grammar(fs[k], tools, 2, "count", 0, 0, &trig, &e);
        cr_assert_not_null(g);
        char *c2 = zl_tc_render_calls(fs[k], &calls[1], 1);
        char *c1 = zl_tc_render_calls(fs[k], &calls[0], 1);
        cr_assert(gmatches(g, c2));
        cr_assert(!gmatches(g, c1));
        free(c1);
        free(c2);
        free(g);
    }
    const char *trig = NULL;
    zl_err e = {0};
    char *g = zl_tc_grammar(ZL_TC_HERMES, tools, 2, NULL, 0, 1, &trig, &e);
    cr_assert_str_eq(trig, "<tool_call>");
    cr_assert(gmatches(g, "\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"x\"}}\n</tool_call>"));
    cr_assert(!gmatches(g, "\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>")); /* city required */
    free(g);
    cr_assert_null(zl_tc_grammar(ZL_TC_HERMES, tools, 2, "nope", 0, 0, &trig, &e));
    cr_assert(strstr(e.msg, "'nope'"));
    json_t *bad = json_loads("{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\",\"pattern\":\"x\"}}}", 0, NULL);
    zl_tool bt = {"b", NULL, bad};
    cr_assert_null(zl_tc_grammar(ZL_TC_HERMES, &bt, 1, NULL, 0, 0, &trig, &e));
    cr_assert(strstr(e.msg, "tool 'b'") && strstr(e.msg, "'pattern'"), "%s", e.msg);
    json_decref(bad);
    json_decref(p1);
    json_decref(p2);
}

Test(toolcall, system_prompt_lists_tools) {
    json_t *p1 = json_loads("{\"type\":\"object\"}", 0, NULL);
    zl_tool t = {"get_weather", "Weather now", p1};
    char *s = zl_tc_system_prompt(ZL_TC_GENERIC, &t, 1);
    cr_assert(strstr(s, "\"name\":\"get_weather\"") && strstr(s, "<tool_call>"), "%s", s);
    free(s);
    json_decref(p1);
}

/* ---- reasoning ---- */

static void think_all_splits(int inside, const char *text, const char *reason, const char *content) {
    size_t n = strlen(text);
    for (size_t k = 0; k <= n; k++) {
        zl_think *t = zl_think_new(inside);
        char *r = NULL, *c = NULL;
        size_t rl = 0, cl = 0;
        zl_think_feed(t, text, k, &r, &rl, &c, &cl);
        zl_think_feed(t, text + k, n - k, &r, &rl, &c, &cl);
        zl_think_finish(t, &r, &rl, &c, &cl);
        cr_assert_str_eq(r ? r : "", reason, "split %zu of '%s'", k, text);
        cr_assert_str_eq(c ? c : "", content, "split %zu of '%s'", k, text);
        free(r);
        free(c);
        zl_think_free(t);
    }
}

Test(reasoning, think_splitter) {
    think_all_splits(0, "<think>\nLet me see: 2 < 3.\n</think>\n\nYes.", "\nLet me see: 2 < 3.\n", "Yes.");
    think_all_splits(1, "plan </thi nk> more</think>done", "plan </thi nk> more", "done");
    think_all_splits(0, "No thinking <think>here</think>", "", "No thinking <think>here</think>");
    think_all_splits(0, "<thin", "", "<thin");
    think_all_splits(0, "<think>cut short", "cut short", "");
    cr_assert(zl_think_prompt_opens("<|im_start|>assistant\n<think>\n", 30));
    cr_assert(!zl_think_prompt_opens("<|im_start|>assistant\n", 22));
    cr_assert_eq(zl_think_effort_budget("medium"), 2048);
    cr_assert_eq(zl_think_effort_budget("max"), -1);
}

Test(toolcall, plain_messages_for_templates_without_tools) {
    json_t *msgs = json_loads("[{\"role\":\"user\",\"content\":\"Weather?\"},"
                              "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
                              "\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Paris\\\"}\"}}]},"
                              "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"sunny\"}]", 0, NULL);
    cr_assert_not_null(msgs);
    zl_tool t = {"get_weather", NULL, NULL};
    json_t *out = zl_tc_plain_messages(ZL_TC_GENERIC, msgs, &t, 1);
    cr_assert_eq(json_array_size(out), 4);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(out, 0), "role")), "system");
    cr_assert(strstr(json_string_value(json_object_get(json_array_get(out, 0), "content")), "get_weather"));
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(out, 2), "content")),
                     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(out, 3), "role")), "user");
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(out, 3), "content")),
                     "<tool_response>\nsunny\n</tool_response>");
    json_decref(out);
    json_decref(msgs);
}

Test(toolcall, outsplit_think_then_calls) {
    const char *text = "<think>need weather</think>\n\nOk.<tool_call>\n{\"name\": \"w\", \"arguments\": {}}\n</tool_call>";
    size_t n = strlen(text);
    for (size_t k = 0; k <= n; k++) {
        zl_outsplit o;
        cr_assert_eq(zl_outsplit_init(&o, 1, 0, 1, ZL_TC_HERMES), 0);
        char *r = NULL, *c = NULL;
        size_t rl = 0, cl = 0;
        zl_outsplit_feed(&o, text, k, 0, &r, &rl, &c, &cl);
        zl_outsplit_feed(&o, text + k, n - k, 1, &r, &rl, &c, &cl);
        cr_assert_str_eq(r ? r : "", "need weather");
        cr_assert_str_eq(c ? c : "", "Ok.");
        cr_assert_eq(zl_tc_n_calls(o.tc), 1);
        cr_assert_str_eq(zl_tc_get(o.tc, 0)->name, "w");
        free(r);
        free(c);
        zl_outsplit_free(&o);
    }
}

Test(toolcall, bare_call_object_without_tags) {
    const char *names[] = {"get_weather"};
    const char *args[] = {"{\"city\":\"Tokyo\"}"};
    check_all_splits(ZL_TC_HERMES, "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Tokyo\"}}", "", 1, names, args);
    check_all_splits(ZL_TC_HERMES, "{\"answer\": 4} is JSON", "{\"answer\": 4} is JSON", 0, NULL, NULL);
    check_all_splits(ZL_TC_HERMES, "  ", "  ", 0, NULL, NULL);
}
