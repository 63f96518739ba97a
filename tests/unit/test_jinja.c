/* test_jinja.c — the template interpreter against python3-jinja2.
 *
 * Every (template, conversation) pair of tests/fixtures/templates/cases.txt
 * is rendered and compared byte for byte with what jinja2 rendered
 * (expected/T@C.out), or, where jinja2 raised, the error is compared by
 * message (expected/T@C.err: raise_exception's text exactly; syntax errors
 * with their line; run-time errors with jinja2's text).  The fixtures come
 * from tools/ref/render_templates.py (see the README beside them).  Then
 * malformed and hostile templates, which must fail cleanly within limits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "template/jinja.h"

#define FIX ZL_ROOT "/tests/fixtures/templates"

static char *read_opt(const char *path, size_t *n) {
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

static char *read_all(const char *path, size_t *n) {
    char *p = read_opt(path, n);
    cr_assert(p, "cannot read %s", path);
    return p;
}

/* "line L, column C: msg" -> "line L: msg" (jinja2 reports lines only) */
static void drop_column(char *m) {
    char *c = strstr(m, ", column ");
    char *colon = c ? strchr(c, ':') : NULL;
    if (c && colon) memmove(c, colon, strlen(colon) + 1);
}

/* "line L: msg" -> "msg" */
static const char *drop_line(const char *m) {
    if (strncmp(m, "line ", 5)) return m;
    const char *p = strstr(m, ": ");
    return p ? p + 2 : m;
}

typedef struct { int out_ok, raise_ok, syntax_ok, runtime_ok, total; } tally;

static int run_case(const char *tname, const char *cname, tally *t, char *why, size_t whylen) {
    char path[512];
    size_t n_src, n_conv, n_vars = 0, n_want;
    /* "NAME#L": line L of tpl/NAME.jinja alone */
    char base[128];
    int line = 0;
    snprintf(base, sizeof base, "%s", tname);
    char *hash = strchr(base, '#');
    if (hash) {
        *hash = 0;
        line = atoi(hash + 1);
    }
    snprintf(path, sizeof path, FIX "/tpl/%s.jinja", base);
    char *src = read_all(path, &n_src);
    if (line) {
        char *p = src;
        for (int k = 1; k < line && p; k++) p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL;
        cr_assert(p, "%s: no line %d", path, line);
        char *e = strchr(p, '\n');
        n_src = e ? (size_t)(e - p) : strlen(p);
        memmove(src, p, n_src);
        src[n_src] = 0;
    }
    snprintf(path, sizeof path, FIX "/conv/%s.json", cname);
    char *conv = read_all(path, &n_conv);
    snprintf(path, sizeof path, FIX "/tpl/%s.vars.json", base);
    char *vars = read_opt(path, &n_vars);
    zl_err err = {0};
    zl_jinja_vars *v = zl_jinja_vars_new();
    cr_assert(v);
    cr_assert_eq(zl_jinja_vars_json(v, NULL, conv, n_conv, &err), 0, "%s: %s", cname, err.msg);
    if (vars) cr_assert_eq(zl_jinja_vars_json(v, NULL, vars, n_vars, &err), 0, "%s: %s", tname, err.msg);
    else {
        cr_assert_eq(zl_jinja_vars_str(v, "bos_token", "<s>", &err), 0);
        cr_assert_eq(zl_jinja_vars_str(v, "eos_token", "</s>", &err), 0);
    }
    zl_jinja *tpl = NULL;
    int prc = zl_jinja_parse(&tpl, src, n_src, &err);
    char perr[sizeof err.msg];
    snprintf(perr, sizeof perr, "%s", err.msg);
    char *out = NULL;
    size_t n_out = 0;
    int rrc = prc ? -1 : zl_jinja_render(tpl, v, NULL, &out, &n_out, &err);
    int ok = 0;
    snprintf(path, sizeof path, FIX "/expected/%s@%s.out", tname, cname);
    char *want = read_opt(path, &n_want);
    if (want) {
        ok = !prc && !rrc && n_out == n_want && !memcmp(out, want, n_want);
        if (ok) t->out_ok++;
        else if (prc || rrc) snprintf(why, whylen, "error instead of output: %s", prc ? perr : err.msg);
        else {
            size_t i = 0;
            while (i < n_out && i < n_want && out[i] == want[i]) i++;
            snprintf(why, whylen, "output differs at byte %zu (got %zu bytes, want %zu): got \"%.60s\" want \"%.60s\"", i,
                     n_out, n_want, out + (i < n_out ? i : n_out), want + (i < n_want ? i : n_want));
        }
    } else {
        snprintf(path, sizeof path, FIX "/expected/%s@%s.err", tname, cname);
        want = read_all(path, &n_want);
        char *msg = strchr(want, '\n');
        cr_assert(msg, "%s: malformed .err fixture", path);
        *msg++ = 0;
        if (!strcmp(want, "syntax")) {
            drop_column(perr);
            ok = prc != 0 && !strcmp(perr, msg);
            if (ok) t->syntax_ok++;
            else snprintf(why, whylen, "want syntax error \"%s\", got %s \"%s\"", msg, prc ? "parse error" : "no parse error", perr);
        } else if (!strcmp(want, "raise")) {
            ok = !prc && rrc != 0 && !strcmp(err.msg, msg);
            if (ok) t->raise_ok++;
            else snprintf(why, whylen, "want raise_exception \"%s\", got \"%s\"", msg, rrc ? err.msg : "(rendered)");
        } else {
            ok = !prc && rrc != 0 && !strcmp(drop_line(err.msg), msg);
            if (ok) t->runtime_ok++;
            else snprintf(why, whylen, "want error \"%s\", got \"%s\"", msg, rrc ? err.msg : "(rendered)");
        }
    }
    t->total++;
    free(want);
    free(out);
    zl_jinja_free(tpl);
    zl_jinja_vars_free(v);
    free(src);
    free(conv);
    free(vars);
    return ok;
}

Test(jinja, fixtures_match_jinja2) {
    size_t n;
    char *cases = read_all(FIX "/cases.txt", &n);
    tally t = {0};
    int failed = 0;
    char *save = NULL;
    for (char *line = strtok_r(cases, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char tname[128], cname[128];
        cr_assert_eq(sscanf(line, "%127s %127s", tname, cname), 2, "bad cases.txt line '%s'", line);
        char why[600] = "";
        if (!run_case(tname, cname, &t, why, sizeof why)) {
            failed++;
            cr_log_error("%s@%s: %s", tname, cname, why);
        }
    }
    free(cases);
    cr_log_info("%d cases: %d renders byte-identical, %d raise_exception, %d syntax, %d runtime errors matched",
                t.total, t.out_ok, t.raise_ok, t.syntax_ok, t.runtime_ok);
    cr_expect_geq(t.total, 150, "cases.txt lists only %d cases", t.total);
    cr_expect_gt(t.out_ok, 100);
    cr_expect_gt(t.raise_ok, 3);
    cr_expect_eq(failed, 0, "%d of %d cases differ from jinja2", failed, t.total);
}

/* ---------------- malformed and hostile templates ---------------- */

static int parse_err(const char *src, char *msg, size_t cap) {
    zl_jinja *t = NULL;
    zl_err e = {0};
    int rc = zl_jinja_parse(&t, src, strlen(src), &e);
    snprintf(msg, cap, "%s", e.msg);
    zl_jinja_free(t);
    return rc;
}

static int render_err(const char *src, const zl_jinja_limits *lim, char *msg, size_t cap) {
    zl_jinja *t = NULL;
    zl_err e = {0};
    int rc = zl_jinja_parse(&t, src, strlen(src), &e);
    cr_assert_eq(rc, 0, "parse failed: %s", e.msg);
    zl_jinja_vars *v = zl_jinja_vars_new();
    const char *msgs = "[{\"role\":\"user\",\"content\":\"x\"}]";
    cr_assert_eq(zl_jinja_vars_json(v, "messages", msgs, strlen(msgs), &e), 0, "%s", e.msg);
    char *out = NULL;
    size_t n = 0;
    rc = zl_jinja_render(t, v, lim, &out, &n, &e);
    snprintf(msg, cap, "%s", e.msg);
    free(out);
    zl_jinja_vars_free(v);
    zl_jinja_free(t);
    return rc;
}

Test(jinja, malformed_templates_fail_with_position) {
    struct { const char *src, *want; } cases[] = {
        {"abc {{ x", "line 1, column 5: unexpected end of template, expected 'end of print statement'."},
        {"{% if x %}", "Unexpected end of template. Jinja was looking for the following tags: 'elif' or 'else' or 'endif'."},
        {"a\nb {# never closed", "line 2, column 3: Missing end of comment tag"},
        {"{% for %}{% endfor %}", "expected token 'name'"},
        {"{% endif %}", "Encountered unknown tag 'endif'."},
        {"{% frobnicate %}", "Encountered unknown tag 'frobnicate'."},
        {"{{ 'unterminated }}", "unterminated string"},
        {"{{ (1 + 2 }}", "unexpected '}', expected ')'"},
        {"{{ 1 + }}", "unexpected 'end of print statement'"},
        {"{{ x | nofilter }}", "No filter named 'nofilter'."},
        {"{{ x is notatest }}", "No test named 'notatest'."},
        {"{% break %}", "'break' outside of a loop"},
        {"{{ a @ b }}", "unexpected char '@'"},
        {"{% raw %}never closed", "Missing end of raw directive"},
        {"{% set 1 = 2 %}", "expected token 'name'"},
        {"{% macro m(a=1, b) %}{% endmacro %}", "non-default argument follows default argument"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char m[512];
        cr_expect_neq(parse_err(cases[i].src, m, sizeof m), 0, "'%s' parsed", cases[i].src);
        cr_expect(strstr(m, cases[i].want) != NULL, "'%s': got \"%s\", want \"%s\"", cases[i].src, m, cases[i].want);
        cr_expect(!strncmp(m, "line ", 5), "'%s': no position in \"%s\"", cases[i].src, m);
    }
}

Test(jinja, deep_nesting_is_bounded) {
    size_t n = 200000;
    char *s = malloc(n * 12 + 64);
    char m[512];
    /* brackets */
    strcpy(s, "{{ ");
    memset(s + 3, '(', n);
    s[3 + n] = 0;
    cr_expect_neq(parse_err(s, m, sizeof m), 0);
    cr_expect(strstr(m, "nested too deeply") != NULL, "%s", m);
    /* blocks */
    s[0] = 0;
    char *p = s;
    for (size_t i = 0; i < 5000; i++) p += sprintf(p, "{%% if 1 %%}");
    cr_expect_neq(parse_err(s, m, sizeof m), 0);
    cr_expect(strstr(m, "nested too deeply") != NULL, "%s", m);
    /* unary and not chains */
    p = s;
    p += sprintf(p, "{{ ");
    for (size_t i = 0; i < n; i++) p += sprintf(p, "not ");
    sprintf(p, "x }}");
    cr_expect_neq(parse_err(s, m, sizeof m), 0);
    cr_expect(strstr(m, "nested too deeply") != NULL, "%s", m);
    p = s;
    p += sprintf(p, "{{ ");
    for (size_t i = 0; i < n; i++) p += sprintf(p, "-");
    sprintf(p, "1 }}");
    cr_expect_neq(parse_err(s, m, sizeof m), 0);
    cr_expect(strstr(m, "nested too deeply") != NULL, "%s", m);
    /* a long left-leaning chain parses but its evaluation depth is bounded */
    p = s;
    p += sprintf(p, "{{ 1");
    for (size_t i = 0; i < n; i++) p += sprintf(p, "+1");
    sprintf(p, " }}");
    cr_expect_neq(render_err(s, NULL, m, sizeof m), 0);
    cr_expect(strstr(m, "recursion exceeded") != NULL, "%s", m);
    free(s);
}

Test(jinja, hostile_templates_hit_limits) {
    char m[512];
    struct { const char *src, *want; } cases[] = {
        {"{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "exceeded"},
        {"{% for i in range(1000000000) %}{% endfor %}", "Range too big"},
        {"{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "recursion exceeded its limit"},
        {"{% set s = 'x' * 1000000 %}{% for i in range(100000) %}{{ s }}{% endfor %}", "output exceeded its limit"},
        {"{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
         "memory limit"},
        {"{{ 'x' * 100000000000 }}", "memory limit"},
        {"{{ raise_exception('stop: ' ~ messages[0].content) }}", "stop: x"},
        {"{{ messages[0].content.nope.deeper }}", "'str object' has no attribute 'nope'"},
        {"{{ undefined_thing + 1 }}", "'undefined_thing' is undefined"},
        {"{{ messages.append(1) }}", "access to attribute 'append' of 'list' object is unsafe."},
        {"{{ 1 / 0 }}", "division by zero"},
        {"{{ none + 1 }}", "unsupported operand type(s) for +: 'NoneType' and 'int'"},
        {"{{ 2 ** 100 }}", "integer overflow"},
        {"{% for a, b in [1] %}{% endfor %}", "cannot unpack non-iterable int object"},
        {"{% for a, b in [[1, 2, 3]] %}{% endfor %}", "too many values to unpack (expected 2)"},
        {"{{ 5() }}", "'int' object is not callable"},
    };
    zl_jinja_limits lim = {.max_output = 1 << 20, .max_memory = 64u << 20};
    zl_jinja_limits few = {.max_iters = 100000};
    cr_expect_neq(render_err("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", &few, m, sizeof m), 0);
    cr_expect(strstr(m, "loops exceeded their limit (100000 iterations)") != NULL, "%s", m);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cr_expect_neq(render_err(cases[i].src, &lim, m, sizeof m), 0, "'%s' rendered", cases[i].src);
        cr_expect(strstr(m, cases[i].want) != NULL, "'%s': got \"%s\", want \"%s\"", cases[i].src, m, cases[i].want);
    }
}

Test(jinja, bad_variables_json) {
    zl_jinja_vars *v = zl_jinja_vars_new();
    zl_err e = {0};
    cr_expect_neq(zl_jinja_vars_json(v, NULL, "[1, 2]", 6, &e), 0);
    cr_expect(strstr(e.msg, "expected a JSON object") != NULL, "%s", e.msg);
    cr_expect_neq(zl_jinja_vars_json(v, "x", "{\"a\": }", 7, &e), 0);
    cr_expect(strstr(e.msg, "invalid JSON") != NULL, "%s", e.msg);
    char deep[2000];
    memset(deep, '[', sizeof deep);
    cr_expect_neq(zl_jinja_vars_json(v, "x", deep, sizeof deep, &e), 0);
    cr_expect(strstr(e.msg, "nested too deeply") != NULL, "%s", e.msg);
    zl_jinja_vars_free(v);
}

Test(jinja, one_template_renders_many_variable_sets) {
    /* the compiled template is read-only during renders: two renders of
     * one template with different variables do not see each other */
    zl_jinja *t = NULL;
    zl_err e = {0};
    const char *src = "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}";
    cr_assert_eq(zl_jinja_parse(&t, src, strlen(src), &e), 0, "%s", e.msg);
    for (int k = 1; k <= 3; k++) {
        zl_jinja_vars *v = zl_jinja_vars_new();
        char js[128] = "[";
        for (int i = 0; i < k; i++) strcat(js, i ? ",{}" : "{}");
        strcat(js, "]");
        cr_assert_eq(zl_jinja_vars_json(v, "messages", js, strlen(js), &e), 0, "%s", e.msg);
        char *out;
        size_t n;
        cr_assert_eq(zl_jinja_render(t, v, NULL, &out, &n, &e), 0, "%s", e.msg);
        char want[8];
        snprintf(want, sizeof want, "%d", k);
        cr_expect_str_eq(out, want);
        free(out);
        zl_jinja_vars_free(v);
    }
    zl_jinja_free(t);
}
