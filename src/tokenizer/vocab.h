/* vocab.h — tokenizers built from GGUF metadata.
 *
 * Two families, chosen by tokenizer.ggml.model:
 *   "llama"  SentencePiece-style (SPM): spaces become U+2581, a space is
 *            prefixed to the text (tokenizer.ggml.add_space_prefix, default
 *            true), symbols merge pairwise by token score, and pieces that are
 *            not tokens fall back to <0xXX> byte tokens.
 *   "gpt2"   byte-level BPE: the text is split into words by the pre-tokenizer
 *            named in tokenizer.ggml.pre, each word's bytes are mapped to
 *            GPT-2's printable code points, and tokenizer.ggml.merges are
 *            applied by rank.
 * Both reproduce llama.cpp's tokenizer token for token.
 *
 * Special tokens: control, user-defined and unknown tokens are cut out of the
 * text before the tokenizer runs, longest token first.  User-defined tokens
 * are always cut out (as Hugging Face's added tokens are); control and unknown
 * tokens only when the caller asks for special-token parsing.
 *
 * A zl_vocab copies everything it needs: the zl_gguf may be closed after
 * zl_vocab_load returns.  A loaded vocab is read-only and may be shared by
 * threads; a zl_detok belongs to one stream. */
#ifndef ZL_VOCAB_H
#define ZL_VOCAB_H

#include <stddef.h>
#include <stdint.h>

#include "../base/err.h"
#include "../gguf/gguf.h"

typedef struct zl_vocab zl_vocab;

typedef enum { ZL_VOCAB_SPM = 1, ZL_VOCAB_BPE = 2 } zl_vocab_type;

/* tokenizer.ggml.token_type values. */
typedef enum {
    ZL_TOKEN_UNDEFINED = 0,
    ZL_TOKEN_NORMAL = 1,
    ZL_TOKEN_UNKNOWN = 2,
    ZL_TOKEN_CONTROL = 3,
    ZL_TOKEN_USER_DEFINED = 4,
    ZL_TOKEN_UNUSED = 5,
    ZL_TOKEN_BYTE = 6,
} zl_token_type;

/* Build the tokenizer from g's tokenizer.ggml.* keys.  Fails with a message
 * naming the key for missing or malformed metadata: unknown model or
 * pre-tokenizer (ZL_EUNSUP), arrays of the wrong type or length, duplicate
 * tokens, merges that are not "left right" or name tokens the vocabulary lacks,
 * special-token ids that add_bos/add_eos need but that are absent. */
int zl_vocab_load(zl_vocab **out, const zl_gguf *g, zl_err *err);
void zl_vocab_free(zl_vocab *v);

zl_vocab_type zl_vocab_kind(const zl_vocab *v);
int32_t zl_vocab_n_tokens(const zl_vocab *v);
/* tokenizer.ggml.pre as loaded ("default" when absent; "" for SPM). */
const char *zl_vocab_pre_name(const zl_vocab *v);
/* Special ids; -1 when the vocabulary has none. */
int32_t zl_vocab_bos(const zl_vocab *v);
int32_t zl_vocab_eos(const zl_vocab *v);
int32_t zl_vocab_eot(const zl_vocab *v);
int32_t zl_vocab_unk(const zl_vocab *v);
int32_t zl_vocab_pad(const zl_vocab *v);
/* Fill-in-the-middle tokens: from tokenizer.ggml.fim_*_token_id, else found
 * by their usual spellings (<|fim_prefix|>, <fim_prefix>, <PRE>, ...); a token
 * found by its text is control type, as llama.cpp makes it.  -1 when absent. */
typedef enum { ZL_FIM_PRE = 0, ZL_FIM_SUF, ZL_FIM_MID, ZL_FIM_PAD, ZL_FIM_REP, ZL_FIM_SEP, ZL_FIM_N } zl_fim_role;
int32_t zl_vocab_fim(const zl_vocab *v, zl_fim_role role);
/* Whether tokenizing with add_bos=1 prepends BOS / appends EOS. */
int zl_vocab_adds_bos(const zl_vocab *v);
int zl_vocab_adds_eos(const zl_vocab *v);
/* Whether SPM prefixes a space to the text (so detokenizers strip one). */
int zl_vocab_adds_space_prefix(const zl_vocab *v);

/* Raw vocabulary string of a token (not NUL-terminated; SPM spaces appear as
 * U+2581, BPE bytes as GPT-2 code points); NULL for an id out of range. */
const char *zl_token_text(const zl_vocab *v, int32_t id, size_t *len);
zl_token_type zl_token_kind(const zl_vocab *v, int32_t id);
/* Id of the token whose raw string is exactly text[0..len), or -1. */
int32_t zl_token_find(const zl_vocab *v, const char *text, size_t len);
/* End of generation: EOS, EOT and the end-of-turn tokens the vocabulary names
 * (<|im_end|>, <|eot_id|>, <end_of_turn>, <|endoftext|>, ...). */
int zl_token_is_eog(const zl_vocab *v, int32_t id);
/* Control or unknown: tokens that render as nothing unless asked. */
int zl_token_is_control(const zl_vocab *v, int32_t id);

/* Tokenize text[0..len) (any bytes; invalid UTF-8 is tolerated as llama.cpp
 * does).  add_bos: add the model's own framing tokens, i.e. BOS if
 * zl_vocab_adds_bos and EOS if zl_vocab_adds_eos (llama.cpp's add_special).
 * parse_special: also cut control/unknown token strings out of the text.
 * On success *ids (malloc'd, caller frees; NULL when *n is 0) holds *n ids. */
int zl_tokenize(const zl_vocab *v, const char *text, size_t len, int add_bos, int parse_special,
                int32_t **ids, size_t *n, zl_err *err);
/* As zl_tokenize; continuation != 0 means the text continues earlier text
 * (no SentencePiece space prefix on its first fragment). */
int zl_tokenize_ex(const zl_vocab *v, const char *text, size_t len, int add_bos, int parse_special, int continuation,
                   int32_t **ids, size_t *n, zl_err *err);

/* Decoded bytes of one token: SPM U+2581 -> ' ' and <0xXX> -> that byte; BPE
 * code points -> their bytes; user-defined tokens as written.  Control and
 * unknown tokens give "" unless special is set (then their text); unused and
 * undefined tokens always give "".  A piece may be part of a UTF-8 character.
 * Returns a pointer into the vocab (not NUL-terminated) or NULL for a bad id. */
const char *zl_token_piece(const zl_vocab *v, int32_t id, int special, size_t *len);

/* Detokenizer options. */
enum {
    ZL_DETOK_SPECIAL = 1,        /* render control/unknown tokens as their text */
    ZL_DETOK_STRIP_SPACE = 2,    /* drop the SPM dummy-prefix space: one leading ' ' of the
                                    first non-empty piece, if the vocab adds a space prefix */
    ZL_DETOK_REPLACE_INVALID = 4 /* emit U+FFFD for bytes that can never form UTF-8 */
};

/* Whole-sequence detokenization: *out is malloc'd and NUL-terminated (caller
 * frees); *len excludes the NUL. */
int zl_detokenize(const zl_vocab *v, const int32_t *ids, size_t n, unsigned flags, char **out,
                  size_t *len, zl_err *err);

/* Streaming detokenizer.  Feed ids one at a time; each call hands back only
 * whole UTF-8 characters: the trailing bytes of a character that the next
 * token may complete are held back.  flush returns what is still held (an
 * incomplete character, as is or as U+FFFD with ZL_DETOK_REPLACE_INVALID).
 * Returned pointers stay valid until the next call on the same zl_detok. */
typedef struct zl_detok zl_detok;
int zl_detok_new(zl_detok **out, const zl_vocab *v, unsigned flags, zl_err *err);
void zl_detok_free(zl_detok *d);
/* Forget held bytes and the first-piece state, as if just created. */
void zl_detok_reset(zl_detok *d);
int zl_detok_feed(zl_detok *d, int32_t id, const char **out, size_t *len, zl_err *err);
int zl_detok_flush(zl_detok *d, const char **out, size_t *len, zl_err *err);

#endif
