/* ring.c — see ring.h.  Pure bookkeeping: no model, no I/O. */
#include "ring.h"

#include <string.h>

#define FIT_DECAY 0.98   /* weight of past steps in the learned cost line, per timed step */
#define PAY_RATIO 0.95   /* the guard: a window of ring steps must reach 95% of plain tokens/s */
#define GUARD_WINDOW 16  /* ring steps per guard judgement (long: the acceptance estimate follows luck; the guard catches a wrong cost model) */
#define COOLDOWN 16      /* first cool-down; doubles after each consecutive failed probe */
#define COOLDOWN_MAX 512
#define ACC_DECAY 0.8    /* weight of past verify steps in the acceptance estimate */

void zl_ring_init(zl_ring *r, int size, int max) {
    memset(r, 0, sizeof *r);
    if (max < 1) max = ZL_RING_DEFAULT;
    if (max > ZL_RING_MAX) max = ZL_RING_MAX;
    if (size < 1) size = 1;
    r->max = max;
    r->size = size > max ? max : size;
    r->cooldown = 2; /* measure plain decoding first: the baseline the ring must beat */
    r->probe = 1;
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

/* The learned line: time(n) = t1 + slope * (n - 1); ok = 0 while the timed
 * steps do not span two token counts yet. */
typedef struct { int ok; double t1, slope; } cost_line;

static cost_line fit_line(const zl_ring *r) {
    const double *f = r->fit;
    cost_line L = {0, 0, 0};
    double det = f[0] * f[2] - f[1] * f[1];
    if (f[0] <= 0 || det <= 1e-9 * f[0] * f[0]) return L;
    double b = (f[0] * f[4] - f[1] * f[3]) / det;
    if (b < 0) b = 0; /* noise: more tokens never cost less */
    double a = (f[3] - b * f[1]) / f[0];
    if (a > 0) L = (cost_line){1, a, b};
    return L;
}

/* cost of a step over n tokens: the given curve, else the learned line (0 = unknown) */
static double cost_of(const zl_ring *r, const cost_line *L, int n) {
    if (n < 1) n = 1;
    if (n > ZL_RING_MAX + 1) n = ZL_RING_MAX + 1;
    if (r->cost[1] > 0) return r->cost[n];
    return L->ok ? 1.0 + L->slope * (n - 1) / L->t1 : 0;
}

double zl_ring_cost(const zl_ring *r, int n) {
    cost_line L = fit_line(r);
    return cost_of(r, &L, n);
}

/* The cost-optimal draft length for the acceptance estimate (1..max) and
 * its expected tokens per unit of cost (*gain); k = 0 when no cost is known. */
static int best_k(const zl_ring *r, double *gain) {
    cost_line L = fit_line(r);
    double a = zl_ring_acceptance(r), e = 1.0, ak = 1.0, best = -1;
    int k_best = 0;
    for (int k = 1; k <= r->max; k++) {
        ak *= a;
        e += ak; /* E(k) = 1 + a + ... + a^k */
        double c = cost_of(r, &L, k + 1);
        if (c <= 0) continue;
        double g = e / c;
        if (g > best * (1 + 1e-9)) { best = g; k_best = k; }
    }
    *gain = best;
    return k_best;
}

int zl_ring_budget(const zl_ring *r) {
    if (r->cooldown > 0) return 0;
    double g;
    int k = r->verify_steps > 0 ? best_k(r, &g) : 0;
    return k > 0 ? k : r->size;
}

static void fit_add(zl_ring *r, int n, double seconds) {
    double x = n - 1, *f = r->fit;
    for (int i = 0; i < 5; i++) f[i] *= FIT_DECAY;
    f[0] += 1;
    f[1] += x;
    f[2] += x * x;
    f[3] += seconds;
    f[4] += x * seconds;
}

static void cool_down(zl_ring *r) {
    r->backoff = r->backoff ? (r->backoff * 2 < COOLDOWN_MAX ? r->backoff * 2 : COOLDOWN_MAX) : COOLDOWN;
    r->cooldown = r->backoff;
    r->probe = 1;
    r->win_steps = 0;
    r->win_tokens = r->win_seconds = 0;
}

void zl_ring_update(zl_ring *r, int drafted, int accepted, double seconds, int emitted) {
    r->steps++;
    if (drafted <= 0) {
        if (seconds > 0) fit_add(r, 1, seconds);
        if (r->cooldown > 0) r->cooldown--;
        return;
    }
    if (r->probe) seconds = 0; /* one-off catching up after a cool-down: not the cost of n tokens */
    r->probe = 0;
    if (seconds > 0) fit_add(r, 1 + drafted, seconds);
    r->verify_steps++;
    r->drafted += (uint64_t)drafted;
    r->accepted += (uint64_t)accepted;
    r->acc_hit = ACC_DECAY * r->acc_hit + accepted;
    r->acc_miss = ACC_DECAY * r->acc_miss + (accepted < drafted);
    if (accepted == drafted) r->size = r->size < r->max ? r->size + 1 : r->max;
    else r->size = accepted + 1 < r->max ? accepted + 1 : r->max;
    /* the model's judgement: no draft length is expected to beat a plain step */
    double g;
    if (best_k(r, &g) > 0 && g < 1.0) {
        cool_down(r);
        return;
    }
    if (accepted > 0) r->backoff = 0; /* a probe that found something: the next cool-down is short again */
    /* the measured judgement, on whole windows of timed ring steps */
    cost_line L = fit_line(r); /* its t1: the plain-step time the guard compares with */
    if (seconds <= 0 || !L.ok) return;
    r->win_steps++;
    r->win_tokens += emitted;
    r->win_seconds += seconds;
    if (r->win_steps < GUARD_WINDOW) return;
    double plain = 1.0 / L.t1, ring = r->win_tokens / r->win_seconds;
    if (ring < PAY_RATIO * plain) {
        cool_down(r);
        return;
    }
    r->win_steps = 0;
    r->win_tokens = r->win_seconds = 0;
}
