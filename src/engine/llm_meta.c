/* llm_meta.c — what a zl_llm handle says about itself: the model file's
 * metadata by key and the kernel level it runs at.  Read-only views of the
 * loaded model; never opens a file (the handle's mapping holds every value)
 * and never hands out the GGUF structures themselves. */
#include <string.h>

#include "engine_internal.h"

const char *zl_llm_isa(const zl_llm *llm) { return zl_isa_name(zl_kernels_isa(llm->model->kern)); }

static const zl_gguf *gguf(const zl_llm *llm) { return llm->model->gguf; }

int zl_llm_meta_str(const zl_llm *llm, const char *key, const char **s, size_t *len) {
    zl_str v;
    if (zl_gguf_get_str(gguf(llm), key, &v)) return ZL_EINVAL;
    *s = v.ptr;
    *len = (size_t)v.len;
    return 0;
}

int zl_llm_meta_int(const zl_llm *llm, const char *key, int64_t *out) {
    return zl_gguf_get_i64(gguf(llm), key, out) ? ZL_EINVAL : 0;
}

int zl_llm_meta_float(const zl_llm *llm, const char *key, double *out) {
    const zl_gguf_kv *kv = zl_gguf_find(gguf(llm), key);
    if (kv && (kv->type == ZL_GGUF_F32 || kv->type == ZL_GGUF_F64)) {
        *out = kv->v.f; /* the reader keeps floats as double: no round trip through float */
        return 0;
    }
    int64_t i;
    uint64_t u;
    if (!zl_gguf_get_i64(gguf(llm), key, &i)) { *out = (double)i; return 0; }
    if (!zl_gguf_get_u64(gguf(llm), key, &u)) { *out = (double)u; return 0; }
    return ZL_EINVAL;
}

static const zl_gguf_kv *array(const zl_llm *llm, const char *key) {
    const zl_gguf_kv *kv = zl_gguf_find(gguf(llm), key);
    return kv && kv->type == ZL_GGUF_ARRAY ? kv : NULL;
}

int zl_llm_meta_arr_len(const zl_llm *llm, const char *key, size_t *n) {
    const zl_gguf_kv *kv = array(llm, key);
    if (!kv) return ZL_EINVAL;
    *n = (size_t)kv->v.arr.n;
    return 0;
}

int zl_llm_meta_arr_str(const zl_llm *llm, const char *key, size_t i, const char **s, size_t *len) {
    const zl_gguf_kv *kv = array(llm, key);
    if (!kv || kv->v.arr.type != ZL_GGUF_STRING) return ZL_EINVAL;
    if (i >= kv->v.arr.n) return ZL_ERANGE;
    *s = kv->v.arr.strs[i].ptr;
    *len = (size_t)kv->v.arr.strs[i].len;
    return 0;
}

int zl_llm_meta_arr_num(const zl_llm *llm, const char *key, size_t i, double *out) {
    const zl_gguf_kv *kv = array(llm, key);
    if (!kv || !zl_gguf_vtype_size(kv->v.arr.type)) return ZL_EINVAL;
    if (i >= kv->v.arr.n) return ZL_ERANGE;
    *out = zl_gguf_arr_f64(kv, i);
    return 0;
}
