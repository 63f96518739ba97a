/* prefetch.c — see prefetch.h.  Owns one thread per loaded model (only when
 * prefetching is on) and the per-layer byte ranges of the mapping. */
#include "prefetch.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "model.h"

typedef struct { uintptr_t lo, hi; } range;

struct zl_prefetch {
    int n_layers, n_ahead;
    range *layer; /* n_layers + 1: the last is the output matrix + norm */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pending, stop; /* pending: layer + 1 whose successors to fetch, 0 = none */
    size_t page;
};

static void widen(range *r, const void *p, size_t n) {
    if (!p || !n) return;
    uintptr_t a = (uintptr_t)p, b = a + n;
    if (!r->lo || a < r->lo) r->lo = a;
    if (b > r->hi) r->hi = b;
}

static size_t mat_bytes(const zl_mat *m) { return (size_t)m->rows * m->row_bytes; }

static void advise(const zl_prefetch *p, const range *r) {
    if (!r->lo) return;
    uintptr_t lo = r->lo & ~(uintptr_t)(p->page - 1);
    madvise((void *)lo, r->hi - lo, MADV_WILLNEED);
}

static void *run(void *arg) {
    zl_prefetch *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->pending && !p->stop) pthread_cond_wait(&p->cv, &p->mu);
        if (p->stop) break;
        int l = p->pending - 1;
        p->pending = 0;
        pthread_mutex_unlock(&p->mu);
        for (int k = 1; k <= p->n_ahead; k++) advise(p, &p->layer[(l + k) % (p->n_layers + 1)]);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

zl_prefetch *zl_prefetch_new(const zl_model *m, int n_ahead) {
    if (n_ahead <= 0 || !m->gguf || m->gguf->owned_copy) return NULL; /* nothing to stream from a malloc'd copy */
    zl_prefetch *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n_layers = m->hp.n_layers;
    p->n_ahead = n_ahead > p->n_layers ? p->n_layers : n_ahead;
    p->page = (size_t)sysconf(_SC_PAGESIZE);
    p->layer = calloc((size_t)p->n_layers + 1, sizeof *p->layer);
    if (!p->layer) { free(p); return NULL; }
    for (int l = 0; l < p->n_layers; l++) {
        const zl_layer *L = &m->layers[l];
        const zl_mat *mats[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_down, &L->w_up};
        for (int i = 0; i < 7; i++) widen(&p->layer[l], mats[i]->data, mat_bytes(mats[i]));
    }
    widen(&p->layer[p->n_layers], m->output.data, mat_bytes(&m->output));
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (pthread_create(&p->thread, NULL, run, p) != 0) {
        free(p->layer);
        free(p);
        return NULL;
    }
    return p;
}

void zl_prefetch_free(zl_prefetch *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->layer);
    free(p);
}

void zl_prefetch_layer(zl_prefetch *p, int layer) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->pending = layer + 1;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

void zl_model_preheat(const zl_model *m, void (*progress)(size_t, size_t, void *), void *ctx) {
    const zl_gguf *g = m->gguf;
    const volatile uint8_t *base = g->base;
    size_t total = g->size, page = (size_t)sysconf(_SC_PAGESIZE), step = total / 100 + 1, next = 0;
    const size_t chunk = (size_t)64 << 20;
    unsigned sum = 0;
    for (size_t off = 0; off < total; off += page) {
        if (off % chunk == 0 && !g->owned_copy) {
            size_t len = total - off < chunk ? total - off : chunk;
            madvise((void *)(uintptr_t)(base + off), len, MADV_WILLNEED);
        }
        sum += base[off];
        if (progress && off >= next) { progress(off, total, ctx); next += step; }
    }
    (void)sum;
    if (progress) progress(total, total, ctx);
}

double zl_model_resident(const zl_model *m) {
    const zl_gguf *g = m->gguf;
    if (g->owned_copy) return 1.0;
    size_t page = (size_t)sysconf(_SC_PAGESIZE), n = (g->size + page - 1) / page;
    unsigned char *vec = malloc(n);
    if (!vec) return 0;
    double r = 0;
    if (mincore((void *)g->base, g->size, vec) == 0) {
        size_t in = 0;
        for (size_t i = 0; i < n; i++) in += vec[i] & 1;
        r = (double)in / n;
    }
    free(vec);
    return r;
}
