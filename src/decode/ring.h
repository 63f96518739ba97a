/* ring.h — the adaptive controller of the verification ring.
 *
 * Decides how many tokens to draft each step and keeps the statistics.
 *
 * The ring drafts the k in 1..max that maximises the expected tokens per unit
 * of step cost, E(k) / cost(k + 1), with E(k) = 1 + a + ... + a^k for its
 * running per-draft acceptance estimate a and cost(n) = time of a step over n
 * tokens / time of a plain step.  The cost curve is either given
 * (zl_ring_set_cost: `--ring-cost`) or learned as it decodes: a straight line
 * time(n) = t1 + slope * (n - 1) fitted by least squares to the timed steps,
 * older ones weighing less (the kernels make the real curve a little lumpy;
 * a given curve keeps that detail).  The step time includes drafting, so a
 * draft model's own cost is part of it; the first verify step after a
 * cool-down (or the start) is left out, as it also pays one-off catching up (a
 * draft model reading the prompt or the tokens of the cool-down).
 * On a weight-bound model a draft of one costs a few percent, so even modest
 * acceptance pays; on a compute-bound one (k tokens cost ~k) it rarely does.
 *
 * Drafting stops for a cool-down (16 steps, doubling after each consecutive
 * failed probe up to 512) when the best expected gain falls below plain
 * decoding, and — a guard against a wrong model — when the measured tokens/s
 * of the last window of ring steps falls below 95% of plain decoding's.  The
 * first steps are plain: the baseline the ring must beat.
 *
 * Without any timing (every step untimed) and without a given curve, the ring
 * grows by one after a fully accepted step and shrinks to one past the
 * accepted prefix after a rejection. */
#ifndef ZL_RING_H
#define ZL_RING_H

#include <stdint.h>

#define ZL_RING_DEFAULT 5
#define ZL_RING_MAX 16

typedef struct zl_ring {
    int size, max;
    int cooldown;       /* plain steps left before drafting is probed again */
    int backoff;        /* length of the last cool-down (0 = none pending) */
    uint64_t steps, verify_steps, drafted, accepted;
    float cost[ZL_RING_MAX + 2]; /* given curve: cost[n] = step over n tokens / over 1; all 0 = learn it */
    double fit[5];               /* learned: decayed sums w, w x, w x^2, w t, w x t over timed steps, x = n - 1 */
    int probe;                   /* the next verify step follows a cool-down: not timed */
    double acc_hit, acc_miss;       /* decayed counts of accepted drafts and of rejections */
    int win_steps;                  /* ring steps in the guard's current window */
    double win_tokens, win_seconds; /* their emitted tokens and time */
} zl_ring;

void zl_ring_init(zl_ring *r, int size, int max);
/* Tokens to draft this step (0 = plain decoding). */
int zl_ring_budget(const zl_ring *r);
/* Record a step: drafted tokens proposed, accepted of them, wall time
 * (<= 0: untimed), tokens emitted. */
void zl_ring_update(zl_ring *r, int drafted, int accepted, double seconds, int emitted);
/* Give the ring its verify-cost curve: cost[i] = time of a forward over
 * i + 1 tokens / over one token, i = 0..n-1 (cost[0] is 1).  Lengths past n
 * are extrapolated from the last two values.  n = 0 (or cost NULL) returns to
 * learning it.  zl_ring_init clears it: call after. */
void zl_ring_set_cost(zl_ring *r, const float *cost, int n);
/* The cost the ring currently assumes for a step over n tokens relative to a
 * plain step (given, learned or interpolated); 0 when it knows none yet. */
double zl_ring_cost(const zl_ring *r, int n);
/* The running per-draft acceptance estimate (0..1). */
double zl_ring_acceptance(const zl_ring *r);

#endif
