/* test_server_chat_template.c — the server's chat formatting against the
 * python3-jinja2 fixtures of tests/fixtures/templates: the hand-written
 * families render what the families' official templates render (gemma:
 * Gemma 3's template), and the Jinja path (zl_chat_fmt) renders the real
 * models' templates, drops a leading BOS text the tokenizer adds itself,
 * continues a trailing assistant turn, and reports raise_exception. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "test_model_copy.h"
#include "server/chat_template.h"
#include "zerolayer.h"

#define FIX ZL_ROOT "/tests/fixtures/templates"

static char *slurp_opt(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long l = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)l + 1);
    cr_assert(p);
    *n = fread(p, 1, (size_t)l, f);
    p[*n] = 0;
    fclose(f);
    return p;
}

/* conv/NAME.json's messages as zl_chat_msg (borrowing from *root) */
static int load_conv(const char *name, json_t **root, zl_chat_msg *m, int cap) {
    char path[256];
    snprintf(path, sizeof path, FIX "/conv/%s.json", name);
    json_error_t je;
    *root = json_load_file(path, 0, &je);
    cr_assert(*root, "%s: %s", path, je.text);
    json_t *msgs = json_object_get(*root, "messages");
    int n = (int)json_array_size(msgs);
    cr_assert(n <= cap);
    for (int i = 0; i < n; i++) {
        json_t *x = json_array_get(msgs, i);
        m[i].role = json_string_value(json_object_get(x, "role"));
        m[i].content = json_string_value(json_object_get(x, "content"));
    }
    return n;
}

static char *expected(const char *tpl, const char *conv) {
    char path[256];
    size_t n;
    snprintf(path, sizeof path, FIX "/expected/%s@%s.out", tpl, conv);
    char *s = slurp_opt(path, &n);
    cr_assert(s, "missing fixture %s", path);
    return s;
}

static const char *skip_prefix(const char *s, const char *p) { return strncmp(s, p, strlen(p)) ? s : s + strlen(p); }

Test(chat_template, families_equal_official_templates) {
    /* family, fixture template, BOS text the tokenizer adds, conversations the family renders exactly */
    static const char *const user_turns[] = {"sys_user", "user_only", "multi", "unicode", NULL};
    static const char *const no_sys[] = {"user_only", "empty_content", NULL};
    struct { zl_tpl t; const char *tpl, *bos; const char *const *convs; } cases[] = {
        {ZL_TPL_GEMMA, "gemma3", "<bos>", user_turns},
        {ZL_TPL_CHATML, "chatml", "", user_turns},
        {ZL_TPL_LLAMA3, "llama3", "<|begin_of_text|>", user_turns},
        {ZL_TPL_LLAMA2, "llama2", "<s>", user_turns},
        {ZL_TPL_PHI3, "phi3", "", user_turns},
        {ZL_TPL_ZEPHYR, "zephyr", "", user_turns},
        {ZL_TPL_MISTRAL, "mistral", "<s>", no_sys},
    };
    int compared = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        for (int k = 0; cases[i].convs[k]; k++) {
            json_t *root;
            zl_chat_msg m[16];
            int n = load_conv(cases[i].convs[k], &root, m, 16);
            char *want = expected(cases[i].tpl, cases[i].convs[k]);
            char *got = zl_tpl_render(cases[i].t, m, n);
            cr_expect_str_eq(got, skip_prefix(want, cases[i].bos), "%s on %s", zl_tpl_name(cases[i].t), cases[i].convs[k]);
            compared++;
            free(got);
            free(want);
            json_decref(root);
        }
    }
    cr_expect_eq(compared, 26);
}

static void fmt_from_fixture(zl_chat_fmt *f, const char *tpl, int strip_bos) {
    char path[256];
    size_t n, nv;
    snprintf(path, sizeof path, FIX "/tpl/%s.jinja", tpl);
    char *src = slurp_opt(path, &n);
    cr_assert(src, "%s", path);
    snprintf(path, sizeof path, FIX "/tpl/%s.vars.json", tpl);
    char *vars = slurp_opt(path, &nv);
    cr_assert(vars, "%s", path);
    json_t *v = json_loads(vars, 0, NULL);
    cr_assert(v);
    zl_err err = {0};
    cr_assert_eq(zl_chat_fmt_jinja(f, src, n, json_string_value(json_object_get(v, "bos_token")),
                                   json_string_value(json_object_get(v, "eos_token")), strip_bos, 0, &err),
                 0, "%s: %s", tpl, err.msg);
    json_decref(v);
    free(vars);
    free(src);
}

Test(chat_template, jinja_renders_the_models_templates) {
    static const char *const tpls[] = {"qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b", "smollm2-135m", "gemma3", "llama3", NULL};
    static const char *const convs[] = {"sys_user", "user_only", "multi", "unicode", "empty_content", NULL};
    int compared = 0;
    for (int t = 0; tpls[t]; t++) {
        zl_chat_fmt f;
        fmt_from_fixture(&f, tpls[t], 0);
        cr_expect(zl_chat_fmt_parse_special(&f));
        cr_expect_null(zl_chat_fmt_extra_stop(&f));
        for (int c = 0; convs[c]; c++) {
            json_t *root;
            zl_chat_msg m[16];
            int n = load_conv(convs[c], &root, m, 16);
            char *want = expected(tpls[t], convs[c]);
            zl_err err = {0};
            char *got = zl_chat_fmt_render(&f, m, n, &err);
            cr_expect_str_eq(got ? got : err.msg, want, "%s on %s", tpls[t], convs[c]);
            compared++;
            free(got);
            free(want);
            json_decref(root);
        }
        zl_chat_fmt_free(&f);
    }
    cr_expect_eq(compared, 25);
}

Test(chat_template, jinja_bos_prefill_and_errors) {
    zl_chat_fmt f;
    fmt_from_fixture(&f, "gemma3", 1);
    json_t *root;
    zl_chat_msg m[16];
    int n = load_conv("multi", &root, m, 16);
    zl_err err = {0};
    char *got = zl_chat_fmt_render(&f, m, n, &err);
    char *want = expected("gemma3", "multi");
    cr_assert(!strncmp(want, "<bos>", 5));
    cr_expect_str_eq(got, want + 5, "the tokenizer adds BOS: the template's bos_token text is dropped");
    free(got);
    free(want);
    json_decref(root);
    /* a trailing assistant message is continued */
    zl_chat_msg pre[] = {{"user", "Finish: The sky is"}, {"assistant", "blue"}};
    got = zl_chat_fmt_render(&f, pre, 2, &err);
    cr_expect_str_eq(got, "<start_of_turn>user\nFinish: The sky is<end_of_turn>\n<start_of_turn>model\nblue");
    free(got);
    /* raise_exception is the request's error, with the template's message */
    n = load_conv("bad_alternation", &root, m, 16);
    got = zl_chat_fmt_render(&f, m, n, &err);
    cr_expect_null(got);
    cr_expect_eq(err.code, ZL_EINVAL);
    cr_expect_str_eq(err.msg, "Conversation roles must alternate user/assistant/user/assistant/...");
    free(got);
    json_decref(root);
    zl_chat_fmt_free(&f);
    /* a template that does not parse is an error here (the server falls back) */
    zl_chat_fmt g;
    cr_expect_neq(zl_chat_fmt_jinja(&g, "{% for %}", 9, "", "", 0, 0, &err), 0);
    cr_expect(strstr(err.msg, "line 1") != NULL, "%s", err.msg);
}

Test(chat_template, setup_choices) {
    zl_chat_fmt f;
    zl_err err = {0};
    /* the embedded base model has no template: the plain family */
    cr_assert_eq(zl_chat_fmt_setup(&f, NULL, NULL, NULL, &err), 0, "%s", err.msg);
    cr_expect_null(f.jinja);
    cr_expect_eq(f.family, ZL_TPL_PLAIN);
    cr_expect_str_eq(zl_chat_fmt_extra_stop(&f), "\nUser:");
    zl_chat_fmt_free(&f);
    /* a forced family */
    cr_assert_eq(zl_chat_fmt_setup(&f, NULL, "qwen", NULL, &err), 0);
    cr_expect_eq(f.family, ZL_TPL_CHATML);
    zl_chat_fmt_free(&f);
    cr_expect_neq(zl_chat_fmt_setup(&f, NULL, "nope", NULL, &err), 0);
    cr_expect(strstr(err.msg, "unknown template 'nope'") != NULL, "%s", err.msg);
    /* a template file */
    cr_assert_eq(zl_chat_fmt_setup(&f, NULL, NULL, FIX "/tpl/chatml.jinja", &err), 0,
                 "%s", err.msg);
    cr_expect_not_null(f.jinja);
    zl_chat_msg m[] = {{"user", "Hi"}};
    char *s = zl_chat_fmt_render(&f, m, 1, &err);
    cr_expect_str_eq(s, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    free(s);
    zl_chat_fmt_free(&f);
    cr_expect_neq(zl_chat_fmt_setup(&f, NULL, NULL, FIX "/tpl/t_error_syntax_expr.jinja", &err), 0);
    cr_expect(strstr(err.msg, "unexpected 'end of print statement'") != NULL, "%s", err.msg);
    cr_expect_neq(zl_chat_fmt_setup(&f, NULL, NULL, "/nonexistent.jinja", &err), 0);
    cr_expect(strstr(err.msg, "cannot open") != NULL, "%s", err.msg);
}

/* The embedded model (which has no template) with tokenizer.chat_template set to tpl (NULL: left out),
 * written to path and opened: what the server starts from. */
static void set_template(zl_gguf_writer *w, void *tpl) {
    if (tpl) cr_assert_eq(zl_gguf_set_str(w, "tokenizer.chat_template", tpl), 0);
}

static zl_llm *model_with_template(const char *path, const char *tpl) {
    copy_model(ZL_ROOT "/models/stories260K.gguf", path, set_template, (void *)tpl);
    zl_err err = {0};
    zl_llm_opts lo = {.n_threads = 1};
    zl_llm *llm = NULL;
    cr_assert_eq(zl_llm_open(&llm, path, &lo, &err), 0, "%s", err.msg);
    return llm;
}

Test(chat_template, family_by_architecture) {
    cr_expect_eq(zl_tpl_for_arch("gemma3", 6), ZL_TPL_GEMMA);
    cr_expect_eq(zl_tpl_for_arch("gemma", 5), ZL_TPL_GEMMA);
    cr_expect_eq(zl_tpl_for_arch("gemma3", 4), ZL_TPL_PLAIN, "only the first len bytes count");
    cr_expect_eq(zl_tpl_for_arch("llama", 5), ZL_TPL_PLAIN);
    cr_expect_eq(zl_tpl_for_arch(NULL, 0), ZL_TPL_PLAIN);
}

Test(chat_template, model_template_choice_and_fallbacks) {
    char dir[] = "/tmp/zl_test_chatfmt_XXXXXX";
    cr_assert(mkdtemp(dir));
    char p1[64], p2[64], p3[64];
    snprintf(p1, sizeof p1, "%s/plain.gguf", dir);
    snprintf(p2, sizeof p2, "%s/broken.gguf", dir);
    snprintf(p3, sizeof p3, "%s/good.gguf", dir);
    zl_llm *m1 = model_with_template(p1, NULL);
    zl_llm *m2 = model_with_template(p2, "{% for m in messages %}<|im_start|>{{ m.role }");
    const char *good = "{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}";
    zl_llm *m3 = model_with_template(p3, good);
    zl_chat_fmt f;
    zl_err err = {0};
    /* no template: the family of the architecture (llama: plain) */
    cr_expect_null(zl_tpl_model_source(m1));
    cr_assert_eq(zl_chat_fmt_setup(&f, m1, NULL, NULL, &err), 0, "%s", err.msg);
    cr_expect_null(f.jinja);
    cr_expect_eq(f.family, ZL_TPL_PLAIN);
    zl_chat_fmt_free(&f);
    /* a template that does not parse: the family its markers name, with a warning */
    cr_assert_eq(zl_chat_fmt_setup(&f, m2, NULL, NULL, &err), 0, "%s", err.msg);
    cr_expect_null(f.jinja);
    cr_expect_eq(f.family, ZL_TPL_CHATML);
    cr_expect(strstr(f.name, "fallback") != NULL, "%s", f.name);
    zl_chat_fmt_free(&f);
    /* a template that parses is rendered, and read from the handle as written */
    char *src = zl_tpl_model_source(m3);
    cr_expect_str_eq(src, good);
    free(src);
    cr_assert_eq(zl_chat_fmt_setup(&f, m3, NULL, NULL, &err), 0, "%s", err.msg);
    cr_expect_not_null(f.jinja);
    zl_chat_msg m[] = {{"system", "S"}, {"user", "U"}};
    char *s = zl_chat_fmt_render(&f, m, 2, &err);
    cr_expect_str_eq(s, "[system:S][user:U]");
    free(s);
    zl_chat_fmt_free(&f);
    /* --chat-template still overrides the model's template */
    cr_assert_eq(zl_chat_fmt_setup(&f, m3, "llama3", NULL, &err), 0, "%s", err.msg);
    cr_expect_null(f.jinja);
    cr_expect_eq(f.family, ZL_TPL_LLAMA3);
    zl_chat_fmt_free(&f);
    zl_llm_close(m1);
    zl_llm_close(m2);
    zl_llm_close(m3);
    remove(p1);
    remove(p2);
    remove(p3);
    remove(dir);
}
