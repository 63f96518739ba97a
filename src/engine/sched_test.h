/* sched_test.h — the scheduler's test hooks: never public API and never a
 * user flag.  Unit tests call them directly; the CLI calls them only in the
 * test build's second binary (#ifdef ZL_TEST_HOOKS: build/tests/zerolayer-hooks,
 * from the ZL_TEST_STEP_MS environment variable). */
#ifndef ZL_SCHED_TEST_H
#define ZL_SCHED_TEST_H

/* Every scheduler created after this call sleeps ms milliseconds after each
 * step that ran a forward (0: never), so tests can hold requests in flight. */
void zl_sched_test_step_ms(int ms);

#endif
