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
    void *self;
} zl_drafter;

/* n-gram lookup over hist: find the most recent earlier occurrence of the
 * last n tokens (n = max_ngram down to min_ngram) and propose what followed. */
zl_drafter *zl_drafter_lookup_new(int min_ngram, int max_ngram);
void zl_drafter_free(zl_drafter *d);

#endif
