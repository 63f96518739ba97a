/* drafter_lookup.c — prompt-lookup drafting (no extra model).
 * Grounded text (summaries, quotes, code edits, multi-turn chat) repeats
 * spans of its context; the continuation of the most recent earlier match of
 * the current suffix is a cheap, often-right guess.  O(n * ngram) per call. */
#include <stdlib.h>
#include <string.h>

#include "drafter.h"

typedef struct { int min_n, max_n; } lookup;

static int lookup_draft(zl_drafter *d, const int32_t *hist, int n_hist, int32_t *out, int max) {
    const lookup *L = d->self;
    if (max <= 0) return 0;
    for (int n = L->max_n; n >= L->min_n; n--) {
        if (n_hist < n + 1) continue;
        const int32_t *suffix = hist + n_hist - n;
        /* scan backwards from the latest possible earlier start */
        for (int start = n_hist - n - 1; start >= 0; start--) {
            if (memcmp(hist + start, suffix, (size_t)n * sizeof *hist) != 0) continue;
            int k = 0;
            for (int p = start + n; p < n_hist && k < max; p++) out[k++] = hist[p];
            if (k) return k;
        }
    }
    return 0;
}

static void lookup_free(zl_drafter *d) {
    free(d->self);
    free(d);
}

zl_drafter *zl_drafter_lookup_new(int min_ngram, int max_ngram) {
    if (min_ngram < 1 || max_ngram < min_ngram) return NULL;
    zl_drafter *d = calloc(1, sizeof *d);
    lookup *L = calloc(1, sizeof *L);
    if (!d || !L) { free(d); free(L); return NULL; }
    L->min_n = min_ngram;
    L->max_n = max_ngram;
    d->name = "lookup";
    d->draft = lookup_draft;
    d->free = lookup_free;
    d->self = L;
    return d;
}

void zl_drafter_free(zl_drafter *d) {
    if (d && d->free) d->free(d);
}
