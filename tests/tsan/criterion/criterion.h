/* criterion/criterion.h for the ThreadSanitizer build (tests/tsan) — the
 * part of Criterion's interface the TSan-labelled unit tests use, run by
 * runner.c.  Criterion itself cannot start under TSan (its BoxFort arena
 * cannot be mapped: Criterion issue #274), so `make tsan` compiles those
 * test files against this header instead: Test() registers a function,
 * cr_assert* end the test (its .fini still runs), cr_expect* record a
 * failure and go on.  It must never be used outside the TSan build. */
#ifndef ZL_TSAN_CRITERION_H
#define ZL_TSAN_CRITERION_H

/* a check without a message passes "" as its format */
#pragma GCC diagnostic ignored "-Wformat-zero-length"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

typedef struct zlt_test {
    const char *suite, *name;
    void (*fn)(void);
    void (*init)(void);
    void (*fini)(void);
    double timeout;
    const char *description;
    bool disabled;
    struct zlt_test *next;
} zlt_test;

void zlt_register(zlt_test *t);
/* fatal: the test ends here (longjmp to the runner); msg is a printf format */
void zlt_fail(int fatal, const char *file, int line, const char *expr, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#define Test(S, N, ...)                                                                                          \
    static void zlt_fn_##S##_##N(void);                                                                         \
    __attribute__((constructor)) static void zlt_reg_##S##_##N(void) {                                          \
        static zlt_test t = {.suite = #S, .name = #N, .fn = zlt_fn_##S##_##N, __VA_ARGS__};                     \
        zlt_register(&t);                                                                                       \
    }                                                                                                           \
    static void zlt_fn_##S##_##N(void)

#define ZLT_CHECK(fatal, cond, expr, ...)                                                                       \
    do {                                                                                                        \
        if (!(cond)) zlt_fail(fatal, __FILE__, __LINE__, expr, "" __VA_ARGS__);                                  \
    } while (0)

#define ZLT_CMP(fatal, a, op, b, ...) ZLT_CHECK(fatal, (a)op(b), #a " " #op " " #b, __VA_ARGS__)

#define cr_assert(c, ...) ZLT_CHECK(1, c, #c, __VA_ARGS__)
#define cr_expect(c, ...) ZLT_CHECK(0, c, #c, __VA_ARGS__)
#define cr_assert_not(c, ...) ZLT_CHECK(1, !(c), "!(" #c ")", __VA_ARGS__)
#define cr_expect_not(c, ...) ZLT_CHECK(0, !(c), "!(" #c ")", __VA_ARGS__)
#define cr_assert_fail(...) zlt_fail(1, __FILE__, __LINE__, "cr_assert_fail", "" __VA_ARGS__)
#define cr_assert_eq(a, b, ...) ZLT_CMP(1, a, ==, b, __VA_ARGS__)
#define cr_expect_eq(a, b, ...) ZLT_CMP(0, a, ==, b, __VA_ARGS__)
#define cr_assert_neq(a, b, ...) ZLT_CMP(1, a, !=, b, __VA_ARGS__)
#define cr_expect_neq(a, b, ...) ZLT_CMP(0, a, !=, b, __VA_ARGS__)
#define cr_assert_lt(a, b, ...) ZLT_CMP(1, a, <, b, __VA_ARGS__)
#define cr_expect_lt(a, b, ...) ZLT_CMP(0, a, <, b, __VA_ARGS__)
#define cr_assert_leq(a, b, ...) ZLT_CMP(1, a, <=, b, __VA_ARGS__)
#define cr_expect_leq(a, b, ...) ZLT_CMP(0, a, <=, b, __VA_ARGS__)
#define cr_assert_gt(a, b, ...) ZLT_CMP(1, a, >, b, __VA_ARGS__)
#define cr_expect_gt(a, b, ...) ZLT_CMP(0, a, >, b, __VA_ARGS__)
#define cr_assert_geq(a, b, ...) ZLT_CMP(1, a, >=, b, __VA_ARGS__)
#define cr_expect_geq(a, b, ...) ZLT_CMP(0, a, >=, b, __VA_ARGS__)
#define cr_assert_null(p, ...) ZLT_CHECK(1, (p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_expect_null(p, ...) ZLT_CHECK(0, (p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_assert_not_null(p, ...) ZLT_CHECK(1, (p) != NULL, #p " != NULL", __VA_ARGS__)
#define cr_expect_not_null(p, ...) ZLT_CHECK(0, (p) != NULL, #p " != NULL", __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) ZLT_CHECK(1, !strcmp(a, b), #a " equals " #b, __VA_ARGS__)
#define cr_expect_str_eq(a, b, ...) ZLT_CHECK(0, !strcmp(a, b), #a " equals " #b, __VA_ARGS__)
#define cr_assert_str_neq(a, b, ...) ZLT_CHECK(1, strcmp(a, b), #a " differs from " #b, __VA_ARGS__)
#define cr_expect_str_neq(a, b, ...) ZLT_CHECK(0, strcmp(a, b), #a " differs from " #b, __VA_ARGS__)
#define cr_assert_float_eq(a, b, eps, ...) ZLT_CHECK(1, fabs((double)(a) - (double)(b)) <= (eps), #a " ~ " #b, __VA_ARGS__)
#define cr_expect_float_eq(a, b, eps, ...) ZLT_CHECK(0, fabs((double)(a) - (double)(b)) <= (eps), #a " ~ " #b, __VA_ARGS__)
#define cr_assert_arr_eq(a, b, n, ...) ZLT_CHECK(1, !memcmp(a, b, n), #a " equals " #b, __VA_ARGS__)
#define cr_expect_arr_eq(a, b, n, ...) ZLT_CHECK(0, !memcmp(a, b, n), #a " equals " #b, __VA_ARGS__)

#endif
