/* assert.h — ZL_ASSERT(cond): an invariant checked in code.
 *
 * Owns: the one assertion macro.  An assertion states what must hold unless
 * the code itself is wrong (KV bookkeeping within its bounds, a job's state
 * moving only forward); it never checks input, which gets an error value
 * (err.h).  On in Debug and sanitizer builds (no NDEBUG, or ZL_ASSERTS=1 from
 * CMake's ZL_SANITIZE); off in Release, where cond is not evaluated, so it
 * must have no side effects.  A failure prints one line (file:line, function,
 * condition) on stderr and aborts. */
#ifndef ZL_ASSERT_H
#define ZL_ASSERT_H

#if !defined(ZL_ASSERTS)
#ifdef NDEBUG
#define ZL_ASSERTS 0
#else
#define ZL_ASSERTS 1
#endif
#endif

_Noreturn void zl_assert_fail(const char *file, int line, const char *func, const char *cond);
#if ZL_ASSERTS
#define ZL_ASSERT(cond) ((cond) ? (void)0 : zl_assert_fail(__FILE__, __LINE__, __func__, #cond))
#else
#define ZL_ASSERT(cond) ((void)sizeof(!(cond)))
#endif

#endif
