/* quantize.h — writing model files: type conversion (quantize),
 * random-weight llama models (synth), and the writer of generated tensors
 * both synth and embed.h's embedding use.
 *
 * A target names either one tensor type or one of llama.cpp's mixes.  Plain
 * F32/F16/BF16 and the pure K names (Q4_K, Q5_K) put every weight matrix in
 * that type.  The llama.cpp file types (Q4_0 … Q8_0, Q6_K, Q4_K_S/M,
 * Q5_K_S/M) follow llama.cpp's recipe so files compare with its output: the
 * output matrix gets Q6_K (Q8_0 stays Q8_0), and the _S/_M mixes give
 * attn_v and ffn_down more bits in some layers.  1-D tensors (norms, biases)
 * are always F32.  A matrix whose rows do not fit the chosen type's blocks
 * falls back to a compatible type (Q4_K→Q5_0, Q5_K→Q5_1, Q6_K→Q8_0, else
 * F16).  Both operations stream: at most a chunk of rows is in memory. */
#ifndef ZL_QUANTIZE_H
#define ZL_QUANTIZE_H

#include <stdint.h>

#include "../base/err.h"
#include "../gguf/gguf.h"
#include "../tensor/types.h"

typedef enum {
    ZL_MIX_PURE = 0,   /* every matrix in the base type */
    ZL_MIX_LLAMA,      /* llama.cpp single-type ftype: output.weight -> Q6_K */
    ZL_MIX_K_S,        /* Q4_K_S / Q5_K_S */
    ZL_MIX_K_M,        /* Q4_K_M / Q5_K_M */
} zl_qmix;

typedef struct zl_qtarget {
    char name[12];  /* canonical upper-case name */
    zl_type base;   /* type of most matrices */
    zl_qmix mix;
    int ftype;      /* llama.cpp LLAMA_FTYPE value written to general.file_type */
} zl_qtarget;

/* Parse a target name (case-insensitive); 0 or ZL_EINVAL. */
int zl_qtarget_parse(const char *name, zl_qtarget *out);
/* Comma-separated list of the accepted names, for help texts. */
const char *zl_qtarget_names(void);

/* Storage type of one tensor under target t.  n_layers: the model's block
 * count; tied: the model has no output.weight (token_embd doubles as it).
 * If the planned type had to fall back because of the row length, a note
 * saying so is written to note (else note[0] = 0). */
zl_type zl_quant_tensor_type(const zl_qtarget *t, const char *name, uint32_t n_dims, const int64_t *ne, int n_layers,
                             int tied, char *note, size_t note_cap);

/* Reported once per tensor, after it is written. */
typedef struct zl_qevent {
    int index, count;   /* 0-based position, number of tensors */
    const char *name;
    uint32_t n_dims;
    const int64_t *ne;
    zl_type from, to;   /* from = to for synth */
    uint64_t in_bytes, out_bytes;
    const char *note;   /* fallback note or NULL */
} zl_qevent;
typedef void (*zl_qprogress)(void *ud, const zl_qevent *ev);

typedef struct zl_qstats {
    int n_tensors, n_fallback;
    uint64_t in_bytes, out_bytes; /* tensor data */
    uint64_t file_bytes;
    double seconds;
} zl_qstats;

typedef struct zl_quantize_opts {
    int n_threads;          /* <= 0: all online CPUs */
    zl_qprogress progress;  /* may be NULL */
    void *ud;
} zl_quantize_opts;

/* Convert the GGUF model at in to target t, written to out (via out.tmp). */
int zl_quantize_file(const char *in, const char *out, const zl_qtarget *t, const zl_quantize_opts *o, zl_qstats *st,
                     zl_err *err);

typedef struct zl_synth_params {
    const char *vocab_path; /* GGUF whose tokenizer.* metadata is copied */
    const char *out_path;
    int dim, ffn, n_layers, n_heads, n_kv_heads;
    int n_ctx;              /* llama.context_length; <= 0: 2048 */
    float rope_base;        /* <= 0: 10000 */
    uint64_t seed;
    zl_qtarget target;
    zl_quantize_opts opts;
} zl_synth_params;

/* Write a random-weight llama model: weights approximately N(0, 0.02²) from a
 * seeded generator (the same file for any thread count), norms 1. */
int zl_synth_file(const zl_synth_params *p, zl_qstats *st, zl_err *err);

/* ---- generated tensors (synth, and embed.c) ----
 * A tensor whose float rows are produced on the fly, then stored in the type
 * the target chooses for it.  A FUNC tensor's fill is called once per row,
 * from any worker thread and in any order, so it must depend only on (ctx,
 * row); tmp is scratch for n more floats. */
typedef void (*zl_row_fill)(const void *ctx, int64_t row, float *dst, int64_t n, float *tmp);
typedef enum { ZL_GEN_RANDOM = 0, ZL_GEN_ONES, ZL_GEN_FUNC } zl_gen_kind;
typedef struct zl_gen_tensor {
    char name[64];
    uint32_t n_dims;
    int64_t ne[ZL_GGUF_MAX_DIMS];
    zl_gen_kind kind;
    uint64_t seed;    /* RANDOM: the tensor's stream (zl_gen_tensor_seed) */
    zl_row_fill fill; /* FUNC */
    const void *ctx;
} zl_gen_tensor;

/* The stream of tensor `index` under a file seed, and row `row` of it:
 * approximately N(0, 0.02²), the same on any thread. */
uint64_t zl_gen_tensor_seed(uint64_t seed, int index);
void zl_gen_random_row(uint64_t tensor_seed, int64_t row, float *dst, int64_t n);
/* synth's shape rules (positive sizes, heads divide dim and are a multiple of
 * kv-heads, even head dimension); 0 or ZL_EINVAL naming the rule. */
int zl_synth_check_shape(const zl_synth_params *p, zl_err *err);
/* The 3 + 9 * n_layers tensors of a llama model of p's shape in llama.cpp's
 * order (token_embd, output_norm, output, then attn_norm, attn_q, attn_k,
 * attn_v, attn_output, ffn_norm, ffn_gate, ffn_down, ffn_up per block): 2-D
 * RANDOM with seeds from p->seed, norms ONES.  NULL when out of memory. */
zl_gen_tensor *zl_llama_tensors(const zl_synth_params *p, int64_t n_vocab, int *n_out);
/* synth's llama.* metadata for p's shape and every tokenizer.* key of vocab. */
int zl_llama_metadata(zl_gguf_writer *s, const zl_synth_params *p, const zl_gguf *vocab);
/* Declare the n tensors (types chosen by target, n_layers for the mixes) in
 * s, whose metadata is set, write them to out_path and finish.  Adds to st
 * (n_tensors, n_fallback, in/out bytes; may be NULL) and sets file_bytes. */
int zl_write_generated(zl_gguf_writer *s, const char *out_path, const zl_gen_tensor *t, int n,
                       const zl_qtarget *target, int n_layers, const zl_quantize_opts *o, zl_qstats *st, zl_err *err);

#endif
