/* fault.c — the counters behind ZL_FAULT (fault.h); empty unless ZL_FAULTS. */
#include "fault.h"

#if ZL_FAULTS
#include <stdatomic.h>

static atomic_int skip_left[ZL_FAULT_COUNT], fail_left[ZL_FAULT_COUNT], fired[ZL_FAULT_COUNT];

void zl_fault_arm(zl_fault_site site, int skip, int count) {
    atomic_store(&fail_left[site], 0);
    atomic_store(&skip_left[site], skip > 0 ? skip : 0);
    atomic_store(&fired[site], 0);
    atomic_store(&fail_left[site], count > 0 ? count : 0);
}

int zl_fault_fired(zl_fault_site site) { return atomic_load(&fired[site]); }

int zl_fault_hit(zl_fault_site site) {
    if (atomic_load_explicit(&fail_left[site], memory_order_relaxed) <= 0) return 0;
    int s = atomic_load(&skip_left[site]);
    while (s > 0)
        if (atomic_compare_exchange_weak(&skip_left[site], &s, s - 1)) return 0;
    int f = atomic_load(&fail_left[site]);
    while (f > 0)
        if (atomic_compare_exchange_weak(&fail_left[site], &f, f - 1)) {
            atomic_fetch_add(&fired[site], 1);
            return 1;
        }
    return 0;
}
#else
typedef int zl_fault_unused; /* ISO C forbids an empty translation unit */
#endif
