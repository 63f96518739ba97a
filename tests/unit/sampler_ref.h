/* sampler_ref.h — the sampler as it was before its fast paths (one pass of
 * scalar expf per filter, quickselect over a copy of the vocabulary), kept
 * verbatim as the reference test_sampler_fast.c compares the sampler with:
 * the same tokens for the same seed, parameters and logits.  Test code only. */
#ifndef ZL_SAMPLER_REF_H
#define ZL_SAMPLER_REF_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "decode/sampler.h"

typedef struct ref_sampler ref_sampler;

typedef struct { int id; float logit; } cand;

struct ref_sampler {
    zl_sampler_params p;
    int n_vocab;
    uint64_t rng[4];
    cand *c;
    int *hist;
    int n_hist, cap_hist;
    int *counts; /* scratch: occurrences of each token in the window */
    float *pr;   /* scratch: quickselect, probabilities of the top-k candidates */
    zl_sampler_bias *bias; /* owned copy of p.bias (in-vocabulary entries only) */
    int n_bias;
    zl_sampler_constraint con; /* con.mask NULL: none */
    float *saved;              /* n_vocab: the logits before a first, unconstrained draw */
};


static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t next_u64(ref_sampler *s) {
    uint64_t *r = s->rng, res = rotl(r[1] * 5, 7) * 9, t = r[1] << 17;
    r[2] ^= r[0]; r[3] ^= r[1]; r[1] ^= r[2]; r[0] ^= r[3];
    r[2] ^= t; r[3] = rotl(r[3], 45);
    return res;
}

static double ref_sampler_uniform(ref_sampler *s) { return (double)(next_u64(s) >> 11) * (1.0 / 9007199254740992.0); }

static void ref_sampler_reset(ref_sampler *s) {
    uint64_t x = s->p.seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
    s->n_hist = 0;
}

static void ref_sampler_free(ref_sampler *s);
static ref_sampler *ref_sampler_new(const zl_sampler_params *p, int n_vocab) {
    if (n_vocab <= 0) return NULL;
    ref_sampler *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->p = *p;
    s->n_vocab = n_vocab;
    s->c = malloc((size_t)n_vocab * sizeof *s->c);
    s->counts = calloc((size_t)n_vocab, sizeof *s->counts);
    s->pr = malloc((size_t)n_vocab * sizeof *s->pr);
    if (!s->c || !s->counts || !s->pr) { ref_sampler_free(s); return NULL; }
    if (p->n_bias > 0 && p->bias) {
        if (!(s->bias = malloc((size_t)p->n_bias * sizeof *s->bias))) { ref_sampler_free(s); return NULL; }
        for (int i = 0; i < p->n_bias; i++)
            if (p->bias[i].token >= 0 && p->bias[i].token < n_vocab) s->bias[s->n_bias++] = p->bias[i];
    }
    s->p.bias = NULL; /* the borrowed pointer is not kept */
    s->p.n_bias = 0;
    ref_sampler_reset(s);
    return s;
}

static void ref_sampler_free(ref_sampler *s) {
    if (!s) return;
    free(s->c);
    free(s->hist);
    free(s->counts);
    free(s->pr);
    free(s->bias);
    free(s->saved);
    free(s);
}

static void ref_sampler_accept(ref_sampler *s, int token) {
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
static void apply_bias(const ref_sampler *s, float *logits) {
    for (int i = 0; i < s->n_bias; i++) logits[s->bias[i].token] += s->bias[i].bias;
}

static void apply_penalties(ref_sampler *s, float *logits) {
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

/* k-th largest of logits (1-based) by quickselect over the pr scratch. */
static float kth_largest(ref_sampler *s, const float *logits, int k) {
    float *a = s->pr;
    int n = s->n_vocab;
    memcpy(a, logits, (size_t)n * sizeof *a);
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

/* The candidates at or above the k-th largest logit, sorted (logit
 * descending, id ascending): exactly the first m >= k entries of the fully
 * sorted vocabulary.  Returns m. */
static int top_sorted(ref_sampler *s, const float *logits, int k) {
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

/* Build the filtered candidate list with softmax probabilities in .logit;
 * returns the count.  The vocabulary is only sorted as far as a filter needs
 * it: top-k sorts its k survivors, top-p sorts a growing head of the
 * distribution until the head holds top_p of the mass; without either the
 * candidates stay in id order (a full sort of a 32k vocabulary per token
 * cost milliseconds, on the engine thread, for every stream of a batch).
 * The kept set and its probabilities do not depend on the order; the draw
 * walks the list in its order. */
static int filter(ref_sampler *s, const float *logits) {
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
        /* the whole vocabulary's mass, then sorted heads of growing size */
        mx = logits[0];
        for (int i = 1; i < n; i++) mx = logits[i] > mx ? logits[i] : mx;
        double sum = 0;
        for (int i = 0; i < n; i++) sum += expf(logits[i] - mx);
        int head = 64;
        for (;;) {
            int m = top_sorted(s, logits, head < n ? head : n), keep = 0;
            double cum = 0;
            for (int i = 0; i < m && !keep; i++) {
                cum += expf(s->c[i].logit - mx) / sum;
                if (cum >= p->top_p) keep = i + 1;
            }
            if (keep || m >= n) { n = keep ? keep : m; break; }
            head *= 4;
        }
    } else {
        for (int i = 0; i < n; i++) s->c[i] = (cand){i, logits[i]};
        mx = logits[0];
        for (int i = 1; i < n; i++) mx = logits[i] > mx ? logits[i] : mx;
    }
    if (p->min_p > 0.0f) {
        /* relative to the most likely token (probability ratio exp(l - mx));
         * that token itself always stays (the first of equal maxima) */
        int m = 0, top = 0;
        for (int i = 0; i < n; i++) {
            int first_max = !top && s->c[i].logit == mx;
            top |= first_max;
            if (first_max || expf(s->c[i].logit - mx) >= p->min_p) s->c[m++] = s->c[i];
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

static int sample_unconstrained(ref_sampler *s, float *logits);

static int ref_sampler_sample(ref_sampler *s, float *logits) {
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

static int sample_unconstrained(ref_sampler *s, float *logits) {
    apply_bias(s, logits);
    apply_penalties(s, logits);
    if (s->p.temp <= 0.0f) {
        int best = 0;
        for (int i = 1; i < s->n_vocab; i++)
            if (logits[i] > logits[best]) best = i;
        return best;
    }
    const zl_sampler_params *p = &s->p;
    if ((p->top_k <= 0 || p->top_k >= s->n_vocab) && p->top_p >= 1.0f && p->min_p <= 0.0f) {
        /* no filter: one pass of exp(l / T) in id order, then the draw
         * against the unnormalised running sum */
        int nv = s->n_vocab;
        float mx = logits[0];
        for (int i = 1; i < nv; i++) mx = logits[i] > mx ? logits[i] : mx;
        double sum = 0;
        for (int i = 0; i < nv; i++) {
            s->pr[i] = expf((logits[i] - mx) / p->temp);
            sum += s->pr[i];
        }
        double r = ref_sampler_uniform(s) * sum, cum = 0;
        int last = 0;
        for (int i = 0; i < nv; i++) {
            if (s->pr[i] <= 0.0f) continue;
            cum += s->pr[i];
            last = i;
            if (r < cum) return i;
        }
        return last;
    }
    int n = filter(s, logits);
    double r = ref_sampler_uniform(s), cum = 0;
    for (int i = 0; i < n; i++) {
        cum += s->c[i].logit;
        if (r < cum) return s->c[i].id;
    }
    if (!n) { /* nothing survived the filter: the first largest logit (the old code read c[-1] here) */
        int best = 0;
        for (int i = 1; i < s->n_vocab; i++)
            if (logits[i] > logits[best]) best = i;
        return best;
    }
    return s->c[n - 1].id;
}

static void ref_sampler_probs(ref_sampler *s, float *logits, float *probs) {
    apply_bias(s, logits);
    apply_penalties(s, logits);
    memset(probs, 0, (size_t)s->n_vocab * sizeof *probs);
    if (s->p.temp <= 0.0f) {
        int best = 0;
        for (int i = 1; i < s->n_vocab; i++)
            if (logits[i] > logits[best]) best = i;
        probs[best] = 1.0f;
        return;
    }
    int n = filter(s, logits);
    for (int i = 0; i < n; i++) probs[s->c[i].id] = s->c[i].logit;
}



#endif
