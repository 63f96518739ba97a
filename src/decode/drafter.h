/* drafter.h — proposal sources for the verification ring.
 *
 * A drafter proposes up to `max` tokens that are likely to follow `hist`
 * (the sequence's tokens so far, prompt and generated, ending with the token
 * about to be verified).  Every drafter here is deterministic: the proposal
 * distribution is a point mass on each drafted token, which keeps rejection
 * sampling exact without per-token draft probabilities.  New drafters plug in
 * by filling the struct. */
#ifndef ZL_DRAFTER_H
#define ZL_DRAFTER_H

#include <stdint.h>

typedef struct zl_drafter {
    const char *name;
    /* Write up to max tokens into out; return how many (0 = no proposal). */
    int (*draft)(struct zl_drafter *d, const int32_t *hist, int n_hist, int32_t *out, int max);
    void (*free)(struct zl_drafter *d);
    /* Optional (NULL: none).  A drafter that ran the verifier's own first
     * layers over the tokens it proposed, in the verifier's cache, hands the
     * verify pass the residual stream leaving them: for `n` tokens `ids` at
     * positions pos.. it returns n rows entering layer *layer, or NULL when it
     * holds no such rows.  The verify pass then runs only the layers after. */
    const float *(*resume)(struct zl_drafter *d, const int32_t *ids, int n, int pos, int *layer);
    void *self;
} zl_drafter;

/* n-gram lookup over hist: find the most recent earlier occurrence of the
 * last n tokens (n = max_ngram down to min_ngram) and propose what followed. */
zl_drafter *zl_drafter_lookup_new(int min_ngram, int max_ngram);
void zl_drafter_free(zl_drafter *d);

#endif
