/* ring.c — see ring.h.  Pure bookkeeping: no model, no I/O. */
#include "ring.h"

#include <string.h>

#define EMA 0.25
#define PAY_RATIO 0.95
#define COOLDOWN 16     /* first cool-down; doubles after each consecutive failed probe */
#define COOLDOWN_MAX 512
#define ACC_DECAY 0.8 /* weight of past verify steps in the acceptance estimate */
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

double zl_ring_acceptance(const zl_ring *r) {
    /* prior: one hit and one miss (0.5) */
    return (r->acc_hit + 1.0) / (r->acc_hit + r->acc_miss + 2.0);
}

void zl_ring_set_cost(zl_ring *r, const float *cost, int n) {
    memset(r->cost, 0, sizeof r->cost);
    if (!cost || n < 1) return;
    for (int i = 1; i <= ZL_RING_MAX + 1; i++) {
        float c;
        if (i <= n) c = cost[i - 1];
        else if (n >= 2) c = cost[n - 1] + (float)(i - n) * (cost[n - 1] - cost[n - 2]);
        else c = (float)i;
        r->cost[i] = c > 0 ? c : 1e-3f;
    }
    r->cost[1] = 1.0f;
}

/* The cost-optimal draft length for the acceptance estimate (1..max). */
static int best_k(const zl_ring *r) {
    double a = zl_ring_acceptance(r), e = 1.0, ak = 1.0, best = -1;
    int k_best = 1;
    for (int k = 1; k <= r->max; k++) {
        ak *= a;
        e += ak; /* E(k) = 1 + a + ... + a^k */
        double g = e / r->cost[k + 1];
        if (g > best * (1 + 1e-9)) { best = g; k_best = k; }
    }
    return k_best;
}

int zl_ring_budget(const zl_ring *r) {
    if (r->cooldown > 0) return 0;
    if (r->cost[1] > 0 && r->verify_steps > 0) return best_k(r);
    return r->size;
}

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
    r->acc_hit = ACC_DECAY * r->acc_hit + accepted;
    r->acc_miss = ACC_DECAY * r->acc_miss + (accepted < drafted);
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
