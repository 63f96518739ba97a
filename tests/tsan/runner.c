/* runner.c — main() of a unit test built for ThreadSanitizer against
 * tests/tsan/criterion/criterion.h.  Runs every registered test (or those
 * whose "suite/name" matches --filter GLOB) in a child process of its own,
 * as Criterion does: .init, the test, .fini (also after a failed
 * cr_assert), with .timeout (default 600 s) as an alarm.  A test fails on a
 * failed check, a signal, a timeout or a non-zero exit (TSan exits 66 from
 * a child that saw a race).  Exit 0 when every test passed.  Other
 * Criterion options (--jobs) are accepted and ignored. */
#include <fnmatch.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "criterion/criterion.h"

static zlt_test *head, **tail = &head;
static jmp_buf bail;
static int failures;

void zlt_register(zlt_test *t) {
    t->next = NULL;
    *tail = t;
    tail = &t->next;
}

void zlt_fail(int fatal, const char *file, int line, const char *expr, const char *fmt, ...) {
    fprintf(stderr, "[----] %s:%d: %s failed: %s", file, line, fatal ? "assertion" : "expectation", expr);
    if (fmt && *fmt) {
        va_list ap;
        va_start(ap, fmt);
        fputs(": ", stderr);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
    }
    fputc('\n', stderr);
    failures++;
    if (fatal) longjmp(bail, 1);
}

static int run_child(const zlt_test *t) {
    alarm((unsigned)(t->timeout > 0 ? t->timeout : 600));
    if (t->init) t->init();
    if (!setjmp(bail)) t->fn();
    if (t->fini) t->fini();
    return failures ? 1 : 0;
}

int main(int argc, char **argv) {
    const char *filter = NULL;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--filter") && i + 1 < argc) filter = argv[++i];
    int n = 0, bad = 0;
    for (zlt_test *t = head; t; t = t->next) {
        char full[256];
        snprintf(full, sizeof full, "%s/%s", t->suite, t->name);
        if (t->disabled || (filter && fnmatch(filter, full, 0))) continue;
        n++;
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) { perror("fork"); return 2; }
        if (pid == 0) {
            int rc = run_child(t);
            fflush(NULL);
            exit(rc); /* exit, not _exit: TSan reports at exit */
        }
        int st = 0;
        while (waitpid(pid, &st, 0) < 0) {}
        const char *why = NULL;
        char buf[64];
        if (WIFSIGNALED(st)) {
            snprintf(buf, sizeof buf, WTERMSIG(st) == SIGALRM ? "timed out" : "signal %d", WTERMSIG(st));
            why = buf;
        } else if (WEXITSTATUS(st)) {
            snprintf(buf, sizeof buf, "exit status %d", WEXITSTATUS(st));
            why = buf;
        }
        if (why) bad++;
        fprintf(stderr, "[%s] %s%s%s\n", why ? "FAIL" : "PASS", full, why ? ": " : "", why ? why : "");
    }
    fprintf(stderr, "[====] Tested: %d | Passing: %d | Failing: %d\n", n, n - bad, bad);
    return bad ? 1 : n ? 0 : 2;
}
