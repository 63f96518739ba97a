/* criterion.c — the runner behind tests/shim/criterion/criterion.h: the
 * registered tests in order, --filter GLOB (on "suite/name"), --jobs and
 * --verbose accepted (tests run one at a time).  Each test runs in a forked
 * child: .init, the test, .fini (also after a failed cr_assert: longjmp back
 * here), with .timeout as an alarm; the child ends with exit() (TSan reports
 * at exit: 66 from a child that saw a race), its status the result: 0 pass,
 * 77 skipped, other non-zero fail, a signal crashed.  A run whose filter
 * matches no test fails (nothing was checked).  The default main is weak so
 * a test file may bring its own (as test_determinism.c does with Criterion). */
#include <fnmatch.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "criterion/criterion.h"

#define SKIP_STATUS 77

static zl_cr_test *g_head, **g_tail = &g_head;
static void (*g_post_all)(struct criterion_global_stats *);
static const char *g_filter;
/* in the child */
static jmp_buf g_bail;
static int g_failed, g_skipped;

void zl_cr_register(zl_cr_test *t) {
    t->next = NULL;
    *g_tail = t;
    g_tail = &t->next;
}

void zl_cr_register_post_all(void (*fn)(struct criterion_global_stats *)) { g_post_all = fn; }

void zl_cr_check(int ok, int fatal, const char *file, int line, const char *expr, const char *fmt, ...) {
    if (ok) return;
    fprintf(stderr, "[----] %s:%d: %s failed: %s", file, line, fatal ? "assertion" : "expectation", expr);
    if (fmt[1]) {
        va_list ap;
        va_start(ap, fmt);
        fputc(':', stderr);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
    }
    fputc('\n', stderr);
    fflush(stderr);
    g_failed = 1;
    if (fatal) longjmp(g_bail, 1);
}

void zl_cr_skip(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("[----] skipped:", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fflush(stderr);
    g_skipped = 1;
    longjmp(g_bail, 1);
}

struct criterion_test_set {
    int unused;
};
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

static int run_child(const zl_cr_test *t) {
    if (t->timeout > 0) alarm((unsigned)t->timeout);
    if (t->init) t->init();
    if (!setjmp(g_bail)) t->fn();
    if (t->fini) t->fini();
    return g_skipped && !g_failed ? SKIP_STATUS : g_failed;
}

int criterion_run_all_tests(struct criterion_test_set *set) {
    (void)set;
    struct criterion_global_stats st = {0};
    for (zl_cr_test *t = g_head; t; t = t->next) {
        char id[512];
        snprintf(id, sizeof id, "%s/%s", t->suite, t->name);
        if (t->disabled || (g_filter && fnmatch(g_filter, id, 0) != 0)) continue;
        st.nb_tests++;
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) {
            perror("criterion shim: fork");
            return 0;
        }
        if (pid == 0) {
            int rc = run_child(t);
            fflush(NULL);
            exit(rc); /* exit, not _exit: TSan reports at exit */
        }
        int status = 0;
        while (waitpid(pid, &status, 0) < 0) {}
        const char *what;
        char why[64] = "";
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) what = "PASS", st.tests_passed++;
        else if (WIFEXITED(status) && WEXITSTATUS(status) == SKIP_STATUS) what = "SKIP", st.tests_skipped++;
        else if (WIFEXITED(status)) {
            what = "FAIL", st.tests_failed++;
            snprintf(why, sizeof why, ": exit status %d", WEXITSTATUS(status));
        } else {
            what = "CRASH", st.tests_crashed++, st.tests_failed++;
            snprintf(why, sizeof why, WTERMSIG(status) == SIGALRM ? ": timed out" : ": signal %d", WTERMSIG(status));
        }
        fprintf(stderr, "[%s] %s::%s%s\n", what, t->suite, t->name, why);
    }
    fprintf(stderr, "[====] Synthesis: Tested: %zu | Passing: %zu | Failing: %zu | Crashing: %zu | Skipped: %zu\n",
            st.nb_tests, st.tests_passed, st.tests_failed, st.tests_crashed, st.tests_skipped);
    if (g_post_all) g_post_all(&st);
    if (!st.nb_tests) fprintf(stderr, "criterion shim: no test matches%s%s\n", g_filter ? " " : "", g_filter ? g_filter : "");
    return st.tests_failed == 0 && st.nb_tests > 0;
}

__attribute__((weak)) int main(int argc, char *argv[]) {
    struct criterion_test_set *set = criterion_initialize();
    int rc = 0;
    if (criterion_handle_args(argc, argv, true)) rc = !criterion_run_all_tests(set);
    else rc = 1;
    criterion_finalize(set);
    return rc;
}
