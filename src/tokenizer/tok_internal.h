/* tok_internal.h — what the tokenizer's .c files share and nobody else sees:
 * the zl_vocab layout, UTF-8 helpers and the GPT-2 byte <-> code point map. */
#ifndef ZL_TOK_INTERNAL_H
#define ZL_TOK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pretok.h"
#include "vocab.h"

/* Token attributes: token_type as a bit, plus what loading infers. */
enum {
    ZL_ATTR_UNDEFINED = 0,
    ZL_ATTR_UNKNOWN = 1 << 0,
    ZL_ATTR_UNUSED = 1 << 1,
    ZL_ATTR_NORMAL = 1 << 2,
    ZL_ATTR_CONTROL = 1 << 3,
    ZL_ATTR_USER_DEFINED = 1 << 4,
    ZL_ATTR_BYTE = 1 << 5,
    ZL_ATTR_LSTRIP = 1 << 6, /* eat whitespace before the token when cutting it out */
    ZL_ATTR_RSTRIP = 1 << 7, /* eat whitespace after it */
    ZL_ATTR_EOG = 1 << 8,
};

/* One BPE merge rule, stored in an open-addressing table keyed by the pair. */
typedef struct {
    uint64_t key; /* left << 32 | right; UINT64_MAX marks an empty slot */
    int32_t rank;
    int32_t result;
} zl_merge;

/* Trie over the special-token strings, used to find which of them occur in a
 * text in one pass.  Edges live in a hash table keyed by (node, byte). */
typedef struct {
    uint64_t *edge_key; /* node << 8 | byte, UINT64_MAX when empty */
    uint32_t *edge_child;
    uint32_t edge_mask;
    int32_t *node_special; /* index into zl_vocab.special ending here, or -1 */
    uint32_t n_nodes;
} zl_trie;

struct zl_vocab {
    zl_vocab_type kind;
    zl_pretok pre;
    char pre_name[48];
    int32_t n_tokens;
    uint32_t max_token_len;

    char *text;      /* every token string, each followed by a NUL */
    uint64_t *toff;  /* token i is text[toff[i] .. toff[i+1]-1) */
    float *score;
    uint16_t *attr;  /* ZL_ATTR_* */

    int32_t *lookup; /* open-addressing table of ids keyed by their string; -1 empty */
    uint32_t lookup_mask;

    zl_merge *merges; /* BPE only */
    uint32_t merge_mask;
    size_t n_merges;

    /* SPM: <0xXX> token for each byte (or the 1-byte token, or unk).
     * BPE: token of the mapped code point for each byte.  -1 when absent. */
    int32_t byte_tok[256];
    /* BPE: UTF-8 of each byte's GPT-2 code point (1 or 2 bytes) */
    char byte_enc[256][2];
    uint8_t byte_enc_len[256];

    int32_t *special; /* control/user-defined/unknown ids, longest string first */
    size_t n_special;
    zl_trie trie;

    char *piece;       /* decoded bytes of every token (control text included) */
    uint64_t *poff;

    int32_t bos, eos, eot, eom, unk, pad, sep;
    int32_t fim[ZL_FIM_N]; /* fill-in-the-middle roles (zl_fim_role), -1 when absent */
    bool add_bos, add_eos, add_space_prefix, ignore_merges;
};

static inline const char *zl_tok_str(const zl_vocab *v, int32_t id, size_t *len) {
    *len = (size_t)(v->toff[id + 1] - v->toff[id] - 1);
    return v->text + v->toff[id];
}

/* FNV-1a; good enough spread for token strings and cheap to compute. */
static inline uint64_t zl_tok_hash(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

static inline uint64_t zl_mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* Length of the UTF-8 sequence a lead byte announces, by its high nibble only
 * (what SentencePiece-style splitting uses; continuation bytes count as 1). */
static inline size_t zl_utf8_len(uint8_t b) {
    static const uint8_t len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len[b >> 4];
}

/* Decode one code point leniently (overlong forms and surrogates pass, as in
 * llama.cpp); a malformed or out-of-range sequence yields U+FFFD for one byte. */
uint32_t zl_utf8_decode(const uint8_t *s, size_t n, size_t *adv);
/* Encode cp (<= 0x10FFFF) into out[4]; returns the byte count. */
size_t zl_utf8_encode(uint32_t cp, char *out);

/* GPT-2's byte <-> printable code point bijection. */
uint32_t zl_byte_to_cp(uint8_t b);
/* The byte a code point stands for, or -1 if it is not in the map. */
int zl_cp_to_byte(uint32_t cp);

/* Follow the special-token trie from node by one byte: 0 if there is no such
 * edge; else *child and the index into v->special of a token ending there
 * (-1 if none).  The root is node 0. */
int zl_vocab_trie_step(const zl_vocab *v, uint32_t node, uint8_t byte, uint32_t *child, int32_t *special_index);

/* Build the decoded-piece cache (vocab.c calls it once tokens are known). */
int zl_vocab_build_pieces(zl_vocab *v, zl_err *err);

#endif
