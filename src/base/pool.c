/* pool.c — see pool.h.
 * Design: one shared job slot guarded by a generation counter.  run() writes
 * the job, bumps the generation and does its own share; workers that see the
 * new generation run their share and decrement `pending`.  Idle workers spin
 * for a bounded number of iterations, then block on a condition variable, so
 * an idle server does not burn CPU. */
#include "pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

/* Busy-wait budget before yielding / sleeping.  Short: on an oversubscribed
 * machine a spinning thread steals the core the thread it waits for needs. */
#define SPIN_ITERS 20000
#define YIELD_ITERS 50

struct zl_pool {
    int n;
    pthread_t *threads;
    zl_pool_fn fn;
    void *ctx;
    atomic_uint gen;
    atomic_int pending;
    atomic_int stop;
    atomic_int sleepers;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

typedef struct { zl_pool *p; int ith; } worker_arg;

static void *worker(void *arg) {
    worker_arg wa = *(worker_arg *)arg;
    free(arg);
    zl_pool *p = wa.p;
    unsigned seen = 0; /* gen is 0 until the first run, which may precede this thread's start */
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen) {
            if (atomic_load(&p->stop)) return NULL;
            if (++spins < SPIN_ITERS) { CPU_RELAX(); continue; }
            if (spins < SPIN_ITERS + YIELD_ITERS) { sched_yield(); continue; }
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (atomic_load(&p->gen) == seen && !atomic_load(&p->stop))
                pthread_cond_wait(&p->cv, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
            spins = 0;
        }
        if (atomic_load(&p->stop)) return NULL;
        seen = g;
        p->fn(p->ctx, wa.ith, p->n);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel);
    }
}

zl_pool *zl_pool_new(int n_threads) {
    if (n_threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = c > 0 ? (int)c : 1;
    }
    zl_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    if (!p->threads) { free(p); return NULL; }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa) { p->n = i; zl_pool_free(p); return NULL; }
        wa->p = p;
        wa->ith = i;
        if (pthread_create(&p->threads[i], NULL, worker, wa) != 0) {
            free(wa);
            p->n = i;
            zl_pool_free(p);
            return NULL;
        }
    }
    return p;
}

void zl_pool_free(zl_pool *p) {
    if (!p) return;
    atomic_store(&p->stop, 1);
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->threads);
    free(p);
}

int zl_pool_size(const zl_pool *p) { return p ? p->n : 1; }

void zl_pool_run(zl_pool *p, zl_pool_fn fn, void *ctx) {
    if (!p || p->n == 1) { fn(ctx, 0, 1); return; }
    p->fn = fn;
    p->ctx = ctx;
    atomic_store(&p->pending, p->n - 1);
    atomic_fetch_add(&p->gen, 1); /* seq_cst: pairs with the sleepers check */
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    fn(ctx, 0, p->n);
    for (int spins = 0; atomic_load_explicit(&p->pending, memory_order_acquire) > 0; spins++) {
        if (spins < SPIN_ITERS) CPU_RELAX();
        else sched_yield();
    }
}
