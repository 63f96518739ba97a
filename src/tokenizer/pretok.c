/* pretok.c — hand-written matchers for the pre-tokenizer regexes.
 *
 * Owns: turning a code point sequence into word boundaries.  No regex engine:
 * each regex is one function that, given a start position, returns the length
 * of the match the regex would find there under ECMAScript rules (first
 * alternative that succeeds, greedy quantifiers with backtracking), or 0.
 * The pass driver then behaves like a regex iterator: it scans left to right,
 * and every match and every gap between matches becomes a word.
 *
 * Character classes follow llama.cpp, which is what we must agree with:
 * \s is White_Space, \p{L}/\p{N}/\p{P} are the major general categories, and
 * the literal classes of the deepseek patterns never contain a non-ASCII
 * whitespace character (llama.cpp rewrites those to U+000B before matching).
 *
 * Every matcher is linear in what it consumes and O(1) when it fails at a
 * position, except the "\s+$" pass, which is done per word instead; so
 * splitting is linear in the text. */
#include "pretok.h"

#include <stdlib.h>
#include <string.h>

#include "ucd.h"

static inline unsigned uflags(uint32_t c) { return c < 128 ? zl_ucd_ascii[c] : zl_ucd_flags(c); }
static inline unsigned ucat(uint32_t c) { return uflags(c) & ZL_UCD_CAT_MASK; }
static bool is_ws(uint32_t c) { return (uflags(c) & ZL_UCD_WS) != 0; }
static bool is_L(uint32_t c) { return ucat(c) == ZL_UCD_L; }
static bool is_N(uint32_t c) { return ucat(c) == ZL_UCD_N; }
static bool is_P(uint32_t c) { return ucat(c) == ZL_UCD_P; }
static bool is_crlf(uint32_t c) { return c == '\r' || c == '\n'; }

/* [^\s\p{L}\p{N}] */
static bool is_other(uint32_t c) {
    unsigned f = uflags(c), k = f & ZL_UCD_CAT_MASK;
    return !(f & ZL_UCD_WS) && k != ZL_UCD_L && k != ZL_UCD_N;
}

/* [\p{P}\$\+<=>\^~\|] (llama.cpp's default list) and falcon's, which adds '`' */
static bool is_default_punct(uint32_t c) { return is_P(c) || (c < 128 && c && strchr("$+<=>^~|", (int)c)); }
static bool is_falcon_punct(uint32_t c) { return is_default_punct(c) || c == '`'; }

static bool is_ds_letter(uint32_t c) {
    return !is_ws(c) && zl_ucd_in_ranges(c, zl_ucd_deepseek_letters, zl_ucd_n_deepseek_letters);
}
static bool is_ds_punct(uint32_t c) {
    return !is_ws(c) && zl_ucd_in_ranges(c, zl_ucd_deepseek_punct, zl_ucd_n_deepseek_punct);
}
static bool is_ds_cjk(uint32_t c) {
    return !is_ws(c) && zl_ucd_in_ranges(c, zl_ucd_deepseek_cjk, zl_ucd_n_deepseek_cjk);
}

/* [^(\s|.,!?…。，、।۔،)] */
static bool is_bloom_word(uint32_t c) {
    static const uint32_t stop[] = {'(', '|', '.', ',', '!', '?', ')', 0x2026, 0x3002, 0xFF0C, 0x3001,
                                    0x0964, 0x06D4, 0x060C};
    if (is_ws(c)) return false;
    for (size_t i = 0; i < sizeof stop / sizeof stop[0]; i++)
        if (c == stop[i]) return false;
    return true;
}

typedef bool (*cls_fn)(uint32_t);

static size_t run(const uint32_t *cp, size_t pos, size_t end, cls_fn in) {
    size_t p = pos;
    while (p < end && in(cp[p])) p++;
    return p - pos;
}

/* X?C+ where X (one code point) is present iff `prefix`: take the prefix if
 * the class follows it, else retry without it (the regex's backtracking). */
static size_t prefixed_run(const uint32_t *cp, size_t pos, size_t end, bool prefix, cls_fn in) {
    if (prefix && pos + 1 < end && in(cp[pos + 1])) return 1 + run(cp, pos + 1, end, in);
    return run(cp, pos, end, in);
}

static uint32_t ascii_lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

/* 's|'t|'re|'ve|'m|'ll|'d, optionally ASCII case-insensitive */
static size_t contraction(const uint32_t *cp, size_t pos, size_t end, bool fold) {
    if (cp[pos] != '\'' || pos + 1 >= end) return 0;
    uint32_t a = cp[pos + 1], b = pos + 2 < end ? cp[pos + 2] : 0;
    if (fold) {
        a = ascii_lower(a);
        b = ascii_lower(b);
    }
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

/* \s+(?!\S), then optionally \s+: a whitespace run gives up its last
 * character when a non-space follows, so that character can lead the next
 * word (" world").  A lone space before a non-space only matches \s+. */
static size_t ws_tail(const uint32_t *cp, size_t pos, size_t end, bool plain_fallback) {
    size_t k = run(cp, pos, end, is_ws);
    if (k == 0) return 0;
    if (pos + k == end) return k;
    if (k >= 2) return k - 1;
    return plain_fallback ? k : 0;
}

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S) */
static size_t m_gpt2(const uint32_t *cp, size_t pos, size_t end) {
    size_t n;
    bool sp = cp[pos] == ' ';
    if ((n = contraction(cp, pos, end, false))) return n;
    if ((n = prefixed_run(cp, pos, end, sp, is_L))) return n;
    if ((n = prefixed_run(cp, pos, end, sp, is_N))) return n;
    if ((n = prefixed_run(cp, pos, end, sp, is_other))) return n;
    return ws_tail(cp, pos, end, false);
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}
 * | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static size_t llama3_like(const uint32_t *cp, size_t pos, size_t end, size_t max_digits) {
    size_t n;
    uint32_t c = cp[pos];
    if ((n = contraction(cp, pos, end, true))) return n;
    if ((n = prefixed_run(cp, pos, end, !is_crlf(c) && !is_L(c) && !is_N(c), is_L))) return n;
    if (is_N(c)) {
        n = run(cp, pos, end, is_N);
        return n < max_digits ? n : max_digits;
    }
    if ((n = prefixed_run(cp, pos, end, c == ' ', is_other))) return n + run(cp, pos + n, end, is_crlf);
    size_t k = run(cp, pos, end, is_ws), last_nl = 0;
    for (size_t j = 0; j < k; j++)
        if (is_crlf(cp[pos + j])) last_nl = j + 1;
    if (last_nl) return last_nl;
    return ws_tail(cp, pos, end, true);
}

static size_t m_llama3(const uint32_t *cp, size_t pos, size_t end) { return llama3_like(cp, pos, end, 3); }
static size_t m_qwen2(const uint32_t *cp, size_t pos, size_t end) { return llama3_like(cp, pos, end, 1); }

/* \p{N} */
static size_t m_digit1(const uint32_t *cp, size_t pos, size_t end) { return is_N(cp[pos]) ? 1 : 0; }
/* \p{N}+ */
static size_t m_digits(const uint32_t *cp, size_t pos, size_t end) { return run(cp, pos, end, is_N); }
/* [0-9][0-9][0-9] */
static size_t m_ascii3(const uint32_t *cp, size_t pos, size_t end) {
    if (end - pos < 3) return 0;
    for (size_t i = 0; i < 3; i++)
        if (cp[pos + i] < '0' || cp[pos + i] > '9') return 0;
    return 3;
}
/* [\r\n] */
static size_t m_crlf(const uint32_t *cp, size_t pos, size_t end) { return is_crlf(cp[pos]) ? 1 : 0; }

static size_t m_default_punct(const uint32_t *cp, size_t pos, size_t end) {
    return run(cp, pos, end, is_default_punct);
}
static size_t m_falcon_punct(const uint32_t *cp, size_t pos, size_t end) {
    return run(cp, pos, end, is_falcon_punct);
}

/* \s?[<deepseek letters>]+ */
static size_t m_ds_letters(const uint32_t *cp, size_t pos, size_t end) {
    return prefixed_run(cp, pos, end, is_ws(cp[pos]), is_ds_letter);
}
/* \s?[!-/:-~！-／：-～‘-‟　-。]+ */
static size_t m_ds_punct(const uint32_t *cp, size_t pos, size_t end) {
    return prefixed_run(cp, pos, end, is_ws(cp[pos]), is_ds_punct);
}
/* [一-龥ࠀ-一가-퟿]+ */
static size_t m_ds_cjk(const uint32_t *cp, size_t pos, size_t end) { return run(cp, pos, end, is_ds_cjk); }
/* \s?\p{L}+ */
static size_t m_ws_letters(const uint32_t *cp, size_t pos, size_t end) {
    return prefixed_run(cp, pos, end, is_ws(cp[pos]), is_L);
}
/* \s?\p{P}+ */
static size_t m_ws_punct(const uint32_t *cp, size_t pos, size_t end) {
    return prefixed_run(cp, pos, end, is_ws(cp[pos]), is_P);
}
/*  ?[^(\s|.,!?…。，、।۔،)]+ */
static size_t m_bloom(const uint32_t *cp, size_t pos, size_t end) {
    return prefixed_run(cp, pos, end, cp[pos] == ' ', is_bloom_word);
}

typedef size_t (*matcher)(const uint32_t *cp, size_t pos, size_t end);
/* NULL in a pass list stands for "\s+$": split off each word's trailing
 * whitespace (done per word; matching it position by position is quadratic). */
#define TRAILING_WS NULL
#define MAX_PASSES 6

static const struct {
    zl_pretok pre;
    int n;
    matcher pass[MAX_PASSES];
} passes[] = {
    {ZL_PRE_DEFAULT, 4, {m_default_punct, m_gpt2, m_digits, m_ascii3}},
    {ZL_PRE_GPT2, 1, {m_gpt2}},
    {ZL_PRE_LLAMA3, 1, {m_llama3}},
    {ZL_PRE_QWEN2, 1, {m_qwen2}},
    {ZL_PRE_STARCODER, 2, {m_digit1, m_gpt2}},
    {ZL_PRE_FALCON, 3, {m_falcon_punct, m_gpt2, m_ascii3}},
    {ZL_PRE_DEEPSEEK_LLM, 6, {m_crlf, m_ds_letters, m_ds_punct, TRAILING_WS, m_ds_cjk, m_digits}},
    {ZL_PRE_DEEPSEEK_CODER, 5, {m_crlf, m_ws_letters, m_ws_punct, m_ds_cjk, m_digit1}},
    {ZL_PRE_BLOOM, 1, {m_bloom}},
    {ZL_PRE_VIKING, 2, {m_bloom, m_digit1}},
};

static const struct {
    const char *name;
    zl_pretok pre;
    bool ignore_merges, add_bos;
} names[] = {
    {"default", ZL_PRE_DEFAULT, false, false},
    {"llama3", ZL_PRE_LLAMA3, true, true},
    {"llama-v3", ZL_PRE_LLAMA3, true, true},
    {"llama-bpe", ZL_PRE_LLAMA3, true, true},
    {"falcon3", ZL_PRE_LLAMA3, true, true},
    {"falcon-h1", ZL_PRE_LLAMA3, true, true},
    {"pixtral", ZL_PRE_LLAMA3, true, true},
    {"midm-2.0", ZL_PRE_LLAMA3, true, true},
    {"lfm2", ZL_PRE_LLAMA3, true, true},
    {"dbrx", ZL_PRE_LLAMA3, false, false},
    {"smaug-bpe", ZL_PRE_LLAMA3, false, false},
    {"deepseek-llm", ZL_PRE_DEEPSEEK_LLM, false, false},
    {"deepseek-coder", ZL_PRE_DEEPSEEK_CODER, false, false},
    {"falcon", ZL_PRE_FALCON, false, false},
    {"gpt-2", ZL_PRE_GPT2, false, false},
    {"phi-2", ZL_PRE_GPT2, false, false},
    {"mpt", ZL_PRE_GPT2, false, false},
    {"olmo", ZL_PRE_GPT2, false, false},
    {"jais", ZL_PRE_GPT2, false, false},
    {"exaone4", ZL_PRE_GPT2, false, false},
    {"starcoder", ZL_PRE_STARCODER, false, false},
    {"refact", ZL_PRE_STARCODER, false, false},
    {"smollm", ZL_PRE_STARCODER, false, false},
    {"command-r", ZL_PRE_STARCODER, false, false},
    {"codeshell", ZL_PRE_STARCODER, false, false},
    {"exaone", ZL_PRE_STARCODER, false, false},
    {"minerva-7b", ZL_PRE_STARCODER, false, false},
    {"qwen2", ZL_PRE_QWEN2, false, false},
    {"deepseek-r1-qwen", ZL_PRE_QWEN2, false, false},
    {"megrez", ZL_PRE_QWEN2, false, false},
    {"stablelm2", ZL_PRE_QWEN2, false, false},
    {"hunyuan", ZL_PRE_QWEN2, false, false},
    {"bloom", ZL_PRE_BLOOM, false, false},
    {"poro-chat", ZL_PRE_BLOOM, false, false},
    {"gpt3-finnish", ZL_PRE_BLOOM, false, false},
    {"viking", ZL_PRE_VIKING, false, false},
};

int zl_pretok_lookup(const char *name, size_t len, zl_pretok_info *out) {
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strlen(names[i].name) == len && memcmp(names[i].name, name, len) == 0) {
            out->pre = names[i].pre;
            out->ignore_merges = names[i].ignore_merges;
            out->add_bos = names[i].add_bos;
            return 0;
        }
    }
    return -1;
}

static int push(zl_words *w, size_t len) {
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        uint32_t *p = realloc(w->len, cap * sizeof *p);
        if (!p) return -1;
        w->len = p;
        w->cap = cap;
    }
    w->len[w->n++] = (uint32_t)len;
    return 0;
}

/* One regex pass over the word cps[a..b): matches and the gaps between them
 * become words of *out. */
static int split_word(matcher m, const uint32_t *cps, size_t a, size_t b, zl_words *out) {
    if (!m) {
        size_t t = b;
        while (t > a && is_ws(cps[t - 1])) t--;
        if (t > a && push(out, t - a)) return -1;
        return b > t ? push(out, b - t) : 0;
    }
    size_t gap = a, pos = a;
    while (pos < b) {
        size_t n = m(cps, pos, b);
        if (!n) {
            pos++;
            continue;
        }
        if (pos > gap && push(out, pos - gap)) return -1;
        if (push(out, n)) return -1;
        pos += n;
        gap = pos;
    }
    return b > gap ? push(out, b - gap) : 0;
}

int zl_pretok_split(zl_pretok pre, const uint32_t *cps, size_t n, zl_words *out, zl_words *tmp) {
    out->n = 0;
    if (n == 0) return 0;
    if (push(out, n)) return -1;
    for (size_t i = 0; i < sizeof passes / sizeof passes[0]; i++) {
        if (passes[i].pre != pre) continue;
        for (int p = 0; p < passes[i].n; p++) {
            tmp->n = 0;
            size_t start = 0;
            for (size_t w = 0; w < out->n; w++) {
                if (split_word(passes[i].pass[p], cps, start, start + out->len[w], tmp)) return -1;
                start += out->len[w];
            }
            zl_words t = *out;
            *out = *tmp;
            *tmp = t;
        }
        return 0;
    }
    return 0; /* ZL_PRE_NONE: the whole text is one word */
}

void zl_words_free(zl_words *w) {
    free(w->len);
    memset(w, 0, sizeof *w);
}
