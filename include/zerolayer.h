/* zerolayer.h — the public API of libzerolayer.
 *
 * Two opaque handles:
 *   zl_llm  a loaded model: weights (mmap'd, shared, read-only), vocabulary
 *           and a thread pool.  Thread-safe for concurrent readers; forward
 *           passes on one zl_llm must be serialised by the caller (the
 *           server's engine thread does this).
 *   zl_seq  one sequence: its KV cache, forward scratch, sampler and the
 *           tokens it has consumed.  Owned by one thread at a time.
 * Every fallible function returns 0 or a ZL_E* code and fills *err with a
 * one-line message (err may be NULL).  Nothing here exits or aborts. */
#ifndef ZEROLAYER_H
#define ZEROLAYER_H

#include <stddef.h>
#include <stdint.h>

#include "zerolayer_kv_policy.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ZEROLAYER_VERSION "0.1.0"

#ifndef ZL_ERR_TYPES
#define ZL_ERR_TYPES
enum { ZL_OK = 0, ZL_EINVAL = 1, ZL_EIO = 2, ZL_ENOMEM = 3, ZL_EFORMAT = 4, ZL_EUNSUP = 5, ZL_ERANGE = 6 };
typedef struct zl_err { int code; char msg[512]; } zl_err;
#endif

typedef struct zl_llm zl_llm;
typedef struct zl_seq zl_seq;

typedef struct zl_llm_opts {
    int n_threads; /* <= 0: all online CPUs */
    int no_mmap;   /* read the file into memory instead of mapping it */
    int mlock;     /* lock the weights in RAM */
    int populate;  /* fault every page in at load (MAP_POPULATE) */
    int prefetch_layers; /* read-ahead depth in layers: 0 = default (2), < 0 = off */
    int kv_layer_max;    /* bounded KV policies: most entries one layer may keep, e.g. the context the
                            model was trained on when its file claims more (0 = the sequence's context) */
    const char *isa;     /* kernel level of this handle: NULL or "" = the best the CPU has (after the
                            ZL_ISA cap), else "scalar" | "avx2" | "avx512" (AArch64: "scalar" | "neon" |
                            "neon-dotprod" | "neon-i8mm"), capped by the CPU; handles
                            at different levels run side by side in one process */
} zl_llm_opts;

/* Pull every page of the weights into the page cache (reads the file once);
 * progress(done, total, ctx) is called about every 1% (may be NULL). */
void zl_llm_preheat(zl_llm *llm, void (*progress)(size_t done, size_t total, void *ctx), void *ctx);
/* Fraction of the weight file resident in memory right now (0..1). */
double zl_llm_resident(const zl_llm *llm);

int zl_llm_open(zl_llm **out, const char *path, const zl_llm_opts *opts, zl_err *err);
void zl_llm_close(zl_llm *llm);

int zl_llm_n_vocab(const zl_llm *llm);
int zl_llm_n_ctx_train(const zl_llm *llm);
int zl_llm_n_threads(const zl_llm *llm);
int32_t zl_llm_bos(const zl_llm *llm);
int32_t zl_llm_eos(const zl_llm *llm);
int zl_llm_is_eog(const zl_llm *llm, int32_t token);
/* One-line description: architecture, size, tensor types. */
const char *zl_llm_desc(const zl_llm *llm);
/* The kernel level this handle runs at: "scalar" | "avx2" | "avx512" (AArch64: "neon" ...). */
const char *zl_llm_isa(const zl_llm *llm);

/* ---- model metadata ----
 * The model file's key/value pairs by key ("general.architecture",
 * "tokenizer.chat_template", "llama.context_length", ...), read from the open
 * handle: no file is opened.  Each returns 0, or ZL_EINVAL when the key is
 * absent or holds another kind of value (ZL_ERANGE: an array index past its
 * end).  Strings point into the handle: *len bytes, not NUL-terminated, valid
 * until zl_llm_close. */
int zl_llm_meta_str(const zl_llm *llm, const char *key, const char **s, size_t *len);
/* Integers and booleans (any width, when the value fits). */
int zl_llm_meta_int(const zl_llm *llm, const char *key, int64_t *out);
/* Floats, and integers as floats. */
int zl_llm_meta_float(const zl_llm *llm, const char *key, double *out);
/* Arrays: the element count, then element i of a string or numeric array. */
int zl_llm_meta_arr_len(const zl_llm *llm, const char *key, size_t *n);
int zl_llm_meta_arr_str(const zl_llm *llm, const char *key, size_t i, const char **s, size_t *len);
int zl_llm_meta_arr_num(const zl_llm *llm, const char *key, size_t i, double *out);
/* Bytes of weights in the file. */
uint64_t zl_llm_weight_bytes(const zl_llm *llm);

/* Tokenize UTF-8 text.  add_special adds BOS/EOS as the model's metadata asks;
 * parse_special turns control-token text (e.g. "<|im_start|>") into ids.
 * *ids is malloc'd; free() it. */
int zl_llm_tokenize(const zl_llm *llm, const char *text, size_t len, int add_special, int parse_special,
                    int32_t **ids, size_t *n, zl_err *err);
/* Whole-sequence detokenisation (malloc'd, NUL-terminated). */
int zl_llm_detokenize(const zl_llm *llm, const int32_t *ids, size_t n, int render_special, char **out, size_t *len,
                      zl_err *err);

/* ---- vocabulary only ----
 * A tokenizer built from a GGUF file's tokenizer.ggml.* metadata alone (what
 * llama-tokenize --vocab-only loads): the file may have no tensors and may
 * name an architecture the engine cannot run, e.g. llama.cpp's ggml-vocab-*
 * test files.  Any tokenizer.ggml.model the tokenizer supports works; a file
 * without tokenizer metadata, or with an unsupported model or pre-tokenizer,
 * fails with a message naming the key.  The file is closed before open
 * returns; the handle is read-only and may be shared by threads. */
typedef struct zl_tokenizer zl_tokenizer;
int zl_tokenizer_open(zl_tokenizer **out, const char *path, zl_err *err);
void zl_tokenizer_close(zl_tokenizer *t);
int zl_tokenizer_n_vocab(const zl_tokenizer *t);
/* As zl_llm_tokenize / zl_llm_detokenize. */
int zl_tokenizer_tokenize(const zl_tokenizer *t, const char *text, size_t len, int add_special, int parse_special,
                          int32_t **ids, size_t *n, zl_err *err);
int zl_tokenizer_detokenize(const zl_tokenizer *t, const int32_t *ids, size_t n, int render_special, char **out,
                            size_t *len, zl_err *err);

/* One logit_bias entry: bias is added to the token's logit before any other
 * transform (-100 effectively bans the token, +100 all but forces it). */
typedef struct zl_logit_bias { int32_t token; float bias; } zl_logit_bias;

typedef struct zl_sampling {
    float temp;             /* <= 0: greedy */
    int top_k;              /* <= 0: off */
    float top_p;            /* >= 1: off */
    float min_p;            /* <= 0: off */
    float repeat_penalty;   /* 1: off */
    int repeat_last_n;
    float presence_penalty;
    float frequency_penalty;
    uint64_t seed;
    /* Borrowed: read (and copied) when a sampler is made from this struct
     * (zl_seq_new, zl_seq_set_sampling, zl_job_new); ids must be < n_vocab. */
    const zl_logit_bias *logit_bias;
    int n_logit_bias;
} zl_sampling;
zl_sampling zl_sampling_defaults(void);

/* q8_0 halves the KV bytes of f16 (needs a head dimension that is a multiple of 32). */
typedef enum { ZL_KV_F16 = 0, ZL_KV_F32 = 1, ZL_KV_Q8_0 = 2 } zl_kv_type;

typedef struct zl_seq_opts {
    int n_ctx;           /* <= 0: the model's training context */
    zl_kv_type kv_type;  /* default F16 */
    zl_sampling sampling;
} zl_seq_opts;

int zl_seq_new(zl_seq **out, zl_llm *llm, const zl_seq_opts *opts, zl_err *err);
void zl_seq_free(zl_seq *s);
/* Tokens fed so far (logical position of the next token). */
int zl_seq_n_past(const zl_seq *s);
/* Tokens currently held in the KV cache (< n_past once a policy evicted). */
int zl_seq_n_cached(const zl_seq *s);
int zl_seq_n_ctx(const zl_seq *s);
/* How many more tokens can be fed (unbounded under a slicing policy). */
int zl_seq_room(const zl_seq *s);

/* ---- KV slicing ---- */
/* full: keep everything; window: 4 attention sinks + the most recent tokens;
 * anchor: sinks + marked anchors + heavy hitters (attention received) + a
 * recent window.  budget: most tokens kept (0 = n_ctx; larger is clamped). */
int zl_seq_set_kv_policy(zl_seq *s, zl_kv_policy_kind kind, int budget, zl_err *err);
/* The policies' names: zerolayer_kv_policy.h (the one table is the KV layer's). */
typedef struct zl_kv_stats {
    int cached, budget, anchors;
    uint64_t evicted;
    uint64_t bytes_per_token; /* K+V bytes of one cached token, all layers */
    uint64_t bytes_held;      /* memory the cache holds now: its whole allocation when it came from the
                                 heap (calloc'd and written), the pages its rows touch when it is a mapping */
} zl_kv_stats;
void zl_seq_kv_stats(const zl_seq *s, zl_kv_stats *st);
/* zl_seq_eval with a per-token anchor mask (1 = never evict; may be NULL). */
int zl_seq_eval_anchored(zl_seq *s, const int32_t *ids, const uint8_t *anchor, int n, int batch, float *all_logits,
                         zl_err *err);
/* Tokenize text containing <|anchor_start|>...<|anchor_end|> markers: the
 * markers are removed and *mask (malloc'd, n bytes) flags the tokens inside.
 * Unbalanced or nested markers are an error. */
int zl_llm_tokenize_anchored(const zl_llm *llm, const char *text, size_t len, int add_special, int parse_special,
                             int32_t **ids, uint8_t **mask, size_t *n, zl_err *err);
/* Drop cached positions >= n (their KV memory is zeroed). */
void zl_seq_truncate(zl_seq *s, int n);
/* Feed n tokens at positions n_past..n_past+n-1 (in chunks of up to
 * `batch` tokens; <= 0 picks a default).  Afterwards zl_seq_logits returns
 * the logits after the last token.  If all_logits is non-NULL it receives
 * n * n_vocab floats, one row per fed token. */
int zl_seq_eval(zl_seq *s, const int32_t *ids, int n, int batch, float *all_logits, zl_err *err);
const float *zl_seq_logits(const zl_seq *s);
/* Sample the next token from the current logits with the sequence's sampler,
 * record it in the penalty history (the token is NOT fed; call zl_seq_eval). */
int32_t zl_seq_sample(zl_seq *s);
/* Every token fed so far, in order (n = zl_seq_n_past). */
const int32_t *zl_seq_tokens(const zl_seq *s, int *n);
/* ---- moving cached state (sessions, prefix cache) ---- */
/* Make dst hold the first n tokens of src: dst is truncated to 0, then src's
 * KV rows and tokens [0, n) are copied (both under the full KV policy, same
 * model and KV type).  dst's next eval continues at position n exactly as if
 * it had been fed those tokens itself. */
int zl_seq_copy_prefix(zl_seq *dst, const zl_seq *src, int n, zl_err *err);
/* Replace the sampler (new request on a kept sequence); the penalty history
 * is rebuilt from the tokens fed so far, as a fresh sequence would have it. */
int zl_seq_set_sampling(zl_seq *s, const zl_sampling *p, zl_err *err);
/* Constrain sampling to a grammar (GBNF-style text, syntax in
 * src/grammar/grammar.h; NULL clears): every sampled token keeps the text
 * inside the grammar, and an end token is allowed only where the grammar's
 * text is complete.  Fails (ZL_EINVAL, naming line and column) on a bad
 * grammar, and when the ring is on (drafts are not checked against it). */
int zl_seq_set_grammar(zl_seq *s, const char *grammar, zl_err *err);
/* Masks computed by a trie walk / served from the cache so far, and the
 * milliseconds spent inside the constraint (checks, masks, advancing). */
void zl_seq_grammar_stats(const zl_seq *s, long *walks, long *hits, double *ms);
/* JSON Schema text to grammar text (malloc'd); ZL_EUNSUP names an
 * unsupported keyword. */
int zl_json_schema_grammar(const char *schema, char **grammar, zl_err *err);
/* Bytes of KV memory holding cached tokens (K+V, all layers). */
size_t zl_seq_kv_bytes_used(const zl_seq *s);
/* The model a sequence was made for, and its KV element type and slicing policy. */
zl_llm *zl_seq_llm(const zl_seq *s);
zl_kv_type zl_seq_kv_type(const zl_seq *s);
zl_kv_policy_kind zl_seq_kv_policy(const zl_seq *s);
/* The KV memory of the first `rows` cache rows (every layer's K, then V),
 * cut into pieces of at most piece_bytes, for touching a fresh sequence's
 * pages before a request needs them: zl_seq_kv_n_pieces counts them,
 * zl_seq_kv_piece returns piece p's size with its address in *at (0 when p is
 * out of range). */
int zl_seq_kv_n_pieces(const zl_seq *s, int rows, size_t piece_bytes);
size_t zl_seq_kv_piece(zl_seq *s, int rows, size_t piece_bytes, int p, void **at);
/* Exact arithmetic (for verification): f32 activations, f64 sums. */
void zl_seq_set_exact(zl_seq *s, int exact);

/* Continuous batching: one forward pass over several sequences.  Item i
 * feeds ids[0..n) to seq at its next positions; afterwards zl_seq_logits(seq)
 * holds the logits after its last id.  All sequences must belong to llm and
 * be distinct.  Equivalent to calling zl_seq_eval on each (same results),
 * but the weights are read once for the whole batch. */
typedef struct zl_batch_item { zl_seq *seq; const int32_t *ids; int n; } zl_batch_item;
int zl_llm_eval_batch(zl_llm *llm, const zl_batch_item *items, int n_items, zl_err *err);

/* ---- verification ring (lossless speculative decoding) ---- */
typedef enum { ZL_SPEC_OFF = 0, ZL_SPEC_LOOKUP = 1, ZL_SPEC_DRAFT = 2 } zl_spec_mode;
typedef struct zl_spec_opts {
    zl_spec_mode mode;
    int ring;      /* initial drafted tokens per step (default 5) */
    int ring_max;  /* adaptive upper bound (default 16) */
    zl_llm *draft; /* ZL_SPEC_DRAFT: the draft model (vocabulary must match) */
} zl_spec_opts;
int zl_seq_set_spec(zl_seq *s, const zl_spec_opts *o, zl_err *err);
/* One decode step from the current logits: choose the next token, and with
 * the ring on, draft up to `ring` more and verify them in one batched
 * forward.  Writes the emitted tokens (>= 1, at most max_out) to out and
 * returns their count, or -1 with *err set.  Emitted tokens are already fed;
 * greedy output is identical to plain decoding, sampled output has the same
 * distribution (rejection sampling).  The caller stops at the first
 * end-of-generation token it sees in out. */
int zl_seq_step(zl_seq *s, int32_t *out, int max_out, zl_err *err);
typedef struct zl_spec_stats {
    uint64_t steps, verify_steps, drafted, accepted;
    int ring; /* current ring size (0 while drafting is cooling down) */
    uint64_t resumed; /* verify steps that ran only the layers after a self-draft's (see below) */
} zl_spec_stats;
void zl_seq_spec_stats(const zl_seq *s, zl_spec_stats *st);
/* Give the sequence's ring a verify-cost curve (cost[i] = forward over i + 1
 * tokens / over one, n entries); after zl_seq_set_spec, which resets the
 * ring.  No effect while the ring is off. */
void zl_seq_set_ring_cost(zl_seq *s, const float *cost, int n);
/* Measure that curve on llm: the best of `reps` timings of a forward over k
 * tokens (all logits, as a verification needs) at `depth` cached tokens,
 * divided by the one-token time, for k = 1..n.  Returns 0 or an error. */
int zl_llm_verify_cost(zl_llm *llm, int depth, int n, int reps, float *cost, zl_err *err);
/* A draft model made of the first n_layers of llm (self-speculation): shares
 * llm's weights; close it before llm.  Drafting for a sequence of llm, it
 * runs in that sequence's own cache and the verify pass resumes after its
 * layers (no second cache, no layer run twice); under a KV slicing policy it
 * drafts in a cache of its own. */
int zl_llm_open_truncated(zl_llm **out, zl_llm *llm, int n_layers, zl_err *err);

/* ---- embeddings ----
 * A token's hidden state is the residual stream leaving the last layer,
 * passed through the model's output norm (what the output matrix would turn
 * into logits).  An input's embedding pools those states over its tokens
 * (mean: their average; cls: the first token's; last: the last token's) and
 * is L2-normalised.  The arithmetic of a token does not depend on what else
 * shares its forward pass, so an input's vector is the same whichever inputs
 * it is batched with. */
typedef enum { ZL_POOL_MEAN = 0, ZL_POOL_CLS = 1, ZL_POOL_LAST = 2 } zl_pooling;
int zl_llm_n_embd(const zl_llm *llm);
/* general.architecture ("llama", "qwen2", ...). */
const char *zl_llm_arch(const zl_llm *llm);
/* The pooling the file asks for in <arch>.pooling_type (mean, cls or last),
 * or -1 when it names none (absent, "none" or "rank"). */
int zl_llm_pooling(const zl_llm *llm);
const char *zl_pooling_name(zl_pooling p);
/* Feed n tokens as zl_seq_eval does, without the output matrix: hidden gets
 * n * n_embd floats, each token's hidden state.  The sequence has no logits
 * afterwards (zl_seq_logits returns NULL until the next zl_seq_eval). */
int zl_seq_eval_hidden(zl_seq *s, const int32_t *ids, int n, int batch, float *hidden, zl_err *err);
/* Embeddings of several inputs, computed step by step so a caller that
 * serialises forward passes (the server's engine thread) can interleave
 * them with generation.  Each step is one forward over at most max_tokens
 * tokens: the rest of the input in progress and as many of the next ones as
 * fit (a long input spans several steps, in its own KV cache, freed when it
 * is done).  Inputs must be non-empty with valid token ids. */
typedef struct zl_embedder zl_embedder;
int zl_embedder_new(zl_embedder **out, zl_llm *llm, const int32_t *const *inputs, const int *n, int n_inputs,
                    zl_pooling pooling, zl_err *err);
/* One step; *done = 1 once every input's vector is ready.  0 or an error. */
int zl_embedder_step(zl_embedder *e, int max_tokens, int *done, zl_err *err);
/* Input i's embedding (n_embd floats), or NULL before it is done. */
const float *zl_embedder_vector(const zl_embedder *e, int i);
void zl_embedder_free(zl_embedder *e);
/* All steps at once: out gets n_embd floats. */
int zl_llm_embed(zl_llm *llm, const int32_t *ids, int n, zl_pooling pooling, float *out, zl_err *err);

/* ---- state access (state codecs, snapshots: src/engine/seq_state.c) ----
 * A sequence's cached K and V as f32 rows of n_kv_heads * head_dim values,
 * one row per position.  Keys either as cached (rotated for their position)
 * or pre-RoPE (rotated back: what the key projection produced, which is
 * position-independent and what a codec's basis is fitted to).  Only under
 * the full KV policy, where slot p holds position p. */
typedef struct zl_kv_shape { int n_layers, n_kv_heads, head_dim; } zl_kv_shape;
zl_kv_shape zl_llm_kv_shape(const zl_llm *llm);
zl_kv_shape zl_seq_kv_shape(const zl_seq *s);
typedef enum { ZL_STATE_K = 0, ZL_STATE_K_PRE_ROPE = 1, ZL_STATE_V = 2 } zl_state_part;
/* Rows of positions [pos, pos + n) of one layer (all cached: pos + n <= n_cached). */
int zl_seq_kv_read(const zl_seq *s, int layer, zl_state_part part, int pos, int n, float *out, zl_err *err);
/* Overwrite rows of cached positions [pos, pos + n); pre-RoPE keys are rotated
 * for their position before they are stored. */
int zl_seq_kv_write(zl_seq *s, int layer, zl_state_part part, int pos, int n, const float *in, zl_err *err);
/* The cache's own bytes (exact transfers: no conversion, no rotation; the
 * KV type is zl_seq_kv_type's): bytes of one row, and rows [pos, pos + n) of
 * one layer's K (is_v 0, as cached) or V copied out of or into the cache. */
size_t zl_seq_kv_row_bytes(const zl_seq *s);
int zl_seq_kv_read_raw(const zl_seq *s, int layer, int is_v, int pos, int n, void *out, zl_err *err);
int zl_seq_kv_write_raw(zl_seq *s, int layer, int is_v, int pos, int n, const void *in, zl_err *err);
/* Make s hold ids[0..n) without running the model: s is truncated to 0, the
 * tokens are recorded as fed (sampler history included) and n positions are
 * cached with zero rows, which the caller then fills with zl_seq_kv_write for
 * every layer; s has no logits until its next eval. */
int zl_seq_adopt(zl_seq *s, const int32_t *ids, int n, zl_err *err);
/* A sequence-length reduction (the codec's additive fusion): keep cached rows
 * [0, n) only, which the caller has rewritten (pre-RoPE keys written at their
 * new slots), and zero the rest; the tokens fed stay, so zl_seq_n_cached <
 * zl_seq_n_past afterwards and the next token goes to slot n, its position
 * cache-relative as under the slicing policies.  Full KV policy only; such a
 * sequence is no longer positions = slots (snapshots and coding refuse it). */
int zl_seq_kv_shorten(zl_seq *s, int n, zl_err *err);
/* What determines the model's forward pass, fed to fn in a fixed order: a
 * canonical text of the hyper-parameters, then each tensor's name, type and
 * shape, then each tensor's data (in place, never copied).  A fingerprint is
 * a hash of these bytes. */
void zl_llm_identity(const zl_llm *llm, void (*fn)(void *ctx, const void *p, size_t n), void *ctx);

/* Streaming detokeniser: returns only complete UTF-8 characters. */
typedef struct zl_stream zl_stream;
/* strip_leading_space: drop the SentencePiece dummy-prefix space. */
int zl_stream_new(zl_stream **out, const zl_llm *llm, int strip_leading_space, zl_err *err);
void zl_stream_free(zl_stream *st);
/* Text ready after this token (pointer valid until the next call). */
const char *zl_stream_feed(zl_stream *st, int32_t token, size_t *len);
const char *zl_stream_flush(zl_stream *st, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
