/* criterion.h — the subset of Criterion's API the unit tests use, for builds
 * where Criterion itself is not available (the AArch64 cross build of
 * `make test-aarch64`: libcriterion-dev:arm64 cannot be installed beside the
 * host's).  Same meaning as Criterion's: Test(suite, name) registers a test;
 * cr_assert* end the test as failed, cr_expect* mark it failed and go on,
 * cr_skip_test ends it as skipped.  Each test runs in its own forked process
 * (as Criterion does), so a crash fails that test only.  Implementation in
 * criterion.c; owns nothing else and never decides what a test checks. */
#ifndef ZL_CROSS_CRITERION_H
#define ZL_CROSS_CRITERION_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

struct criterion_global_stats {
    size_t nb_tests, tests_passed, tests_failed, tests_crashed, tests_skipped;
};
struct criterion_test_set;

void zl_cr_register(const char *suite, const char *name, void (*fn)(void));
void zl_cr_register_post_all(void (*fn)(struct criterion_global_stats *));
/* fatal: end the test on failure; returns only when ok */
void zl_cr_check(int ok, int fatal, const char *file, int line, const char *expr, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
_Noreturn void zl_cr_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

struct criterion_test_set *criterion_initialize(void);
int criterion_handle_args(int argc, char *argv[], bool handle_unknown);
int criterion_run_all_tests(struct criterion_test_set *set); /* 1 when no test failed */
void criterion_finalize(struct criterion_test_set *set);

#define ZL_CR_FN(suite, name) zl_cr_test_##suite##_##name
#define Test(suite, name, ...)                                                                  \
    static void ZL_CR_FN(suite, name)(void);                                                    \
    __attribute__((constructor)) static void zl_cr_reg_##suite##_##name(void) {                  \
        zl_cr_register(#suite, #name, ZL_CR_FN(suite, name));                                   \
    }                                                                                           \
    static void ZL_CR_FN(suite, name)(void)
#define ReportHook(kind)                                                                        \
    static void zl_cr_hook_##kind(struct criterion_global_stats *);                             \
    __attribute__((constructor)) static void zl_cr_reg_hook_##kind(void) {                      \
        zl_cr_register_post_all(zl_cr_hook_##kind);                                             \
    }                                                                                           \
    static void zl_cr_hook_##kind

/* the message is " " followed by the test's format (if any): never an empty format */
#define ZL_CR(fatal, ok, expr, ...) zl_cr_check(!!(ok), fatal, __FILE__, __LINE__, expr, " " __VA_ARGS__)
#define cr_assert(c, ...) ZL_CR(1, (c), #c, __VA_ARGS__)
#define cr_expect(c, ...) ZL_CR(0, (c), #c, __VA_ARGS__)
#define cr_expect_not(c, ...) ZL_CR(0, !(c), "!(" #c ")", __VA_ARGS__)
#define cr_assert_fail(...) ZL_CR(1, 0, "fail", __VA_ARGS__)
#define cr_assert_eq(a, b, ...) ZL_CR(1, (a) == (b), #a " == " #b, __VA_ARGS__)
#define cr_assert_neq(a, b, ...) ZL_CR(1, (a) != (b), #a " != " #b, __VA_ARGS__)
#define cr_assert_gt(a, b, ...) ZL_CR(1, (a) > (b), #a " > " #b, __VA_ARGS__)
#define cr_assert_lt(a, b, ...) ZL_CR(1, (a) < (b), #a " < " #b, __VA_ARGS__)
#define cr_assert_leq(a, b, ...) ZL_CR(1, (a) <= (b), #a " <= " #b, __VA_ARGS__)
#define cr_assert_null(a, ...) ZL_CR(1, (a) == NULL, #a " == NULL", __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) ZL_CR(1, strcmp((a), (b)) == 0, #a " == " #b " (strings)", __VA_ARGS__)
#define cr_expect_eq(a, b, ...) ZL_CR(0, (a) == (b), #a " == " #b, __VA_ARGS__)
#define cr_expect_lt(a, b, ...) ZL_CR(0, (a) < (b), #a " < " #b, __VA_ARGS__)
#define cr_expect_geq(a, b, ...) ZL_CR(0, (a) >= (b), #a " >= " #b, __VA_ARGS__)
#define cr_expect_str_eq(a, b, ...) ZL_CR(0, strcmp((a), (b)) == 0, #a " == " #b " (strings)", __VA_ARGS__)
#define cr_expect_null(a, ...) ZL_CR(0, (a) == NULL, #a " == NULL", __VA_ARGS__)
#define cr_expect_float_eq(a, b, eps, ...)                                                      \
    ZL_CR(0, (a) - (b) <= (eps) && (b) - (a) <= (eps), #a " ~= " #b, __VA_ARGS__)
#define cr_skip_test(...) zl_cr_skip(" " __VA_ARGS__)

#endif
