/* lease.h — a job's sequence through the session store: the engine's job
 * hooks (sched.h) over a session lease (runtime/session.h).  The one place
 * the scheduler and the runtime meet; neither knows the other. */
#ifndef ZL_SERVER_LEASE_H
#define ZL_SERVER_LEASE_H

#include "zerolayer_sched.h"
#include "../runtime/session.h"

/* Before submit: j's sequence comes from the session `id` (NULL: the
 * tenant's prefix cache) and goes back there when j ends; prefill: a
 * typing-ahead job (evaluated, never sampled, kept uncommitted).  Returns 0,
 * ZL_EINVAL (tenant too long) or ZL_ENOMEM; the job owns the lease. */
int zl_job_lease(zl_job *j, zl_sessions *s, const char *tenant, const char *id, int prefill);

#endif
