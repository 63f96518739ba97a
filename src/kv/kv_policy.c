/* kv_policy.c — KV slicing: which cached tokens to keep when a sequence
 * outgrows its budget.
 *
 *   full    keep everything (the cache is bounded by n_ctx only)
 *   window  n_sink attention sinks + the most recent tokens (StreamingLLM)
 *   anchor  sinks + marked anchors + heavy hitters (the highest mean
 *           attention received per query since arrival, accumulated by the
 *           forward pass from the softmax weights it already computes) + a
 *           recent drift window of budget/2; everything else is transient
 *           and goes first.
 *
 * Eviction compacts the kept entries to the front and re-rotates their keys
 * by the distance moved, so positions stay cache-relative (StreamingLLM):
 * slot index == RoPE position, and generation can run past the model's
 * context length.  To amortise compaction, each eviction frees a slack of
 * budget/16 slots beyond what the new tokens need.  Freed memory is zeroed. */
#include <stdlib.h>
#include <string.h>

#include "../tensor/kernels.h"
#include "kv.h"

#define DEFAULT_SINKS 4
#define MIN_WINDOW 32 /* recent tokens always kept: covers a verification ring (17) */

const char *zl_kvp_name(zl_kvp_kind k) {
    return k == ZL_KVP_WINDOW ? "window" : k == ZL_KVP_ANCHOR ? "anchor" : "full";
}

int zl_kvp_from_name(const char *name, zl_kvp_kind *out) {
    if (!name) return ZL_EINVAL;
    if (!strcmp(name, "full")) *out = ZL_KVP_FULL;
    else if (!strcmp(name, "window")) *out = ZL_KVP_WINDOW;
    else if (!strcmp(name, "anchor")) *out = ZL_KVP_ANCHOR;
    else return ZL_EINVAL;
    return 0;
}

int zl_kv_budget(const zl_kv *kv) {
    return kv->policy.kind == ZL_KVP_FULL || kv->policy.budget <= 0 ? kv->n_ctx : kv->policy.budget;
}

int zl_kv_set_policy(zl_kv *kv, const zl_kv_policy *p, const zl_rope *rope, int head_dim, int nth, zl_err *err) {
    zl_kv_policy q = *p;
    if (q.kind != ZL_KVP_FULL && q.kind != ZL_KVP_WINDOW && q.kind != ZL_KVP_ANCHOR)
        return zl_errf(err, ZL_EINVAL, "unknown KV policy %d", (int)q.kind);
    if (q.budget < 0) return zl_errf(err, ZL_EINVAL, "KV budget must be positive, got %d", q.budget);
    if (q.budget == 0 || q.budget > kv->n_ctx) q.budget = kv->n_ctx;
    if (q.n_sink <= 0) q.n_sink = DEFAULT_SINKS;
    if (q.kind != ZL_KVP_FULL && q.budget < q.n_sink + 2 * MIN_WINDOW)
        return zl_errf(err, ZL_EINVAL, "KV budget %d is too small for the %s policy (minimum %d tokens)", q.budget,
                       zl_kvp_name(q.kind), q.n_sink + 2 * MIN_WINDOW);
    if (q.window <= 0) q.window = q.budget / 2; /* measured: 1/4, 1/2, 3/4 -> 1/2 best at a 25% budget */
    if (q.window < MIN_WINDOW) q.window = MIN_WINDOW;
    if (kv->type == ZL_TYPE_Q8_0 && head_dim % ZL_QK)
        return zl_errf(err, ZL_EUNSUP, "a q8_0 KV cache needs a head dimension that is a multiple of %d", ZL_QK);
    if (head_dim <= 0 || kv->kv_dim % head_dim || (rope && rope->dim > head_dim))
        return zl_errf(err, ZL_EINVAL, "invalid head dimension %d for the KV cache", head_dim);
    if (q.kind == ZL_KVP_ANCHOR) {
        if (nth < 1) nth = 1;
        if (!kv->score_part || kv->score_nth < nth) {
            float *sp = calloc((size_t)nth * kv->n_ctx, sizeof *sp);
            if (!sp) return zl_errf(err, ZL_ENOMEM, "out of memory");
            free(kv->score_part);
            kv->score_part = sp;
            kv->score_nth = nth;
        }
        if (!kv->anchor && !(kv->anchor = calloc((size_t)kv->n_ctx, 1)))
            return zl_errf(err, ZL_ENOMEM, "out of memory");
        if (!kv->birth && !(kv->birth = calloc((size_t)kv->n_ctx, sizeof *kv->birth)))
            return zl_errf(err, ZL_ENOMEM, "out of memory");
    }
    kv->policy = q;
    if (rope) kv->rope = *rope;
    kv->head_dim = head_dim;
    return 0;
}

void zl_kv_note_written(zl_kv *kv, int slot, int n) {
    if (kv->birth)
        for (int i = 0; i < n && slot + i < kv->n_ctx; i++) kv->birth[slot + i] = kv->queries + i;
    kv->queries += n;
}

void zl_kv_mark_anchor(zl_kv *kv, int slot, int n) {
    if (!kv->anchor) return;
    for (int i = slot; i < slot + n && i < kv->n_ctx; i++)
        if (i >= 0) kv->anchor[i] = 1;
}

int zl_kv_n_anchor(const zl_kv *kv) {
    int n = 0;
    if (kv->anchor)
        for (int i = 0; i < kv->n_used; i++) n += kv->anchor[i];
    return n;
}

/* Rotate every head of a K row by the angles in cs/sn (one position delta). */
static void rerotate(zl_kv *kv, void *row, float *tmp, const float *cs, const float *sn) {
    int n = kv->kv_dim;
    if (kv->type == ZL_TYPE_F16) {
        zl_f16 *r = row;
        for (int i = 0; i < n; i++) tmp[i] = zl_f16_to_f32(r[i]);
        for (int h = 0; h < n / kv->head_dim; h++) zl_rope_apply(&kv->rope, tmp + h * kv->head_dim, cs, sn);
        for (int i = 0; i < n; i++) r[i] = zl_f32_to_f16(tmp[i]);
    } else if (kv->type == ZL_TYPE_F32) {
        float *r = row;
        for (int h = 0; h < n / kv->head_dim; h++) zl_rope_apply(&kv->rope, r + h * kv->head_dim, cs, sn);
    } else {
        zl_dequant_row(kv->type, row, tmp, n);
        for (int h = 0; h < n / kv->head_dim; h++) zl_rope_apply(&kv->rope, tmp + h * kv->head_dim, cs, sn);
        zl_quantize_row(kv->type, tmp, row, n);
    }
}

typedef struct { float score; int slot; } cand;

static int cmp_cand(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? 1 : -1;
    return y->slot - x->slot; /* ties: prefer the more recent */
}

int zl_kv_make_room(zl_kv *kv, int n_new, zl_err *err) {
    const zl_kv_policy *p = &kv->policy;
    int budget = zl_kv_budget(kv);
    if (p->kind == ZL_KVP_FULL || kv->n_used + n_new <= budget) return 0;
    int slack = budget / 16 > 1 ? budget / 16 : 1;
    if (n_new > budget - p->n_sink - MIN_WINDOW)
        return zl_errf(err, ZL_ERANGE, "%d new tokens do not fit in a KV budget of %d", n_new, budget);
    int target = budget - n_new - slack;
    if (target < p->n_sink + MIN_WINDOW) target = budget - n_new;
    int n = kv->n_used;
    uint8_t *keep = calloc((size_t)n, 1);
    cand *c = malloc((size_t)n * sizeof *c);
    float *tmp = malloc((size_t)kv->kv_dim * sizeof *tmp + (size_t)kv->rope.dim * sizeof(float));
    if (!keep || !c || !tmp) {
        free(keep); free(c); free(tmp);
        return zl_errf(err, ZL_ENOMEM, "out of memory");
    }
    int count = 0;
    for (int i = 0; i < n && i < p->n_sink; i++) keep[i] = 1, count++;
    if (p->kind == ZL_KVP_ANCHOR && kv->anchor)
        for (int i = 0; i < n; i++)
            if (kv->anchor[i] && !keep[i]) keep[i] = 1, count++;
    if (count + MIN_WINDOW > target) {
        free(keep); free(c); free(tmp);
        return zl_errf(err, ZL_ERANGE, "anchored spans and sinks (%d tokens) leave no room in a KV budget of %d",
                       count, budget);
    }
    int recent = p->kind == ZL_KVP_WINDOW ? target - count : (p->window < target - count ? p->window : target - count);
    for (int i = n - 1; i >= 0 && recent > 0; i--)
        if (!keep[i]) keep[i] = 1, count++, recent--;
    if (p->kind == ZL_KVP_ANCHOR && count < target) {
        int nc = 0;
        for (int i = 0; i < n; i++) {
            if (keep[i]) continue;
            float s = 0;
            for (int t = 0; t < kv->score_nth; t++) s += kv->score_part[(size_t)t * kv->n_ctx + i];
            /* mean attention per query since the token arrived: accumulated
             * sums alone favour old tokens merely for having been seen longer */
            int64_t age = kv->birth ? kv->queries - kv->birth[i] : 1;
            c[nc++] = (cand){s / (float)(age > 0 ? age : 1), i};
        }
        qsort(c, (size_t)nc, sizeof *c, cmp_cand);
        for (int j = 0; j < nc && count < target; j++) keep[c[j].slot] = 1, count++;
    }
    /* compact: kept slots move down in order, keys re-rotated by the distance moved */
    float *cs = tmp + kv->kv_dim, *sn = cs + kv->rope.dim / 2;
    int j = 0;
    for (int i = 0; i < n; i++) {
        if (!keep[i]) continue;
        if (j != i) {
            zl_rope_table(&kv->rope, j - i, cs, sn);
            for (int l = 0; l < kv->n_layers; l++) {
                memcpy(zl_kv_k(kv, l, j), zl_kv_k(kv, l, i), kv->row_bytes);
                memcpy(zl_kv_v(kv, l, j), zl_kv_v(kv, l, i), kv->row_bytes);
                rerotate(kv, zl_kv_k(kv, l, j), tmp, cs, sn);
            }
            for (int t = 0; t < kv->score_nth; t++)
                kv->score_part[(size_t)t * kv->n_ctx + j] = kv->score_part[(size_t)t * kv->n_ctx + i];
            if (kv->anchor) kv->anchor[j] = kv->anchor[i];
            if (kv->birth) kv->birth[j] = kv->birth[i];
        }
        j++;
    }
    kv->evicted += (uint64_t)(n - j);
    kv->n_used = n; /* so truncate zeroes everything past the kept entries */
    zl_kv_truncate(kv, j);
    free(keep);
    free(c);
    free(tmp);
    return 0;
}
