/* test_server_hardening.c — tenant boundaries and freed memory, without a
 * socket: tenants are a fixed-size digest of the whole identity (two ids
 * sharing their first 200 bytes are two tenants), the session store refuses a
 * tenant string it would have to cut, and a KV cache's written rows are zero
 * by the time its memory goes back to malloc — for zl_kv_free itself, for a
 * sequence evaluated on stories260K, and for a scheduler job without hooks
 * (the path of Message Batches and every plain request).
 *
 * The last three replace free() for this executable: the replacement looks
 * at the blocks the test watches (by address, or by the KV buffer's size)
 * just before passing them on to the real free (dlsym RTLD_NEXT, so it also
 * runs under ASan). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_internal.h"
#include "engine/sched.h"
#include "runtime/session.h"
#include "kv/kv.h"
#include "server/http.h"
#include "zerolayer.h"

#define MODEL ZL_ROOT "/models/stories260K.gguf"

/* ---------------- free() watcher ---------------- */

static void (*real_free)(void *);
static atomic_int resolving;
static void *volatile watch_ptr[2];
static volatile size_t watch_size; /* 0: off; else blocks whose usable size is in [size, size + 64) */
static atomic_int seen, dirty;

/* Not instrumented: a sanitizer runtime frees (through dlsym) before its
 * shadow memory exists. */
#define ZL_NO_SAN __attribute__((no_sanitize("address", "undefined")))

ZL_NO_SAN static void watch_check(void *p, size_t n) {
    const unsigned char *b = p;
    size_t i = 0;
    while (i < n && !b[i]) i++;
    atomic_fetch_add(&seen, 1);
    if (i < n) atomic_fetch_add(&dirty, 1);
}

ZL_NO_SAN void free(void *p) {
    if (!real_free) {
        /* dlsym itself may free (its error buffer), also while a sanitizer
         * runtime starts: such a block is left alone */
        if (atomic_exchange(&resolving, 1)) return;
        void (*f)(void *) = (void (*)(void *))dlsym(RTLD_NEXT, "free");
        atomic_store(&resolving, 0);
        if (!f) return;
        real_free = f;
    }
    if (p) {
        if (p == watch_ptr[0] || p == watch_ptr[1]) watch_check(p, watch_size);
        else if (watch_size && !watch_ptr[0]) {
            size_t u = malloc_usable_size(p);
            if (u >= watch_size && u < watch_size + 64) watch_check(p, watch_size);
        }
    }
    real_free(p);
}

static void watch_reset(void) {
    watch_ptr[0] = watch_ptr[1] = NULL;
    watch_size = 0;
    atomic_store(&seen, 0);
    atomic_store(&dirty, 0);
}

/* ---------------- tenants ---------------- */

Test(tenant, whole_identity_fixed_size) {
    char a[ZL_TENANT_CAP], b[ZL_TENANT_CAP], c[ZL_TENANT_CAP], k[ZL_TENANT_CAP], n[ZL_TENANT_CAP];
    char ua[260], ub[260];
    memset(ua, 'x', 250);
    memset(ub, 'x', 250);
    ua[250] = 'A';
    ub[250] = 'B';
    ua[251] = ub[251] = 0;
    zl_tenant_derive(NULL, ua, a);
    zl_tenant_derive(NULL, ub, b);
    cr_expect_str_neq(a, b, "users sharing 250 bytes became one tenant");
    zl_tenant_derive(NULL, ua, c);
    cr_expect_str_eq(a, c);
    cr_expect_eq(strlen(a), strlen("user:") + 64);
    cr_expect_eq(strncmp(a, "user:", 5), 0);
    /* the digest is SHA-256 of the whole id: "abc" has a known one */
    zl_tenant_derive(NULL, "abc", c);
    cr_expect_str_eq(c, "user:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    /* a key and a user of the same text are not one tenant */
    zl_tenant_derive("abc", NULL, k);
    cr_expect_str_eq(k, "key:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    zl_tenant_derive(NULL, NULL, n);
    cr_expect_str_eq(n, "anonymous");
    zl_tenant_derive(NULL, "", n);
    cr_expect_str_eq(n, "anonymous");
}

Test(tenant, session_store_never_cuts_a_tenant) {
    zl_sessions *s = NULL;
    zl_sessions_opts o = {.ttl_s = 60, .max_per_tenant = 4, .kv_budget = 1 << 20, .pcache_bytes = 0, .pcache_block = 16};
    cr_assert_eq(zl_sessions_new(&s, &o, NULL), 0);
    char t1[200], t2[200];
    memset(t1, 'u', 150);
    memset(t2, 'u', 150);
    t1[150] = '1';
    t2[150] = '2';
    t1[151] = t2[151] = 0;
    zl_session_info in;
    cr_expect_neq(zl_sessions_create(s, "zs_1", t1, 0, &in), ZL_SESS_OK, "a 151-byte tenant was stored (cut)");
    cr_expect_eq(zl_sessions_info(s, "zs_1", t2, &in), ZL_SESS_UNKNOWN);
    /* a tenant of the server's shape fits */
    char d[ZL_TENANT_CAP];
    zl_tenant_derive(NULL, t1, d);
    cr_expect_eq(zl_sessions_create(s, "zs_2", d, 0, &in), ZL_SESS_OK);
    cr_expect_eq(zl_sessions_info(s, "zs_2", d, &in), ZL_SESS_OK);
    zl_tenant_derive(NULL, t2, d);
    cr_expect_eq(zl_sessions_info(s, "zs_2", d, &in), ZL_SESS_TENANT);
    zl_sessions_free(s);
}

/* ---------------- freed KV is zero ---------------- */

Test(kv_free, written_rows_are_zero_before_free) {
    zl_kv *kv = NULL;
    cr_assert_eq(zl_kv_new(&kv, 3, 100, 32, ZL_TYPE_F16, NULL), 0);
    cr_assert_eq(kv->mapped, 0, "this cache is small enough to come from the heap");
    size_t bytes = zl_kv_bytes(kv) / 2;
    for (int l = 0; l < 3; l++)
        for (int p = 0; p < 40; p++) {
            memset(zl_kv_k(kv, l, p), 0x5a, kv->row_bytes);
            memset(zl_kv_v(kv, l, p), 0xa5, kv->row_bytes);
        }
    kv->n_used = kv->n_dirty = 40;
    watch_reset();
    watch_size = bytes;
    watch_ptr[0] = kv->k;
    watch_ptr[1] = kv->v;
    zl_kv_free(kv);
    int s = atomic_load(&seen), d = atomic_load(&dirty);
    watch_reset();
    cr_expect_eq(s, 2, "K and V buffers freed: saw %d", s);
    cr_expect_eq(d, 0, "%d KV buffer(s) went back to malloc holding cached rows", d);
}

static size_t seq_kv_bytes(zl_llm *llm, int n_ctx) {
    zl_seq *q = NULL;
    zl_seq_opts so = {.n_ctx = n_ctx, .kv_type = ZL_KV_F16, .sampling = zl_sampling_defaults()};
    cr_assert_eq(zl_seq_new(&q, llm, &so, NULL), 0);
    cr_assert_eq(q->kv->mapped, 0);
    size_t b = zl_kv_bytes(q->kv) / 2;
    zl_seq_free(q);
    return b;
}

Test(kv_free, evaluated_sequence_leaves_no_rows) {
    zl_llm *llm = NULL;
    zl_llm_opts lo = {.n_threads = 1};
    cr_assert_eq(zl_llm_open(&llm, MODEL, &lo, NULL), 0);
    zl_seq *q = NULL;
    zl_seq_opts so = {.n_ctx = 777, .kv_type = ZL_KV_F16, .sampling = zl_sampling_defaults()};
    cr_assert_eq(zl_seq_new(&q, llm, &so, NULL), 0);
    int32_t ids[] = {1, 400, 401, 402, 403, 404, 405, 406};
    cr_assert_eq(zl_seq_eval(q, ids, 8, 8, NULL, NULL), 0);
    watch_reset();
    watch_size = zl_kv_bytes(q->kv) / 2;
    watch_ptr[0] = q->kv->k;
    watch_ptr[1] = q->kv->v;
    zl_seq_free(q);
    int s = atomic_load(&seen), d = atomic_load(&dirty);
    watch_reset();
    zl_llm_close(llm);
    cr_expect_eq(s, 2);
    cr_expect_eq(d, 0, "zl_seq_free handed %d KV buffer(s) holding a prompt back to malloc", d);
}

Test(kv_free, scheduler_job_without_hooks_leaves_no_rows) {
    zl_llm *llm = NULL;
    zl_llm_opts lo = {.n_threads = 1};
    cr_assert_eq(zl_llm_open(&llm, MODEL, &lo, NULL), 0);
    const int n_ctx = 777;
    size_t kvb = seq_kv_bytes(llm, n_ctx);
    zl_sched *sch = NULL;
    zl_sched_opts so = {.n_parallel = 2, .max_queue = 8, .n_ctx = n_ctx, .step_tokens = 64};
    cr_assert_eq(zl_sched_new(&sch, llm, &so, NULL), 0);
    watch_reset();
    watch_size = kvb; /* by size: the job's sequence is the scheduler's */
    zl_sampling greedy = {.temp = 0, .top_p = 1, .repeat_penalty = 1};
    int32_t p[] = {1, 400, 401, 402, 403, 404};
    zl_job *j = zl_job_new(p, 6, &greedy, 8, -1);
    cr_assert_eq(zl_sched_submit(sch, j), 0);
    zl_finish f = ZL_FINISH_NONE;
    zl_job_tok t[64];
    for (int i = 0; i < 1000 && !f; i++) {
        zl_job_read(sch, j, 0, t, 64, &f);
        if (!f) zl_sched_wait(sch, 20);
    }
    cr_expect(f != ZL_FINISH_NONE, "the job did not finish");
    zl_job_release(j);
    zl_sched_free(sch); /* the engine thread has freed the finished job's sequence by now */
    int s = atomic_load(&seen), d = atomic_load(&dirty);
    watch_reset();
    zl_llm_close(llm);
    cr_expect_geq(s, 2, "the job's K and V buffers were not seen being freed (%d)", s);
    cr_expect_eq(d, 0, "%d KV buffer(s) of a finished job went back to malloc holding its rows", d);
}
