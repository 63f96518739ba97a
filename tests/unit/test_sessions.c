/* test_sessions.c — sessions and the prefix cache at the engine level
 * (runtime/session.h, runtime/prefix_cache.h, zl_seq_copy_prefix) on
 * stories260K: continuation, prefix reuse and typing-ahead give the tokens of
 * the stateless run; tenants never see each other's cache; flush, expiry and
 * eviction zero the KV memory; statuses for unknown/foreign/expired ids; the
 * spare sequence is made only while the engine is quiet (never during a
 * session's first continuation). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine_internal.h"
#include "engine/sched_test.h"
#include "runtime/prefix_cache.h"
#include "runtime/session.h"
#include "server/lease.h"
#include "kv/kv.h"
#include "zerolayer.h"

#define MODEL ZL_ROOT "/models/stories260K.gguf"

static zl_llm *g_llm;
static zl_sched *g_sched;

static void setup(void) {
    zl_llm_opts lo = {.n_threads = 1};
    cr_assert_eq(zl_llm_open(&g_llm, MODEL, &lo, NULL), 0);
    zl_sched_opts so = {.n_parallel = 4, .max_queue = 64, .n_ctx = 256, .step_tokens = 64};
    cr_assert_eq(zl_sched_new(&g_sched, g_llm, &so, NULL), 0);
}
static void teardown(void) {
    zl_sched_free(g_sched);
    zl_llm_close(g_llm);
}

static int tokenize(const char *text, int32_t **ids) {
    size_t n = 0;
    cr_assert_eq(zl_llm_tokenize(g_llm, text, strlen(text), 1, 0, ids, &n, NULL), 0);
    return (int)n;
}

/* Run one greedy job (optionally through the store); returns generated count. */
static int run_job(zl_sessions *ss, const char *tenant, const char *sid, int prefill, const int32_t *p, int n,
                   int max_tokens, int32_t *out, int *cached) {
    zl_sampling smp = zl_sampling_defaults();
    smp.temp = 0;
    zl_job *j = zl_job_new(p, n, &smp, max_tokens, -1);
    if (ss) cr_assert_eq(zl_job_lease(j, ss, tenant, sid, prefill), 0);
    cr_assert_eq(zl_sched_submit(g_sched, j), 0);
    zl_job_tok buf[256];
    int got = 0;
    zl_finish fin = ZL_FINISH_NONE;
    while (!fin) {
        got += zl_job_read(g_sched, j, got, buf + got, 256 - got, &fin);
        if (!fin) zl_sched_wait(g_sched, 20);
    }
    cr_assert_neq(fin, ZL_FINISH_ERROR);
    zl_job_report t;
    zl_job_get_report(g_sched, j, &t);
    if (cached) *cached = t.n_cached;
    for (int i = 0; i < got; i++) out[i] = buf[i].id;
    zl_job_release(j);
    usleep(20000); /* the engine hands the sequence back when it reaps the job */
    return got;
}

static zl_sessions *store_idle(double ttl, size_t budget, size_t pcache, double spare_idle_ms) {
    zl_sessions *s = NULL;
    zl_sessions_opts o = {.ttl_s = ttl, .prefill_idle_s = 0.2, .max_per_tenant = 2, .kv_budget = budget,
                          .pcache_bytes = pcache, .pcache_block = 16, .spare_idle_ms = spare_idle_ms};
    cr_assert_eq(zl_sessions_new(&s, &o, NULL), 0);
    return s;
}
static zl_sessions *store(double ttl, size_t budget, size_t pcache) { return store_idle(ttl, budget, pcache, 5); }

/* Wait (up to 20 s) until the store's sweeper has a spare ready. */
static void wait_spare(zl_sessions *ss) {
    zl_sessions_stats st;
    for (int i = 0; i < 2000; i++) {
        zl_sessions_stats_get(ss, &st);
        if (st.spare_ready) return;
        usleep(10000);
    }
    cr_assert_fail("no spare sequence was made in 20 s");
}

/* K+V bytes of one cached token of the model. */
static size_t kv_token_bytes(void) {
    zl_seq_opts so = {.n_ctx = 8};
    zl_seq *probe;
    cr_assert_eq(zl_seq_new(&probe, g_llm, &so, NULL), 0);
    zl_kv_stats ks;
    zl_seq_kv_stats(probe, &ks);
    zl_seq_free(probe);
    return (size_t)ks.bytes_per_token;
}

static int all_zero(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i]) return 0;
    return 1;
}

Test(seq_copy, prefix_then_rest_equals_straight, .init = setup, .fini = teardown) {
    int32_t *ids;
    int n = tokenize("Once upon a time there was a little girl named Lily who loved the sun.", &ids);
    zl_seq *a, *b, *c;
    zl_seq_opts so = {.n_ctx = 128, .sampling = zl_sampling_defaults()};
    cr_assert_eq(zl_seq_new(&a, g_llm, &so, NULL), 0);
    cr_assert_eq(zl_seq_new(&b, g_llm, &so, NULL), 0);
    cr_assert_eq(zl_seq_new(&c, g_llm, &so, NULL), 0);
    cr_assert_eq(zl_seq_eval(a, ids, n, 0, NULL, NULL), 0);
    cr_assert_eq(zl_seq_eval(b, ids, n - 3, 0, NULL, NULL), 0);
    cr_assert_eq(zl_seq_copy_prefix(c, b, n - 5, NULL), 0);
    cr_assert_eq(zl_seq_n_past(c), n - 5);
    cr_assert_eq(zl_seq_eval(c, ids + n - 5, 5, 0, NULL, NULL), 0);
    int nv = zl_llm_n_vocab(g_llm);
    cr_expect_eq(memcmp(zl_seq_logits(a), zl_seq_logits(c), (size_t)nv * sizeof(float)), 0);
    zl_err err = {0};
    cr_expect_neq(zl_seq_copy_prefix(c, b, n, &err), 0); /* more than the source holds */
    cr_expect(strstr(err.msg, "holds") != NULL);
    cr_expect_neq(zl_seq_copy_prefix(c, c, 1, NULL), 0);
    zl_seq_free(a);
    zl_seq_free(b);
    zl_seq_free(c);
    free(ids);
}

Test(prefix_cache, tenant_isolated_exact_prefix, .init = setup, .fini = teardown) {
    int32_t *ids;
    int n = tokenize("Once upon a time there was a little girl named Lily. She loved to play outside in the sun "
                     "with her friends every day.", &ids);
    cr_assert_gt(n, 33);
    zl_pcache *pc;
    cr_assert_eq(zl_pcache_new(&pc, 64 << 20, 16, NULL), 0);
    zl_seq *a, *d;
    zl_seq_opts so = {.n_ctx = 128, .sampling = zl_sampling_defaults()};
    cr_assert_eq(zl_seq_new(&a, g_llm, &so, NULL), 0);
    cr_assert_eq(zl_seq_eval(a, ids, n, 0, NULL, NULL), 0);
    zl_pcache_insert(pc, "user:alice", a, 0);
    cr_assert_eq(zl_seq_new(&d, g_llm, &so, NULL), 0);
    cr_expect_eq(zl_pcache_lookup(pc, "user:bob", ids, n, d), 0);
    cr_expect_eq(zl_pcache_lookup(pc, "user:alic", ids, n, d), 0);
    /* found by whole blocks, reused up to the exact first difference (here:
     * all but the last prompt token, which is evaluated for its logits) */
    int got = zl_pcache_lookup(pc, "user:alice", ids, n, d);
    cr_expect_eq(got, n - 1);
    cr_expect_eq(zl_seq_n_past(d), got);
    /* a prompt that diverges at token 20 reuses exactly the 20 tokens before it */
    ids[20] = ids[20] == 5 ? 6 : 5;
    cr_expect_eq(zl_pcache_lookup(pc, "user:alice", ids, n, d), 20);
    cr_expect_eq(zl_seq_n_past(d), 20);
    /* ... and one that diverges inside the first block reuses nothing */
    ids[3] = ids[3] == 5 ? 6 : 5;
    cr_expect_eq(zl_pcache_lookup(pc, "user:alice", ids, n, d), 0);
    zl_pcache_stats st;
    zl_pcache_stats_get(pc, &st);
    cr_expect_eq(st.entries, 1);
    cr_expect_eq(st.hit_tokens, (uint64_t)(got + 20));
    /* LRU by memory: a cache smaller than one entry keeps nothing */
    zl_pcache *tiny;
    cr_assert_eq(zl_pcache_new(&tiny, 1000, 16, NULL), 0);
    zl_pcache_insert(tiny, "user:alice", a, 0);
    zl_pcache_stats_get(tiny, &st);
    cr_expect_eq(st.entries, 0);
    zl_pcache_free(tiny);
    zl_pcache_free(pc);
    zl_seq_free(a);
    zl_seq_free(d);
    free(ids);
}

/* A request that extends a whole cached sequence (or shares all of it but a
 * short tail) takes the sequence itself (no copy, no fresh memory): only for
 * its tenant, only when made alike; the logits after it equal a straight
 * run's. */
Test(prefix_cache, take_hands_over_a_whole_sequence, .init = setup, .fini = teardown) {
    int32_t *ids;
    int n = tokenize("Once upon a time there was a little girl named Lily. She loved to play outside in the sun "
                     "with her friends every day.", &ids);
    cr_assert_gt(n, 33);
    int h = n - 6; /* the cached turn (two blocks or more); the request adds 6 tokens */
    zl_pcache *pc;
    cr_assert_eq(zl_pcache_new(&pc, 64 << 20, 16, NULL), 0);
    zl_seq_opts so = {.n_ctx = 128, .sampling = zl_sampling_defaults()};
    zl_seq *a, *b, *got = NULL;
    cr_assert_eq(zl_seq_new(&a, g_llm, &so, NULL), 0);
    cr_assert_eq(zl_seq_eval(a, ids, h, 0, NULL, NULL), 0);
    zl_pcache_insert(pc, "user:alice", a, 1); /* kept whole */
    cr_expect_eq(zl_pcache_take(pc, "user:bob", ids, n, g_llm, 128, ZL_KV_F16, &got), 0, "another tenant");
    cr_expect_null(got);
    cr_expect_eq(zl_pcache_take(pc, "user:alice", ids, n, g_llm, 256, ZL_KV_F16, &got), 0, "another context size");
    cr_expect_eq(zl_pcache_take(pc, "user:alice", ids, n, g_llm, 128, ZL_KV_F32, &got), 0, "another KV type");
    int32_t save = ids[16];
    ids[16] = save == 5 ? 6 : 5;
    cr_expect_eq(zl_pcache_take(pc, "user:alice", ids, n, g_llm, 128, ZL_KV_F16, &got), 0, "a long tail not reused");
    ids[16] = save;
    zl_pcache_stats st;
    zl_pcache_stats_get(pc, &st);
    cr_expect_eq(st.entries, 1, "misses leave the entry");
    cr_expect_eq(zl_pcache_take(pc, "user:alice", ids, n, g_llm, 128, ZL_KV_F16, &got), h);
    cr_assert_eq(got, a, "the cached sequence itself");
    zl_pcache_stats_get(pc, &st);
    cr_expect_eq(st.entries, 0);
    cr_expect_eq(st.bytes, 0);
    cr_expect_eq(st.hit_tokens, (uint64_t)h);
    /* continuing it gives the logits of a straight run over all n tokens */
    cr_assert_eq(zl_seq_eval(got, ids + h, n - h, 0, NULL, NULL), 0);
    cr_assert_eq(zl_seq_new(&b, g_llm, &so, NULL), 0);
    cr_assert_eq(zl_seq_eval(b, ids, n, 0, NULL, NULL), 0);
    const float *la = zl_seq_logits(got), *lb = zl_seq_logits(b);
    for (int i = 0; i < zl_llm_n_vocab(g_llm); i++) cr_assert_float_eq(la[i], lb[i], 1e-5, "logit %d", i);
    /* handed back when its job ends; a request with the same history and another last token takes it */
    zl_pcache_insert(pc, "user:alice", got, 1);
    ids[n - 1] = ids[n - 1] == 5 ? 6 : 5;
    cr_expect_eq(zl_pcache_take(pc, "user:alice", ids, n, g_llm, 128, ZL_KV_F16, &got), n - 1, "short tail");
    cr_expect_eq(got, a);
    cr_expect_eq(zl_seq_n_past(got), n - 1);
    zl_seq_free(got);
    zl_seq_free(b);
    zl_pcache_free(pc);
    free(ids);
}

Test(sessions, continuation_prefix_and_typing_ahead_equal_stateless, .init = setup, .fini = teardown) {
    zl_sessions *ss = store(60, 1 << 30, 64 << 20);
    const char *turn1 = "Once upon a time there was a cat named Tom.";
    int32_t *p1, *full;
    int n1 = tokenize(turn1, &p1);
    int32_t ref1[64], out1[64], ref2[64], out2[64];
    int g1 = run_job(NULL, NULL, NULL, 0, p1, n1, 24, ref1, NULL);
    cr_assert_eq(zl_sessions_create(ss, "s1", "t1", 0, NULL), ZL_SESS_OK);
    cr_assert_eq(zl_sessions_begin(ss, "s1", "t1"), ZL_SESS_OK);
    int cached = -1;
    cr_assert_eq(run_job(ss, "t1", "s1", 0, p1, n1, 24, out1, &cached), g1);
    zl_sessions_end(ss, "s1", NULL, 0);
    cr_expect_eq(memcmp(out1, ref1, (size_t)g1 * sizeof *out1), 0);
    cr_expect_eq(cached, 0);
    /* turn 2: history + reply + new text, as token ids */
    char *reply = NULL;
    size_t rl = 0;
    cr_assert_eq(zl_llm_detokenize(g_llm, out1, (size_t)g1, 0, &reply, &rl, NULL), 0);
    char text[1024];
    snprintf(text, sizeof text, "%s%s One day Tom found a ball.", turn1, reply);
    int nf = tokenize(text, &full);
    int gr = run_job(NULL, NULL, NULL, 0, full, nf, 24, ref2, NULL);
    cr_assert_eq(zl_sessions_begin(ss, "s1", "t1"), ZL_SESS_OK);
    cr_assert_eq(run_job(ss, "t1", "s1", 0, full, nf, 24, out2, &cached), gr);
    zl_sessions_end(ss, "s1", NULL, 0);
    cr_expect_eq(memcmp(out2, ref2, (size_t)gr * sizeof *out2), 0);
    cr_expect_gt(cached, n1 - 2, "reused %d of %d", cached, nf);
    /* prefix cache: the stateless run of `full` left a snapshot for tenant "" only */
    int32_t out3[64];
    cr_assert_eq(run_job(ss, "t2", NULL, 0, full, nf, 24, out3, &cached), gr);
    cr_expect_eq(cached, 0);
    cr_assert_eq(run_job(ss, "t2", NULL, 0, full, nf, 24, out3, &cached), gr);
    cr_expect_eq(cached, nf - 1);
    cr_expect_eq(memcmp(out3, ref2, (size_t)gr * sizeof *out3), 0);
    /* typing-ahead: prefill a partial, then the final prompt */
    cr_assert_eq(zl_sessions_create(ss, "s2", "t1", 0, NULL), ZL_SESS_OK);
    cr_assert_eq(zl_sessions_begin(ss, "s2", "t1"), ZL_SESS_OK);
    run_job(ss, "t1", "s2", 1, full, nf - 4, 1, out3, &cached);
    zl_sessions_end(ss, "s2", NULL, 0);
    zl_session_info in;
    cr_assert_eq(zl_sessions_info(ss, "s2", "t1", &in), ZL_SESS_OK);
    cr_expect_eq(in.n_tokens, nf - 4);
    cr_expect_eq(in.committed, 0);
    cr_assert_eq(zl_sessions_begin(ss, "s2", "t1"), ZL_SESS_OK);
    cr_assert_eq(run_job(ss, "t1", "s2", 0, full, nf, 24, out3, &cached), gr);
    zl_sessions_end(ss, "s2", NULL, 0);
    cr_expect_eq(cached, nf - 4);
    cr_expect_eq(memcmp(out3, ref2, (size_t)gr * sizeof *out3), 0);
    /* an edit: the prefilled text differs from token 5 on */
    int32_t *edit = malloc((size_t)nf * sizeof *edit);
    memcpy(edit, full, (size_t)nf * sizeof *edit);
    edit[5] = edit[5] == 7 ? 8 : 7;
    cr_assert_eq(zl_sessions_begin(ss, "s2", "t1"), ZL_SESS_OK);
    run_job(ss, "t1", "s2", 1, edit, nf, 1, out3, &cached);
    zl_sessions_end(ss, "s2", NULL, 0);
    cr_assert_eq(zl_sessions_begin(ss, "s2", "t1"), ZL_SESS_OK);
    cr_assert_eq(run_job(ss, "t1", "s2", 0, full, nf, 24, out3, &cached), gr);
    zl_sessions_end(ss, "s2", NULL, 0);
    cr_expect_eq(cached, 5);
    cr_expect_eq(memcmp(out3, ref2, (size_t)gr * sizeof *out3), 0);
    free(edit);
    free(reply);
    free(p1);
    free(full);
    zl_sessions_free(ss);
}

/* Fresh sequences come from the store's spare (made by its sweeper after a
 * job ends, pages mapped ahead): prefix-cache hits and first session turns
 * on it give the stateless tokens, turn after turn. */
Test(sessions, spare_sequences_equal_stateless, .init = setup, .fini = teardown) {
    zl_sessions *ss = store(60, 1 << 30, 64 << 20);
    const char *base = "Once upon a time there was a little girl named Lily. She loved to play outside";
    const char *tails[] = {" in the sun.", " with her dog.", " in the rain.", " with her friends every day."};
    int32_t ref[64], out[64];
    for (int r = 0; r < 8; r++) {
        char text[512];
        snprintf(text, sizeof text, "%s%s", base, tails[r % 4]);
        int32_t *p;
        int n = tokenize(text, &p);
        int g = run_job(NULL, NULL, NULL, 0, p, n, 16, ref, NULL);
        int cached = -1;
        const char *sid = NULL;
        char id[16];
        if (r % 2) { /* a new session's first turn */
            snprintf(id, sizeof id, "s%d", r);
            cr_assert_eq(zl_sessions_create(ss, id, "t", 0, NULL), ZL_SESS_OK);
            cr_assert_eq(zl_sessions_begin(ss, id, "t"), ZL_SESS_OK);
            sid = id;
        }
        cr_assert_eq(run_job(ss, "t", sid, 0, p, n, 16, out, &cached), g);
        if (sid) zl_sessions_end(ss, sid, NULL, 0);
        cr_expect_eq(memcmp(out, ref, (size_t)g * sizeof *out), 0, "run %d", r);
        if (r) cr_expect_gt(cached, 16, "run %d reused %d", r, cached);
        wait_spare(ss); /* the sweeper maps the next spare once the engine is quiet */
        free(p);
    }
    zl_sessions_stats st;
    zl_sessions_stats_get(ss, &st);
    cr_expect_geq(st.spares_taken, 7, "fresh requests took %llu spares", (unsigned long long)st.spares_taken);
    cr_expect_gt(st.spare_bytes_mapped, 0);
    zl_sessions_free(ss);
}

/* ---- the first continuation of a session (mechanism, not timing) ---- */

static void setup_slow(void) {
    zl_llm_opts lo = {.n_threads = 1};
    cr_assert_eq(zl_llm_open(&g_llm, MODEL, &lo, NULL), 0);
    /* a short sleep after each engine step keeps a long job in flight for seconds */
    zl_sched_opts so = {.n_parallel = 4, .max_queue = 64, .n_ctx = 256, .step_tokens = 64};
    zl_sched_test_step_ms(10);
    cr_assert_eq(zl_sched_new(&g_sched, g_llm, &so, NULL), 0);
    zl_sched_test_step_ms(0);
}

static zl_job *submit(zl_sessions *ss, const char *tenant, const char *sid, const int32_t *p, int n, int max_tokens) {
    zl_sampling smp = zl_sampling_defaults();
    smp.temp = 0;
    zl_job *j = zl_job_new(p, n, &smp, max_tokens, -1);
    cr_assert_eq(zl_job_lease(j, ss, tenant, sid, 0), 0);
    cr_assert_eq(zl_sched_submit(g_sched, j), 0);
    return j;
}

/* Read a job to its end; returns the tokens generated (into out). */
static int finish(zl_job *j, int32_t *out, int *cached) {
    zl_job_tok buf[256];
    int got = 0;
    zl_finish fin = ZL_FINISH_NONE;
    while (!fin) {
        got += zl_job_read(g_sched, j, got, buf + got, 256 - got, &fin);
        if (!fin) zl_sched_wait(g_sched, 20);
    }
    cr_assert_neq(fin, ZL_FINISH_ERROR);
    zl_job_report t;
    zl_job_get_report(g_sched, j, &t);
    if (cached) *cached = t.n_cached;
    for (int i = 0; out && i < got; i++) out[i] = buf[i].id;
    zl_job_release(j);
    return got;
}

/* A session's cold turn ends; its first continuation follows at once while
 * another job runs.  The continuation reuses the session's own KV (no
 * re-evaluation of the history) and the process allocates no KV cache and
 * maps no spare page from the cold turn's end until the engine is quiet:
 * the spare that the cold turn made due waits for the other job's end, and
 * is then made (and taken by the next fresh request without a new KV
 * allocation).  Counts, not times: the KV allocations of the process
 * (zl_kv_allocs) and the store's mapped spare bytes. */
Test(sessions, first_continuation_allocates_and_maps_nothing, .init = setup_slow, .fini = teardown) {
    zl_sessions *ss = store_idle(60, 1 << 30, 64 << 20, 50);
    int32_t *pb, *pa, *pc;
    int nb = tokenize("The little dog ran to the park and played with a red ball all day long.", &pb);
    int na = tokenize("Once upon a time there was a cat named Tom. He liked to sleep in the sun.", &pa);
    /* another tenant's long stateless job: in flight for the whole check */
    zl_job *jb = submit(ss, "other", NULL, pb, nb, 200);
    zl_job_tok t0;
    zl_finish fb = ZL_FINISH_NONE;
    while (!zl_job_read(g_sched, jb, 0, &t0, 1, &fb) && !fb) zl_sched_wait(g_sched, 20); /* it holds its sequence */
    cr_assert_eq(fb, ZL_FINISH_NONE);
    unsigned long long k0 = zl_kv_allocs();
    /* the session's cold turn: a fresh sequence (no spare exists yet) */
    cr_assert_eq(zl_sessions_create(ss, "s", "t", 0, NULL), ZL_SESS_OK);
    cr_assert_eq(zl_sessions_begin(ss, "s", "t"), ZL_SESS_OK);
    int32_t outa[16];
    int ca = -1;
    int ga = finish(submit(ss, "t", "s", pa, na, 8), outa, &ca);
    zl_sessions_end(ss, "s", NULL, 0);
    cr_assert_eq(ca, 0);
    zl_session_info in;
    cr_assert_eq(zl_sessions_info(ss, "s", "t", &in), ZL_SESS_OK); /* the sequence is home */
    cr_assert_eq(in.n_tokens, na + ga - 1);
    cr_expect_eq(zl_kv_allocs(), k0 + 1, "the cold turn allocated its own cache, and nothing else was");
    /* the first continuation, at once: history + reply + a new turn */
    int nc = na + ga + 6;
    pc = malloc((size_t)nc * sizeof *pc);
    memcpy(pc, pa, (size_t)na * sizeof *pc);
    memcpy(pc + na, outa, (size_t)ga * sizeof *pc);
    memcpy(pc + na + ga, pb + 1, 6 * sizeof *pc);
    cr_assert_eq(zl_sessions_begin(ss, "s", "t"), ZL_SESS_OK);
    int cc = -1;
    finish(submit(ss, "t", "s", pc, nc, 4), NULL, &cc);
    zl_sessions_end(ss, "s", NULL, 0);
    cr_expect_eq(cc, na + ga - 1, "the continuation reused %d tokens, not the %d the session holds", cc, na + ga - 1);
    zl_sessions_stats st;
    zl_sessions_stats_get(ss, &st);
    cr_expect_eq(zl_kv_allocs(), k0 + 1, "a KV cache was allocated during the first continuation");
    cr_expect_eq(st.spare_bytes_mapped, 0, "spare pages were mapped during the first continuation");
    /* longer than the quiet time, with the other job still running: still nothing */
    usleep(300000);
    zl_sessions_stats_get(ss, &st);
    cr_expect_eq(zl_kv_allocs(), k0 + 1, "a KV cache was allocated while a job was in flight");
    cr_expect_eq(st.spare_bytes_mapped, 0, "spare pages were mapped while a job was in flight");
    cr_assert_eq(zl_job_read(g_sched, jb, 0, &t0, 0, &fb), 0);
    cr_assert_eq(fb, ZL_FINISH_NONE, "the other job ended too early for the check (a very slow machine?)");
    /* the engine goes quiet: the spare is made, and a new session's first turn takes it */
    zl_job_cancel(jb);
    finish(jb, NULL, NULL);
    wait_spare(ss);
    zl_sessions_stats_get(ss, &st);
    cr_expect_gt(st.spare_bytes_mapped, 0);
    cr_expect_eq(st.spares_made, 1);
    unsigned long long k1 = zl_kv_allocs();
    cr_expect_eq(k1, k0 + 2, "the spare is one KV cache");
    cr_assert_eq(zl_sessions_create(ss, "s2", "t", 0, NULL), ZL_SESS_OK);
    cr_assert_eq(zl_sessions_begin(ss, "s2", "t"), ZL_SESS_OK);
    int c2 = -1;
    finish(submit(ss, "t", "s2", pb, nb, 4), NULL, &c2);
    zl_sessions_end(ss, "s2", NULL, 0);
    zl_sessions_stats_get(ss, &st);
    cr_expect_eq(st.spares_taken, 1);
    cr_expect_eq(zl_kv_allocs(), k1, "the new session's first turn allocated instead of taking the spare");
    free(pa);
    free(pb);
    free(pc);
    zl_sessions_free(ss);
}

Test(sessions, flush_zeroes_kv, .init = setup, .fini = teardown) {
    zl_sessions *ss = store(60, 1 << 30, 0);
    int32_t *p, out[8];
    int n = tokenize("Once upon a time there was a dog.", &p);
    cr_assert_eq(zl_sessions_create(ss, "s", "t", 0, NULL), ZL_SESS_OK);
    cr_assert_eq(zl_sessions_begin(ss, "s", "t"), ZL_SESS_OK);
    run_job(ss, "t", "s", 0, p, n, 4, out, NULL);
    zl_sessions_end(ss, "s", NULL, 0);
    zl_seq *q = zl_sessions_peek_seq(ss, "s");
    cr_assert_not_null(q);
    int used = q->kv->n_used;
    size_t bytes = (size_t)used * q->kv->row_bytes;
    cr_assert_gt(used, n - 1);
    cr_expect_not(all_zero(zl_kv_k(q->kv, 0, 0), bytes));
    cr_expect_eq(zl_sessions_flush(ss, "s", "other"), ZL_SESS_TENANT);
    cr_expect_eq(zl_sessions_flush(ss, "s", "t"), ZL_SESS_OK);
    cr_expect_eq(q->kv->n_used, 0);
    for (int l = 0; l < q->kv->n_layers; l++) {
        cr_expect(all_zero(zl_kv_k(q->kv, l, 0), bytes), "layer %d K not zeroed", l);
        cr_expect(all_zero(zl_kv_v(q->kv, l, 0), bytes), "layer %d V not zeroed", l);
    }
    cr_expect_eq(zl_seq_n_past(q), 0);
    free(p);
    zl_sessions_free(ss);
}

Test(sessions, statuses_expiry_eviction_prefill_idle, .init = setup, .fini = teardown) {
    zl_sessions *ss = store(0.3, 1 << 30, 0);
    cr_assert_eq(zl_sessions_create(ss, "a", "t", 0, NULL), ZL_SESS_OK);
    cr_expect_eq(zl_sessions_begin(ss, "nope", "t"), ZL_SESS_UNKNOWN);
    cr_expect_eq(zl_sessions_begin(ss, "a", "u"), ZL_SESS_TENANT);
    cr_expect_eq(zl_sessions_begin(ss, "a", "t"), ZL_SESS_OK);
    cr_expect_eq(zl_sessions_begin(ss, "a", "t"), ZL_SESS_BUSY);
    zl_sessions_end(ss, "a", "[1]", 3);
    char *h = zl_sessions_history(ss, "a", "t");
    cr_expect_str_eq(h, "[1]");
    free(h);
    cr_expect_null(zl_sessions_history(ss, "a", "u"));
    /* per-tenant bound 2: the third evicts the least recently used idle one */
    cr_assert_eq(zl_sessions_create(ss, "b", "t", 0, NULL), ZL_SESS_OK);
    cr_assert_eq(zl_sessions_create(ss, "c", "t", 0, NULL), ZL_SESS_OK);
    cr_expect_eq(zl_sessions_begin(ss, "a", "t"), ZL_SESS_EVICTED);
    cr_expect_eq(zl_sessions_begin(ss, "b", "t"), ZL_SESS_OK);
    cr_expect_eq(zl_sessions_begin(ss, "c", "t"), ZL_SESS_OK);
    cr_expect_eq(zl_sessions_create(ss, "d", "t", 0, NULL), ZL_SESS_LIMIT); /* both busy */
    zl_sessions_end(ss, "b", NULL, 0);
    zl_sessions_end(ss, "c", NULL, 0);
    cr_expect_eq(zl_sessions_delete(ss, "b", "t"), ZL_SESS_OK);
    cr_expect_eq(zl_sessions_begin(ss, "b", "t"), ZL_SESS_DELETED);
    usleep(400000);
    zl_sessions_sweep(ss);
    cr_expect_eq(zl_sessions_begin(ss, "c", "t"), ZL_SESS_EXPIRED);
    zl_sessions_stats st;
    zl_sessions_stats_get(ss, &st);
    cr_expect_eq(st.active, 0);
    cr_expect_eq(st.expired_total, 1);
    cr_expect_eq(st.evicted_total, 1);
    zl_sessions_free(ss);

    /* KV budget: room for about one sequence of ~40 tokens */
    int32_t *p, out[8];
    int n = tokenize("Once upon a time there was a little girl named Lily. She loved the big blue sky.", &p);
    ss = store(60, kv_token_bytes() * (size_t)(n + 10), 0);
    cr_assert_eq(zl_sessions_create(ss, "x", "t", 0, NULL), ZL_SESS_OK);
    cr_assert_eq(zl_sessions_create(ss, "y", "t2", 0, NULL), ZL_SESS_OK);
    const char *ids[] = {"x", "y"}, *ten[] = {"t", "t2"};
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(zl_sessions_begin(ss, ids[i], ten[i]), ZL_SESS_OK);
        run_job(ss, ten[i], ids[i], 0, p, n, 4, out, NULL);
        zl_sessions_end(ss, ids[i], NULL, 0);
    }
    cr_expect_eq(zl_sessions_begin(ss, "x", "t"), ZL_SESS_EVICTED);
    cr_expect_eq(zl_sessions_begin(ss, "y", "t2"), ZL_SESS_OK);
    zl_sessions_end(ss, "y", NULL, 0);
    /* typing-ahead input not followed up is dropped after prefill_idle (0.2 s) */
    cr_assert_eq(zl_sessions_begin(ss, "y", "t2"), ZL_SESS_OK);
    zl_session_info in;
    cr_assert_eq(zl_sessions_info(ss, "y", "t2", &in), ZL_SESS_OK);
    int committed = in.committed;
    run_job(ss, "t2", "y", 1, p, n - 2, 1, out, NULL); /* shorter: truncates to n-2 */
    zl_sessions_end(ss, "y", NULL, 0);
    cr_assert_eq(zl_sessions_info(ss, "y", "t2", &in), ZL_SESS_OK);
    cr_expect_eq(in.n_tokens, n - 2);
    cr_expect_eq(in.committed, n - 2 < committed ? n - 2 : committed);
    usleep(300000);
    zl_sessions_sweep(ss);
    cr_assert_eq(zl_sessions_info(ss, "y", "t2", &in), ZL_SESS_OK);
    cr_expect_eq(in.n_tokens, in.committed);
    free(p);
    zl_sessions_free(ss);
}

/* Spill hooks that keep a copy of the latest spilled sequence in memory
 * (the server's seal it into its state store record,
 * tests/e2e/server_state_dir.sh). */
typedef struct {
    char id[80];
    zl_seq *seq;
    int puts, gets, drops, fail;
    pthread_t get_thread; /* who called the last get */
} fake_spill;

static int spill_put(void *ud, const char *id, const char *tenant, double created, double last, const zl_seq *seq,
                     const uint8_t *code, size_t bytes, const char *hist, size_t *stored) {
    fake_spill *f = ud;
    (void)tenant, (void)created, (void)last, (void)code, (void)bytes, (void)hist;
    *stored = 1234;
    cr_assert_not_null(seq); /* no codec in this store: never coded */
    f->puts++;
    if (f->fail) return -1;
    zl_seq_opts so = {.n_ctx = zl_seq_n_ctx(seq), .sampling = zl_sampling_defaults()};
    if (f->seq) zl_seq_free(f->seq); /* this store holds the latest spill only */
    f->seq = NULL;
    cr_assert_eq(zl_seq_new(&f->seq, g_llm, &so, NULL), 0);
    cr_assert_eq(zl_seq_copy_prefix(f->seq, seq, zl_seq_n_past(seq), NULL), 0);
    snprintf(f->id, sizeof f->id, "%s", id);
    return 0;
}
static int spill_get(void *ud, const char *id, const char *tenant, zl_seq *dst) {
    fake_spill *f = ud;
    (void)tenant;
    f->gets++;
    f->get_thread = pthread_self();
    if (!f->seq || strcmp(f->id, id)) return -1;
    return zl_seq_copy_prefix(dst, f->seq, zl_seq_n_past(f->seq), NULL);
}
static void spill_drop(void *ud, const char *id, const char *tenant) {
    fake_spill *f = ud;
    (void)tenant;
    f->drops++;
    if (f->seq && !strcmp(f->id, id)) {
        zl_seq_free(f->seq);
        f->seq = NULL;
    }
}

Test(sessions, over_budget_spills_and_continues_exactly, .init = setup, .fini = teardown) {
    int32_t *p, out[16], ref[16], more[16];
    int n = tokenize("Once upon a time there was a little girl named Lily. She loved the big blue sky.", &p);
    for (int fail = 0; fail < 2; fail++) {
        fake_spill f = {.fail = fail};
        zl_sessions_opts o = {.ttl_s = 60, .prefill_idle_s = 0.2, .max_per_tenant = 2,
                              .kv_budget = kv_token_bytes() * (size_t)(n + 10), .spare_idle_ms = 5,
                              .spill = {spill_put, spill_get, spill_drop, &f}};
        zl_sessions *ss;
        cr_assert_eq(zl_sessions_new(&ss, &o, NULL), 0);
        cr_assert_eq(zl_sessions_create(ss, "x", "t", 0, NULL), ZL_SESS_OK);
        cr_assert_eq(zl_sessions_create(ss, "y", "t2", 0, NULL), ZL_SESS_OK);
        const char *ids[] = {"x", "y"}, *ten[] = {"t", "t2"};
        int got = 0;
        for (int i = 0; i < 2; i++) {
            cr_assert_eq(zl_sessions_begin(ss, ids[i], ten[i]), ZL_SESS_OK);
            got = run_job(ss, ten[i], ids[i], 0, p, n, 4, out, NULL);
            zl_sessions_end(ss, ids[i], NULL, 0);
        }
        zl_sessions_sweep(ss);
        zl_sessions_stats st;
        zl_sessions_stats_get(ss, &st);
        cr_expect_eq(f.puts, 1, "one spill (fail %d): %d", fail, f.puts);
        if (fail) {
            cr_expect_eq(st.spill_failed_total, 1);
            cr_expect_eq(zl_sessions_begin(ss, "x", "t"), ZL_SESS_EVICTED, "a failed spill evicts");
            zl_sessions_free(ss);
            continue;
        }
        cr_expect_eq(st.spilled, 1);
        cr_expect_eq(st.spilled_total, 1);
        cr_expect_eq(st.evicted_total, 0);
        cr_expect_leq(st.kv_bytes, o.kv_budget, "the RAM held is back within the budget");
        cr_assert_null(zl_sessions_peek_seq(ss, "x"), "x holds nothing in memory");
        zl_session_info in;
        cr_assert_eq(zl_sessions_info(ss, "x", "t", &in), ZL_SESS_OK);
        cr_expect_eq(in.n_tokens, n + got - 1, "the spilled session still reports its tokens");
        cr_expect_eq(in.kv_bytes, 0);
        /* the next turn brings it back and continues as the stateless run does */
        int32_t *q = malloc((size_t)(n + got) * sizeof *q);
        memcpy(q, p, (size_t)n * sizeof *q);
        memcpy(q + n, out, (size_t)got * sizeof *q);
        int cached = 0;
        cr_assert_eq(zl_sessions_begin(ss, "x", "t"), ZL_SESS_OK);
        int g2 = run_job(ss, "t", "x", 0, q, n + got, 8, more, &cached);
        zl_sessions_end(ss, "x", NULL, 0);
        int g3 = run_job(NULL, NULL, NULL, 0, q, n + got, 8, ref, NULL);
        cr_expect_eq(g2, g3);
        cr_expect_arr_eq(more, ref, (size_t)g2 * sizeof *ref, "same greedy tokens after the spill");
        cr_expect_geq(cached, n + got - 2, "its tokens were reused, not prefilled (%d)", cached);
        cr_expect_eq(f.gets, 1);
        cr_expect_eq(f.drops, 0, "the stored copy stays once it is back: it is the session as last written");
        zl_sessions_stats_get(ss, &st);
        cr_expect_eq(st.unspilled_total, 1);
        free(q);
        zl_sessions_free(ss);
        if (f.seq) zl_seq_free(f.seq);
    }
    free(p);
}

/* A request's own thread rebuilds its spilled session (zl_sessions_rebuild)
 * before the job starts: the engine thread's acquire then takes the sequence
 * as it is, reads nothing again, and the turn continues exactly. */
Test(sessions, a_spilled_session_is_rebuilt_on_the_request_thread, .init = setup, .fini = teardown) {
    int32_t *p, out[16], ref[16], more[16];
    int n = tokenize("Once upon a time there was a little girl named Lily. She loved the big blue sky.", &p);
    fake_spill f = {0};
    zl_sessions_opts o = {.ttl_s = 60, .prefill_idle_s = 0.2, .max_per_tenant = 2,
                          .kv_budget = kv_token_bytes() * (size_t)(n + 10), .spare_idle_ms = 5,
                          .spill = {spill_put, spill_get, spill_drop, &f}};
    zl_sessions *ss;
    cr_assert_eq(zl_sessions_new(&ss, &o, NULL), 0);
    cr_assert_eq(zl_sessions_create(ss, "x", "t", 0, NULL), ZL_SESS_OK);
    cr_assert_eq(zl_sessions_create(ss, "y", "t2", 0, NULL), ZL_SESS_OK);
    const char *ids[] = {"x", "y"}, *ten[] = {"t", "t2"};
    int got = 0;
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(zl_sessions_begin(ss, ids[i], ten[i]), ZL_SESS_OK);
        got = run_job(ss, ten[i], ids[i], 0, p, n, 4, out, NULL);
        zl_sessions_end(ss, ids[i], NULL, 0);
    }
    zl_sessions_sweep(ss);
    cr_assert_eq(f.puts, 1);
    cr_assert_null(zl_sessions_peek_seq(ss, "x"), "x is spilled");
    zl_seq_opts so = {256, ZL_KV_F16, zl_sampling_defaults()};
    zl_sessions_rebuild(ss, "x", g_llm, &so); /* not begun: nothing happens */
    cr_expect_eq(f.gets, 0, "a session not begun is not rebuilt");
    cr_assert_eq(zl_sessions_begin(ss, "x", "t"), ZL_SESS_OK);
    zl_sessions_rebuild(ss, "x", g_llm, &so);
    cr_expect_eq(f.gets, 1);
    cr_expect(pthread_equal(f.get_thread, pthread_self()), "the spill was read on the request's thread");
    zl_seq *held = zl_sessions_peek_seq(ss, "x");
    cr_assert_not_null(held, "x holds its sequence again");
    cr_expect_eq(zl_seq_n_past(held), n + got - 1);
    zl_session_restore rs;
    cr_assert_eq(zl_sessions_restore_info(ss, "x", &rs), ZL_SESS_OK);
    cr_expect(rs.from == ZL_SESS_FROM_SPILL && rs.ok && rs.tokens == n + got - 1 && rs.load_ms > 0,
              "the rebuild is recorded: from %d ok %d tokens %d", rs.from, rs.ok, rs.tokens);
    zl_sessions_rebuild(ss, "x", g_llm, &so); /* held already: nothing more */
    cr_expect_eq(f.gets, 1);
    int32_t *q = malloc((size_t)(n + got) * sizeof *q);
    memcpy(q, p, (size_t)n * sizeof *q);
    memcpy(q + n, out, (size_t)got * sizeof *q);
    int cached = 0;
    int g2 = run_job(ss, "t", "x", 0, q, n + got, 8, more, &cached);
    cr_assert_eq(zl_sessions_restore_info(ss, "x", &rs), ZL_SESS_OK);
    cr_expect(rs.from == ZL_SESS_FROM_SPILL && rs.ok, "the job keeps the rebuild's record (from %d)", rs.from);
    zl_sessions_end(ss, "x", NULL, 0);
    int g3 = run_job(NULL, NULL, NULL, 0, q, n + got, 8, ref, NULL);
    cr_expect_eq(g2, g3);
    cr_expect_arr_eq(more, ref, (size_t)g2 * sizeof *ref, "same greedy tokens after the rebuild");
    cr_expect_geq(cached, n + got - 2, "its tokens were reused (%d)", cached);
    cr_expect_eq(f.gets, 1, "the engine's acquire read nothing again");
    zl_sessions_stats st;
    zl_sessions_stats_get(ss, &st);
    cr_expect_eq(st.unspilled_total, 1);
    cr_assert_eq(zl_sessions_begin(ss, "x", "t"), ZL_SESS_OK);
    run_job(ss, "t", "x", 0, q, n + got, 2, more, NULL);
    cr_assert_eq(zl_sessions_restore_info(ss, "x", &rs), ZL_SESS_OK);
    cr_expect_eq(rs.from, ZL_SESS_FROM_MEMORY, "the next turn from memory says so");
    zl_sessions_end(ss, "x", NULL, 0);
    free(q);
    zl_sessions_free(ss);
    if (f.seq) zl_seq_free(f.seq);
    free(p);
}

/* ---------------- writes to a state store (zl_sessions_persist) ---------------- */

typedef struct persist_log {
    pthread_mutex_t mu;
    int seals, puts, fail_puts, last_tokens;
    char last_id[80], last_hist[64];
} persist_log;
static persist_log g_plog = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0, "", ""};

static int fake_seal(void *ud, const zl_session_ref *ref, const zl_seq *seq, const char *history, uint8_t **out,
                     size_t *n) {
    persist_log *l = ud;
    pthread_mutex_lock(&l->mu);
    l->seals++;
    l->last_tokens = zl_seq_n_past(seq);
    snprintf(l->last_id, sizeof l->last_id, "%s", ref->id);
    snprintf(l->last_hist, sizeof l->last_hist, "%s", history ? history : "");
    pthread_mutex_unlock(&l->mu);
    *out = malloc(4);
    *n = 4;
    return *out ? 0 : ZL_ENOMEM;
}

static int fake_put(void *ud, const zl_session_ref *ref, const uint8_t *v, size_t n) {
    persist_log *l = ud;
    pthread_mutex_lock(&l->mu);
    int fail = l->fail_puts > 0;
    if (fail) l->fail_puts--;
    else l->puts++;
    pthread_mutex_unlock(&l->mu);
    return fail ? ZL_EIO : 0;
}

static int plog_get(int *seals) {
    pthread_mutex_lock(&g_plog.mu);
    int p = g_plog.puts;
    if (seals) *seals = g_plog.seals;
    pthread_mutex_unlock(&g_plog.mu);
    return p;
}

/* Wait up to 5 s for the count of successful puts to reach want. */
static int wait_puts(int want) {
    for (int i = 0; i < 500 && plog_get(NULL) < want; i++) usleep(10000);
    return plog_get(NULL);
}

static void turn(zl_sessions *ss, const char *id, const int32_t *p, int n, const char *hist) {
    int32_t out[8];
    cr_assert_eq(zl_sessions_begin(ss, id, "t"), ZL_SESS_OK);
    run_job(ss, "t", id, 0, p, n, 4, out, NULL);
    zl_sessions_end(ss, id, hist, hist ? strlen(hist) : 0);
}

Test(sessions, persist_when_idle_every_n_turns_and_after_a_failed_write, .init = setup, .fini = teardown) {
    zl_sessions *ss = NULL;
    zl_sessions_opts o = {.ttl_s = 60, .max_per_tenant = 4, .kv_budget = 1 << 30, .spare_idle_ms = -1,
                          .persist = {fake_seal, fake_put, &g_plog, 0.4, 2}};
    cr_assert_eq(zl_sessions_new(&ss, &o, NULL), 0);
    int32_t *p;
    int n = tokenize("Once upon a time there was a dog.", &p);
    cr_assert_eq(zl_sessions_create(ss, "s", "t", 0, NULL), ZL_SESS_OK);
    usleep(600000);
    cr_expect_eq(plog_get(NULL), 0, "an unchanged session is never written");
    turn(ss, "s", p, n, "[1]");
    cr_expect_eq(wait_puts(1), 1, "written once idle");
    cr_expect_str_eq(g_plog.last_id, "s");
    cr_expect_str_eq(g_plog.last_hist, "[1]");
    cr_expect_geq(g_plog.last_tokens, n, "the seal sees the whole cached sequence");
    usleep(600000);
    cr_expect_eq(plog_get(NULL), 1, "and not again while nothing changed");
    /* every 2 turns: two quick turns are written at once, before the idle time */
    o.persist.idle_s = 0;
    zl_sessions_free(ss);
    cr_assert_eq(zl_sessions_new(&ss, &o, NULL), 0);
    cr_assert_eq(zl_sessions_create(ss, "u", "t", 0, NULL), ZL_SESS_OK);
    turn(ss, "u", p, n, NULL);
    usleep(300000);
    cr_expect_eq(plog_get(NULL), 1, "one turn of two: not yet");
    turn(ss, "u", p, n, NULL);
    cr_expect_eq(wait_puts(2), 2, "the second turn is written");
    /* a failed write is counted and retried later */
    pthread_mutex_lock(&g_plog.mu);
    g_plog.fail_puts = 1;
    pthread_mutex_unlock(&g_plog.mu);
    turn(ss, "u", p, n, NULL);
    turn(ss, "u", p, n, NULL);
    cr_expect_eq(wait_puts(3), 3, "written after the failed try");
    zl_sessions_stats st;
    zl_sessions_stats_get(ss, &st);
    cr_expect_eq(st.persisted_total, 2, "this store: the every-2 write and the retried one");
    cr_expect_eq(st.persist_failed_total, 1);
    /* forget: gone without a tombstone (the next request may load it from the store) */
    cr_expect_eq(zl_sessions_forget(ss, "u", "other"), ZL_SESS_TENANT);
    cr_expect_eq(zl_sessions_forget(ss, "u", "t"), ZL_SESS_OK);
    cr_expect_eq(zl_sessions_info(ss, "u", "t", NULL), ZL_SESS_UNKNOWN);
    cr_expect_eq(zl_sessions_create(ss, "u", "t", 0, NULL), ZL_SESS_OK, "and can be created again");
    cr_expect_eq(zl_sessions_create(ss, "u", "t", 0, NULL), ZL_SESS_BUSY, "but never twice while live");
    free(p);
    zl_sessions_free(ss);
}
