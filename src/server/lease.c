/* lease.c — see lease.h.  Adapters only: every rule of where a sequence
 * comes from is the session store's. */
#include "lease.h"

static int lease_acquire(void *ud, zl_llm *llm, const zl_seq_opts *so, const int32_t *prompt, int n_prompt,
                         zl_seq **seq, int *n_reused, char *err, size_t err_cap) {
    return zl_sess_lease_acquire(ud, llm, so, prompt, n_prompt, seq, n_reused, err, err_cap);
}

static void lease_release(void *ud, zl_seq *seq, zl_finish why) {
    (void)why; /* the store keeps what the sequence holds, however the job ended */
    zl_sess_lease_release(ud, seq);
}

static void lease_free(void *ud) { zl_sess_lease_free(ud); }

int zl_job_lease(zl_job *j, zl_sessions *s, const char *tenant, const char *id, int prefill) {
    zl_sess_lease *l = NULL;
    int rc = zl_sessions_lease(s, tenant, id, prefill, &l);
    if (rc) return rc;
    zl_job_hooks hk = {lease_acquire, lease_release, lease_free, l};
    zl_job_set_hooks(j, &hk);
    if (prefill) zl_job_set_prefill_only(j);
    return 0;
}
