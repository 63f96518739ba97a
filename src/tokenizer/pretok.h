/* pretok.h — byte-level BPE pre-tokenizers: splitting text into words.
 *
 * Each pre-tokenizer is the sequence of regular expressions its model's
 * tokenizer.json names.  A regex pass cuts every current word into its
 * matches and the gaps between them (both become words), and the next pass
 * works on those words; this is how llama.cpp applies a regex list, and the
 * hand-written matchers in pretok.c reproduce its results exactly. */
#ifndef ZL_PRETOK_H
#define ZL_PRETOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    ZL_PRE_NONE = 0,      /* SPM: no pre-tokenizer */
    ZL_PRE_DEFAULT,       /* llama.cpp's fallback regex list */
    ZL_PRE_GPT2,          /* gpt-2, mpt, olmo, ... */
    ZL_PRE_LLAMA3,        /* llama3 / llama-bpe and relatives */
    ZL_PRE_QWEN2,         /* llama3's regex with single digits */
    ZL_PRE_STARCODER,     /* starcoder, refact, smollm, command-r, ... */
    ZL_PRE_FALCON,
    ZL_PRE_DEEPSEEK_LLM,
    ZL_PRE_DEEPSEEK_CODER,
    ZL_PRE_BLOOM,         /* bloom, poro-chat, gpt3-finnish */
    ZL_PRE_VIKING,
} zl_pretok;

typedef struct {
    zl_pretok pre;
    bool ignore_merges; /* a word that is itself a token is emitted whole */
    bool add_bos;       /* default for add_bos_token */
} zl_pretok_info;

/* Map a tokenizer.ggml.pre name to its pre-tokenizer; -1 if unknown. */
int zl_pretok_lookup(const char *name, size_t len, zl_pretok_info *out);

/* Word lengths in code points, growing as needed. */
typedef struct {
    uint32_t *len;
    size_t n, cap;
} zl_words;

/* Split cps[0..n) into words appended to *out (reset first); uses *tmp as
 * scratch.  Returns 0 or -1 when memory runs out. */
int zl_pretok_split(zl_pretok pre, const uint32_t *cps, size_t n, zl_words *out, zl_words *tmp);
void zl_words_free(zl_words *w);

#endif
