/* criterion.c — the runner behind tests/cross/criterion/criterion.h: a list
 * of registered tests, --filter GLOB (on "suite/name") and --jobs (ignored:
 * tests run one at a time), one forked child per test whose exit status is
 * its result (0 pass, 1 fail, 77 skip, a signal: crashed), a summary line.
 * The default main is weak so a test file may bring its own (as
 * test_determinism.c does with Criterion). */
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "criterion/criterion.h"

#define MAX_TESTS 1024
#define SKIP_STATUS 77

static struct { const char *suite, *name; void (*fn)(void); } g_tests[MAX_TESTS];
static int g_n;
static void (*g_post_all)(struct criterion_global_stats *);
static const char *g_filter;
static int g_failed_expect; /* in the child: a cr_expect failed */

void zl_cr_register(const char *suite, const char *name, void (*fn)(void)) {
    if (g_n == MAX_TESTS) {
        fprintf(stderr, "criterion shim: more than %d tests\n", MAX_TESTS);
        exit(2);
    }
    g_tests[g_n].suite = suite;
    g_tests[g_n].name = name;
    g_tests[g_n++].fn = fn;
}

void zl_cr_register_post_all(void (*fn)(struct criterion_global_stats *)) { g_post_all = fn; }

void zl_cr_check(int ok, int fatal, const char *file, int line, const char *expr, const char *fmt, ...) {
    if (ok) return;
    fprintf(stderr, "%s:%d: %s failed: %s", file, line, fatal ? "assertion" : "expectation", expr);
    if (fmt[1]) { /* fmt is " " + the test's message */
        va_list ap;
        va_start(ap, fmt);
        fputc(':', stderr);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
    }
    fputc('\n', stderr);
    fflush(stderr);
    if (fatal) _exit(1);
    g_failed_expect = 1;
}

void zl_cr_skip(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("skipped:", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fflush(stderr);
    _exit(SKIP_STATUS);
}

struct criterion_test_set { int unused; };
static struct criterion_test_set g_set;

struct criterion_test_set *criterion_initialize(void) { return &g_set; }
void criterion_finalize(struct criterion_test_set *set) { (void)set; }

int criterion_handle_args(int argc, char *argv[], bool handle_unknown) {
    (void)handle_unknown;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--filter") && i + 1 < argc) g_filter = argv[++i];
        else if (!strncmp(argv[i], "--filter=", 9)) g_filter = argv[i] + 9;
        else if (!strcmp(argv[i], "--jobs") && i + 1 < argc) i++;
        else if (!strncmp(argv[i], "--jobs=", 7) || !strcmp(argv[i], "--verbose")) continue;
        else {
            fprintf(stderr, "criterion shim: unknown argument '%s' (--filter GLOB, --jobs N)\n", argv[i]);
            return 0;
        }
    }
    return 1;
}

int criterion_run_all_tests(struct criterion_test_set *set) {
    (void)set;
    struct criterion_global_stats st = {0};
    for (int i = 0; i < g_n; i++) {
        char id[512];
        snprintf(id, sizeof id, "%s/%s", g_tests[i].suite, g_tests[i].name);
        if (g_filter && fnmatch(g_filter, id, 0) != 0) continue;
        st.nb_tests++;
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid < 0) {
            perror("criterion shim: fork");
            return 0;
        }
        if (pid == 0) {
            g_tests[i].fn();
            fflush(stdout);
            _exit(g_failed_expect ? 1 : 0);
        }
        int status = 0;
        while (waitpid(pid, &status, 0) < 0) {}
        const char *what;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) what = "PASS", st.tests_passed++;
        else if (WIFEXITED(status) && WEXITSTATUS(status) == SKIP_STATUS) what = "SKIP", st.tests_skipped++;
        else if (WIFEXITED(status)) what = "FAIL", st.tests_failed++;
        else what = "CRASH", st.tests_crashed++, st.tests_failed++;
        fprintf(stderr, "[%s] %s::%s\n", what, g_tests[i].suite, g_tests[i].name);
    }
    fprintf(stderr, "[====] Synthesis: Tested: %zu | Passing: %zu | Failing: %zu | Crashing: %zu | Skipped: %zu\n",
            st.nb_tests, st.tests_passed, st.tests_failed, st.tests_crashed, st.tests_skipped);
    if (g_post_all) g_post_all(&st);
    return st.tests_failed == 0;
}

__attribute__((weak)) int main(int argc, char *argv[]) {
    struct criterion_test_set *set = criterion_initialize();
    int rc = 0;
    if (criterion_handle_args(argc, argv, true)) rc = !criterion_run_all_tests(set);
    else rc = 1;
    criterion_finalize(set);
    return rc;
}
