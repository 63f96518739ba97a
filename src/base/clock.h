/* clock.h — the process's clocks, one helper each.
 *
 * Owns: reading the monotonic clock (durations, timings, the scheduler's
 * zl_now_ms timeline), the wall clock (timestamps shown to users), the
 * calling thread's CPU time (measurements that must hold on a shared
 * machine), and the absolute CLOCK_REALTIME deadlines
 * pthread_cond_timedwait takes.  Never sleeps or waits itself. */
#ifndef ZL_CLOCK_H
#define ZL_CLOCK_H

#include <time.h>

/* Monotonic time in seconds / milliseconds (arbitrary origin, same clock). */
double zl_now_s(void);
double zl_now_ms(void);
/* Wall-clock seconds / whole milliseconds since the Unix epoch. */
double zl_wall_s(void);
long long zl_wall_ms(void);
/* CPU seconds the calling thread has used (arbitrary origin): it counts only
 * this thread's work, so it holds on a machine other work shares. */
double zl_thread_cpu_s(void);
/* The CLOCK_REALTIME instant timeout_ms from now (for pthread_cond_timedwait). */
struct timespec zl_deadline_ms(long timeout_ms);

#endif
