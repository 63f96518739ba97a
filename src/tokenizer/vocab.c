/* vocab.c — building a zl_vocab from GGUF metadata, and its lookups.
 *
 * Owns: validating tokenizer.ggml.* (every array's type and length, every
 * merge's tokens, every special id's range) and turning it into flat tables
 * the tokenizer can use without further checks: a string -> id hash, a
 * (left, right) -> merge hash, the special-token list and trie, and the
 * decoded bytes of every token.  Must never trust metadata it has not
 * checked, and never keep a pointer into the zl_gguf it was built from.
 *
 * Defaults and inferences mirror llama.cpp's loader, because tokenization
 * must agree with it: SPM defaults bos=1 eos=2 unk=0 and adds BOS; BPE
 * defaults bos=eos=11 (disabled when out of range); end-of-generation and
 * FIM tokens are recognised by their text and forced to control type. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

#include "tok_internal.h"

/* ---- UTF-8 and the GPT-2 byte map ---- */

uint32_t zl_utf8_decode(const uint8_t *s, size_t n, size_t *adv) {
    uint8_t b = s[0];
    size_t need;
    uint32_t cp;
    *adv = 1;
    if (b < 0x80) return b;
    if (!(b & 0x40)) return 0xFFFD;
    if (!(b & 0x20)) {
        need = 1;
        cp = b & 0x1F;
    } else if (!(b & 0x10)) {
        need = 2;
        cp = b & 0x0F;
    } else if (!(b & 0x08)) {
        need = 3;
        cp = b & 0x07;
    } else {
        return 0xFFFD;
    }
    if (need >= n) return 0xFFFD;
    for (size_t i = 1; i <= need; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0xFFFD;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if (cp > 0x10FFFF) return 0xFFFD;
    *adv = need + 1;
    return cp;
}

size_t zl_utf8_encode(uint32_t cp, char *out) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* GPT-2 keeps the printable Latin-1 bytes as their own code points and moves
 * the other 68 to U+0100.. in byte order: 0x00-0x20 (33 of them), 0x7F-0xA0
 * (34) and the soft hyphen 0xAD. */
uint32_t zl_byte_to_cp(uint8_t b) {
    if (b <= 0x20) return 256u + b;
    if (b >= 0x7F && b <= 0xA0) return 256u + 33 + (b - 0x7Fu);
    if (b == 0xAD) return 256u + 67;
    return b;
}

int zl_cp_to_byte(uint32_t cp) {
    if (cp < 256) return zl_byte_to_cp((uint8_t)cp) == cp ? (int)cp : -1;
    if (cp < 256 + 33) return (int)(cp - 256);
    if (cp < 256 + 67) return (int)(0x7F + cp - 256 - 33);
    if (cp == 256 + 67) return 0xAD;
    return -1;
}

/* ---- lookups ---- */

int32_t zl_token_find(const zl_vocab *v, const char *s, size_t n) {
    if (!v || !s || n == 0 || n > v->max_token_len) return -1; /* no token is empty */
    for (uint64_t i = zl_tok_hash(s, n) & v->lookup_mask;; i = (i + 1) & v->lookup_mask) {
        int32_t id = v->lookup[i];
        if (id < 0) return -1;
        size_t len;
        const char *t = zl_tok_str(v, id, &len);
        if (len == n && memcmp(t, s, n) == 0) return id;
    }
}

static bool valid_id(const zl_vocab *v, int32_t id) { return v && id >= 0 && id < v->n_tokens; }

zl_vocab_type zl_vocab_kind(const zl_vocab *v) { return v->kind; }
int32_t zl_vocab_n_tokens(const zl_vocab *v) { return v->n_tokens; }
const char *zl_vocab_pre_name(const zl_vocab *v) { return v->pre_name; }
int32_t zl_vocab_bos(const zl_vocab *v) { return v->bos; }
int32_t zl_vocab_eos(const zl_vocab *v) { return v->eos; }
int32_t zl_vocab_eot(const zl_vocab *v) { return v->eot; }
int32_t zl_vocab_unk(const zl_vocab *v) { return v->unk; }
int32_t zl_vocab_pad(const zl_vocab *v) { return v->pad; }
int32_t zl_vocab_fim(const zl_vocab *v, zl_fim_role role) { return role >= 0 && role < ZL_FIM_N ? v->fim[role] : -1; }
int zl_vocab_adds_bos(const zl_vocab *v) { return v->add_bos; }
int zl_vocab_adds_eos(const zl_vocab *v) { return v->add_eos; }
int zl_vocab_adds_space_prefix(const zl_vocab *v) { return v->add_space_prefix; }

const char *zl_token_text(const zl_vocab *v, int32_t id, size_t *len) {
    if (!valid_id(v, id)) return NULL;
    return zl_tok_str(v, id, len);
}

zl_token_type zl_token_kind(const zl_vocab *v, int32_t id) {
    if (!valid_id(v, id)) return ZL_TOKEN_UNDEFINED;
    unsigned a = v->attr[id];
    if (a & ZL_ATTR_CONTROL) return ZL_TOKEN_CONTROL;
    if (a & ZL_ATTR_USER_DEFINED) return ZL_TOKEN_USER_DEFINED;
    if (a & ZL_ATTR_UNKNOWN) return ZL_TOKEN_UNKNOWN;
    if (a & ZL_ATTR_BYTE) return ZL_TOKEN_BYTE;
    if (a & ZL_ATTR_UNUSED) return ZL_TOKEN_UNUSED;
    if (a & ZL_ATTR_NORMAL) return ZL_TOKEN_NORMAL;
    return ZL_TOKEN_UNDEFINED;
}

int zl_token_is_eog(const zl_vocab *v, int32_t id) { return valid_id(v, id) && (v->attr[id] & ZL_ATTR_EOG); }

int zl_token_is_control(const zl_vocab *v, int32_t id) {
    return valid_id(v, id) && (v->attr[id] & (ZL_ATTR_CONTROL | ZL_ATTR_UNKNOWN));
}

const char *zl_token_piece(const zl_vocab *v, int32_t id, int special, size_t *len) {
    if (!valid_id(v, id)) return NULL;
    if (!special && (v->attr[id] & (ZL_ATTR_CONTROL | ZL_ATTR_UNKNOWN))) {
        *len = 0;
        return "";
    }
    *len = (size_t)(v->poff[id + 1] - v->poff[id]);
    return v->piece + v->poff[id];
}

/* ---- loading ---- */

static uint32_t pow2_at_least(uint64_t n) {
    uint32_t c = 16;
    while (c < n) c <<= 1;
    return c;
}

static int load_strings(zl_vocab *v, const zl_gguf_kv *kv, zl_err *err) {
    uint64_t n = kv->v.arr.n;
    if (n == 0) return zl_errf(err, ZL_EFORMAT, "tokenizer.ggml.tokens is empty");
    if (n > (uint64_t)INT32_MAX / 4) return zl_errf(err, ZL_EFORMAT, "tokenizer.ggml.tokens has %llu entries", (unsigned long long)n);
    v->n_tokens = (int32_t)n;
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t len = kv->v.arr.strs[i].len;
        if (len > UINT32_MAX) return zl_errf(err, ZL_EFORMAT, "tokenizer.ggml.tokens[%llu] is %llu bytes long", (unsigned long long)i, (unsigned long long)len);
        total += (len ? len : 24) + 1;
    }
    v->text = malloc(total);
    v->toff = malloc((n + 1) * sizeof *v->toff);
    if (!v->text || !v->toff) return zl_errf(err, ZL_ENOMEM, "out of memory for %llu token strings", (unsigned long long)n);
    uint64_t off = 0;
    for (uint64_t i = 0; i < n; i++) {
        zl_str s = kv->v.arr.strs[i];
        v->toff[i] = off;
        if (s.len) {
            memcpy(v->text + off, s.ptr, s.len);
            off += s.len;
        } else { /* llama.cpp's stand-in keeps ids of empty strings distinct */
            off += (uint64_t)snprintf(v->text + off, 24, "[EMPTY_%llu]", (unsigned long long)i);
        }
        v->text[off++] = '\0';
        uint32_t len = (uint32_t)(off - 1 - v->toff[i]);
        if (len > v->max_token_len) v->max_token_len = len;
    }
    v->toff[n] = off;
    return 0;
}

static int build_lookup(zl_vocab *v, zl_err *err) {
    uint32_t cap = pow2_at_least((uint64_t)v->n_tokens * 2);
    v->lookup = malloc((size_t)cap * sizeof *v->lookup);
    if (!v->lookup) return zl_errf(err, ZL_ENOMEM, "out of memory for the token table");
    memset(v->lookup, 0xFF, (size_t)cap * sizeof *v->lookup);
    v->lookup_mask = cap - 1;
    for (int32_t id = 0; id < v->n_tokens; id++) {
        size_t len;
        const char *s = zl_tok_str(v, id, &len);
        uint64_t i = zl_tok_hash(s, len) & v->lookup_mask;
        for (; v->lookup[i] >= 0; i = (i + 1) & v->lookup_mask) {
            size_t l2;
            const char *t = zl_tok_str(v, v->lookup[i], &l2);
            if (l2 == len && memcmp(s, t, len) == 0)
                return zl_errf(err, ZL_EFORMAT, "duplicate token in vocabulary: '%.*s' has ids %d and %d",
                               (int)(len > 64 ? 64 : len), s, v->lookup[i], id);
        }
        v->lookup[i] = id;
    }
    return 0;
}

static int load_scores_and_types(zl_vocab *v, const zl_gguf *g, zl_err *err) {
    size_t n = (size_t)v->n_tokens;
    v->score = calloc(n, sizeof *v->score);
    v->attr = malloc(n * sizeof *v->attr);
    if (!v->score || !v->attr) return zl_errf(err, ZL_ENOMEM, "out of memory for token attributes");
    const zl_gguf_kv *kv = zl_gguf_find(g, "tokenizer.ggml.scores");
    if (kv) {
        if (kv->type != ZL_GGUF_ARRAY || (kv->v.arr.type != ZL_GGUF_F32 && kv->v.arr.type != ZL_GGUF_I32))
            return zl_errf(err, ZL_EFORMAT, "tokenizer.ggml.scores must be an array of f32 or i32");
        if (kv->v.arr.n < n)
            return zl_errf(err, ZL_EFORMAT, "tokenizer.ggml.scores has %llu entries for %zu tokens", (unsigned long long)kv->v.arr.n, n);
        for (size_t i = 0; i < n; i++) v->score[i] = (float)zl_gguf_arr_f64(kv, i);
    }
    for (size_t i = 0; i < n; i++) v->attr[i] = ZL_ATTR_NORMAL;
    kv = zl_gguf_find(g, "tokenizer.ggml.token_type");
    if (kv) {
        if (kv->type != ZL_GGUF_ARRAY || kv->v.arr.type != ZL_GGUF_I32)
            return zl_errf(err, ZL_EFORMAT, "tokenizer.ggml.token_type must be an array of i32");
        if (kv->v.arr.n < n)
            return zl_errf(err, ZL_EFORMAT, "tokenizer.ggml.token_type has %llu entries for %zu tokens", (unsigned long long)kv->v.arr.n, n);
        static const uint16_t by_type[] = {ZL_ATTR_UNDEFINED, ZL_ATTR_NORMAL, ZL_ATTR_UNKNOWN, ZL_ATTR_CONTROL,
                                           ZL_ATTR_USER_DEFINED, ZL_ATTR_UNUSED, ZL_ATTR_BYTE};
        for (size_t i = 0; i < n; i++) {
            int64_t t = zl_gguf_arr_i64(kv, i);
            v->attr[i] = (t >= 0 && t <= 6) ? by_type[t] : ZL_ATTR_UNDEFINED;
        }
    }
    return 0;
}

static int merge_put(zl_vocab *v, int32_t left, int32_t right, int32_t rank, int32_t result) {
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    uint64_t i = zl_mix64(key) & v->merge_mask;
    for (; v->merges[i].key != UINT64_MAX; i = (i + 1) & v->merge_mask)
        if (v->merges[i].key == key) return 0; /* a repeated pair keeps its first rank */
    v->merges[i] = (zl_merge){key, rank, result};
    v->n_merges++;
    return 0;
}

static int load_merges(zl_vocab *v, const zl_gguf *g, zl_err *err) {
    const zl_gguf_kv *kv = zl_gguf_find(g, "tokenizer.ggml.merges");
    if (!kv) return zl_errf(err, ZL_EFORMAT, "missing tokenizer.ggml.merges (required for a gpt2 tokenizer)");
    if (kv->type != ZL_GGUF_ARRAY || kv->v.arr.type != ZL_GGUF_STRING)
        return zl_errf(err, ZL_EFORMAT, "tokenizer.ggml.merges must be an array of strings");
    uint64_t n = kv->v.arr.n;
    if (n > (uint64_t)INT32_MAX / 4) return zl_errf(err, ZL_EFORMAT, "tokenizer.ggml.merges has %llu entries", (unsigned long long)n);
    uint32_t cap = pow2_at_least(n * 2);
    v->merges = malloc((size_t)cap * sizeof *v->merges);
    char *joined = malloc((size_t)v->max_token_len + 1);
    if (!v->merges || !joined) {
        free(joined);
        return zl_errf(err, ZL_ENOMEM, "out of memory for %llu merges", (unsigned long long)n);
    }
    memset(v->merges, 0xFF, (size_t)cap * sizeof *v->merges);
    v->merge_mask = cap - 1;
    int rc = 0;
    for (uint64_t i = 0; i < n && !rc; i++) {
        zl_str s = kv->v.arr.strs[i];
        /* "left right", split at the first space after the first byte */
        const char *sp = s.len > 1 ? memchr(s.ptr + 1, ' ', s.len - 1) : NULL;
        if (!sp) {
            rc = zl_errf(err, ZL_EFORMAT, "tokenizer.ggml.merges[%llu] '%.*s' is not \"left right\"",
                         (unsigned long long)i, (int)(s.len > 64 ? 64 : s.len), s.ptr);
            break;
        }
        size_t nl = (size_t)(sp - s.ptr), nr = s.len - nl - 1;
        int32_t left = zl_token_find(v, s.ptr, nl), right = zl_token_find(v, sp + 1, nr);
        int32_t result = -1;
        if (left >= 0 && right >= 0 && nl + nr <= v->max_token_len) {
            memcpy(joined, s.ptr, nl);
            memcpy(joined + nl, sp + 1, nr);
            result = zl_token_find(v, joined, nl + nr);
        }
        if (left < 0 || right < 0 || result < 0)
            rc = zl_errf(err, ZL_EFORMAT, "tokenizer.ggml.merges[%llu] '%.*s' names %s that is not in the vocabulary",
                         (unsigned long long)i, (int)(s.len > 64 ? 64 : s.len), s.ptr,
                         left < 0 ? "a left token" : right < 0 ? "a right token" : "a merged token");
        else
            merge_put(v, left, right, (int32_t)i, result);
    }
    free(joined);
    return rc;
}

/* An optional integer id key: absent, or out of range, keeps *id. */
static int opt_id(const zl_gguf *g, const char *key, int32_t *id, int32_t n, zl_err *err) {
    const zl_gguf_kv *kv = zl_gguf_find(g, key);
    if (!kv) return 0;
    int64_t x;
    switch (kv->type) {
    case ZL_GGUF_U8: case ZL_GGUF_U16: case ZL_GGUF_U32: case ZL_GGUF_U64:
        x = kv->v.u > (uint64_t)INT32_MAX ? -1 : (int64_t)kv->v.u;
        break;
    case ZL_GGUF_I8: case ZL_GGUF_I16: case ZL_GGUF_I32: case ZL_GGUF_I64:
        x = kv->v.i;
        break;
    default:
        return zl_errf(err, ZL_EFORMAT, "%s must be an integer, not %s", key, zl_gguf_vtype_name(kv->type));
    }
    if (x >= 0 && x < n) *id = (int32_t)x;
    return 0;
}

static int opt_bool(const zl_gguf *g, const char *key, bool *out, zl_err *err) {
    const zl_gguf_kv *kv = zl_gguf_find(g, key);
    if (!kv) return 0;
    if (kv->type != ZL_GGUF_BOOL) return zl_errf(err, ZL_EFORMAT, "%s must be a bool, not %s", key, zl_gguf_vtype_name(kv->type));
    *out = kv->v.u != 0;
    return 0;
}

/* Find the first of `texts` in the vocabulary; -1 if none. */
static int32_t find_any(const zl_vocab *v, const char *const *texts) {
    for (; *texts; texts++) {
        int32_t id = zl_token_find(v, *texts, strlen(*texts));
        if (id >= 0) return id;
    }
    return -1;
}

/* Tokens found by their text are also forced to control type, as llama.cpp
 * does: a converter that left <|im_end|> "normal" would otherwise print it. */
static void mark_eog(zl_vocab *v, int32_t id, bool by_text) {
    if (id < 0) return;
    v->attr[id] |= ZL_ATTR_EOG;
    if (by_text) v->attr[id] |= ZL_ATTR_CONTROL;
}

static void force_control(zl_vocab *v, int32_t id) {
    if (id >= 0) v->attr[id] |= ZL_ATTR_CONTROL;
}

static int32_t find_text(const zl_vocab *v, const char *text) { return zl_token_find(v, text, strlen(text)); }

/* The fill-in-the-middle roles: each has an id key (and for prefix, suffix
 * and middle a deprecated one, read after it so that it wins, as in
 * llama.cpp); without a valid id the first token spelled like one of the
 * role's texts takes it and is forced to control type.  Pad, repo and
 * separator also end generation. */
#define FIM_BEGIN "<\xef\xbd\x9c" "fim\xe2\x96\x81" /* <｜fim▁ (DeepSeek) */
static int infer_fim(zl_vocab *v, const zl_gguf *g, zl_err *err) {
    static const char *const pre[] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", FIM_BEGIN "begin\xef\xbd\x9c>",
                                      "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL};
    static const char *const suf[] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", FIM_BEGIN "hole\xef\xbd\x9c>",
                                      "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL};
    static const char *const mid[] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", FIM_BEGIN "end\xef\xbd\x9c>",
                                      "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL};
    static const char *const pad[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL};
    static const char *const rep[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL};
    static const char *const sep[] = {"<|file_sep|>", NULL};
    static const struct { const char *key, *old_key; const char *const *texts; bool eog; } roles[ZL_FIM_N] = {
        [ZL_FIM_PRE] = {"tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id", pre, false},
        [ZL_FIM_SUF] = {"tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id", suf, false},
        [ZL_FIM_MID] = {"tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id", mid, false},
        [ZL_FIM_PAD] = {"tokenizer.ggml.fim_pad_token_id", NULL, pad, true},
        [ZL_FIM_REP] = {"tokenizer.ggml.fim_rep_token_id", NULL, rep, true},
        [ZL_FIM_SEP] = {"tokenizer.ggml.fim_sep_token_id", NULL, sep, true},
    };
    for (int r = 0; r < ZL_FIM_N; r++) {
        int32_t id = -1;
        int rc = opt_id(g, roles[r].key, &id, v->n_tokens, err);
        if (!rc && roles[r].old_key) rc = opt_id(g, roles[r].old_key, &id, v->n_tokens, err);
        if (rc) return rc;
        if (id < 0 && (id = find_any(v, roles[r].texts)) >= 0) force_control(v, id);
        v->fim[r] = id;
        if (roles[r].eog && id >= 0) v->attr[id] |= ZL_ATTR_EOG;
    }
    return 0;
}
#undef FIM_BEGIN

/* End-of-generation tokens named by text (the converters do not always mark
 * them), after llama.cpp's lists, and its fix-ups of two tokenizer families
 * whose usual end tokens are ordinary text there. */
static void infer_eog(zl_vocab *v) {
    static const char *const eot[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                      "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
                                      "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
                                      "<end_of_utterance>", NULL};
    static const char *const eom[] = {"<|eom_id|>", NULL};
    static const char *const eog[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
                                      "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>",
                                      "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>",
                                      "<turn|>", "<|tool_response>",
                                      "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
                                      "[e~[", NULL};
    if (v->eot < 0) mark_eog(v, v->eot = find_any(v, eot), true);
    if (v->eom < 0) mark_eog(v, v->eom = find_any(v, eom), true);
    for (const char *const *t = eog; *t; t++) mark_eog(v, find_text(v, *t), true);
    /* gpt-oss: channel markers are rendered, never hidden */
    static const char *const shown[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", NULL};
    for (const char *const *t = shown; *t; t++) {
        int32_t id = find_text(v, *t);
        if (id >= 0) v->attr[id] = ZL_ATTR_USER_DEFINED;
    }
    mark_eog(v, v->eos, false);
    mark_eog(v, v->eot, false);
    mark_eog(v, v->eom, false);
    /* o200k_harmony / solar-open: with <|return|> and <|call|> (or <|calls|>
     * and <|flush|>) ending generation, <|end|> only separates messages */
    bool is_eog[5] = {false};
    static const char *const harmony[5] = {"<|return|>", "<|call|>", "<|calls|>", "<|flush|>", "<|end|>"};
    int32_t ids[5];
    for (int i = 0; i < 5; i++) {
        ids[i] = find_text(v, harmony[i]);
        is_eog[i] = ids[i] >= 0 && (v->attr[ids[i]] & ZL_ATTR_EOG);
    }
    bool call = is_eog[1] || is_eog[2];
    if (is_eog[4] && call && (is_eog[0] || is_eog[3])) v->attr[ids[4]] = ZL_ATTR_USER_DEFINED;
    /* gemma4 / plamo: </s> is an ordinary token where these end generation */
    int32_t s = find_text(v, "</s>"), tr = find_text(v, "<|tool_response>"), pe = find_text(v, "<|plamo:eos|>");
    bool marker = (tr >= 0 && (v->attr[tr] & ZL_ATTR_EOG)) || (pe >= 0 && (v->attr[pe] & ZL_ATTR_EOG));
    if (marker && s >= 0 && (v->attr[s] & ZL_ATTR_EOG)) v->attr[s] = ZL_ATTR_NORMAL;
}

/* llama.cpp strips whitespace after Phi-3's special tokens (by model name). */
static void phi3_rstrip(zl_vocab *v, const zl_gguf *g) {
    zl_str name;
    char buf[128];
    if (zl_gguf_get_str(g, "general.name", &name)) return;
    zl_str_copy(name, buf, sizeof buf);
    for (char *p = buf; *p; p++) *p = (char)tolower((unsigned char)*p);
    if (!strstr(buf, "phi-3") && !strstr(buf, "phi3")) return;
    for (size_t i = 0; i < v->n_special; i++) v->attr[v->special[i]] |= ZL_ATTR_RSTRIP;
    int32_t id = zl_token_find(v, "</s>", 4);
    if (id >= 0) v->attr[id] |= ZL_ATTR_RSTRIP;
    static const char *const keep[] = {"<unk>", "<s>", "<|endoftext|>"};
    for (size_t i = 0; i < 3; i++) {
        id = zl_token_find(v, keep[i], strlen(keep[i]));
        if (id >= 0) v->attr[id] &= (uint16_t)~ZL_ATTR_RSTRIP;
    }
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Slot of edge (node, byte): where it is, or the empty slot it would take. */
static uint64_t trie_slot(const zl_trie *t, uint32_t node, uint8_t byte) {
    uint64_t key = (uint64_t)node << 8 | byte;
    uint64_t i = zl_mix64(key) & t->edge_mask;
    while (t->edge_key[i] != UINT64_MAX && t->edge_key[i] != key) i = (i + 1) & t->edge_mask;
    return i;
}

/* Child of node by byte, created if missing (room was reserved up front). */
static uint32_t trie_add(zl_trie *t, uint32_t node, uint8_t byte) {
    uint64_t i = trie_slot(t, node, byte);
    if (t->edge_key[i] == UINT64_MAX) {
        t->edge_key[i] = (uint64_t)node << 8 | byte;
        t->edge_child[i] = t->n_nodes;
        t->node_special[t->n_nodes++] = -1;
    }
    return t->edge_child[i];
}

int zl_vocab_trie_step(const zl_vocab *v, uint32_t node, uint8_t byte, uint32_t *child, int32_t *special_index) {
    const zl_trie *t = &v->trie;
    uint64_t i = trie_slot(t, node, byte);
    if (t->edge_key[i] == UINT64_MAX) return 0;
    *child = t->edge_child[i];
    *special_index = t->node_special[*child];
    return 1;
}

static int build_special(zl_vocab *v, zl_err *err) {
    size_t n = 0, bytes = 0;
    for (int32_t id = 0; id < v->n_tokens; id++)
        if (v->attr[id] & (ZL_ATTR_CONTROL | ZL_ATTR_USER_DEFINED | ZL_ATTR_UNKNOWN)) {
            n++;
            bytes += (size_t)(v->toff[id + 1] - v->toff[id] - 1);
        }
    if (bytes > (1u << 28)) return zl_errf(err, ZL_EFORMAT, "special tokens total %zu bytes", bytes);
    v->special = malloc((n ? n : 1) * sizeof *v->special);
    if (!v->special) return zl_errf(err, ZL_ENOMEM, "out of memory for special tokens");
    /* longest string first, ties by id: sort keys (~length << 32 | id) */
    uint64_t *keys = malloc((n ? n : 1) * sizeof *keys);
    if (!keys) return zl_errf(err, ZL_ENOMEM, "out of memory for special tokens");
    for (int32_t id = 0; id < v->n_tokens; id++)
        if (v->attr[id] & (ZL_ATTR_CONTROL | ZL_ATTR_USER_DEFINED | ZL_ATTR_UNKNOWN))
            keys[v->n_special++] = (uint64_t)(UINT32_MAX - (uint32_t)(v->toff[id + 1] - v->toff[id])) << 32 | (uint32_t)id;
    qsort(keys, v->n_special, sizeof *keys, cmp_u64);
    for (size_t i = 0; i < v->n_special; i++) v->special[i] = (int32_t)(keys[i] & 0xFFFFFFFFu);
    free(keys);

    zl_trie *t = &v->trie;
    uint32_t max_nodes = (uint32_t)bytes + 1;
    t->edge_mask = pow2_at_least((uint64_t)max_nodes * 2) - 1;
    t->edge_key = malloc(((size_t)t->edge_mask + 1) * sizeof *t->edge_key);
    t->edge_child = malloc(((size_t)t->edge_mask + 1) * sizeof *t->edge_child);
    t->node_special = malloc((size_t)max_nodes * sizeof *t->node_special);
    if (!t->edge_key || !t->edge_child || !t->node_special) return zl_errf(err, ZL_ENOMEM, "out of memory for the special-token trie");
    memset(t->edge_key, 0xFF, ((size_t)t->edge_mask + 1) * sizeof *t->edge_key);
    t->n_nodes = 1;
    t->node_special[0] = -1;
    for (size_t i = 0; i < v->n_special; i++) {
        size_t len;
        const char *s = zl_tok_str(v, v->special[i], &len);
        uint32_t node = 0;
        for (size_t j = 0; j < len; j++) node = trie_add(t, node, (uint8_t)s[j]);
        if (node && t->node_special[node] < 0) t->node_special[node] = (int32_t)i;
    }
    return 0;
}

static void find_byte_tokens(zl_vocab *v) {
    for (unsigned b = 0; b < 256; b++) {
        char buf[8];
        int32_t id;
        if (v->kind == ZL_VOCAB_SPM) {
            snprintf(buf, sizeof buf, "<0x%02X>", b);
            id = zl_token_find(v, buf, 6);
            if (id < 0) {
                buf[0] = (char)b;
                id = zl_token_find(v, buf, 1);
            }
        } else {
            size_t n = zl_utf8_encode(zl_byte_to_cp((uint8_t)b), buf);
            memcpy(v->byte_enc[b], buf, n);
            v->byte_enc_len[b] = (uint8_t)n;
            id = zl_token_find(v, buf, n);
        }
        v->byte_tok[b] = id;
    }
}

static int load_kind(zl_vocab *v, const zl_gguf *g, zl_err *err) {
    zl_str model;
    const zl_gguf_kv *kv = zl_gguf_find(g, "tokenizer.ggml.model");
    if (!kv) return zl_errf(err, ZL_EFORMAT, "missing tokenizer.ggml.model");
    if (kv->type != ZL_GGUF_STRING) return zl_errf(err, ZL_EFORMAT, "tokenizer.ggml.model must be a string");
    model = kv->v.s;
    if (zl_str_eq(model, "llama")) {
        v->kind = ZL_VOCAB_SPM;
        v->pre = ZL_PRE_NONE;
        v->add_bos = v->add_space_prefix = true;
        v->bos = 1, v->eos = 2, v->unk = 0;
        return 0;
    }
    if (!zl_str_eq(model, "gpt2")) {
        char buf[64];
        return zl_errf(err, ZL_EUNSUP, "unknown tokenizer.ggml.model '%s' (supported: llama, gpt2)",
                       zl_str_copy(model, buf, sizeof buf));
    }
    v->kind = ZL_VOCAB_BPE;
    v->bos = v->eos = 11;
    zl_pretok_info info = {ZL_PRE_DEFAULT, false, false};
    strcpy(v->pre_name, "default");
    kv = zl_gguf_find(g, "tokenizer.ggml.pre");
    if (kv) {
        if (kv->type != ZL_GGUF_STRING) return zl_errf(err, ZL_EFORMAT, "tokenizer.ggml.pre must be a string");
        zl_str_copy(kv->v.s, v->pre_name, sizeof v->pre_name);
        if (kv->v.s.len >= sizeof v->pre_name || zl_pretok_lookup(kv->v.s.ptr, kv->v.s.len, &info))
            return zl_errf(err, ZL_EUNSUP, "unknown pre-tokenizer tokenizer.ggml.pre = '%s'", v->pre_name);
    }
    v->pre = info.pre;
    v->ignore_merges = info.ignore_merges;
    v->add_bos = info.add_bos;
    return 0;
}

static int load_special_ids(zl_vocab *v, const zl_gguf *g, zl_err *err) {
    int32_t *defaults[] = {&v->bos, &v->eos, &v->unk};
    for (size_t i = 0; i < 3; i++)
        if (*defaults[i] >= v->n_tokens) *defaults[i] = -1;
    static const struct { const char *key; size_t off; } keys[] = {
        {"tokenizer.ggml.bos_token_id", offsetof(zl_vocab, bos)},
        {"tokenizer.ggml.eos_token_id", offsetof(zl_vocab, eos)},
        {"tokenizer.ggml.eot_token_id", offsetof(zl_vocab, eot)},
        {"tokenizer.ggml.eom_token_id", offsetof(zl_vocab, eom)},
        {"tokenizer.ggml.unknown_token_id", offsetof(zl_vocab, unk)},
        {"tokenizer.ggml.seperator_token_id", offsetof(zl_vocab, sep)},
        {"tokenizer.ggml.padding_token_id", offsetof(zl_vocab, pad)},
    };
    int rc;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if ((rc = opt_id(g, keys[i].key, (int32_t *)((char *)v + keys[i].off), v->n_tokens, err))) return rc;
    if ((rc = opt_bool(g, "tokenizer.ggml.add_bos_token", &v->add_bos, err)) ||
        (rc = opt_bool(g, "tokenizer.ggml.add_eos_token", &v->add_eos, err)) ||
        (rc = opt_bool(g, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix, err)))
        return rc;
    if (v->add_bos && v->bos < 0)
        return zl_errf(err, ZL_EFORMAT, "tokenizer.ggml.add_bos_token is true, but there is no valid tokenizer.ggml.bos_token_id");
    if (v->add_eos && v->eos < 0)
        return zl_errf(err, ZL_EFORMAT, "tokenizer.ggml.add_eos_token is true, but there is no valid tokenizer.ggml.eos_token_id");
    return 0;
}

int zl_vocab_load(zl_vocab **out, const zl_gguf *g, zl_err *err) {
    *out = NULL;
    if (!g) return zl_errf(err, ZL_EINVAL, "zl_vocab_load: no gguf");
    zl_vocab *v = calloc(1, sizeof *v);
    if (!v) return zl_errf(err, ZL_ENOMEM, "out of memory for the vocabulary");
    v->bos = v->eos = v->eot = v->eom = v->unk = v->pad = v->sep = -1;
    int rc = load_kind(v, g, err);
    const zl_gguf_kv *toks = NULL;
    if (!rc) {
        toks = zl_gguf_find(g, "tokenizer.ggml.tokens");
        if (!toks)
            rc = zl_errf(err, ZL_EFORMAT, "missing tokenizer.ggml.tokens");
        else if (toks->type != ZL_GGUF_ARRAY || toks->v.arr.type != ZL_GGUF_STRING)
            rc = zl_errf(err, ZL_EFORMAT, "tokenizer.ggml.tokens must be an array of strings");
    }
    if (!rc) rc = load_strings(v, toks, err);
    if (!rc) rc = build_lookup(v, err);
    if (!rc) rc = load_scores_and_types(v, g, err);
    if (!rc && v->kind == ZL_VOCAB_BPE) rc = load_merges(v, g, err);
    if (!rc) rc = load_special_ids(v, g, err);
    if (!rc) rc = infer_fim(v, g, err);
    if (!rc) {
        infer_eog(v);
        rc = build_special(v, err);
    }
    if (!rc) {
        phi3_rstrip(v, g);
        find_byte_tokens(v);
        rc = zl_vocab_build_pieces(v, err);
    }
    if (rc) {
        zl_err_prefix(err, "loading tokenizer");
        zl_vocab_free(v);
        return rc;
    }
    *out = v;
    return 0;
}

void zl_vocab_free(zl_vocab *v) {
    if (!v) return;
    free(v->text);
    free(v->toff);
    free(v->score);
    free(v->attr);
    free(v->lookup);
    free(v->merges);
    free(v->special);
    free(v->trie.edge_key);
    free(v->trie.edge_child);
    free(v->trie.node_special);
    free(v->piece);
    free(v->poff);
    free(v);
}
