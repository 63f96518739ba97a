/* sched.h — the engine thread as the layers above the engine see it: the
 * public scheduler API (zerolayer_sched.h) and the one call that needs an
 * engine type, a job's sampling constraint (decode/sampler.h), which the
 * server binds through engine/constraint.h.  The implementation is sched.c
 * (the job's life and the thread) and step.c (one step). */
#ifndef ZL_SCHED_H
#define ZL_SCHED_H

#include "../base/clock.h"
#include "../decode/sampler.h"
#include "zerolayer_sched.h"

/* Before submit: constrain the job's sampling (a grammar, decode/sampler.h);
 * the job owns c->ud and calls free_ud(c->ud) when it is freed.  A
 * constrained job decodes without the ring: drafted tokens are not checked
 * against the constraint. */
void zl_job_set_constraint(zl_job *j, const zl_sampler_constraint *c, void (*free_ud)(void *));

#endif
