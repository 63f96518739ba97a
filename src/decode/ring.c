/* ring.c — see ring.h.  Pure bookkeeping: no model, no I/O. */
#include "ring.h"

#include <string.h>

#define EMA 0.25
#define PAY_RATIO 0.95
#define COOLDOWN 16     /* first cool-down; doubles after each consecutive failed probe */
#define COOLDOWN_MAX 512
#define MIN_RING_STEPS 2 /* ring steps before the first judgement; a probe after a cool-down is judged at once */

void zl_ring_init(zl_ring *r, int size, int max) {
    memset(r, 0, sizeof *r);
    if (max < 1) max = ZL_RING_DEFAULT;
    if (max > ZL_RING_MAX) max = ZL_RING_MAX;
    if (size < 1) size = 1;
    r->max = max;
    r->size = size > max ? max : size;
    r->cooldown = 2; /* measure plain decoding first: the baseline the ring must beat */
}

int zl_ring_budget(const zl_ring *r) { return r->cooldown > 0 ? 0 : r->size; }

static void ema(double *x, double v) { *x = *x == 0 ? v : (1 - EMA) * *x + EMA * v; }

void zl_ring_update(zl_ring *r, int drafted, int accepted, double seconds, int emitted) {
    r->steps++;
    double rate = seconds > 0 ? emitted / seconds : 0;
    if (drafted == 0) {
        if (rate > 0) ema(&r->rate_plain, rate);
        if (r->cooldown > 0) r->cooldown--;
        return;
    }
    r->verify_steps++;
    r->drafted += (uint64_t)drafted;
    r->accepted += (uint64_t)accepted;
    if (rate > 0) ema(&r->rate_ring, rate);
    r->ring_steps++;
    if (accepted == drafted) r->size = r->size < r->max ? r->size + 1 : r->max;
    else r->size = accepted + 1 < r->max ? accepted + 1 : r->max;
    /* judge only on measured rates: untimed steps (seconds <= 0) leave the EMAs alone */
    if (r->rate_plain > 0 && r->rate_ring > 0 && r->ring_steps >= (r->backoff ? 1 : MIN_RING_STEPS)) {
        if (r->rate_ring < PAY_RATIO * r->rate_plain) {
            r->backoff = r->backoff ? (r->backoff * 2 < COOLDOWN_MAX ? r->backoff * 2 : COOLDOWN_MAX) : COOLDOWN;
            r->cooldown = r->backoff;
            r->ring_steps = 0;
            r->rate_ring = 0;
        } else if (r->rate_ring >= r->rate_plain) {
            /* drafting clearly pays: the next failure starts a short cool-down again (between 95% and
             * 100% of plain the ring keeps going, but one noisy step does not forget the back-off) */
            r->backoff = 0;
        }
    }
}
