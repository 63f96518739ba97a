/* sampler.c — see sampler.h.  Owns the candidate list and the RNG state of
 * one sequence; never shares state between sequences. */
#include "sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/cpu.h"
#include "../tensor/vexp.h"

typedef struct { int id; float logit; } cand;

enum { SCAN_BLOCK = 512 };

struct zl_sampler {
    zl_sampler_params p;
    int n_vocab;
    uint64_t rng[4];
    cand *c;
    int *hist;
    int n_hist, cap_hist;
    int *counts; /* scratch: occurrences of each token in the window */
    float *pr;   /* scratch: selection buffer, exp values, probabilities of the top-k candidates */
    double *blk; /* scratch: the running sum of the unfiltered draw at the end of each SCAN_BLOCK entries */
    zl_sampler_bias *bias; /* owned copy of p.bias (in-vocabulary entries only) */
    int n_bias;
    zl_sampler_constraint con; /* con.mask NULL: none */
    float *saved;              /* n_vocab: the logits before a first, unconstrained draw */
    zl_vexp_sum_fn vexp;       /* the unfiltered draw's approximate exp (tensor/vexp.h); NULL: none */
    double *eblk;              /* scratch: SCAN_BLOCK of its terms */
    uint64_t n_fast, n_exact;  /* whole-vocabulary decisions (the unfiltered draw, top-p's cut) made
                                  with the approximation / by the exact path */
};

zl_sampler_params zl_sampler_defaults(void) {
    zl_sampler_params p = {0.8f, 40, 0.95f, 0.05f, 1.0f, 64, 0.0f, 0.0f, 0, NULL, 0};
    return p;
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t next_u64(zl_sampler *s) {
    uint64_t *r = s->rng, res = rotl(r[1] * 5, 7) * 9, t = r[1] << 17;
    r[2] ^= r[0]; r[3] ^= r[1]; r[1] ^= r[2]; r[0] ^= r[3];
    r[2] ^= t; r[3] = rotl(r[3], 45);
    return res;
}

double zl_sampler_uniform(zl_sampler *s) { return (double)(next_u64(s) >> 11) * (1.0 / 9007199254740992.0); }

void zl_sampler_reset(zl_sampler *s) {
    uint64_t x = s->p.seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
    s->n_hist = 0;
}

zl_sampler *zl_sampler_new(const zl_sampler_params *p, int n_vocab) {
    if (n_vocab <= 0) return NULL;
    zl_sampler *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->p = *p;
    s->n_vocab = n_vocab;
    s->c = malloc((size_t)n_vocab * sizeof *s->c);
    s->counts = calloc((size_t)n_vocab, sizeof *s->counts);
    s->pr = malloc((size_t)n_vocab * sizeof *s->pr);
    s->blk = malloc(((size_t)n_vocab / SCAN_BLOCK + 1) * sizeof *s->blk);
    s->eblk = malloc(SCAN_BLOCK * sizeof *s->eblk);
    /* the scalar reference costs about what expf does: no fast path there */
    s->vexp = zl_cpu_max_isa() > ZL_ISA_SCALAR ? zl_vexp_sum_fn_for(zl_cpu_max_isa()) : NULL;
    if (!s->c || !s->counts || !s->pr || !s->blk || !s->eblk) { zl_sampler_free(s); return NULL; }
    if (p->n_bias > 0 && p->bias) {
        if (!(s->bias = malloc((size_t)p->n_bias * sizeof *s->bias))) { zl_sampler_free(s); return NULL; }
        for (int i = 0; i < p->n_bias; i++)
            if (p->bias[i].token >= 0 && p->bias[i].token < n_vocab) s->bias[s->n_bias++] = p->bias[i];
    }
    s->p.bias = NULL; /* the borrowed pointer is not kept */
    s->p.n_bias = 0;
    zl_sampler_reset(s);
    return s;
}

void zl_sampler_free(zl_sampler *s) {
    if (!s) return;
    free(s->c);
    free(s->hist);
    free(s->counts);
    free(s->pr);
    free(s->blk);
    free(s->eblk);
    free(s->bias);
    free(s->saved);
    free(s);
}

void zl_sampler_accept(zl_sampler *s, int token) {
    if (token < 0 || token >= s->n_vocab) return;
    if (s->n_hist == s->cap_hist) {
        int nc = s->cap_hist ? s->cap_hist * 2 : 256;
        int *nh = realloc(s->hist, (size_t)nc * sizeof *nh);
        if (!nh) return;
        s->hist = nh;
        s->cap_hist = nc;
    }
    s->hist[s->n_hist++] = token;
}

/* The first transform: bias added to the raw logits, so every later stage
 * (penalties, filters, temperature, the greedy argmax, the verification
 * ring's probabilities) sees the biased distribution. */
static void apply_bias(const zl_sampler *s, float *logits) {
    for (int i = 0; i < s->n_bias; i++) logits[s->bias[i].token] += s->bias[i].bias;
}

static void apply_penalties(zl_sampler *s, float *logits) {
    const zl_sampler_params *p = &s->p;
    if (p->repeat_last_n == 0 || s->n_hist == 0) return;
    if (p->repeat_penalty == 1.0f && p->presence_penalty == 0.0f && p->frequency_penalty == 0.0f) return;
    int n = p->repeat_last_n < 0 || p->repeat_last_n > s->n_hist ? s->n_hist : p->repeat_last_n;
    const int *h = s->hist + s->n_hist - n;
    for (int i = 0; i < n; i++) s->counts[h[i]]++;
    for (int i = 0; i < n; i++) {
        int t = h[i], c = s->counts[t];
        if (!c) continue; /* already applied */
        float l = logits[t];
        if (p->repeat_penalty != 1.0f) l = l > 0 ? l / p->repeat_penalty : l * p->repeat_penalty;
        l -= (float)c * p->frequency_penalty + p->presence_penalty;
        logits[t] = l;
        s->counts[t] = 0;
    }
}

static int cmp_cand(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit < y->logit ? 1 : -1;
    return x->id - y->id;
}

/* The largest logit, as the scalar loop `m = l[i] > m ? l[i] : m` from
 * m = l[0] finds it (NaNs never win unless l[0] is one; the sign of a zero
 * maximum may differ, which no caller can see), in eight independent lanes
 * the compiler can vectorise. */
static float max_of(const float *l, int n) {
    float m[8];
    for (int k = 0; k < 8; k++) m[k] = l[0];
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) m[k] = l[i + k] > m[k] ? l[i + k] : m[k];
    for (; i < n; i++) m[0] = l[i] > m[0] ? l[i] : m[0];
    float r = m[0];
    for (int k = 1; k < 8; k++) r = m[k] > r ? m[k] : r;
    return r;
}

/* The first index of the largest logit (0 when l[0] is NaN): what the loop
 * `if (l[i] > l[best]) best = i` returns, without its chain through a load. */
static int argmax(const float *l, int n) {
    float m = max_of(l, n);
    for (int b = 0; b < n; b += 64) {
        int e = b + 64 < n ? b + 64 : n, hit = 0;
        for (int i = b; i < e; i++) hit |= l[i] == m;
        if (hit)
            for (int i = b; i < e; i++)
                if (l[i] == m) return i;
    }
    return 0;
}

/* k-th largest of a[0..n) (1-based) by quickselect, reordering a. */
static float quickselect(float *a, int n, int k) {
    int lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        float piv = a[(lo + hi) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (a[i] > piv) i++;
            while (a[j] < piv) j--;
            if (i <= j) { float t = a[i]; a[i] = a[j]; a[j] = t; i++; j--; }
        }
        if (want <= j) hi = j;
        else if (want >= i) lo = i;
        else break;
    }
    return a[want];
}

/* k-th largest of logits (1-based).  One pass keeps, in the pr scratch, only
 * values that can still be among the k largest: when the buffer fills, its
 * k-th largest becomes a floor (values below it are out; values equal to it
 * are kept up to k in all, more copies cannot change the k-th value) and
 * later values must exceed it.  The result is the value itself, so it equals
 * a quickselect over the whole vocabulary; with a NaN among the logits (no
 * order) or a k near n it is that quickselect. */
static float kth_largest(zl_sampler *s, const float *logits, int k) {
    float *a = s->pr;
    int n = s->n_vocab, cap = 4 * k + 1024;
    if (cap >= n / 2) {
        memcpy(a, logits, (size_t)n * sizeof *a);
        return quickselect(a, n, k);
    }
    int m = 0, floored = 0, nan = 0;
    float floor = -INFINITY;
    for (int i = 0; i < n; i++) {
        float v = logits[i];
        nan |= v != v;
        if (floored ? v > floor : v >= floor) {
            a[m++] = v;
            if (m == cap) {
                float t = quickselect(a, m, k);
                int w = 0, gt = 0;
                for (int j = 0; j < m; j++) gt += a[j] > t;
                for (int j = 0, eq = k - gt; j < m; j++)
                    if (a[j] > t || (a[j] == t && eq-- > 0)) a[w++] = a[j];
                m = w;
                floor = t;
                floored = 1;
            }
        }
    }
    if (nan) {
        memcpy(a, logits, (size_t)n * sizeof *a);
        return quickselect(a, n, k);
    }
    return quickselect(a, m, k);
}

/* expf(x) >= min_p, calling expf only near the cut: far from ln(min_p) the
 * answer is the same for any expf within 1% of exp (far looser than any libm). */
static int min_p_keeps(float x, float min_p, float ln_min_p) {
    if (x < ln_min_p - 0.01f) return 0;
    if (x > ln_min_p + 0.01f) return 1;
    return expf(x) >= min_p;
}

/* The candidates at or above the k-th largest logit, sorted (logit
 * descending, id ascending): exactly the first m >= k entries of the fully
 * sorted vocabulary.  Returns m. */
static int top_sorted(zl_sampler *s, const float *logits, int k) {
    int n = s->n_vocab;
    if (k >= n) {
        for (int i = 0; i < n; i++) s->c[i] = (cand){i, logits[i]};
        qsort(s->c, (size_t)n, sizeof *s->c, cmp_cand);
        return n;
    }
    float kth = kth_largest(s, logits, k);
    int m = 0;
    for (int i = 0; i < n; i++)
        if (logits[i] >= kth) s->c[m++] = (cand){i, logits[i]};
    qsort(s->c, (size_t)m, sizeof *s->c, cmp_cand);
    return m;
}

static int top_p_fast(zl_sampler *s, const float *logits, float mx, int *head, int *m);

/* Build the filtered candidate list with softmax probabilities in .logit;
 * returns the count.  The vocabulary is only sorted as far as a filter needs
 * it: top-k sorts its k survivors, top-p sorts a growing head of the
 * distribution until the head holds top_p of the mass; without either the
 * candidates stay in id order (a full sort of a 32k vocabulary per token
 * cost milliseconds, on the engine thread, for every stream of a batch).
 * The kept set and its probabilities do not depend on the order; the draw
 * walks the list in its order. */
static int filter(zl_sampler *s, const float *logits) {
    const zl_sampler_params *p = &s->p;
    int n = s->n_vocab;
    int k = p->top_k > 0 && p->top_k < n ? p->top_k : n;
    float *pr = s->pr;
    float mx;
    if (k < n) {
        /* keep only candidates at or above the k-th largest logit */
        int m = top_sorted(s, logits, k);
        n = k < m ? k : m;
        mx = s->c[0].logit;
        if (p->top_p < 1.0f) {
            double sum = 0;
            for (int i = 0; i < n; i++) { pr[i] = expf(s->c[i].logit - mx); sum += pr[i]; }
            double cum = 0;
            for (int i = 0; i < n; i++) {
                cum += pr[i] / sum;
                if (cum >= p->top_p) { n = i + 1; break; }
            }
        }
    } else if (p->top_p < 1.0f) {
        /* the whole vocabulary's mass, then sorted heads of growing size
         * (top_p_fast usually decides the cut without the expf pass) */
        mx = max_of(logits, n);
        int head = 64, m = 0;
        int fast = top_p_fast(s, logits, mx, &head, &m);
        if (fast > 0) {
            s->n_fast++;
            n = fast;
        } else {
            /* from the head where top_p_fast stopped (s->c holds its m
             * candidates when m > 0): every smaller head held no cut */
            s->n_exact++;
            double sum = 0;
            for (int i = 0; i < n; i++) sum += expf(logits[i] - mx);
            for (;; head *= 4, m = 0) {
                if (!m) m = top_sorted(s, logits, head < n ? head : n);
                int keep = 0;
                double cum = 0;
                for (int i = 0; i < m && !keep; i++) {
                    cum += expf(s->c[i].logit - mx) / sum;
                    if (cum >= p->top_p) keep = i + 1;
                }
                if (keep || m >= n) { n = keep ? keep : m; break; }
            }
        }
    } else if (p->min_p > 0.0f) {
        /* min-p alone: its survivors straight from the logits, in id order */
        mx = max_of(logits, n);
        float ln_min_p = logf(p->min_p);
        int m = 0, top = 0;
        for (int i = 0; i < n; i++) {
            int first_max = !top && logits[i] == mx;
            top |= first_max;
            if (first_max || min_p_keeps(logits[i] - mx, p->min_p, ln_min_p)) s->c[m++] = (cand){i, logits[i]};
        }
        n = m;
    } else {
        for (int i = 0; i < n; i++) s->c[i] = (cand){i, logits[i]};
        mx = max_of(logits, n);
    }
    if (p->min_p > 0.0f && (k < s->n_vocab || p->top_p < 1.0f)) {
        /* relative to the most likely token (probability ratio exp(l - mx));
         * that token itself always stays (the first of equal maxima) */
        float ln_min_p = logf(p->min_p);
        int m = 0, top = 0;
        for (int i = 0; i < n; i++) {
            int first_max = !top && s->c[i].logit == mx;
            top |= first_max;
            if (first_max || min_p_keeps(s->c[i].logit - mx, p->min_p, ln_min_p)) s->c[m++] = s->c[i];
        }
        n = m;
    }
    /* temperature + final softmax */
    float t = p->temp;
    double sum = 0;
    for (int i = 0; i < n; i++) {
        float e = expf((s->c[i].logit - mx) / t);
        s->c[i].logit = e;
        sum += e;
    }
    for (int i = 0; i < n; i++) s->c[i].logit = (float)(s->c[i].logit / sum);
    return n;
}

void zl_sampler_set_constraint(zl_sampler *s, const zl_sampler_constraint *c) {
    if (c) s->con = *c;
    else memset(&s->con, 0, sizeof s->con);
}

static int sample_unconstrained(zl_sampler *s, float *logits);

int zl_sampler_sample(zl_sampler *s, float *logits) {
    if (!s->con.mask) return sample_unconstrained(s, logits);
    if (s->con.check && !s->saved) s->saved = malloc((size_t)s->n_vocab * sizeof *s->saved);
    if (s->con.check && s->saved) {
        memcpy(s->saved, logits, (size_t)s->n_vocab * sizeof *logits);
        int t = sample_unconstrained(s, logits);
        if (s->con.check(s->con.ud, t)) {
            s->con.accept(s->con.ud, t);
            return t;
        }
        memcpy(logits, s->saved, (size_t)s->n_vocab * sizeof *logits);
    }
    if (s->con.mask(s->con.ud, logits) <= 0) return s->con.fallback;
    int t = sample_unconstrained(s, logits);
    s->con.accept(s->con.ud, t);
    return t;
}

/* The unfiltered draw's token without expf, when it is certain to be the
 * exact path's; -1 when not.  u is that path's uniform; the kernel computes
 * x_i = (l_i - max) / T in float as that path does.
 *
 * The exact path takes p_i = expf(x_i) (float), C_j = the double running
 * sum of p_0..p_j in id order, S = C_{n-1}, r = u·S (rounded), and returns
 * the first j with C_j > r (so p_j > 0: a zero term leaves the sum as it
 * was).  Here e_i ≈ exp(x_i) (tensor/vexp.h), summed in double by block (the
 * kernel's own order) and then in id order into D_j and S', r' = u·S'; j is
 * the entry where r' falls: D_{j-1} <= r' < D_j (D_{-1} = 0).
 *
 * Bounds, with E_i = exp(x_i) exactly, n <= 2^23 entries, u_d = 2^-53,
 * g = n·u_d/(1 - n·u_d) (<= 2^-30: double additions at most n deep err by at
 * most g times the sum of their non-negative terms, in any order):
 *   libm:   |p_i - E_i| <= a·E_i·(1 + 2^-21) + b, a = LIBM_EXPF_REL = 2^-22:
 *           2 ulps, twice the documented bound of glibc's and musl's expf
 *           (their code is within 0.502 ulp), b = 2^-148 (below 2^-126 the
 *           result is subnormal or 0: 2 ulps of 2^-149); the factor
 *           (1 + 2^-21), from ulps of p rather than of E, is inside A's slack;
 *   kernel: |e_i - E_i| <= a'·E_i + b', a' = ZL_VEXP_REL_ERR, b' = ZL_VEXP_ABS_ERR.
 * The lower boundary: r - C_{j-1} = u·(S - C_{j-1}) - (1-u)·C_{j-1} + (r's
 * rounding), where S - C_{j-1} is the tail sum p_j.. and C_{j-1} the head
 * sum ..p_{j-1}, each within g·S; the same holds for r' - D_{j-1} with e, S'.
 * Their difference is u·(tail of p - e) - (1-u)·(head of p - e) plus
 * roundings, and a head or tail of p - e is at most (a + a') times its sum
 * of E plus n(b + b'); those sums of E are within (1 + 2a') of the computed
 * D_{j-1} and S' - D_{j-1} up to 2g·S' + n·b', and S <= 1.01·S'.  So
 *   |(r - C_{j-1}) - (r' - D_{j-1})| <= A·[u·(S' - D_{j-1}) + (1-u)·D_{j-1}] + G·S' + B,
 *   A = (a + a')(1 + 2^-20),  G = 8g + 4u_d,  B = 4n(b + b'),
 * and for the upper one, in the same way,
 *   |(C_j - r) - (D_j - r')| <= A·[(1-u)·D_j + u·(S' - D_j)] + G·S' + B.
 * r' - D_{j-1} and D_j - r' above these margins give C_{j-1} < r < C_j: the
 * exact path's first C above r is C_j (C is non-decreasing), j itself.  The
 * error of the head and the tail enter with weights 1-u and u, so a draw
 * near either end of the running sum has a margin near G·S' + B there.  The
 * slack in A (1 + 2^-20 for 1 + 2a') and in G covers the roundings of the
 * test itself.  An entry whose e_i is below the margin (an underflowed one
 * among them) can never pass.  Anything not finite (a NaN or infinite logit
 * makes S' NaN) falls to the exact path. */
#define LIBM_EXPF_REL 0x1p-22
static int fast_draw(zl_sampler *s, const float *l, float mx, float t, int nb, double u) {
    int nv = s->n_vocab;
    if (!s->vexp || nv > (1 << 23)) return -1;
    double run = 0;
    for (int b = 0; b < nb; b++) {
        int o = b * SCAN_BLOCK, len = nv - o < SCAN_BLOCK ? nv - o : SCAN_BLOCK;
        run += s->vexp(l + o, mx, t, len, NULL);
        s->blk[b] = run;
    }
    if (!(run >= 1.0 && run <= 1e300)) return -1; /* the maximum's term is 1; catches NaN */
    double r = u * run;
    int b0 = 0;
    while (b0 < nb && s->blk[b0] <= r) b0++;
    if (b0 == nb) return -1;
    int o = b0 * SCAN_BLOCK, len = nv - o < SCAN_BLOCK ? nv - o : SCAN_BLOCK;
    s->vexp(l + o, mx, t, len, s->eblk);
    double lo = b0 ? s->blk[b0 - 1] : 0, hi = lo;
    int j = -1;
    for (int i = 0; i < len && j < 0; i++) {
        lo = hi;
        hi += s->eblk[i];
        if (r < hi) j = o + i;
    }
    if (j < 0) return -1;
    double g = (double)nv * 0x1p-53 * (1.0 + 0x1p-29);
    double A = (LIBM_EXPF_REL + ZL_VEXP_REL_ERR) * (1.0 + 0x1p-20);
    double GB = (8.0 * g + 4.0 * 0x1p-53) * run + 4.0 * (double)nv * (0x1p-148 + ZL_VEXP_ABS_ERR);
    double m_lo = A * (u * (run - lo) + (1.0 - u) * lo) + GB;
    double m_hi = A * ((1.0 - u) * hi + u * (run - hi)) + GB;
    return r - lo > m_lo && hi - r > m_hi ? j : -1;
}

/* Top-p without top-k, when its cut is certain: the number of sorted
 * candidates it keeps (s->c holds them, as top_sorted left them), or 0 when
 * not certain.  The exact path sums p_i = expf(l_i - max) over the whole
 * vocabulary into S (double, id order), then walks the sorted heads with
 * cum += expf(l - max) / S until cum >= top_p.  Here only S is approximated
 * (S' from the vector exp, x = (l - max) / 1 = l - max exactly); the walk's
 * own expf terms are the exact path's.  As in fast_draw,
 * |S - S'| <= K·S' + B, and S' >= 1 (the maximum's term), so S'/S is within
 * (K + B)(1 + 4K) of 1; each cum is a sum of at most n quotients, within 2g
 * of the same quotients' exact sum on either side.  So every comparison of
 * cum with top_p is the exact path's when |cum' - top_p| exceeds
 * (K + B + 4g)(1 + 2^-10)·(cum' + top_p); the first that is not falls to
 * the exact path.  The kept set, hence every probability filter computes
 * after it, is then bit for bit the exact path's.  When it returns 0, *head
 * is the head size it stopped at and *m the candidates top_sorted left in
 * s->c for it (0: none sorted): every smaller head certainly held no cut. */
static int top_p_fast(zl_sampler *s, const float *logits, float mx, int *head, int *m) {
    int n = s->n_vocab;
    if (!s->vexp || n > (1 << 23)) return 0;
    double S = s->vexp(logits, mx, 1.0f, n, NULL);
    if (!(S >= 1.0 && S <= 1e300)) return 0;
    double g = (double)n * 0x1p-53 * (1.0 + 0x1p-29);
    double K = (LIBM_EXPF_REL + ZL_VEXP_REL_ERR + 3.0 * g) * (1.0 + 0x1p-20);
    double B = 4.0 * (double)n * (0x1p-148 + ZL_VEXP_ABS_ERR);
    double M = (K + B + 4.0 * g) * (1.0 + 0x1p-10), tp = s->p.top_p;
    for (;; *head *= 4) {
        *m = top_sorted(s, logits, *head < n ? *head : n);
        double cum = 0;
        for (int i = 0; i < *m; i++) {
            cum += expf(s->c[i].logit - mx) / S;
            if (!(fabs(cum - tp) > M * (cum + tp))) return 0;
            if (cum >= tp) return i + 1;
        }
        if (*m >= n) return *m;
    }
}

static int sample_unconstrained(zl_sampler *s, float *logits) {
    apply_bias(s, logits);
    apply_penalties(s, logits);
    if (s->p.temp <= 0.0f) return argmax(logits, s->n_vocab);
    const zl_sampler_params *p = &s->p;
    if ((p->top_k <= 0 || p->top_k >= s->n_vocab) && p->top_p >= 1.0f && p->min_p <= 0.0f) {
        /* no filter: exp((l - max) / T) in id order, summed in that order
         * (the running sum is kept at each block's end), then the draw
         * against the unnormalised running sum: the scan starts in the first
         * block whose end sum exceeds it, which is where the walk from the
         * first entry would stop.  fast_draw usually decides that token
         * first, without expf (then this loop does not run). */
        int nv = s->n_vocab, nb = (nv + SCAN_BLOCK - 1) / SCAN_BLOCK;
        float mx = max_of(logits, nv), t = p->temp, *pr = s->pr;
        double u = zl_sampler_uniform(s);
        int fast = fast_draw(s, logits, mx, t, nb, u);
        if (fast >= 0) {
            s->n_fast++;
            return fast;
        }
        s->n_exact++;
        for (int i = 0; i < nv; i++) pr[i] = (logits[i] - mx) / t;
        double sum = 0;
        for (int b = 0; b < nb; b++) {
            int e = (b + 1) * SCAN_BLOCK < nv ? (b + 1) * SCAN_BLOCK : nv;
            for (int i = b * SCAN_BLOCK; i < e; i++) {
                pr[i] = expf(pr[i]);
                sum += pr[i];
            }
            s->blk[b] = sum;
        }
        double r = u * sum;
        int b0 = 0;
        while (b0 < nb && s->blk[b0] <= r) b0++;
        double cum = b0 ? s->blk[b0 - 1] : 0;
        int last = -1;
        for (int i = b0 * SCAN_BLOCK; i < nv; i++) {
            if (pr[i] <= 0.0f) continue;
            cum += pr[i];
            last = i;
            if (r < cum) return i;
        }
        for (int i = b0 * SCAN_BLOCK - 1; i >= 0 && last < 0; i--)
            if (!(pr[i] <= 0.0f)) last = i;
        return last < 0 ? 0 : last;
    }
    int n = filter(s, logits);
    double r = zl_sampler_uniform(s), cum = 0;
    for (int i = 0; i < n; i++) {
        cum += s->c[i].logit;
        if (r < cum) return s->c[i].id;
    }
    /* nothing survived the filter (a NaN logit can make the k-th largest NaN): the first largest logit */
    return n ? s->c[n - 1].id : argmax(logits, s->n_vocab);
}

void zl_sampler_probs(zl_sampler *s, float *logits, float *probs) {
    apply_bias(s, logits);
    apply_penalties(s, logits);
    memset(probs, 0, (size_t)s->n_vocab * sizeof *probs);
    if (s->p.temp <= 0.0f) {
        probs[argmax(logits, s->n_vocab)] = 1.0f;
        return;
    }
    int n = filter(s, logits);
    for (int i = 0; i < n; i++) probs[s->c[i].id] = s->c[i].logit;
}

int zl_sampler_n_hist(const zl_sampler *s) { return s->n_hist; }

void zl_sampler_truncate(zl_sampler *s, int n_hist) {
    if (n_hist >= 0 && n_hist < s->n_hist) s->n_hist = n_hist;
}

void zl_sampler_set_isa(zl_sampler *s, int isa) { s->vexp = isa < 0 ? NULL : zl_vexp_sum_fn_for(isa); }

void zl_sampler_draw_counts(const zl_sampler *s, uint64_t *fast, uint64_t *exact) {
    *fast = s->n_fast;
    *exact = s->n_exact;
}
