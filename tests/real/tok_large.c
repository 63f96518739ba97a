/* tok_large.c — the tokenizers of the larger models on the corpus against
 * llama.cpp (see tok_corpus.h): Qwen2.5-Coder (byte-level BPE, pre-tokenizer
 * "qwen2", 151936 tokens) and Gemma 3 (SentencePiece, 262144 tokens, no
 * space prefix, byte fallback, user-defined whitespace and HTML tokens).
 *
 * The 0.5B and 1.5B Qwen2.5-Coder files carry the same tokenizer: the test
 * checks that their tokenizer.ggml.tokens, token_type and merges are equal
 * element for element, so one set of reference ids serves both. */
#include "tok_corpus.h"

Test(tok_real, qwen25_coder_05b, .timeout = 600) { tok_check_model("qwen2.5-coder-0.5b", "qwen2.5-coder"); }
Test(tok_real, qwen25_coder_15b, .timeout = 600) { tok_check_model("qwen2.5-coder-1.5b", "qwen2.5-coder"); }
Test(tok_real, gemma3_270m, .timeout = 600) { tok_check_model("gemma3-270m", "gemma3-270m"); }

static int same_array(const zl_gguf *a, const zl_gguf *b, const char *key) {
    const zl_gguf_kv *x = zl_gguf_find(a, key), *y = zl_gguf_find(b, key);
    cr_assert(x && y && x->type == ZL_GGUF_ARRAY && y->type == ZL_GGUF_ARRAY, "%s missing", key);
    if (x->v.arr.type != y->v.arr.type || x->v.arr.n != y->v.arr.n) return 0;
    for (uint64_t i = 0; i < x->v.arr.n; i++) {
        if (x->v.arr.type == ZL_GGUF_STRING) {
            zl_str s = x->v.arr.strs[i], t = y->v.arr.strs[i];
            if (s.len != t.len || memcmp(s.ptr, t.ptr, s.len)) return 0;
        } else if (zl_gguf_arr_i64(x, i) != zl_gguf_arr_i64(y, i)) {
            return 0;
        }
    }
    return 1;
}

Test(tok_real, qwen25_coder_same_vocabulary) {
    zl_gguf *a, *b;
    zl_err err = {0};
    cr_assert_eq(zl_gguf_open(&a, zl_real_model("qwen2.5-coder-0.5b"), NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(zl_gguf_open(&b, zl_real_model("qwen2.5-coder-1.5b"), NULL, &err), 0, "%s", err.msg);
    static const char *const keys[] = {"tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges"};
    for (int i = 0; i < 3; i++) cr_assert(same_array(a, b, keys[i]), "%s differs between 0.5B and 1.5B", keys[i]);
    static const char *const strs[] = {"tokenizer.ggml.model", "tokenizer.ggml.pre"};
    for (int i = 0; i < 2; i++) {
        zl_str s, t;
        cr_assert(!zl_gguf_get_str(a, strs[i], &s) && !zl_gguf_get_str(b, strs[i], &t));
        cr_assert(s.len == t.len && !memcmp(s.ptr, t.ptr, s.len), "%s differs", strs[i]);
    }
    zl_gguf_close(a);
    zl_gguf_close(b);
}
