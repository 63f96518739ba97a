/* tokenize.c — text to token ids.
 *
 * Owns the three stages of zl_tokenize:
 *   1. special-token partition: cut the strings of special tokens out of the
 *      text, longest token first, leaving raw fragments between them;
 *   2. SPM: per raw fragment, escape spaces, start from UTF-8 characters and
 *      repeatedly merge the adjacent pair whose concatenation is the token
 *      with the best score (ties: leftmost); leftovers fall back to bytes;
 *   3. BPE: per raw fragment, decode to code points, split into words with the
 *      pre-tokenizer, and per word start from bytes and repeatedly apply the
 *      merge rule with the lowest rank (ties: leftmost).
 * Both merge loops use a binary heap of candidate pairs with lazy deletion (a
 * popped pair whose sides changed since it was pushed is skipped), so a
 * fragment of n characters costs O(n log n).
 *
 * All scratch lives in one context per call: zl_tokenize is reentrant and a
 * vocab may be shared between threads.  Every allocation is checked; on
 * failure everything is released and ZL_ENOMEM returned. */
#include <stdlib.h>

#include "tok_internal.h"

typedef struct {
    int32_t tok; /* >= 0: a special token; -1: raw text */
    size_t off, len;
} frag;

typedef struct {
    size_t start;      /* byte offset of the symbol in the word or fragment */
    uint32_t n;        /* byte length; 0 once merged into its left neighbour */
    int32_t prev, next;
    int32_t id;        /* BPE: token id of the symbol, -1 if it is not a token */
} sym;

typedef struct {
    int64_t key;       /* SPM: -score (as an ordered integer); BPE: rank */
    int32_t left, right;
    uint32_t size;     /* byte length of the pair when pushed */
    int32_t result;    /* BPE: token the merge produces */
} pair;

typedef struct {
    const zl_vocab *v;
    const char *text;
    int32_t *ids;
    size_t n_ids, cap_ids;
    frag *fr, *fr2;
    size_t n_fr, cap_fr, cap_fr2;
    sym *sy;
    size_t cap_sy;
    pair *heap;
    size_t n_heap, cap_heap;
    char *buf; /* escaped SPM fragment / GPT-2 spelling of a BPE word */
    size_t cap_buf;
    uint8_t *word; /* UTF-8 bytes of the current BPE word */
    size_t cap_word;
    uint32_t *cps;
    size_t cap_cps;
    zl_words words, wtmp;
} ctx;

/* Grow the array whose pointer is at pp (elements of `size` bytes, capacity
 * *cap) to hold at least `need`.  The pointer is moved with memcpy so any
 * element type can share this helper without type-punning through void **. */
static int grow(void *pp, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap : 16;
    while (n < need) n *= 2;
    if (n > SIZE_MAX / size) return -1;
    void *p;
    memcpy(&p, pp, sizeof p);
    void *q = realloc(p, n * size);
    if (!q) return -1;
    memcpy(pp, &q, sizeof q);
    *cap = n;
    return 0;
}

#define GROW(arr, cap, need) grow(&(arr), &(cap), (need), sizeof *(arr))

static int emit(ctx *c, int32_t id) {
    if (GROW(c->ids, c->cap_ids, c->n_ids + 1)) return -1;
    c->ids[c->n_ids++] = id;
    return 0;
}

/* ---- heap of candidate pairs, smallest (key, left) on top ---- */

static bool pair_less(const pair *a, const pair *b) {
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

static int heap_push(ctx *c, pair p) {
    if (GROW(c->heap, c->cap_heap, c->n_heap + 1)) return -1;
    size_t i = c->n_heap++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!pair_less(&p, &c->heap[up])) break;
        c->heap[i] = c->heap[up];
        i = up;
    }
    c->heap[i] = p;
    return 0;
}

static pair heap_pop(ctx *c) {
    pair top = c->heap[0], last = c->heap[--c->n_heap];
    size_t i = 0, n = c->n_heap;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const pair *best = &last;
        if (l < n && pair_less(&c->heap[l], best)) m = l, best = &c->heap[l];
        if (r < n && pair_less(&c->heap[r], best)) m = r;
        if (m == i) break;
        c->heap[i] = c->heap[m];
        i = m;
    }
    if (n) c->heap[i] = last;
    return top;
}

/* Map a float to an integer with the same order, so "best score first" is a
 * min-heap on the negation.  -0.0 and 0.0 compare equal as floats; keep them
 * equal here too. */
static int64_t score_key(float f) {
    uint32_t u;
    if (f == 0.0f) f = 0.0f;
    memcpy(&u, &f, sizeof u);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return -(int64_t)u;
}

/* Unlink sy[right] after its bytes joined sy[left]. */
static void absorb(ctx *c, int32_t left, int32_t right) {
    sym *l = &c->sy[left], *r = &c->sy[right];
    l->n += r->n;
    r->n = 0;
    l->next = r->next;
    if (r->next >= 0) c->sy[r->next].prev = left;
}

/* ---- SentencePiece ---- */

static int spm_try_pair(ctx *c, const char *s, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return 0;
    size_t len = c->sy[left].n + (size_t)c->sy[right].n;
    if (len > c->v->max_token_len) return 0;
    int32_t id = zl_token_find(c->v, s + c->sy[left].start, len);
    if (id < 0) return 0;
    return heap_push(c, (pair){score_key(c->v->score[id]), left, right, (uint32_t)len, id});
}

static int spm_fragment(ctx *c, const char *s, size_t n, bool space_prefix) {
    const zl_vocab *v = c->v;
    /* escape: a leading space if asked, then every ' ' as U+2581 */
    if (GROW(c->buf, c->cap_buf, 3 * (n + 1))) return -1;
    size_t m = 0;
    if (space_prefix) memcpy(c->buf, "\xE2\x96\x81", 3), m = 3;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ')
            memcpy(c->buf + m, "\xE2\x96\x81", 3), m += 3;
        else
            c->buf[m++] = s[i];
    }
    const char *b = c->buf;
    if (m == 0) return 0;
    /* one symbol per UTF-8 character (by lead byte; a cut-off tail stays short) */
    int32_t ns = 0;
    for (size_t off = 0; off < m; ns++) {
        if (GROW(c->sy, c->cap_sy, (size_t)ns + 1)) return -1;
        size_t len = zl_utf8_len((uint8_t)b[off]);
        if (len > m - off) len = m - off;
        c->sy[ns] = (sym){off, (uint32_t)len, ns - 1, off + len == m ? -1 : ns + 1, -1};
        off += len;
    }
    c->n_heap = 0;
    for (int32_t i = 1; i < ns; i++)
        if (spm_try_pair(c, b, i - 1, i)) return -1;
    while (c->n_heap) {
        pair p = heap_pop(c);
        sym *l = &c->sy[p.left], *r = &c->sy[p.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != p.size) continue; /* stale */
        absorb(c, p.left, p.right);
        if (spm_try_pair(c, b, c->sy[p.left].prev, p.left) || spm_try_pair(c, b, p.left, c->sy[p.left].next))
            return -1;
    }
    for (int32_t i = 0; i >= 0; i = c->sy[i].next) {
        const sym *y = &c->sy[i];
        int32_t id = zl_token_find(v, b + y->start, y->n);
        if (id >= 0) {
            if (emit(c, id)) return -1;
            continue;
        }
        for (uint32_t j = 0; j < y->n; j++) { /* byte fallback */
            int32_t bt = v->byte_tok[(uint8_t)b[y->start + j]];
            if (bt < 0) bt = v->unk;
            if (bt >= 0 && emit(c, bt)) return -1;
        }
    }
    return 0;
}

/* ---- byte-level BPE ---- */

static const zl_merge *find_merge(const zl_vocab *v, int32_t left, int32_t right) {
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    for (uint64_t i = zl_mix64(key) & v->merge_mask;; i = (i + 1) & v->merge_mask) {
        if (v->merges[i].key == key) return &v->merges[i];
        if (v->merges[i].key == UINT64_MAX) return NULL;
    }
}

static int bpe_try_pair(ctx *c, int32_t left, int32_t right) {
    if (left < 0 || right < 0 || c->sy[left].id < 0 || c->sy[right].id < 0) return 0;
    const zl_merge *mg = find_merge(c->v, c->sy[left].id, c->sy[right].id);
    if (!mg) return 0;
    return heap_push(c, (pair){mg->rank, left, right, c->sy[left].n + c->sy[right].n, mg->result});
}

/* Merge the bytes w[0..n) of one word and emit its tokens. */
static int bpe_word(ctx *c, const uint8_t *w, size_t n) {
    const zl_vocab *v = c->v;
    if (v->ignore_merges) { /* a word that is a token as a whole is taken as is */
        if (GROW(c->buf, c->cap_buf, 2 * n)) return -1;
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            memcpy(c->buf + m, v->byte_enc[w[i]], v->byte_enc_len[w[i]]);
            m += v->byte_enc_len[w[i]];
        }
        int32_t id = zl_token_find(v, c->buf, m);
        if (id >= 0) return emit(c, id);
    }
    if (GROW(c->sy, c->cap_sy, n)) return -1;
    for (size_t i = 0; i < n; i++)
        c->sy[i] = (sym){i, 1, (int32_t)i - 1, i + 1 == n ? -1 : (int32_t)i + 1, v->byte_tok[w[i]]};
    c->n_heap = 0;
    for (size_t i = 1; i < n; i++)
        if (bpe_try_pair(c, (int32_t)i - 1, (int32_t)i)) return -1;
    while (c->n_heap) {
        pair p = heap_pop(c);
        sym *l = &c->sy[p.left], *r = &c->sy[p.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != p.size) continue; /* stale */
        absorb(c, p.left, p.right);
        c->sy[p.left].id = p.result;
        if (bpe_try_pair(c, c->sy[p.left].prev, p.left) || bpe_try_pair(c, p.left, c->sy[p.left].next)) return -1;
    }
    for (int32_t i = 0; i >= 0; i = c->sy[i].next) {
        const sym *y = &c->sy[i];
        if (y->id >= 0) {
            if (emit(c, y->id)) return -1;
            continue;
        }
        /* not a token (a byte the vocabulary lacks): like llama.cpp, try each
         * byte of its mapped spelling as a one-byte token, else drop it */
        for (uint32_t j = 0; j < y->n; j++) {
            uint8_t b = w[y->start + j];
            for (uint8_t k = 0; k < v->byte_enc_len[b]; k++) {
                int32_t id = zl_token_find(v, &v->byte_enc[b][k], 1);
                if (id >= 0 && emit(c, id)) return -1;
            }
        }
    }
    return 0;
}

static int bpe_fragment(ctx *c, const char *s, size_t n) {
    /* code points, with a malformed byte read as U+FFFD (so it is re-encoded
     * as EF BF BD, as llama.cpp does) */
    if (GROW(c->cps, c->cap_cps, n)) return -1;
    size_t ncp = 0;
    for (size_t i = 0; i < n;) {
        size_t adv;
        c->cps[ncp++] = zl_utf8_decode((const uint8_t *)s + i, n - i, &adv);
        i += adv;
    }
    if (zl_pretok_split(c->v->pre, c->cps, ncp, &c->words, &c->wtmp)) return -1;
    size_t start = 0;
    for (size_t w = 0; w < c->words.n; w++) {
        size_t len = c->words.len[w];
        if (GROW(c->word, c->cap_word, 4 * len)) return -1;
        size_t m = 0;
        for (size_t i = start; i < start + len; i++) m += zl_utf8_encode(c->cps[i], (char *)c->word + m);
        start += len;
        if (bpe_word(c, c->word, m)) return -1;
    }
    return 0;
}

/* ---- special-token partition ---- */

static bool c_isspace(char ch) { return ch == ' ' || (ch >= '\t' && ch <= '\r'); }

/* Cut every occurrence of special token `id` out of the raw fragments,
 * honouring its lstrip/rstrip attributes, as llama.cpp's partition does. */
static int cut_token(ctx *c, int32_t id) {
    size_t tl;
    const char *t = zl_tok_str(c->v, id, &tl);
    unsigned a = c->v->attr[id];
    size_t n2 = 0;
#define OUT(tk, o, l)                                                   \
    do {                                                                \
        if (GROW(c->fr2, c->cap_fr2, n2 + 1)) return -1;             \
        c->fr2[n2++] = (frag){(tk), (o), (l)};                          \
    } while (0)
    for (size_t f = 0; f < c->n_fr; f++) {
        frag fr = c->fr[f];
        if (fr.tok >= 0) {
            OUT(fr.tok, fr.off, fr.len);
            continue;
        }
        size_t base = fr.off, blen = fr.len;
        for (;;) {
            const char *hit = memmem(c->text + base, blen, t, tl);
            if (!hit) {
                OUT(-1, base, blen);
                break;
            }
            size_t at = (size_t)(hit - c->text), left = at - base;
            if (a & ZL_ATTR_LSTRIP)
                while (left > 0 && c_isspace(c->text[base + left - 1])) left--;
            if (left > 0) OUT(-1, base, left);
            OUT(id, 0, 0);
            size_t end = base + blen;
            if (at + tl >= end) break;
            base = at + tl;
            blen = end - base;
            if (a & ZL_ATTR_RSTRIP)
                while (blen > 0 && c_isspace(c->text[base])) base++, blen--;
            if (blen == 0) break;
        }
    }
#undef OUT
    frag *t2 = c->fr;
    size_t cap = c->cap_fr;
    c->fr = c->fr2;
    c->cap_fr = c->cap_fr2;
    c->n_fr = n2;
    c->fr2 = t2;
    c->cap_fr2 = cap;
    return 0;
}

static int partition(ctx *c, size_t len, bool parse_special) {
    const zl_vocab *v = c->v;
    c->n_fr = 0;
    if (len == 0) return 0;
    if (GROW(c->fr, c->cap_fr, 1)) return -1;
    c->fr[c->n_fr++] = (frag){-1, 0, len};
    if (v->n_special == 0) return 0;
    /* which special strings occur at all: one pass over the text with the trie */
    uint8_t *present = calloc(v->n_special, 1);
    if (!present) return -1;
    bool any = false;
    for (size_t i = 0; i < len; i++) {
        uint32_t node = 0;
        int32_t si;
        for (size_t j = i; j < len && zl_vocab_trie_step(v, node, (uint8_t)c->text[j], &node, &si); j++)
            if (si >= 0) present[si] = 1, any = true;
    }
    int rc = 0;
    for (size_t s = 0; any && s < v->n_special && !rc; s++) {
        int32_t id = v->special[s];
        if (!present[s]) continue;
        if (!parse_special && (v->attr[id] & (ZL_ATTR_CONTROL | ZL_ATTR_UNKNOWN))) continue;
        rc = cut_token(c, id);
    }
    free(present);
    return rc;
}

/* ---- entry point ---- */

static int run(ctx *c, size_t len, bool add_special, bool parse_special, bool continuation) {
    const zl_vocab *v = c->v;
    if (partition(c, len, parse_special)) return -1;
    if (add_special && v->add_bos && emit(c, v->bos)) return -1;
    bool prev_special = !continuation; /* SPM: the first fragment gets the space prefix */
    for (size_t f = 0; f < c->n_fr; f++) {
        frag fr = c->fr[f];
        if (fr.tok >= 0) {
            if (emit(c, fr.tok)) return -1;
            prev_special = true;
            continue;
        }
        if (v->kind == ZL_VOCAB_SPM) {
            if (spm_fragment(c, c->text + fr.off, fr.len, v->add_space_prefix && prev_special)) return -1;
        } else if (bpe_fragment(c, c->text + fr.off, fr.len)) {
            return -1;
        }
        prev_special = false;
    }
    if (add_special && v->add_eos && emit(c, v->eos)) return -1;
    return 0;
}

int zl_tokenize(const zl_vocab *v, const char *text, size_t len, int add_bos, int parse_special, int32_t **ids,
                size_t *n, zl_err *err) {
    return zl_tokenize_ex(v, text, len, add_bos, parse_special, 0, ids, n, err);
}

int zl_tokenize_ex(const zl_vocab *v, const char *text, size_t len, int add_bos, int parse_special, int continuation,
                   int32_t **ids, size_t *n, zl_err *err) {
    *ids = NULL;
    *n = 0;
    if (!v || (!text && len)) return zl_errf(err, ZL_EINVAL, "zl_tokenize: no vocabulary or text");
    if (len > (size_t)INT32_MAX / 4) return zl_errf(err, ZL_ERANGE, "text of %zu bytes is too long to tokenize", len);
    ctx c = {.v = v, .text = text};
    int rc = run(&c, len, add_bos != 0, parse_special != 0, continuation != 0);
    free(c.fr);
    free(c.fr2);
    free(c.sy);
    free(c.heap);
    free(c.buf);
    free(c.word);
    free(c.cps);
    zl_words_free(&c.words);
    zl_words_free(&c.wtmp);
    if (rc) {
        free(c.ids);
        return zl_errf(err, ZL_ENOMEM, "out of memory tokenizing %zu bytes", len);
    }
    *ids = c.ids;
    *n = c.n_ids;
    return 0;
}
