/* quantize.c — quantize (GGUF → GGUF in another type), synth (random
 * llama model) and the generated-tensor writer they and embed.c share, all
 * over the streaming GGUF writer.
 *
 * Owns: choosing each tensor's storage type and producing its bytes.  Every
 * command reduces to one loop: for each tensor, fill float rows (dequantised
 * from the mmap'd source, drawn from the seeded generator, or computed by a
 * caller's row function), quantise them in parallel into a chunk buffer and
 * append the chunk to the output.  Only one chunk (~16 MiB) and two float
 * rows per thread are ever in memory, so a model of any size converts in
 * constant memory.  Never prints: progress and fallback notes go to the
 * caller's callback. */
#include "quantize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "../base/clock.h"
#include "../base/pool.h"
#include "../gguf/gguf.h"
#include "../tensor/kernels.h"

/* llama.cpp's LLAMA_FTYPE values */
enum { FT_F32 = 0, FT_F16 = 1, FT_Q4_0 = 2, FT_Q4_1 = 3, FT_Q8_0 = 7, FT_Q5_0 = 8, FT_Q5_1 = 9,
       FT_Q4_K_S = 14, FT_Q4_K_M = 15, FT_Q5_K_S = 16, FT_Q5_K_M = 17, FT_Q6_K = 18, FT_BF16 = 32 };

static const zl_qtarget k_targets[] = {
    {"F32", ZL_TYPE_F32, ZL_MIX_PURE, FT_F32},       {"F16", ZL_TYPE_F16, ZL_MIX_PURE, FT_F16},
    {"BF16", ZL_TYPE_BF16, ZL_MIX_PURE, FT_BF16},    {"Q8_0", ZL_TYPE_Q8_0, ZL_MIX_LLAMA, FT_Q8_0},
    {"Q4_0", ZL_TYPE_Q4_0, ZL_MIX_LLAMA, FT_Q4_0},   {"Q4_1", ZL_TYPE_Q4_1, ZL_MIX_LLAMA, FT_Q4_1},
    {"Q5_0", ZL_TYPE_Q5_0, ZL_MIX_LLAMA, FT_Q5_0},   {"Q5_1", ZL_TYPE_Q5_1, ZL_MIX_LLAMA, FT_Q5_1},
    {"Q4_K", ZL_TYPE_Q4_K, ZL_MIX_PURE, FT_Q4_K_S},  {"Q5_K", ZL_TYPE_Q5_K, ZL_MIX_PURE, FT_Q5_K_S},
    {"Q6_K", ZL_TYPE_Q6_K, ZL_MIX_LLAMA, FT_Q6_K},   {"Q4_K_S", ZL_TYPE_Q4_K, ZL_MIX_K_S, FT_Q4_K_S},
    {"Q4_K_M", ZL_TYPE_Q4_K, ZL_MIX_K_M, FT_Q4_K_M}, {"Q5_K_S", ZL_TYPE_Q5_K, ZL_MIX_K_S, FT_Q5_K_S},
    {"Q5_K_M", ZL_TYPE_Q5_K, ZL_MIX_K_M, FT_Q5_K_M},
};
#define N_TARGETS (sizeof k_targets / sizeof k_targets[0])

int zl_qtarget_parse(const char *name, zl_qtarget *out) {
    for (size_t i = 0; i < N_TARGETS; i++)
        if (!strcasecmp(name, k_targets[i].name)) {
            *out = k_targets[i];
            return 0;
        }
    return ZL_EINVAL;
}

const char *zl_qtarget_names(void) {
    return "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M";
}

/* ---- type choice ---- */

static int is_float_type(zl_type t) { return t == ZL_TYPE_F32 || t == ZL_TYPE_F16 || t == ZL_TYPE_BF16; }
static int blck(zl_type t) { return zl_type_traits_of(t)->blck; }
static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* llama.cpp's "use more bits" layers: the first and last eighth, and every
 * third layer in between. */
static int more_bits_layer(int i, int n) {
    int e = n / 8;
    return i < e || i >= 7 * n / 8 || (i - e) % 3 == 2;
}

static zl_type planned_type(const zl_qtarget *t, const char *name, int64_t cols, int n_layers, int tied) {
    if (t->mix == ZL_MIX_PURE) return t->base;
    int is_output = !strcmp(name, "output.weight") || (tied && !strcmp(name, "token_embd.weight"));
    if (is_output) {
        if (cols % blck(t->base)) return ZL_TYPE_Q8_0;
        return t->base == ZL_TYPE_Q8_0 ? ZL_TYPE_Q8_0 : ZL_TYPE_Q6_K;
    }
    int layer = 0;
    if (sscanf(name, "blk.%d.", &layer) != 1) layer = 0;
    int attn_v = ends_with(name, "attn_v.weight"), ffn_down = ends_with(name, "ffn_down.weight");
    if (t->mix == ZL_MIX_K_M && (attn_v || ffn_down) && more_bits_layer(layer, n_layers)) return ZL_TYPE_Q6_K;
    if (t->mix == ZL_MIX_K_S && t->base == ZL_TYPE_Q4_K) {
        if (attn_v && layer < 4) return ZL_TYPE_Q5_K;
        if (ffn_down && layer < n_layers / 8) return ZL_TYPE_Q5_K;
    }
    return t->base;
}

static zl_type fallback_for(zl_type t) {
    switch (t) {
    case ZL_TYPE_Q4_K: return ZL_TYPE_Q5_0;
    case ZL_TYPE_Q5_K: return ZL_TYPE_Q5_1;
    case ZL_TYPE_Q6_K: return ZL_TYPE_Q8_0;
    default: return ZL_TYPE_F16;
    }
}

zl_type zl_quant_tensor_type(const zl_qtarget *t, const char *name, uint32_t n_dims, const int64_t *ne, int n_layers,
                             int tied, char *note, size_t note_cap) {
    if (note_cap) note[0] = 0;
    if (n_dims < 2 || strstr(name, "_norm.")) return ZL_TYPE_F32;
    zl_type want = planned_type(t, name, ne[0], n_layers, tied), got = want;
    while (ne[0] % blck(got)) got = fallback_for(got);
    if (got != want && note_cap)
        snprintf(note, note_cap, "row length %lld is not a multiple of the %s block size %d, using %s", (long long)ne[0],
                 zl_type_traits_of(want)->name, blck(want), zl_type_traits_of(got)->name);
    return got;
}

/* ---- the conversion loop ---- */

#define CHUNK_BYTES (16u << 20)

typedef enum { SRC_TENSOR, SRC_RANDOM, SRC_ONES, SRC_FUNC } src_kind;

/* Where one tensor's float rows come from. */
typedef struct row_src {
    src_kind kind;
    const uint8_t *data; /* SRC_TENSOR: source bytes */
    zl_type type;
    size_t row_bytes;
    uint64_t seed; /* SRC_RANDOM: per-tensor seed */
    zl_row_fill fill; /* SRC_FUNC */
    const void *ctx;
} row_src;

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Approximately N(0, 0.02²): the Irwin-Hall sum of four 16-bit uniforms, one
 * 64-bit draw per weight.  Each row has its own stream, so rows can be made
 * in any order on any thread and the file is the same. */
static void fill_random(uint64_t seed, int64_t row, float *dst, int64_t n) {
    uint64_t s = seed ^ ((uint64_t)row * 0xD1B54A32D192ED03ull);
    splitmix64(&s);
    const float scale = 0.02f * 1.7320508f / 65536.0f; /* sd of sum of 4 U(0,1) is 1/sqrt(3) */
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = splitmix64(&s);
        uint32_t sum = (uint32_t)(r & 0xffff) + (uint32_t)((r >> 16) & 0xffff) + (uint32_t)((r >> 32) & 0xffff) +
                       (uint32_t)(r >> 48);
        dst[i] = ((float)sum - 2.0f * 65535.0f) * scale;
    }
}

void zl_gen_random_row(uint64_t tensor_seed, int64_t row, float *dst, int64_t n) {
    fill_random(tensor_seed, row, dst, n);
}

uint64_t zl_gen_tensor_seed(uint64_t seed, int index) {
    uint64_t ts = (uint64_t)index + 1;
    return splitmix64(&ts) ^ seed;
}

/* tmp: n more floats of scratch for SRC_FUNC */
static void fill_row(const row_src *src, int64_t row, float *dst, int64_t n, float *tmp) {
    switch (src->kind) {
    case SRC_TENSOR: zl_dequant_row(src->type, src->data + (size_t)row * src->row_bytes, dst, n); break;
    case SRC_RANDOM: fill_random(src->seed, row, dst, n); break;
    case SRC_ONES: for (int64_t i = 0; i < n; i++) dst[i] = 1.0f; break;
    case SRC_FUNC: src->fill(src->ctx, row, dst, n, tmp); break;
    }
}

/* Reusable buffers of one conversion run. */
typedef struct conv {
    zl_pool *pool;
    uint8_t *chunk;
    size_t chunk_cap;
    float *scratch; /* two rows per thread */
    size_t scratch_cap;
} conv;

typedef struct chunk_job {
    const row_src *src;
    zl_type to;
    int64_t cols, r0, r1;
    size_t out_row;
    uint8_t *out;
    float *scratch;
} chunk_job;

static void chunk_rows(void *ctx, int ith, int nth) {
    const chunk_job *j = ctx;
    long b, e;
    zl_split((long)(j->r1 - j->r0), ith, nth, &b, &e);
    float *x = j->scratch + (size_t)ith * 2 * (size_t)j->cols;
    for (long r = b; r < e; r++) {
        fill_row(j->src, j->r0 + r, x, j->cols, x + j->cols);
        zl_quantize_row(j->to, x, j->out + (size_t)r * j->out_row, j->cols);
    }
}

static int grow(void **p, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    void *np = realloc(*p, need);
    if (!np) return ZL_ENOMEM;
    *p = np;
    *cap = need;
    return 0;
}

/* Produce rows x cols of type `to` from src and append them to the stream. */
static int convert_tensor(conv *c, const row_src *src, int64_t cols, int64_t rows, zl_type to, zl_gguf_writer *s,
                          zl_err *err) {
    if (src->kind == SRC_TENSOR && src->type == to) /* same type: copy the bytes as they are */
        return zl_gguf_write_data(s, src->data, (uint64_t)rows * src->row_bytes, err);
    size_t out_row = zl_row_size(to, cols);
    int64_t per_chunk = (int64_t)(CHUNK_BYTES / out_row);
    if (per_chunk < 1) per_chunk = 1;
    if (per_chunk > rows) per_chunk = rows;
    int nth = zl_pool_size(c->pool);
    if (grow((void **)&c->chunk, &c->chunk_cap, (size_t)per_chunk * out_row) ||
        grow((void **)&c->scratch, &c->scratch_cap, (size_t)nth * 2 * (size_t)cols * sizeof(float)))
        return zl_errf(err, ZL_ENOMEM, "out of memory for a %lld-element row", (long long)cols);
    for (int64_t r0 = 0; r0 < rows; r0 += per_chunk) {
        int64_t r1 = r0 + per_chunk < rows ? r0 + per_chunk : rows;
        chunk_job j = {src, to, cols, r0, r1, out_row, c->chunk, c->scratch};
        zl_pool_run(c->pool, chunk_rows, &j);
        int rc = zl_gguf_write_data(s, c->chunk, (uint64_t)(r1 - r0) * out_row, err);
        if (rc) return rc;
    }
    return 0;
}

static uint64_t file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

static int64_t n_rows(const int64_t *ne) { return ne[1] * ne[2] * ne[3]; }

static int set_file_type(zl_gguf_writer *s, const zl_qtarget *t) {
    int rc = zl_gguf_set_u32(s, "general.file_type", (uint32_t)t->ftype);
    if (!rc && !is_float_type(t->base)) rc = zl_gguf_set_u32(s, "general.quantization_version", 2);
    return rc;
}

/* ---- quantize ---- */

/* Blocks in the model: one more than the highest blk.N in a tensor name. */
static int count_layers(const zl_gguf *g) {
    int n = 0;
    char name[64];
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        int l;
        if (sscanf(zl_str_copy(g->tensors[i].name, name, sizeof name), "blk.%d.", &l) == 1 && l >= n && l < (1 << 20))
            n = l + 1;
    }
    return n;
}

typedef struct qrun {
    zl_gguf *g;
    zl_gguf_writer *s;
    conv c;
    zl_type *to;
    char (*notes)[192];
} qrun;

static void qrun_free(qrun *q) {
    zl_gguf_writer_free(q->s);
    zl_pool_free(q->c.pool);
    free(q->c.chunk);
    free(q->c.scratch);
    free(q->to);
    free(q->notes);
    zl_gguf_close(q->g);
}

/* Decide every tensor's type and declare it; the header needs them all. */
static int quantize_plan(qrun *q, const zl_qtarget *t, zl_qstats *st, zl_err *err) {
    const zl_gguf *g = q->g;
    int n_layers = count_layers(g), tied = zl_gguf_find_tensor(g, "output.weight") == NULL;
    char name[1100];
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const zl_gguf_tensor *gt = &g->tensors[i];
        zl_str_copy(gt->name, name, sizeof name);
        zl_type to = zl_quant_tensor_type(t, name, gt->n_dims, gt->ne, n_layers, tied, q->notes[i], sizeof q->notes[i]);
        if (to != gt->type && !zl_type_traits_of(gt->type)->supported)
            return zl_errf(err, ZL_EUNSUP, "tensor %s has type %s, which cannot be converted", name,
                           zl_type_traits_of(gt->type)->name);
        q->to[i] = to;
        st->n_fallback += q->notes[i][0] != 0;
        if (zl_gguf_declare_tensor(q->s, name, to, gt->n_dims, gt->ne))
            return zl_errf(err, ZL_ENOMEM, "cannot declare tensor %s", name);
    }
    return 0;
}

int zl_quantize_file(const char *in, const char *out, const zl_qtarget *t, const zl_quantize_opts *o, zl_qstats *st,
                     zl_err *err) {
    zl_quantize_opts opts = {0};
    if (o) opts = *o;
    zl_qstats local;
    if (!st) st = &local;
    memset(st, 0, sizeof *st);
    double t0 = zl_now_s();
    qrun q = {0};
    int rc = zl_gguf_open(&q.g, in, NULL, err);
    if (rc) return rc;
    uint64_t nt = q.g->n_tensors;
    q.s = zl_gguf_writer_new();
    q.c.pool = zl_pool_new(opts.n_threads);
    q.to = calloc(nt ? nt : 1, sizeof *q.to);
    q.notes = calloc(nt ? nt : 1, sizeof *q.notes);
    if (!q.s || !q.c.pool || !q.to || !q.notes) rc = zl_errf(err, ZL_ENOMEM, "out of memory");
    for (uint64_t i = 0; !rc && i < q.g->n_kv; i++)
        if (zl_gguf_copy_kv(q.s, &q.g->kv[i])) rc = zl_errf(err, ZL_ENOMEM, "out of memory copying metadata");
    if (!rc && set_file_type(q.s, t)) rc = zl_errf(err, ZL_ENOMEM, "out of memory");
    if (!rc) rc = quantize_plan(&q, t, st, err);
    if (!rc) rc = zl_gguf_write_begin(q.s, out, err);
    char name[1100];
    for (uint64_t i = 0; !rc && i < nt; i++) {
        const zl_gguf_tensor *gt = &q.g->tensors[i];
        zl_str_copy(gt->name, name, sizeof name);
        row_src src = {SRC_TENSOR, gt->data, (zl_type)gt->type, zl_row_size((zl_type)gt->type, gt->ne[0]), 0, NULL, NULL};
        rc = convert_tensor(&q.c, &src, gt->ne[0], n_rows(gt->ne), q.to[i], q.s, err);
        if (rc) { zl_err_prefix(err, "tensor %s", name); break; }
        uint64_t ob = zl_gguf_writer_tensor_bytes(q.s, i);
        st->in_bytes += gt->nbytes;
        st->out_bytes += ob;
        st->n_tensors++;
        if (opts.progress) {
            zl_qevent ev = {(int)i, (int)nt, name, gt->n_dims, gt->ne, (zl_type)gt->type, q.to[i], gt->nbytes, ob,
                            q.notes[i][0] ? q.notes[i] : NULL};
            opts.progress(opts.ud, &ev);
        }
    }
    if (!rc) rc = zl_gguf_write_finish(q.s, err);
    qrun_free(&q);
    if (rc) return rc;
    st->file_bytes = file_size(out);
    st->seconds = zl_now_s() - t0;
    return 0;
}

/* ---- generated tensors ---- */

int zl_write_generated(zl_gguf_writer *s, const char *out_path, const zl_gen_tensor *ts, int n,
                       const zl_qtarget *target, int n_layers, const zl_quantize_opts *o, zl_qstats *st, zl_err *err) {
    zl_quantize_opts opts = {0};
    if (o) opts = *o;
    zl_qstats local = {0};
    if (!st) st = &local;
    conv c = {zl_pool_new(opts.n_threads), NULL, 0, NULL, 0};
    zl_type *to = calloc((size_t)n + 1, sizeof *to);
    char (*notes)[192] = calloc((size_t)n + 1, sizeof *notes);
    int rc = 0;
    if (!c.pool || !to || !notes) rc = zl_errf(err, ZL_ENOMEM, "out of memory");
    if (!rc && set_file_type(s, target)) rc = zl_errf(err, ZL_ENOMEM, "out of memory");
    for (int i = 0; !rc && i < n; i++) {
        to[i] = zl_quant_tensor_type(target, ts[i].name, ts[i].n_dims, ts[i].ne, n_layers, 0, notes[i],
                                     sizeof notes[i]);
        st->n_fallback += notes[i][0] != 0;
        if (zl_gguf_declare_tensor(s, ts[i].name, to[i], ts[i].n_dims, ts[i].ne))
            rc = zl_errf(err, ZL_ENOMEM, "cannot declare tensor %s", ts[i].name);
    }
    if (!rc) rc = zl_gguf_write_begin(s, out_path, err);
    for (int i = 0; !rc && i < n; i++) {
        static const src_kind kinds[] = {[ZL_GEN_RANDOM] = SRC_RANDOM, [ZL_GEN_ONES] = SRC_ONES,
                                         [ZL_GEN_FUNC] = SRC_FUNC};
        row_src src = {kinds[ts[i].kind], NULL, ZL_TYPE_F32, 0, ts[i].seed, ts[i].fill, ts[i].ctx};
        rc = convert_tensor(&c, &src, ts[i].ne[0], n_rows(ts[i].ne), to[i], s, err);
        if (rc) { zl_err_prefix(err, "tensor %s", ts[i].name); break; }
        uint64_t ob = zl_gguf_writer_tensor_bytes(s, (size_t)i);
        st->out_bytes += ob;
        st->in_bytes += (uint64_t)(ts[i].ne[0] * n_rows(ts[i].ne)) * sizeof(float);
        st->n_tensors++;
        if (opts.progress) {
            zl_qevent ev = {i, n, ts[i].name, ts[i].n_dims, ts[i].ne, to[i], to[i], ob, ob,
                            notes[i][0] ? notes[i] : NULL};
            opts.progress(opts.ud, &ev);
        }
    }
    if (!rc) rc = zl_gguf_write_finish(s, err);
    zl_pool_free(c.pool);
    free(c.chunk);
    free(c.scratch);
    free(to);
    free(notes);
    if (!rc) st->file_bytes = file_size(out_path);
    return rc;
}

/* ---- synth ---- */

static int synth_check(const zl_synth_params *p, zl_err *err) {
    if (p->dim <= 0 || p->ffn <= 0 || p->n_layers <= 0 || p->n_heads <= 0 || p->n_kv_heads <= 0)
        return zl_errf(err, ZL_EINVAL, "dim, ffn, layers, heads and kv-heads must all be positive");
    if (p->dim % p->n_heads) return zl_errf(err, ZL_EINVAL, "dim %d is not a multiple of heads %d", p->dim, p->n_heads);
    if (p->n_heads % p->n_kv_heads)
        return zl_errf(err, ZL_EINVAL, "heads %d is not a multiple of kv-heads %d", p->n_heads, p->n_kv_heads);
    if ((p->dim / p->n_heads) % 2) return zl_errf(err, ZL_EINVAL, "head dimension %d is odd", p->dim / p->n_heads);
    return 0;
}

int zl_synth_check_shape(const zl_synth_params *p, zl_err *err) { return synth_check(p, err); }

zl_gen_tensor *zl_llama_tensors(const zl_synth_params *p, int64_t n_vocab, int *n_out) {
    int n = 3 + 9 * p->n_layers;
    zl_gen_tensor *v = calloc((size_t)n, sizeof *v);
    if (!v) return NULL;
    int64_t d = p->dim, f = p->ffn, kvd = (int64_t)p->n_kv_heads * (p->dim / p->n_heads);
    int k = 0;
#define T2(nm, a, b) (v[k] = (zl_gen_tensor){"", 2, {a, b, 1, 1}, ZL_GEN_RANDOM, 0, NULL, NULL}, snprintf(v[k].name, 64, "%s", nm), k++)
#define T1(nm, a) (v[k] = (zl_gen_tensor){"", 1, {a, 1, 1, 1}, ZL_GEN_ONES, 0, NULL, NULL}, snprintf(v[k].name, 64, "%s", nm), k++)
    T2("token_embd.weight", d, n_vocab);
    T1("output_norm.weight", d);
    T2("output.weight", d, n_vocab);
    char nm[64];
    for (int l = 0; l < p->n_layers; l++) {
#define B(s) (snprintf(nm, sizeof nm, "blk.%d.%s", l, s), nm)
        T1(B("attn_norm.weight"), d);
        T2(B("attn_q.weight"), d, d);
        T2(B("attn_k.weight"), d, kvd);
        T2(B("attn_v.weight"), d, kvd);
        T2(B("attn_output.weight"), d, d);
        T1(B("ffn_norm.weight"), d);
        T2(B("ffn_gate.weight"), d, f);
        T2(B("ffn_down.weight"), f, d);
        T2(B("ffn_up.weight"), d, f);
#undef B
    }
#undef T1
#undef T2
    for (int i = 0; i < k; i++) v[i].seed = zl_gen_tensor_seed(p->seed, i);
    *n_out = k;
    return v;
}

int zl_llama_metadata(zl_gguf_writer *s, const zl_synth_params *p, const zl_gguf *vocab) {
    int rc = zl_gguf_set_str(s, "general.architecture", "llama");
    rc |= zl_gguf_set_str(s, "general.name", "zerolayer-synth");
    rc |= zl_gguf_set_u32(s, "llama.context_length", (uint32_t)(p->n_ctx > 0 ? p->n_ctx : 2048));
    rc |= zl_gguf_set_u32(s, "llama.embedding_length", (uint32_t)p->dim);
    rc |= zl_gguf_set_u32(s, "llama.block_count", (uint32_t)p->n_layers);
    rc |= zl_gguf_set_u32(s, "llama.feed_forward_length", (uint32_t)p->ffn);
    rc |= zl_gguf_set_u32(s, "llama.attention.head_count", (uint32_t)p->n_heads);
    rc |= zl_gguf_set_u32(s, "llama.attention.head_count_kv", (uint32_t)p->n_kv_heads);
    rc |= zl_gguf_set_u32(s, "llama.rope.dimension_count", (uint32_t)(p->dim / p->n_heads));
    rc |= zl_gguf_set_f32(s, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    rc |= zl_gguf_set_f32(s, "llama.rope.freq_base", p->rope_base > 0 ? p->rope_base : 10000.0f);
    rc |= set_file_type(s, &p->target);
    for (uint64_t i = 0; i < vocab->n_kv; i++)
        if (vocab->kv[i].key.len > 10 && !memcmp(vocab->kv[i].key.ptr, "tokenizer.", 10))
            rc |= zl_gguf_copy_kv(s, &vocab->kv[i]);
    return rc;
}

int zl_synth_file(const zl_synth_params *p, zl_qstats *st, zl_err *err) {
    zl_qstats local;
    if (!st) st = &local;
    memset(st, 0, sizeof *st);
    double t0 = zl_now_s();
    int rc = synth_check(p, err);
    if (rc) return rc;
    zl_gguf *vocab;
    if ((rc = zl_gguf_open(&vocab, p->vocab_path, NULL, err))) return rc;
    const zl_gguf_kv *toks = zl_gguf_get_arr(vocab, "tokenizer.ggml.tokens", ZL_GGUF_STRING);
    if (!toks || toks->v.arr.n == 0 || toks->v.arr.n > (1u << 24)) {
        zl_gguf_close(vocab);
        return zl_errf(err, ZL_EFORMAT, "%s has no usable tokenizer.ggml.tokens array", p->vocab_path);
    }
    int n = 0;
    zl_gen_tensor *spec = zl_llama_tensors(p, (int64_t)toks->v.arr.n, &n);
    zl_gguf_writer *s = zl_gguf_writer_new();
    if (!spec || !s) rc = zl_errf(err, ZL_ENOMEM, "out of memory");
    if (!rc && zl_llama_metadata(s, p, vocab)) rc = zl_errf(err, ZL_ENOMEM, "out of memory");
    if (!rc) rc = zl_write_generated(s, p->out_path, spec, n, &p->target, p->n_layers, &p->opts, st, err);
    zl_gguf_writer_free(s);
    free(spec);
    zl_gguf_close(vocab);
    if (rc) return rc;
    st->seconds = zl_now_s() - t0;
    return 0;
}
