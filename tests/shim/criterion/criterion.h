/* criterion.h — the subset of Criterion's API the unit tests use, for the
 * builds where Criterion itself cannot run: the AArch64 cross build of `make
 * test-aarch64` (libcriterion-dev:arm64 cannot be installed beside the
 * host's) and the ThreadSanitizer build of `make tsan` (Criterion's BoxFort
 * arena cannot be mapped under TSan: Criterion issue #274).  Same meaning as
 * Criterion's: Test(suite, name, .init, .fini, .timeout, .disabled, ...)
 * registers a test; cr_assert* end the test as failed (its .fini still
 * runs), cr_expect* mark it failed and go on, cr_skip_test ends it as
 * skipped (exit 77).  Each test runs in a forked child of its own, so a crash
 * fails that test only.  Runner in criterion.c; owns nothing else and never
 * decides what a test checks. */
#ifndef ZL_SHIM_CRITERION_H
#define ZL_SHIM_CRITERION_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

struct criterion_global_stats {
    size_t nb_tests, tests_passed, tests_failed, tests_crashed, tests_skipped;
};
struct criterion_test_set;

typedef struct zl_cr_test {
    const char *suite, *name;
    void (*fn)(void);
    void (*init)(void);
    void (*fini)(void);
    double timeout; /* seconds (0: none of its own; ctest's TIMEOUT still holds) */
    const char *description;
    bool disabled;
    struct zl_cr_test *next;
} zl_cr_test;

void zl_cr_register(zl_cr_test *t);
void zl_cr_register_post_all(void (*fn)(struct criterion_global_stats *));
/* fatal: end the test on failure; returns only when ok or not fatal.  fmt is
 * " " followed by the test's own format (never an empty format). */
void zl_cr_check(int ok, int fatal, const char *file, int line, const char *expr, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
_Noreturn void zl_cr_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

struct criterion_test_set *criterion_initialize(void);
int criterion_handle_args(int argc, char *argv[], bool handle_unknown);
int criterion_run_all_tests(struct criterion_test_set *set); /* 1 when no test failed */
void criterion_finalize(struct criterion_test_set *set);

#define ZL_CR_FN(S, N) zl_cr_test_##S##_##N
#define Test(S, N, ...)                                                                                      \
    static void ZL_CR_FN(S, N)(void);                                                                        \
    __attribute__((constructor)) static void zl_cr_reg_##S##_##N(void) {                                      \
        static zl_cr_test t = {.suite = #S, .name = #N, .fn = ZL_CR_FN(S, N), __VA_ARGS__};                   \
        zl_cr_register(&t);                                                                                  \
    }                                                                                                        \
    static void ZL_CR_FN(S, N)(void)
#define ReportHook(kind)                                                                                     \
    static void zl_cr_hook_##kind(struct criterion_global_stats *);                                          \
    __attribute__((constructor)) static void zl_cr_reg_hook_##kind(void) {                                   \
        zl_cr_register_post_all(zl_cr_hook_##kind);                                                          \
    }                                                                                                        \
    static void zl_cr_hook_##kind

#define ZL_CR(fatal, ok, expr, ...) zl_cr_check(!!(ok), fatal, __FILE__, __LINE__, expr, " " __VA_ARGS__)
#define ZL_CR_CMP(fatal, a, op, b, ...) ZL_CR(fatal, (a)op(b), #a " " #op " " #b, __VA_ARGS__)
#define ZL_CR_NEAR(a, b, eps) (fabs((double)(a) - (double)(b)) <= (double)(eps))

#define cr_assert(c, ...) ZL_CR(1, (c), #c, __VA_ARGS__)
#define cr_expect(c, ...) ZL_CR(0, (c), #c, __VA_ARGS__)
#define cr_assert_not(c, ...) ZL_CR(1, !(c), "!(" #c ")", __VA_ARGS__)
#define cr_expect_not(c, ...) ZL_CR(0, !(c), "!(" #c ")", __VA_ARGS__)
#define cr_assert_fail(...) ZL_CR(1, 0, "cr_assert_fail", __VA_ARGS__)
#define cr_assert_eq(a, b, ...) ZL_CR_CMP(1, a, ==, b, __VA_ARGS__)
#define cr_expect_eq(a, b, ...) ZL_CR_CMP(0, a, ==, b, __VA_ARGS__)
#define cr_assert_neq(a, b, ...) ZL_CR_CMP(1, a, !=, b, __VA_ARGS__)
#define cr_expect_neq(a, b, ...) ZL_CR_CMP(0, a, !=, b, __VA_ARGS__)
#define cr_assert_lt(a, b, ...) ZL_CR_CMP(1, a, <, b, __VA_ARGS__)
#define cr_expect_lt(a, b, ...) ZL_CR_CMP(0, a, <, b, __VA_ARGS__)
#define cr_assert_leq(a, b, ...) ZL_CR_CMP(1, a, <=, b, __VA_ARGS__)
#define cr_expect_leq(a, b, ...) ZL_CR_CMP(0, a, <=, b, __VA_ARGS__)
#define cr_assert_gt(a, b, ...) ZL_CR_CMP(1, a, >, b, __VA_ARGS__)
#define cr_expect_gt(a, b, ...) ZL_CR_CMP(0, a, >, b, __VA_ARGS__)
#define cr_assert_geq(a, b, ...) ZL_CR_CMP(1, a, >=, b, __VA_ARGS__)
#define cr_expect_geq(a, b, ...) ZL_CR_CMP(0, a, >=, b, __VA_ARGS__)
#define cr_assert_null(p, ...) ZL_CR(1, (p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_expect_null(p, ...) ZL_CR(0, (p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_assert_not_null(p, ...) ZL_CR(1, (p) != NULL, #p " != NULL", __VA_ARGS__)
#define cr_expect_not_null(p, ...) ZL_CR(0, (p) != NULL, #p " != NULL", __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) ZL_CR(1, !strcmp((a), (b)), #a " == " #b " (strings)", __VA_ARGS__)
#define cr_expect_str_eq(a, b, ...) ZL_CR(0, !strcmp((a), (b)), #a " == " #b " (strings)", __VA_ARGS__)
#define cr_assert_str_neq(a, b, ...) ZL_CR(1, strcmp((a), (b)), #a " != " #b " (strings)", __VA_ARGS__)
#define cr_expect_str_neq(a, b, ...) ZL_CR(0, strcmp((a), (b)), #a " != " #b " (strings)", __VA_ARGS__)
#define cr_assert_float_eq(a, b, eps, ...) ZL_CR(1, ZL_CR_NEAR(a, b, eps), #a " ~= " #b, __VA_ARGS__)
#define cr_expect_float_eq(a, b, eps, ...) ZL_CR(0, ZL_CR_NEAR(a, b, eps), #a " ~= " #b, __VA_ARGS__)
#define cr_assert_arr_eq(a, b, n, ...) ZL_CR(1, !memcmp((a), (b), (n)), #a " == " #b " (bytes)", __VA_ARGS__)
#define cr_expect_arr_eq(a, b, n, ...) ZL_CR(0, !memcmp((a), (b), (n)), #a " == " #b " (bytes)", __VA_ARGS__)
#define cr_skip_test(...) zl_cr_skip(" " __VA_ARGS__)

#endif
