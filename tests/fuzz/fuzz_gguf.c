/* fuzz_gguf.c — libFuzzer target: the GGUF reader (zl_gguf_open_mem) on
 * arbitrary bytes, then every lookup a model load makes on what it accepted
 * (keys of each type, arrays, tensor table).  Must never crash, read out of
 * bounds or leak; a rejected file is a clean error. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "gguf/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    zl_gguf *g = NULL;
    zl_err err = {0};
    if (zl_gguf_open_mem(&g, data, size, &err)) return 0;
    static const char *const keys[] = {"general.architecture", "general.alignment", "llama.block_count",
                                       "llama.context_length", "llama.embedding_length", "tokenizer.ggml.model",
                                       "tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.merges",
                                       "tokenizer.chat_template"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        uint64_t u64;
        uint32_t u32;
        int64_t i64;
        float f;
        bool b;
        zl_str s;
        zl_gguf_get_u64(g, keys[i], &u64);
        zl_gguf_get_u32(g, keys[i], &u32);
        zl_gguf_get_i64(g, keys[i], &i64);
        zl_gguf_get_f32(g, keys[i], &f);
        zl_gguf_get_bool(g, keys[i], &b);
        if (!zl_gguf_get_str(g, keys[i], &s) && s.len) {
            volatile char c = s.ptr[s.len - 1];
            (void)c;
        }
        zl_gguf_find(g, keys[i]);
    }
    volatile uint8_t sink = 0;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const zl_gguf_kv *kv = &g->kv[i];
        if (kv->key.len) sink ^= (uint8_t)kv->key.ptr[kv->key.len - 1];
        if (kv->type == ZL_GGUF_STRING && kv->v.s.len) sink ^= (uint8_t)kv->v.s.ptr[kv->v.s.len - 1];
        if (kv->type != ZL_GGUF_ARRAY || !kv->v.arr.n) continue;
        uint64_t last = kv->v.arr.n - 1;
        if (kv->v.arr.type == ZL_GGUF_STRING) {
            zl_str e = kv->v.arr.strs[last];
            if (e.len) sink ^= (uint8_t)e.ptr[e.len - 1];
        } else if (kv->v.arr.type != ZL_GGUF_BOOL) {
            double d = zl_gguf_arr_f64(kv, last);
            uint64_t bits;
            memcpy(&bits, &d, sizeof bits);
            sink ^= (uint8_t)zl_gguf_arr_i64(kv, 0) ^ (uint8_t)bits;
        }
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const zl_gguf_tensor *t = &g->tensors[i];
        if (t->nbytes) sink ^= ((const uint8_t *)t->data)[0] ^ ((const uint8_t *)t->data)[t->nbytes - 1];
        if (t->name.len) zl_gguf_find_tensor(g, t->name.ptr);
    }
    (void)sink;
    zl_gguf_close(g);
    return 0;
}
