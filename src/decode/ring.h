/* ring.h — the adaptive controller of the verification ring.
 *
 * Decides how many tokens to draft each step and keeps the statistics.  The
 * ring grows by one after a fully accepted step (up to max), shrinks to one
 * past the accepted prefix after a rejection, and turns drafting off for a
 * cool-down when measured throughput with drafting falls below 95% of plain
 * decoding — so it is never meaningfully slower than no ring at all.  Repeated
 * failed probes double the cool-down (16 .. 512 steps). */
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
} zl_ring;

void zl_ring_init(zl_ring *r, int size, int max);
/* Tokens to draft this step (0 = plain decoding). */
int zl_ring_budget(const zl_ring *r);
/* Record a step: drafted tokens proposed, accepted of them, wall time, tokens emitted. */
void zl_ring_update(zl_ring *r, int drafted, int accepted, double seconds, int emitted);

#endif
