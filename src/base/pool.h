/* pool.h — a fixed pthread pool for data-parallel kernels.
 *
 * zl_pool_run(p, fn, ctx) calls fn(ctx, ith, nth) once on each of the nth
 * threads (the caller is thread 0) and returns when all have finished.
 * Workers spin briefly on a generation counter before sleeping, so the
 * dispatch cost of the ~150 small ops of one decode step stays in the
 * microsecond range.  A NULL pool runs fn(ctx, 0, 1) inline. */
#ifndef ZL_POOL_H
#define ZL_POOL_H

typedef struct zl_pool zl_pool;
typedef void (*zl_pool_fn)(void *ctx, int ith, int nth);

/* n_threads <= 0 picks the number of online CPUs. Returns NULL on failure. */
zl_pool *zl_pool_new(int n_threads);
void zl_pool_free(zl_pool *p);
int zl_pool_size(const zl_pool *p);
void zl_pool_run(zl_pool *p, zl_pool_fn fn, void *ctx);

/* Split [0,n) into nth nearly equal parts; part ith is [*b, *e). */
static inline void zl_split(long n, int ith, int nth, long *b, long *e) {
    long q = n / nth, r = n % nth;
    *b = ith * q + (ith < r ? ith : r);
    *e = *b + q + (ith < r ? 1 : 0);
}

#endif
