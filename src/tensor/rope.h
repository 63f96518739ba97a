/* rope.h — rotary position embedding math, shared by the forward pass (which
 * rotates Q and K by their position) and the KV cache (which re-rotates kept
 * keys by the distance they move when evicted entries are compacted out:
 * R(a) R(b) = R(a + b), so a key stored at position p moves to p + d by one
 * more rotation by d). */
#ifndef ZL_ROPE_H
#define ZL_ROPE_H

#include <math.h>

typedef struct zl_rope {
    int dim;          /* rotated dimensions per head (<= head_dim, even) */
    float base;       /* rope.freq_base */
    float freq_scale; /* 1 / linear scaling factor */
    int neox;         /* 1: pairs (i, i + dim/2) (qwen2); 0: pairs (2i, 2i + 1) (llama GGUF) */
} zl_rope;

/* cos/sin of the dim/2 angles for position pos (may be negative). */
static inline void zl_rope_table(const zl_rope *r, int pos, float *cs, float *sn) {
    float theta_scale = powf(r->base, -2.0f / (float)r->dim);
    float theta = (float)pos * r->freq_scale;
    for (int i = 0; i < r->dim / 2; i++) {
        cs[i] = cosf(theta);
        sn[i] = sinf(theta);
        theta *= theta_scale;
    }
}

/* Rotate one head vector in place by a precomputed table. */
static inline void zl_rope_apply(const zl_rope *r, float *v, const float *cs, const float *sn) {
    int half = r->dim / 2;
    for (int i = 0; i < half; i++) {
        int a = r->neox ? i : 2 * i, b = r->neox ? i + half : 2 * i + 1;
        float x0 = v[a], x1 = v[b];
        v[a] = x0 * cs[i] - x1 * sn[i];
        v[b] = x0 * sn[i] + x1 * cs[i];
    }
}

#endif
