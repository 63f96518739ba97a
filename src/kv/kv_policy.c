/* kv_policy.c — KV slicing: which cached tokens to keep when a sequence
 * outgrows its budget.
 *
 *   full    keep everything (the cache is bounded by n_ctx only)
 *   window  n_sink attention sinks + the most recent tokens (StreamingLLM)
 *   anchor  sinks + marked anchors + a recent drift window, chosen per layer
 *           when the engine supports per-layer slices (kv->layered): each
 *           layer keeps its own tokens under its own budget.  The budget is
 *           the mean over layers (the KV bytes of a uniform cache of
 *           `budget` tokens), shared out in a linear ramp that gives the
 *           last layer RAMP_TOP/RAMP_BOTTOM times the entries of the first,
 *           each layer within [layer_floor, layer max]: the first layers
 *           need a shorter context than the last ones (the per-layer probe
 *           and the perplexity against `window` at the same KV bytes:
 *           BENCHMARKS.md, "KV slicing").  Nothing
 *           is evicted while the sequence fits the budget itself, so a budget
 *           covering the sequence equals `full`.  A layer never holds more
 *           than the model's training context (kv->layer_max, from
 *           --kv-layer-max): past it the model degrades, and the last
 *           layer's share is capped there with the ramp's shape kept below.
 *           Without engine support the anchor policy keeps one slice: sinks,
 *           marked anchors and the most recent tokens.
 *           Heavy hitters (mean softmax weight received per query since the
 *           token arrived, accumulated by the forward pass) are kept in the
 *           part of a layer's budget beyond policy.window when window > 0;
 *           by default the window covers the whole budget: plain recency,
 *           which no attention-scored ranking beat (BENCHMARKS.md, "KV
 *           slicing").
 *
 * Eviction compacts the kept entries to the front of their layer and
 * re-rotates their keys, so positions stay cache-relative (StreamingLLM): a
 * layer's newest entry sits at position n_used - 1 and older entries count
 * back from it, so generation can run past the model's context length.  No
 * key is placed more than `budget` positions back: the entries a long layer
 * holds beyond the budget share the position `budget` back, the range a
 * uniform cache of that budget shows the model.  An eviction frees at least
 * budget/16 slots (amortising compaction over decode steps) and at least
 * what the new tokens need.  Freed memory is zeroed. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tensor/kernels.h"
#include "kv.h"

#define DEFAULT_SINKS 4
#define MIN_WINDOW 32 /* recent tokens always kept: covers a verification ring (17) */
#define RAMP_BOTTOM 1 /* anchor: per-layer budgets grow linearly from the first layer to the last */
#define RAMP_TOP 5

/* The one table of the policies' names: parse, print and the list of
 * choices in messages all read it. */
static const char *const k_kvp_names[ZL_KV_POLICY_COUNT] = {
    [ZL_KV_POLICY_FULL] = "full", [ZL_KV_POLICY_WINDOW] = "window", [ZL_KV_POLICY_ANCHOR] = "anchor"};

const char *zl_kv_policy_name(zl_kv_policy_kind k) {
    return k >= 0 && k < ZL_KV_POLICY_COUNT ? k_kvp_names[k] : k_kvp_names[ZL_KV_POLICY_FULL];
}

int zl_kv_policy_from_name(const char *name, zl_kv_policy_kind *out) {
    if (!name) return -1;
    for (int k = 0; k < ZL_KV_POLICY_COUNT; k++)
        if (!strcmp(name, k_kvp_names[k])) { *out = (zl_kv_policy_kind)k; return 0; }
    return -1;
}

static char k_kvp_list[64];
static pthread_once_t k_kvp_list_once = PTHREAD_ONCE_INIT;

static void kvp_list_build(void) { /* "a, b or c" */
    size_t at = 0;
    for (int k = 0; k < ZL_KV_POLICY_COUNT; k++) {
        const char *sep = k == 0 ? "" : k == ZL_KV_POLICY_COUNT - 1 ? " or " : ", ";
        at += (size_t)snprintf(k_kvp_list + at, sizeof k_kvp_list - at, "%s%s", sep, k_kvp_names[k]);
        if (at >= sizeof k_kvp_list) break;
    }
}

const char *zl_kv_policy_names(void) {
    pthread_once(&k_kvp_list_once, kvp_list_build);
    return k_kvp_list;
}

int zl_kv_budget(const zl_kv *kv) {
    return kv->policy.kind == ZL_KV_POLICY_FULL || kv->policy.budget <= 0 ? kv->n_ctx : kv->policy.budget;
}

/* The fewest entries a layer may keep: sinks, the minimal window, and room
 * for a prefill chunk (the engine feeds bounded sequences budget/4 tokens at
 * a time). */
static int layer_floor(const zl_kv_policy *q) {
    int chunk = q->budget / 4 > MIN_WINDOW ? q->budget / 4 : MIN_WINDOW;
    int f = q->n_sink + MIN_WINDOW + chunk;
    return f < q->budget ? f : q->budget;
}

/* Share budget * n_layers entries out over the layers in proportion to a
 * linear ramp, each layer within [floor, layer_max]. */
static void plan_layers(const zl_kv *kv, const zl_kv_policy *q, int *out) {
    int L = kv->n_layers, lo = layer_floor(q), hi = kv->layer_max;
    if (hi <= 0 || hi > kv->n_ctx) hi = kv->n_ctx;
    if (hi < q->budget) hi = q->budget;
    long total = (long)q->budget * L, sum = 0;
    double a = 0, b = (double)hi + 1;
    /* bisect the scale s with sum over l of clamp(s * w_l, lo, hi) = total */
    for (int it = 0; it < 64; it++) {
        double s = (a + b) / 2, t = 0;
        for (int l = 0; l < L; l++) {
            double x = s * (RAMP_BOTTOM + (double)(RAMP_TOP - RAMP_BOTTOM) * l / (L - 1));
            t += x < lo ? lo : x > hi ? hi : x;
        }
        if (t > total) b = s;
        else a = s;
    }
    /* a capped last layer keeps the ramp's shape: the others shrink with it
     * rather than filling up to the cap (less memory than the budget) */
    int capped = a * RAMP_TOP > hi;
    if (capped) a = (double)hi / RAMP_TOP;
    for (int l = 0; l < L; l++) {
        double x = a * (RAMP_BOTTOM + (double)(RAMP_TOP - RAMP_BOTTOM) * l / (L - 1));
        out[l] = x < lo ? lo : x > hi ? hi : (int)x;
        sum += out[l];
    }
    /* the rounding remainder goes to the deepest layers that can take it */
    for (int l = L - 1; l >= 0 && sum < total && !capped; l--)
        while (out[l] < hi && sum < total) out[l]++, sum++;
}

/* Give the cache `want` slices (1 or n_layers) and the per-slot metadata,
 * with score rows only when `scored` (the forward pass accumulates attention
 * only while they exist).  A cache whose layers already hold different
 * tokens keeps its slices until it is emptied. */
static int set_slices(zl_kv *kv, int want, int nth, int scored, zl_err *err) {
    if (kv->slices > 1 && want == 1 && kv->n_used > 0) want = kv->slices;
    if (nth < 1) nth = 1;
    if (scored && kv->score_nth > nth) nth = kv->score_nth;
    if (want == kv->slices && kv->anchor && (scored ? kv->score_part && kv->score_nth >= nth : !kv->score_part)) return 0;
    size_t rows = (size_t)want * kv->n_ctx;
    float *sp = scored ? calloc((size_t)nth * rows, sizeof *sp) : NULL;
    uint8_t *an = calloc(rows, 1);
    int64_t *bi = calloc(rows, sizeof *bi);
    int *sh = calloc(rows, sizeof *sh);
    int *off = want > 1 ? calloc((size_t)kv->n_layers, sizeof *off) : NULL;
    int *bud = want > 1 ? calloc((size_t)kv->n_layers, sizeof *bud) : NULL;
    if ((scored && !sp) || !an || !bi || !sh || (want > 1 && (!off || !bud))) {
        free(sp); free(an); free(bi); free(sh); free(off); free(bud);
        return zl_errf(err, ZL_ENOMEM, "out of memory");
    }
    /* carry the metadata over: one shared slice seeds every layer's */
    for (int s = 0; s < want; s++) {
        int from = kv->slices > 1 ? s : 0;
        size_t dst = (size_t)s * kv->n_ctx, src = (size_t)from * kv->n_ctx;
        if (kv->anchor) memcpy(an + dst, kv->anchor + src, (size_t)kv->n_ctx);
        if (kv->birth) memcpy(bi + dst, kv->birth + src, (size_t)kv->n_ctx * sizeof *bi);
        if (kv->shift) memcpy(sh + dst, kv->shift + src, (size_t)kv->n_ctx * sizeof *sh);
        for (int t = 0; sp && kv->score_part && t < kv->score_nth; t++)
            memcpy(sp + ((size_t)t * want + s) * kv->n_ctx, kv->score_part + ((size_t)t * kv->slices + from) * kv->n_ctx,
                   (size_t)kv->n_ctx * sizeof *sp);
    }
    if (off && kv->layer_off) memcpy(off, kv->layer_off, (size_t)kv->n_layers * sizeof *off);
    free(kv->score_part); free(kv->anchor); free(kv->birth); free(kv->shift); free(kv->layer_off); free(kv->layer_budget);
    kv->score_part = sp;
    kv->score_nth = sp ? nth : 0;
    kv->anchor = an;
    kv->birth = bi;
    kv->shift = sh;
    kv->layer_off = off;
    kv->layer_budget = bud;
    kv->slices = want;
    return 0;
}

int zl_kv_set_policy(zl_kv *kv, const zl_kv_policy *p, const zl_rope *rope, int head_dim, int nth, zl_err *err) {
    zl_kv_policy q = *p;
    if (q.kind != ZL_KV_POLICY_FULL && q.kind != ZL_KV_POLICY_WINDOW && q.kind != ZL_KV_POLICY_ANCHOR)
        return zl_errf(err, ZL_EINVAL, "unknown KV policy %d", (int)q.kind);
    if (q.budget < 0) return zl_errf(err, ZL_EINVAL, "KV budget must be positive, got %d", q.budget);
    if (q.budget == 0 || q.budget > kv->n_ctx) q.budget = kv->n_ctx;
    if (q.n_sink <= 0) q.n_sink = DEFAULT_SINKS;
    if (q.kind != ZL_KV_POLICY_FULL && q.budget < q.n_sink + 2 * MIN_WINDOW)
        return zl_errf(err, ZL_EINVAL, "KV budget %d is too small for the %s policy (minimum %d tokens)", q.budget,
                       zl_kv_policy_name(q.kind), q.n_sink + 2 * MIN_WINDOW);
    if (q.window < 0) q.window = 0;
    if (q.window && q.window < MIN_WINDOW) q.window = MIN_WINDOW;
    if (kv->type == ZL_TYPE_Q8_0 && head_dim % ZL_QK)
        return zl_errf(err, ZL_EUNSUP, "a q8_0 KV cache needs a head dimension that is a multiple of %d", ZL_QK);
    if (head_dim <= 0 || kv->kv_dim % head_dim || (rope && rope->dim > head_dim))
        return zl_errf(err, ZL_EINVAL, "invalid head dimension %d for the KV cache", head_dim);
    if (q.kind != ZL_KV_POLICY_FULL) {
        int want = q.kind == ZL_KV_POLICY_ANCHOR && kv->layered && kv->n_layers > 1 ? kv->n_layers : 1;
        int rc = set_slices(kv, want, nth, q.kind == ZL_KV_POLICY_ANCHOR && q.window > 0, err);
        if (rc) return rc;
    }
    if (kv->slices > 1) {
        if (q.kind == ZL_KV_POLICY_ANCHOR) plan_layers(kv, &q, kv->layer_budget);
        else
            for (int l = 0; l < kv->n_layers; l++) kv->layer_budget[l] = q.budget;
    }
    kv->policy = q;
    if (rope) kv->rope = *rope;
    kv->head_dim = head_dim;
    return 0;
}

void zl_kv_note_written(zl_kv *kv, int pos, int n) {
    /* the forward that wrote [pos, pos + n) has already raised n_used (or n_dirty) over it */
    ZL_ASSERT(pos >= 0 && n >= 0 && pos + n <= (kv->n_dirty > kv->n_used ? kv->n_dirty : kv->n_used));
    zl_kv_assert_ok(kv);
    if (kv->birth)
        for (int s = 0; s < kv->slices; s++) {
            int slot = zl_kv_slot(kv, s, pos);
            for (int i = 0; i < n && slot + i < kv->n_ctx; i++)
                if (slot + i >= 0) kv->birth[(size_t)s * kv->n_ctx + slot + i] = kv->queries + i;
        }
    kv->queries += n;
}

void zl_kv_mark_anchor(zl_kv *kv, int pos, int n) {
    if (!kv->anchor) return;
    for (int s = 0; s < kv->slices; s++) {
        int slot = zl_kv_slot(kv, s, pos);
        for (int i = slot; i < slot + n && i < kv->n_ctx; i++)
            if (i >= 0) kv->anchor[(size_t)s * kv->n_ctx + i] = 1;
    }
}

int zl_kv_n_anchor(const zl_kv *kv) {
    int n = 0;
    if (kv->anchor)
        for (int i = 0; i < zl_kv_layer_used(kv, 0); i++) n += kv->anchor[i];
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

/* Choose which of slice s's n entries to keep (keep[i] = 1), at most
 * `target`.  Returns the number kept, or -1 when sinks and anchors leave no
 * room. */
static int choose(const zl_kv *kv, int s, int n, int target, uint8_t *keep, cand *c) {
    const zl_kv_policy *p = &kv->policy;
    const uint8_t *anchor = kv->anchor ? kv->anchor + (size_t)s * kv->n_ctx : NULL;
    int count = 0;
    memset(keep, 0, (size_t)n);
    for (int i = 0; i < n && i < p->n_sink; i++) keep[i] = 1, count++;
    if (p->kind == ZL_KV_POLICY_ANCHOR && anchor)
        for (int i = 0; i < n; i++)
            if (anchor[i] && !keep[i]) keep[i] = 1, count++;
    if (count + MIN_WINDOW > target) return -1;
    int scored = p->kind == ZL_KV_POLICY_ANCHOR && p->window > 0 && kv->score_part;
    int recent = !scored || p->window > target - count ? target - count : p->window;
    for (int i = n - 1; i >= 0 && recent > 0; i--)
        if (!keep[i]) keep[i] = 1, count++, recent--;
    if (scored && count < target) {
        int nc = 0;
        for (int i = 0; i < n; i++) {
            if (keep[i]) continue;
            float sum = 0;
            for (int t = 0; t < kv->score_nth; t++) sum += kv->score_part[((size_t)t * kv->slices + s) * kv->n_ctx + i];
            /* mean attention per query since the token arrived: accumulated
             * sums alone favour old tokens merely for having been seen longer */
            int64_t age = kv->queries - kv->birth[(size_t)s * kv->n_ctx + i];
            c[nc++] = (cand){sum / (float)(age > 0 ? age : 1), i};
        }
        qsort(c, (size_t)nc, sizeof *c, cmp_cand);
        for (int j = 0; j < nc && count < target; j++) keep[c[j].slot] = 1, count++;
    }
    return count;
}

/* Move entry i of slice s to slot j (j <= i) with its key re-rotated by delta. */
static void move_entry(zl_kv *kv, int s, int i, int j, int delta, float *tmp, const float *cs, const float *sn) {
    int l0 = kv->slices > 1 ? s : 0, l1 = kv->slices > 1 ? s + 1 : kv->n_layers;
    for (int l = l0; l < l1; l++) {
        if (j != i) {
            memcpy(zl_kv_k(kv, l, j), zl_kv_k(kv, l, i), kv->row_bytes);
            memcpy(zl_kv_v(kv, l, j), zl_kv_v(kv, l, i), kv->row_bytes);
        }
        if (delta) rerotate(kv, zl_kv_k(kv, l, j), tmp, cs, sn);
    }
    if (j == i) return;
    size_t base = (size_t)s * kv->n_ctx;
    for (int t = 0; t < kv->score_nth; t++) {
        float *sp = kv->score_part + ((size_t)t * kv->slices + s) * kv->n_ctx;
        sp[j] = sp[i];
    }
    kv->anchor[base + j] = kv->anchor[base + i];
    kv->birth[base + j] = kv->birth[base + i];
}

/* Zero slots [from, to) of slice s: K/V rows and per-slot metadata. */
static void clear_slots(zl_kv *kv, int s, int from, int to) {
    if (to <= from) return;
    int l0 = kv->slices > 1 ? s : 0, l1 = kv->slices > 1 ? s + 1 : kv->n_layers;
    size_t cnt = (size_t)(to - from), base = (size_t)s * kv->n_ctx + from;
    for (int l = l0; l < l1; l++) {
        memset(zl_kv_k(kv, l, from), 0, cnt * kv->row_bytes);
        memset(zl_kv_v(kv, l, from), 0, cnt * kv->row_bytes);
    }
    for (int t = 0; t < kv->score_nth; t++)
        memset(kv->score_part + ((size_t)t * kv->slices + s) * kv->n_ctx + from, 0, cnt * sizeof(float));
    memset(kv->anchor + base, 0, cnt);
    memset(kv->birth + base, 0, cnt * sizeof *kv->birth);
    memset(kv->shift + base, 0, cnt * sizeof *kv->shift);
    kv->evicted_entries += cnt * (uint64_t)(l1 - l0);
}

int zl_kv_make_room(zl_kv *kv, int n_new, zl_err *err) {
    const zl_kv_policy *p = &kv->policy;
    if (p->kind == ZL_KV_POLICY_FULL) return 0;
    int S = kv->slices, need = 0, n_max = 0;
    int used[S], budget[S], kept[S];
    for (int s = 0; s < S; s++) {
        used[s] = zl_kv_layer_used(kv, s);
        budget[s] = S > 1 ? kv->layer_budget[s] : zl_kv_budget(kv);
        if (n_new > budget[s] - p->n_sink - MIN_WINDOW)
            return zl_errf(err, ZL_ERANGE, "%d new tokens do not fit in a KV budget of %d", n_new, budget[s]);
        need |= used[s] + n_new > budget[s];
        if (used[s] > n_max) n_max = used[s];
    }
    /* until the sequence outgrows the budget itself, no layer evicts: a
     * budget that covers the sequence changes nothing */
    int sliced = 0;
    for (int l = 0; kv->layer_off && l < kv->n_layers; l++) sliced |= kv->layer_off[l] != 0;
    if (!need || (!sliced && kv->n_used + n_new <= zl_kv_budget(kv))) return 0;
    uint8_t *keep = malloc((size_t)S * n_max + 1);
    cand *c = malloc((size_t)n_max * sizeof *c + 1);
    float *tmp = malloc((size_t)kv->kv_dim * sizeof *tmp + (size_t)kv->rope.dim * sizeof(float));
    int rc = keep && c && tmp ? 0 : zl_errf(err, ZL_ENOMEM, "out of memory");
    for (int s = 0; s < S && !rc; s++) {
        uint8_t *k = keep + (size_t)s * n_max;
        kept[s] = used[s];
        if (used[s] + n_new <= budget[s]) {
            memset(k, 1, (size_t)used[s]);
            continue;
        }
        for (;;) {
            int slack = budget[s] / 16 > 1 ? budget[s] / 16 : 1;
            int target = budget[s] - (n_new > slack ? n_new : slack);
            if (target < p->n_sink + MIN_WINDOW) target = budget[s] - n_new;
            if ((kept[s] = choose(kv, s, used[s], target, k, c)) >= 0) break;
            /* a layer whose share cannot hold the anchored spans may use the
             * whole budget, as it would without slices */
            if (budget[s] < zl_kv_budget(kv)) {
                budget[s] = zl_kv_budget(kv);
                if (used[s] + n_new <= budget[s]) {
                    memset(k, 1, (size_t)used[s]);
                    kept[s] = used[s];
                    break;
                }
                continue;
            }
            rc = zl_errf(err, ZL_ERANGE, "anchored spans and sinks leave no room in a KV budget of %d", budget[s]);
            break;
        }
    }
    if (rc) {
        free(keep); free(c); free(tmp);
        return rc;
    }
    /* new positions: the fullest layer starts at slot 0 = position 0, the
     * others are right-aligned on it (offset = n_pos - entries kept) */
    int n_pos = 0, dmax = zl_kv_budget(kv);
    for (int s = 0; s < S; s++) n_pos = kept[s] > n_pos ? kept[s] : n_pos;
    float *cs = tmp + kv->kv_dim, *sn = cs + kv->rope.dim / 2;
    for (int s = 0; s < S; s++) {
        const uint8_t *k = keep + (size_t)s * n_max;
        int *shift = kv->shift + (size_t)s * kv->n_ctx;
        int off = kv->layer_off ? kv->layer_off[s] : 0, noff = n_pos - kept[s];
        int j = 0, last = 0;
        /* compact: kept slots move down in order; each key is re-rotated from
         * the position it was rotated for to its new one, at most dmax back */
        for (int i = 0; i < used[s]; i++) {
            if (!k[i]) continue;
            int want = j + noff, have = i + off + shift[i];
            if (n_pos - want > dmax) want = n_pos - dmax;
            int delta = want - have;
            if (delta && delta != last) zl_rope_table(&kv->rope, delta, cs, sn), last = delta;
            move_entry(kv, s, i, j, delta, tmp, cs, sn);
            shift[j] = want - (j + noff);
            j++;
        }
        clear_slots(kv, s, j, used[s]);
        if (kv->layer_off) kv->layer_off[s] = noff;
    }
    kv->evicted = kv->evicted_entries / (uint64_t)kv->n_layers;
    kv->n_used = n_pos;
    zl_kv_assert_ok(kv);
    /* room made: every layer takes the n_new tokens within its slots */
    for (int s = 0; s < S; s++) ZL_ASSERT(zl_kv_layer_used(kv, s) + n_new <= kv->n_ctx);
    free(keep);
    free(c);
    free(tmp);
    return 0;
}
