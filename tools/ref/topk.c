/* topk.c — the top-K fixture format of tools/ref/README.md, outside
 * zerolayer's build (plain C, no project headers).  Owns converting a full
 * logits dump to that format and comparing dumps; it never runs a model.
 *
 *   topk from-f32 IDS FULL.f32 OUT.topk N_VOCAB   full [n][vocab] float32 -> top-K file
 *   topk compare REF.topk IDS A.f32 [B.f32]  over REF's top-K set at each position:
 *        mean |REF - A| and top-1 agreement (argmax A == REF's first id), and
 *        with B, the same between A and B on REF's set; per-position NLL
 *        (logsumexp - logit of the next id of IDS) as a perplexity, for REF, A (and B).
 *        Dumps shorter than REF are compared on their leading positions.
 *
 * build: cc -O2 -o topk tools/ref/topk.c -lm */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { K = 32 };

typedef struct {
    uint32_t nv, n, k;
    int32_t *id;   /* [n][k] */
    float *logit;  /* [n][k] */
    float *lse, *next;
} topk_file;

static void die(const char *m, const char *a) { fprintf(stderr, "topk: %s %s\n", m, a ? a : ""); exit(1); }

static int read_topk(const char *path, topk_file *t) {
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot open", path);
    char magic[4];
    uint32_t v, h[3];
    if (fread(magic, 1, 4, f) != 4 || memcmp(magic, "ZLTK", 4) || fread(&v, 4, 1, f) != 1 || v != 1 ||
        fread(h, 4, 3, f) != 3)
        die("not a ZLTK v1 file:", path);
    t->nv = h[0], t->n = h[1], t->k = h[2];
    t->id = malloc((size_t)t->n * t->k * 4);
    t->logit = malloc((size_t)t->n * t->k * 4);
    t->lse = malloc(t->n * 4);
    t->next = malloc(t->n * 4);
    for (uint32_t p = 0; p < t->n; p++)
        if (fread(t->id + (size_t)p * t->k, 4, t->k, f) != t->k || fread(t->logit + (size_t)p * t->k, 4, t->k, f) != t->k ||
            fread(t->lse + p, 4, 1, f) != 1 || fread(t->next + p, 4, 1, f) != 1)
            die("truncated:", path);
    fclose(f);
    return 0;
}

/* a full dump of at most n floats; *rows (if given) gets its whole rows of nv */
static float *read_full(const char *path, size_t n, uint32_t nv, uint32_t *rows) {
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot open", path);
    float *b = malloc(n * 4);
    size_t got = fread(b, 4, n, f);
    if (got != n && !rows) die("short file:", path);
    if (rows) *rows = (uint32_t)(got / nv);
    fclose(f);
    return b;
}

static int32_t *read_ids(const char *path, uint32_t *n) {
    FILE *f = fopen(path, "r");
    if (!f) die("cannot open", path);
    size_t cap = 1024;
    int32_t *ids = malloc(cap * 4);
    long v;
    *n = 0;
    while (fscanf(f, "%ld", &v) == 1) {
        if (*n == cap) ids = realloc(ids, (cap *= 2) * 4);
        ids[(*n)++] = (int32_t)v;
    }
    fclose(f);
    return ids;
}

static double lse_of(const float *l, uint32_t nv) {
    float mx = l[0];
    for (uint32_t i = 1; i < nv; i++) if (l[i] > mx) mx = l[i];
    double s = 0;
    for (uint32_t i = 0; i < nv; i++) s += exp((double)l[i] - mx);
    return log(s) + mx;
}

static uint32_t argmax(const float *l, uint32_t nv) {
    uint32_t b = 0;
    for (uint32_t i = 1; i < nv; i++) if (l[i] > l[b]) b = i;
    return b;
}

static void put_u32(FILE *f, uint32_t v) { fwrite(&v, 4, 1, f); }

static int from_f32(const char *ids_path, const char *full, const char *out, uint32_t nv) {
    uint32_t n;
    int32_t *ids = read_ids(ids_path, &n);
    float *L = read_full(full, (size_t)n * nv, nv, NULL);
    FILE *f = fopen(out, "wb");
    if (!f) die("cannot create", out);
    fwrite("ZLTK", 1, 4, f);
    put_u32(f, 1), put_u32(f, nv), put_u32(f, n), put_u32(f, K);
    for (uint32_t p = 0; p < n; p++) {
        const float *l = L + (size_t)p * nv;
        int32_t top[K];
        float tl[K];
        /* the K largest, largest first, lower id first on ties: insertion
         * into a sorted list (a later id enters only when strictly larger) */
        int have = 0;
        for (uint32_t i = 0; i < nv; i++) {
            if (have == K && !(l[i] > tl[K - 1])) continue;
            int j = have < K ? have++ : K - 1;
            while (j > 0 && l[i] > tl[j - 1]) { top[j] = top[j - 1], tl[j] = tl[j - 1]; j--; }
            top[j] = (int32_t)i, tl[j] = l[i];
        }
        float lse = (float)lse_of(l, nv), next = p + 1 < n ? l[ids[p + 1]] : NAN;
        fwrite(top, 4, K, f), fwrite(tl, 4, K, f), fwrite(&lse, 4, 1, f), fwrite(&next, 4, 1, f);
    }
    if (fclose(f)) die("writing failed:", out);
    return 0;
}

static int compare(const char *ref, const char *ids_path, const char *a_path, const char *b_path) {
    topk_file t;
    read_topk(ref, &t);
    uint32_t nid;
    int32_t *ids = read_ids(ids_path, &nid);
    if (nid < t.n) die("fewer ids than positions:", ids_path);
    /* the dumps may hold fewer positions than REF: the leading ones are compared */
    uint32_t ra, rb = UINT32_MAX;
    float *A = read_full(a_path, (size_t)t.n * t.nv, t.nv, &ra);
    float *B = b_path ? read_full(b_path, (size_t)t.n * t.nv, t.nv, &rb) : NULL;
    if (ra < t.n) t.n = ra;
    if (rb < t.n) t.n = rb;
    double dra = 0, dab = 0, mra = 0, nll_r = 0, nll_a = 0, nll_b = 0;
    long top_ra = 0, top_ab = 0, scored = 0;
    uint32_t first_miss = UINT32_MAX;
    for (uint32_t p = 0; p < t.n; p++) {
        const float *a = A + (size_t)p * t.nv, *b = B ? B + (size_t)p * t.nv : NULL;
        for (uint32_t k = 0; k < t.k; k++) {
            int32_t id = t.id[(size_t)p * t.k + k];
            double d = fabs((double)t.logit[(size_t)p * t.k + k] - a[id]);
            dra += d;
            if (d > mra) mra = d;
            if (b) dab += fabs((double)a[id] - b[id]);
        }
        uint32_t am = argmax(a, t.nv);
        top_ra += am == (uint32_t)t.id[(size_t)p * t.k];
        if (am != (uint32_t)t.id[(size_t)p * t.k] && first_miss == UINT32_MAX) first_miss = p;
        if (b) top_ab += am == argmax(b, t.nv);
        if (p + 1 < t.n) {
            nll_r += t.lse[p] - t.next[p];
            nll_a += lse_of(a, t.nv) - a[ids[p + 1]];
            if (b) nll_b += lse_of(b, t.nv) - b[ids[p + 1]];
            scored++;
        }
    }
    double npk = (double)t.n * t.k;
    printf("positions %u vocab %u K %u\n", t.n, t.nv, t.k);
    printf("ref vs A: mean|d| %.5f max|d| %.4f top1 %.2f%% (first miss at %d)\n", dra / npk, mra, 100.0 * top_ra / t.n,
           first_miss == UINT32_MAX ? -1 : (int)first_miss);
    if (B) printf("A vs B on ref's set: mean|d| %.5f top1 %.2f%%\n", dab / npk, 100.0 * top_ab / t.n);
    printf("ppl over %ld predictions: ref %.4f A %.4f", scored, exp(nll_r / scored), exp(nll_a / scored));
    if (B) printf(" B %.4f", exp(nll_b / scored));
    printf("\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 6 && !strcmp(argv[1], "from-f32")) return from_f32(argv[2], argv[3], argv[4], (uint32_t)atol(argv[5]));
    if ((argc == 5 || argc == 6) && !strcmp(argv[1], "compare")) return compare(argv[2], argv[3], argv[4], argc == 6 ? argv[5] : NULL);
    fprintf(stderr, "usage: topk from-f32 IDS FULL.f32 OUT.topk N_VOCAB | topk compare REF.topk IDS A.f32 [B.f32]\n");
    return 2;
}
