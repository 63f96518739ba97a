/* fault.h — injected allocation failures, for tests only.
 *
 * Owns: the fault sites and their counters.  A site is one allocation on an
 * error path that tests must reach (a sequence's creation, the batch
 * evaluator's buffers, a job's token array); ZL_FAULT(site) there is true
 * when a test armed that site, and the code then takes its real
 * out-of-memory path.  Compiled in only when the build has tests
 * (ZL_FAULTS=1, CMake's ZL_TESTS); otherwise ZL_FAULT is the constant 0.
 * Armed only by test code through zl_fault_arm: no flag, environment
 * variable or public API reaches it, and it never fails anything by itself. */
#ifndef ZL_FAULT_H
#define ZL_FAULT_H

typedef enum {
    ZL_FAULT_SEQ_NEW,   /* zl_seq_new: the sequence's buffers */
    ZL_FAULT_BATCH_BUF, /* the batch evaluator: its buffers or a sequence's token array */
    ZL_FAULT_JOB_PUSH,  /* the scheduler: a job's output token array */
    ZL_FAULT_COUNT
} zl_fault_site;

#if ZL_FAULTS
/* From now on, let `skip` passes of site succeed, then fail the next `count`
 * (count 0 disarms).  Thread-safe. */
void zl_fault_arm(zl_fault_site site, int skip, int count);
/* Failures injected at site so far. */
int zl_fault_fired(zl_fault_site site);
/* 1 when this pass of site must fail. */
int zl_fault_hit(zl_fault_site site);
#define ZL_FAULT(site) zl_fault_hit(site)
#else
#define ZL_FAULT(site) 0
#endif

#endif
