/* model_load.c — hyper-parameters from GGUF metadata and weight binding.
 *
 * Owns: deciding whether a file is a model we can run, and saying precisely
 * why not.  Supported: arch "llama" (llama 1/2/3, mistral, tinyllama, smollm
 * all use it), "mistral" as an alias, "qwen2" (QKV bias, NEOX rope) and
 * "gemma3" (embeddings scaled by sqrt(dim), per-head Q/K norms, post-norms
 * around both blocks, GELU-gated FFN, interleaved sliding-window layers with
 * their own RoPE base).  Gemma's RMSNorm multiplies by (1 + w); GGUF files
 * store 1 + w already (the converter adds it), so every norm here is the
 * plain x / rms(x) * w.  Everything a family differs in is a field of
 * zl_hparams read from the metadata, with llama's values as the neutral
 * ones, so forward.c has no per-architecture branches. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "prefetch.h"

static int get_u32_req(const zl_gguf *g, const char *arch, const char *suffix, int *out, zl_err *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    uint32_t v;
    if (zl_gguf_get_u32(g, key, &v) || v == 0 || v > (1u << 30))
        return zl_errf(err, ZL_EFORMAT, "missing or invalid metadata %s", key);
    *out = (int)v;
    return 0;
}

/* The widest projection (heads x head size, or a vocabulary) a file may ask for. */
#define ZL_MAX_WIDTH (1 << 28)

static int get_u32_opt(const zl_gguf *g, const char *arch, const char *suffix, int *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    uint32_t v;
    if (zl_gguf_get_u32(g, key, &v) || v > (1u << 30)) return 0;
    *out = (int)v;
    return 1;
}

static int get_f32_opt(const zl_gguf *g, const char *arch, const char *suffix, float *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return zl_gguf_get_f32(g, key, out) == 0;
}

static int read_hparams(const zl_gguf *g, zl_hparams *hp, zl_err *err) {
    zl_str arch;
    if (zl_gguf_get_str(g, "general.architecture", &arch))
        return zl_errf(err, ZL_EFORMAT, "missing metadata general.architecture");
    zl_str_copy(arch, hp->arch, sizeof hp->arch);
    const char *a = hp->arch;
    int gemma3 = 0;
    if (!strcmp(a, "llama") || !strcmp(a, "mistral")) {
        hp->rope_type = ZL_ROPE_NORM;
    } else if (!strcmp(a, "qwen2")) {
        hp->rope_type = ZL_ROPE_NEOX;
        hp->has_qkv_bias = 1;
    } else if (!strcmp(a, "gemma3")) {
        hp->rope_type = ZL_ROPE_NEOX;
        hp->ffn_act = ZL_ACT_GELU_TANH;
        hp->post_norms = hp->qk_norm = 1;
        gemma3 = 1;
    } else {
        return zl_errf(err, ZL_EUNSUP, "unsupported architecture '%s' (supported: llama, mistral, qwen2, gemma3)", a);
    }
    if (get_u32_req(g, a, "embedding_length", &hp->dim, err) || get_u32_req(g, a, "block_count", &hp->n_layers, err) ||
        get_u32_req(g, a, "feed_forward_length", &hp->ffn_dim, err) ||
        get_u32_req(g, a, "attention.head_count", &hp->n_heads, err))
        return ZL_EFORMAT;
    hp->n_kv_heads = hp->n_heads;
    get_u32_opt(g, a, "attention.head_count_kv", &hp->n_kv_heads);
    hp->n_ctx_train = 2048;
    get_u32_opt(g, a, "context_length", &hp->n_ctx_train);
    if (hp->n_kv_heads <= 0 || hp->n_heads % hp->n_kv_heads)
        return zl_errf(err, ZL_EFORMAT, "attention.head_count %d is not a multiple of head_count_kv %d", hp->n_heads,
                       hp->n_kv_heads);
    if (hp->dim % hp->n_heads)
        return zl_errf(err, ZL_EFORMAT, "embedding_length %d is not a multiple of head_count %d", hp->dim, hp->n_heads);
    hp->head_dim = hp->dim / hp->n_heads;
    get_u32_opt(g, a, "attention.key_length", &hp->head_dim);
    if (hp->head_dim <= 0 || hp->head_dim % 2) return zl_errf(err, ZL_EFORMAT, "head dimension %d is odd or zero", hp->head_dim);
    /* the projections' widths are products of two counts: they must fit an int
     * before they are compared with the tensor table */
    if ((int64_t)hp->n_heads * hp->head_dim > ZL_MAX_WIDTH)
        return zl_errf(err, ZL_EFORMAT, "%s.attention.head_count %d x head dimension %d exceeds %d", a, hp->n_heads,
                       hp->head_dim, ZL_MAX_WIDTH);
    int vlen = hp->head_dim;
    get_u32_opt(g, a, "attention.value_length", &vlen);
    if (vlen != hp->head_dim)
        return zl_errf(err, ZL_EUNSUP, "attention.value_length %d differs from key_length %d", vlen, hp->head_dim);
    hp->rope_dim = hp->head_dim;
    get_u32_opt(g, a, "rope.dimension_count", &hp->rope_dim);
    if (hp->rope_dim > hp->head_dim || hp->rope_dim % 2)
        return zl_errf(err, ZL_EFORMAT, "rope.dimension_count %d invalid for head dimension %d", hp->rope_dim,
                       hp->head_dim);
    hp->rope_base = 10000.0f;
    get_f32_opt(g, a, "rope.freq_base", &hp->rope_base);
    hp->norm_eps = 1e-5f;
    get_f32_opt(g, a, "attention.layer_norm_rms_epsilon", &hp->norm_eps);
    hp->rope_freq_scale = 1.0f;
    float factor = 0;
    zl_str stype;
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    int has_type = zl_gguf_get_str(g, key, &stype) == 0;
    if (get_f32_opt(g, a, "rope.scaling.factor", &factor) || get_f32_opt(g, a, "rope.scale_linear", &factor)) {
        if (has_type && !zl_str_eq(stype, "linear") && !zl_str_eq(stype, "none")) {
            char t[32];
            return zl_errf(err, ZL_EUNSUP, "unsupported rope scaling type '%s' (only linear)",
                           zl_str_copy(stype, t, sizeof t));
        }
        if (!(has_type && zl_str_eq(stype, "none")) && factor > 0 && factor != 1.0f) hp->rope_freq_scale = 1.0f / factor;
    }
    if (!(hp->rope_base > 0) || !isfinite(hp->rope_base) || !(hp->norm_eps > 0) || !isfinite(hp->norm_eps))
        return zl_errf(err, ZL_EFORMAT, "invalid rope.freq_base or rms epsilon");
    hp->embd_scale = gemma3 ? sqrtf((float)hp->dim) : 1.0f;
    /* Gemma scales queries by query_pre_attn_scalar^-1/2, which its files
     * state only as the head size (the 27B's differs and says so) */
    float qpas = 0;
    if (get_f32_opt(g, a, "attention.query_pre_attn_scalar", &qpas) && qpas > 0 && isfinite(qpas))
        hp->attn_scale = 1.0f / sqrtf(qpas);
    else
        hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    if (get_f32_opt(g, a, "final_logit_softcapping", &hp->final_softcap) && !(hp->final_softcap >= 0))
        return zl_errf(err, ZL_EFORMAT, "invalid %s.final_logit_softcapping", a);
    if (gemma3 && get_u32_opt(g, a, "attention.sliding_window", &hp->n_swa) && hp->n_swa > 0) {
        hp->rope_base_swa = 10000.0f; /* Gemma 3's local layers; files may say otherwise */
        if (get_f32_opt(g, a, "rope.freq_base_swa", &hp->rope_base_swa) &&
            !(hp->rope_base_swa > 0 && isfinite(hp->rope_base_swa)))
            return zl_errf(err, ZL_EFORMAT, "invalid %s.rope.freq_base_swa", a);
    }
    return 0;
}

/* Which layers slide: the metadata's sliding_window_pattern, either one flag
 * per layer or a period P (layers l with l % P < P - 1 are local, every P-th
 * global); Gemma 3's period is 6 when the file is silent. */
static int read_swa_layers(const zl_gguf *g, zl_model *m, zl_err *err) {
    zl_hparams *hp = &m->hp;
    if (hp->n_swa <= 0) return 0;
    char key[128];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", hp->arch);
    const zl_gguf_kv *kv = zl_gguf_find(g, key);
    if (kv && kv->type == ZL_GGUF_ARRAY) {
        if (kv->v.arr.type == ZL_GGUF_STRING || kv->v.arr.n != (uint64_t)hp->n_layers)
            return zl_errf(err, ZL_EFORMAT, "%s must hold one flag per layer (%d)", key, hp->n_layers);
        for (int l = 0; l < hp->n_layers; l++) m->layers[l].swa = zl_gguf_arr_i64(kv, (uint64_t)l) != 0;
        return 0;
    }
    int period = 6;
    if (kv && !get_u32_opt(g, hp->arch, "attention.sliding_window_pattern", &period))
        return zl_errf(err, ZL_EFORMAT, "invalid %s", key);
    for (int l = 0; l < hp->n_layers; l++) m->layers[l].swa = period == 0 || l % period < period - 1;
    return 0;
}

/* block_count against the tensor table, before anything is allocated per
 * layer: the layers present are the names blk.N.*, and they must be exactly
 * blk.0 .. blk.(block_count - 1), so a count the file does not back is a
 * clean error and not a calloc of that many layers (a hole in the middle is
 * named by the binding that follows). */
static int check_layer_count(const zl_gguf *g, const zl_hparams *hp, zl_err *err) {
    int64_t top = -1;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        zl_str s = g->tensors[i].name;
        if (s.len < 6 || memcmp(s.ptr, "blk.", 4)) continue;
        int64_t l = 0;
        uint64_t j = 4;
        for (; j < s.len && j < 14 && s.ptr[j] >= '0' && s.ptr[j] <= '9'; j++) l = l * 10 + (s.ptr[j] - '0');
        if (j == 4 || j >= s.len || s.ptr[j] != '.') continue;
        if (l > top) top = l;
    }
    if (top + 1 != hp->n_layers) {
        char span[48] = "no blk.* tensors";
        if (top >= 0) snprintf(span, sizeof span, "blk.0 .. blk.%lld", (long long)top);
        return zl_errf(err, ZL_EFORMAT, "%s.block_count is %d but the tensor table holds %lld layer%s (%s)", hp->arch,
                       hp->n_layers, (long long)(top + 1), top == 0 ? "" : "s", span);
    }
    return 0;
}

/* Bind a 2-D weight of shape [cols, rows] (GGUF order).  rows may be 0 to accept any. */
static int bind_mat(const zl_gguf *g, const char *name, int64_t cols, int64_t rows, zl_mat *m, int optional,
                    zl_err *err) {
    const zl_gguf_tensor *t = zl_gguf_find_tensor(g, name);
    if (!t) {
        if (optional) return 0;
        return zl_errf(err, ZL_EFORMAT, "missing tensor %s", name);
    }
    const zl_type_traits *tr = zl_type_traits_of(t->type);
    if (!tr->supported) return zl_errf(err, ZL_EUNSUP, "tensor %s has unsupported type %s", name, tr->name ? tr->name : "?");
    if (t->ne[0] != cols || (rows && t->ne[1] != rows) || t->ne[2] != 1 || t->ne[3] != 1)
        return zl_errf(err, ZL_EFORMAT, "tensor %s has shape [%lld, %lld, %lld], expected [%lld, %lld]", name,
                       (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)cols, (long long)rows);
    m->type = (zl_type)t->type;
    m->cols = t->ne[0];
    m->rows = t->ne[1];
    m->data = t->data;
    m->row_bytes = zl_row_size(m->type, m->cols);
    return 0;
}

/* A 1-D vector as F32: points into the file if already F32 (and aligned), else converted. */
static int bind_vec(zl_model *m, const char *name, int64_t n, const float **out, int optional, zl_err *err) {
    const zl_gguf_tensor *t = zl_gguf_find_tensor(m->gguf, name);
    *out = NULL;
    if (!t) {
        if (optional) return 0;
        return zl_errf(err, ZL_EFORMAT, "missing tensor %s", name);
    }
    if (t->ne[0] != n || t->ne[1] != 1 || t->ne[2] != 1 || t->ne[3] != 1)
        return zl_errf(err, ZL_EFORMAT, "tensor %s has %lld elements, expected %lld", name, (long long)t->ne[0],
                       (long long)n);
    const zl_type_traits *tr = zl_type_traits_of(t->type);
    if (!tr->supported) return zl_errf(err, ZL_EUNSUP, "tensor %s has unsupported type %s", name, tr->name ? tr->name : "?");
    if (t->type == ZL_TYPE_F32 && ((uintptr_t)t->data & 3) == 0) {
        *out = t->data;
        return 0;
    }
    float *buf = malloc((size_t)n * sizeof(float));
    float **no = realloc(m->owned, (size_t)(m->n_owned + 1) * sizeof *no);
    if (!buf || !no) {
        free(buf);
        if (no) m->owned = no;
        return zl_errf(err, ZL_ENOMEM, "out of memory");
    }
    m->owned = no;
    m->owned[m->n_owned++] = buf;
    zl_dequant_row((zl_type)t->type, t->data, buf, n);
    *out = buf;
    return 0;
}

int zl_model_from_gguf(zl_model **out, zl_gguf *g, zl_err *err) {
    *out = NULL;
    zl_model *m = calloc(1, sizeof *m);
    if (!m) return zl_errf(err, ZL_ENOMEM, "out of memory");
    m->gguf = g;
    m->kern = zl_kernels_for(zl_cpu_max_isa());
    zl_hparams *hp = &m->hp;
    int rc = read_hparams(g, hp, err);
    zl_str name;
    if (zl_gguf_get_str(g, "general.name", &name) == 0) zl_str_copy(name, m->name, sizeof m->name);
    const zl_gguf_tensor *te = rc ? NULL : zl_gguf_find_tensor(g, "token_embd.weight");
    if (!rc && !te) rc = zl_errf(err, ZL_EFORMAT, "missing tensor token_embd.weight");
    if (!rc && te->ne[1] > ZL_MAX_WIDTH)
        rc = zl_errf(err, ZL_EFORMAT, "token_embd.weight has %lld rows, more than %d tokens", (long long)te->ne[1],
                     ZL_MAX_WIDTH);
    if (!rc) {
        hp->n_vocab = (int)te->ne[1];
        rc = bind_mat(g, "token_embd.weight", hp->dim, 0, &m->tok_embd, 0, err);
    }
    if (!rc) rc = bind_vec(m, "output_norm.weight", hp->dim, &m->output_norm, 0, err);
    if (!rc) rc = bind_mat(g, "output.weight", hp->dim, hp->n_vocab, &m->output, 1, err);
    if (!rc && !m->output.data) {
        m->output = m->tok_embd;
        hp->tied_output = 1;
    }
    if (!rc) rc = check_layer_count(g, hp, err);
    if (!rc) {
        m->layers = calloc((size_t)hp->n_layers, sizeof *m->layers);
        if (!m->layers) rc = zl_errf(err, ZL_ENOMEM, "out of memory");
    }
    /* products that read_hparams bounded: computed only once it succeeded */
    int qd = rc ? 0 : hp->n_heads * hp->head_dim, kvd = rc ? 0 : hp->n_kv_heads * hp->head_dim;
    for (int l = 0; !rc && l < hp->n_layers; l++) {
        zl_layer *L = &m->layers[l];
        char n[96];
#define NM(s) (snprintf(n, sizeof n, "blk.%d.%s", l, s), n)
        if ((rc = bind_vec(m, NM("attn_norm.weight"), hp->dim, &L->attn_norm, 0, err))) break;
        if ((rc = bind_vec(m, NM("ffn_norm.weight"), hp->dim, &L->ffn_norm, 0, err))) break;
        if ((rc = bind_mat(g, NM("attn_q.weight"), hp->dim, qd, &L->wq, 0, err))) break;
        if ((rc = bind_mat(g, NM("attn_k.weight"), hp->dim, kvd, &L->wk, 0, err))) break;
        if ((rc = bind_mat(g, NM("attn_v.weight"), hp->dim, kvd, &L->wv, 0, err))) break;
        if ((rc = bind_mat(g, NM("attn_output.weight"), qd, hp->dim, &L->wo, 0, err))) break;
        if ((rc = bind_mat(g, NM("ffn_gate.weight"), hp->dim, hp->ffn_dim, &L->w_gate, 0, err))) break;
        if ((rc = bind_mat(g, NM("ffn_down.weight"), hp->ffn_dim, hp->dim, &L->w_down, 0, err))) break;
        if ((rc = bind_mat(g, NM("ffn_up.weight"), hp->dim, hp->ffn_dim, &L->w_up, 0, err))) break;
        int opt = !hp->has_qkv_bias;
        if ((rc = bind_vec(m, NM("attn_q.bias"), qd, &L->bq, opt, err))) break;
        if ((rc = bind_vec(m, NM("attn_k.bias"), kvd, &L->bk, opt, err))) break;
        if ((rc = bind_vec(m, NM("attn_v.bias"), kvd, &L->bv, opt, err))) break;
        if (hp->qk_norm && ((rc = bind_vec(m, NM("attn_q_norm.weight"), hp->head_dim, &L->q_norm, 0, err)) ||
                            (rc = bind_vec(m, NM("attn_k_norm.weight"), hp->head_dim, &L->k_norm, 0, err))))
            break;
        if (hp->post_norms && ((rc = bind_vec(m, NM("post_attention_norm.weight"), hp->dim, &L->post_attn_norm, 0, err)) ||
                               (rc = bind_vec(m, NM("post_ffw_norm.weight"), hp->dim, &L->post_ffn_norm, 0, err))))
            break;
#undef NM
    }
    if (!rc) rc = read_swa_layers(g, m, err);
    if (rc) {
        m->gguf = NULL; /* caller keeps ownership on failure */
        zl_model_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

int zl_model_load(zl_model **out, const char *path, const zl_model_opts *opts, zl_err *err) {
    *out = NULL;
    zl_gguf_open_opts go = {0};
    zl_isa isa = zl_cpu_max_isa();
    if (opts) {
        go.no_mmap = opts->no_mmap;
        go.populate = opts->populate;
        if (opts->isa && *opts->isa && zl_isa_from_name(opts->isa, &isa))
            return zl_errf(err, ZL_EINVAL, "unknown ISA level '%s' (%s)", opts->isa, zl_isa_names());
    }
    zl_gguf *g;
    int rc = zl_gguf_open(&g, path, &go, err);
    if (rc) return rc;
    rc = zl_model_from_gguf(out, g, err);
    if (rc) {
        zl_err_prefix(err, "%s", path);
        zl_gguf_close(g);
        return rc;
    }
    (*out)->kern = zl_kernels_for(isa);
    return 0;
}

void zl_model_free(zl_model *m) {
    if (!m) return;
    if (m->borrowed) { free(m); return; }
    zl_prefetch_free(m->prefetch);
    for (int i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    free(m->layers);
    zl_gguf_close(m->gguf);
    free(m);
}

zl_rope zl_model_rope(const zl_model *m) {
    zl_rope r = {m->hp.rope_dim, m->hp.rope_base, m->hp.rope_freq_scale, m->hp.rope_type == ZL_ROPE_NEOX};
    return r;
}

zl_rope zl_model_rope_layer(const zl_model *m, int layer) {
    zl_rope r = zl_model_rope(m);
    if (m->layers[layer].swa) { /* local layers: their own base, never scaled */
        r.base = m->hp.rope_base_swa;
        r.freq_scale = 1.0f;
    }
    return r;
}

int zl_model_uniform_rope(const zl_model *m) {
    for (int l = 0; l < m->hp.n_layers; l++)
        if (m->layers[l].swa) return 0;
    return 1;
}
