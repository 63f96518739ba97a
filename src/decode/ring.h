/* ring.h — the adaptive controller of the verification ring.
 *
 * Decides how many tokens to draft each step and keeps the statistics.  The
 * ring grows by one after a fully accepted step (up to max), shrinks to one
 * past the accepted prefix after a rejection, and turns drafting off for a
 * cool-down when measured throughput with drafting falls below 95% of plain
 * decoding — so it is never meaningfully slower than no ring at all.  Repeated
 * failed probes double the cool-down (16 .. 512 steps).
 *
 * Optionally the ring knows the verify-cost curve of its model (cost of a
 * forward over n tokens relative to one token; e.g. four-token kernels make
 * n = 4 cheaper than n = 3).  Then, once it has seen a verify step, it drafts
 * the k in 1..max that maximises the expected tokens per unit of cost,
 * E(k) / cost(k + 1), with E(k) = (1 - a^(k+1)) / (1 - a) for its running
 * per-draft acceptance estimate a, instead of growing and shrinking by one. */
#ifndef ZL_RING_H
#define ZL_RING_H

#include <stdint.h>

#define ZL_RING_DEFAULT 5
#define ZL_RING_MAX 16

typedef struct zl_ring {
    int size, max;
    int cooldown;       /* plain steps left before drafting is probed again */
    int backoff;        /* length of the last cool-down (0 = none pending) */
    int ring_steps;     /* ring steps since the last cool-down */
    double rate_plain;  /* tokens/s EMA of plain steps (0 = unknown) */
    double rate_ring;   /* tokens/s EMA of ring steps */
    uint64_t steps, verify_steps, drafted, accepted;
    float cost[ZL_RING_MAX + 2]; /* cost[n]: forward over n tokens / over 1 (n = 1..ZL_RING_MAX + 1); 0 = none */
    double acc_hit, acc_miss;    /* decayed counts of accepted drafts and of rejections */
} zl_ring;

void zl_ring_init(zl_ring *r, int size, int max);
/* Tokens to draft this step (0 = plain decoding). */
int zl_ring_budget(const zl_ring *r);
/* Record a step: drafted tokens proposed, accepted of them, wall time, tokens emitted. */
void zl_ring_update(zl_ring *r, int drafted, int accepted, double seconds, int emitted);
/* Give the ring its verify-cost curve: cost[i] = time of a forward over
 * i + 1 tokens / over one token, i = 0..n-1 (cost[0] is 1).  Lengths past n
 * are extrapolated from the last two values.  n = 0 (or cost NULL) removes it.
 * zl_ring_init clears it: call after. */
void zl_ring_set_cost(zl_ring *r, const float *cost, int n);
/* The running per-draft acceptance estimate (0..1). */
double zl_ring_acceptance(const zl_ring *r);

#endif
