/* test_assert.c — ZL_ASSERT (src/base/assert.h).
 *  - in checked builds (Debug, sanitizers) a false condition aborts with one
 *    "zerolayer: internal error: FILE:LINE: FUNC: assertion 'COND' failed"
 *    line on stderr; the KV accessors assert their bounds and
 *    zl_kv_note_written that the forward already covered what it notes;
 *  - in Release the condition is not evaluated at all.
 * The checked-build tests are cr_skip'ped in Release (and the Release one in
 * checked builds), so ctest's output says which half ran. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/assert.h"
#include "kv/kv.h"

/* Runs fn in a child; returns its termination signal (0 if it exited) and
 * its stderr in err. */
static int run_child(void (*fn)(void), char *err, size_t cap) {
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        fn();
        _exit(0);
    }
    close(fd[1]);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < cap && (r = read(fd[0], err + n, cap - 1 - n)) > 0) n += (size_t)r;
    err[n] = 0;
    close(fd[0]);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    return WIFSIGNALED(st) ? WTERMSIG(st) : 0;
}

static void false_assert(void) {
    int two = 2;
    ZL_ASSERT(two == 3);
}

static zl_kv *small_kv(void) {
    zl_kv *kv = NULL;
    zl_err err = {0};
    if (zl_kv_new(&kv, 2, 16, 8, ZL_TYPE_F32, &err)) _exit(3);
    return kv;
}
static void kv_slot_past_end(void) { (void)zl_kv_k(small_kv(), 0, 16); }
static void kv_layer_past_end(void) { (void)zl_kv_v(small_kv(), 2, 0); }
static void kv_note_unwritten(void) { zl_kv_note_written(small_kv(), 0, 4); /* n_used is 0 */ }
static void kv_in_bounds(void) {
    zl_kv *kv = small_kv();
    (void)zl_kv_k(kv, 1, 15);
    kv->n_used = 4;
    zl_kv_note_written(kv, 0, 4);
    zl_kv_truncate(kv, 2);
    zl_kv_free(kv);
}

Test(assert, a_false_condition_aborts_naming_it) {
    if (!ZL_ASSERTS) cr_skip_test("ZL_ASSERT is off in this build (Release)");
    char err[1024];
    cr_assert_eq(run_child(false_assert, err, sizeof err), SIGABRT, "stderr: %s", err);
    cr_assert(strstr(err, "zerolayer: internal error: ") == err, "stderr: %s", err);
    cr_assert(strstr(err, "test_assert.c:") && strstr(err, "false_assert: assertion 'two == 3' failed\n"),
              "stderr: %s", err);
}

Test(assert, kv_bounds_are_checked) {
    if (!ZL_ASSERTS) cr_skip_test("ZL_ASSERT is off in this build (Release)");
    char err[1024];
    cr_assert_eq(run_child(kv_in_bounds, err, sizeof err), 0, "in-bounds use aborted: %s", err);
    cr_assert_eq(run_child(kv_slot_past_end, err, sizeof err), SIGABRT, "slot n_ctx: %s", err);
    cr_assert(strstr(err, "zl_kv_k: assertion"), "stderr: %s", err);
    cr_assert_eq(run_child(kv_layer_past_end, err, sizeof err), SIGABRT, "layer n_layers: %s", err);
    cr_assert(strstr(err, "zl_kv_v: assertion"), "stderr: %s", err);
    cr_assert_eq(run_child(kv_note_unwritten, err, sizeof err), SIGABRT, "note past n_used: %s", err);
    cr_assert(strstr(err, "zl_kv_note_written: assertion"), "stderr: %s", err);
}

Test(assert, off_in_release_and_not_evaluated) {
    if (ZL_ASSERTS) cr_skip_test("ZL_ASSERT is on in this build (Debug or sanitizers)");
    int n = 0;
    ZL_ASSERT(n++ == 5);
    cr_assert_eq(n, 0, "the condition was evaluated");
    char err[1024];
    cr_assert_eq(run_child(false_assert, err, sizeof err), 0, "stderr: %s", err);
}
