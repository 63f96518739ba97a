/* gen.h — one API request's generations, turned from token ids into text.
 *
 * A zl_gen submits one scheduler job per choice (several prompts, or n
 * samples of one) and, on every poll, pulls the new tokens of each job
 * through a UTF-8-safe stream detokenizer and the stop-sequence matcher:
 *
 *   text that could still be the start of a stop sequence is held back and
 *   released only once it cannot be (or, when more than stream_buffer tokens
 *   are held, released anyway); when a stop sequence completes, the text
 *   before it is released, the rest is dropped and the job is cancelled so
 *   its sequence slot frees in the next engine step.
 *
 * The adapters (OpenAI, Anthropic) take released text with zl_gen_take and
 * format it; nothing here knows JSON. */
#ifndef ZL_GEN_H
#define ZL_GEN_H

#include "zerolayer_sched.h"
#include "jsonv.h"

typedef enum {
    ZL_GEN_RUNNING = 0,
    ZL_GEN_EOG,    /* end of turn */
    ZL_GEN_LENGTH, /* max_tokens or context */
    ZL_GEN_STOP,   /* a stop sequence matched */
    ZL_GEN_CANCEL,
    ZL_GEN_ERROR,
} zl_gen_end;

struct zl_gen;
typedef struct zl_gen_params {
    zl_sampling sampling;
    int max_tokens;
    int n_logprobs; /* -1: none */
    const char **stops;
    int n_stops;
    int stream_buffer; /* max tokens held back for stop matching; <= 0: unbounded */
    int strip_leading_space;
    /* Sessions and the prefix cache (api_sessions.c): hook_job runs on each
     * choice's job before submit (non-zero fails the start); on_end runs
     * exactly once, when every choice has ended or the gen is freed or fails
     * to start (then with g == NULL). */
    int (*hook_job)(void *ud, zl_job *j, int choice);
    /* ring / KV controls of every job (has_ctl: else the server's defaults),
     * and per choice an anchor mask of n_prompts[i] bytes or NULL (only read
     * by zl_gen_start) */
    zl_job_ctl ctl;
    int has_ctl;
    /* constrained sampling: every job follows this grammar (text, already
     * validated), lazily from grammar_trigger when set; think_budget > 0
     * closes a thinking block after that many tokens (think_inside: the
     * prompt opened it); 0: no bound */
    const char *grammar;
    const char *grammar_trigger;
    int think_budget;
    int think_inside;
    uint8_t *const *anchors;
    void *hook_ud;
    void (*on_end)(struct zl_gen *g, void *ud);
    void *end_ud;
} zl_gen_params;

typedef struct zl_gen_choice {
    zl_job *job;
    struct zl_stream *st;
    int n_read;       /* tokens read from the job */
    int n_tokens;     /* tokens that count as generated (up to a stop match) */
    zl_buf text;      /* all released text */
    size_t taken;     /* bytes of text handed to the adapter */
    zl_buf held;      /* text held back for stop matching */
    int held_tokens;
    int held_peak;    /* most tokens held back at once, seen after each token's text */
    zl_job_tok *toks; /* every counted token, for logprobs */
    int n_toks, cap_toks, toks_released, toks_taken;
    zl_gen_end end;
    int stop_index; /* which stop matched, or -1 */
    double t_last;
} zl_gen_choice;

/* How a session request got its cached state (filled by the session layer's
 * on_end, api_sessions.c): from: 0 memory (or no session), 1 the idle
 * code, 2 a spill file; bytes stored vs the exact K+V bytes, and the time to
 * store it (when it went idle) and to rebuild it (this request). */
typedef struct zl_gen_state {
    int from, ok, tokens;
    double bytes, exact_bytes, store_ms, load_ms;
} zl_gen_state;

typedef struct zl_gen {
    zl_sched *sched;
    zl_llm *llm;
    zl_gen_params p;
    char **stops; /* owned copies */
    int n;
    zl_gen_choice *ch;
    int *n_prompt;
    double t_start;
    int metrics_done;
    int end_called;
    zl_gen_state state;
} zl_gen;

/* Submit n jobs (prompts[i] of n_prompts[i] tokens; seeds offset by i).
 * Returns NULL and *busy = 1 when the queue is full (nothing stays
 * submitted), or NULL with *busy = 0 when out of memory. */
zl_gen *zl_gen_start(zl_sched *s, int32_t *const *prompts, const int *n_prompts, int n, const zl_gen_params *p,
                     double t_start, int *busy);
/* Wait up to timeout_ms for progress, then absorb it.  Returns 1 when every
 * choice has ended. */
int zl_gen_poll(zl_gen *g, int timeout_ms);
/* Released text of choice i not yet taken (*len bytes; may be 0). */
const char *zl_gen_take(zl_gen *g, int i, size_t *len);
/* Tokens of choice i released but not yet taken (for streamed logprobs). */
const zl_job_tok *zl_gen_take_toks(zl_gen *g, int i, int *n);
/* Cancel every job (client gone). */
void zl_gen_cancel(zl_gen *g);
void zl_gen_free(zl_gen *g);

typedef struct zl_gen_timing {
    double prep_ms; /* request received -> job submitted (body, template, tokenization) */
    double queue_ms, prefill_ms, decode_ms, kv_ms, sample_ms;
    int prompt_tokens, generated_tokens, cached_tokens;
    /* verification ring (ring_on: some choice decoded with it) and KV slicing */
    int ring_on, kv_policy, kv_budget, kv_anchors;
    unsigned long long ring_steps, ring_drafted, ring_accepted, kv_evicted;
    double kv_read_bytes;
    int kv_read_steps;
    zl_gen_state state;
} zl_gen_timing;
/* Summed over the choices (prompt tokens counted once per distinct job). */
void zl_gen_timing_get(zl_gen *g, zl_gen_timing *t);
/* Token piece text for logprobs (lossy UTF-8 handled by the caller). */
const char *zl_gen_piece(zl_gen *g, int32_t id, char *buf, size_t cap, size_t *len);

#endif
