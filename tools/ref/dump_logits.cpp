/* dump_logits.cpp — reference outputs from llama.cpp through its public C
 * API (include/llama.h), for the fixtures of tests/fixtures/real.  Owns only
 * the running of a reference model and the writing of tools/ref/README.md's
 * formats; it is built outside the repository against a reference build and
 * is never part of zerolayer's build.
 *
 *   dump_logits logits MODEL IDS OUT   one sequence, every position's logits
 *   dump_logits greedy MODEL IDS N OUT N greedy tokens after the prompt IDS
 *                                      (end-of-generation tokens do not stop it)
 *
 * IDS is a text file of whitespace-separated token ids, used exactly as they
 * are (nothing is added).  CPU only, 2 threads, a context big enough for the
 * whole sequence in one batch. */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>

#include "llama.h"

static const int K = 32;

static std::vector<llama_token> read_ids(const char *path) {
    std::vector<llama_token> ids;
    FILE *f = fopen(path, "r");
    if (!f) { fprintf(stderr, "dump_logits: cannot open %s\n", path); exit(1); }
    long v;
    while (fscanf(f, "%ld", &v) == 1) ids.push_back((llama_token)v);
    if (!feof(f)) { fprintf(stderr, "dump_logits: %s: not a list of ids\n", path); exit(1); }
    fclose(f);
    return ids;
}

/* indices of the k largest of l[0..n), largest first (ties: lower id first) */
static std::vector<int> top_k(const float *l, int n, int k) {
    std::vector<int> idx(n);
    for (int i = 0; i < n; i++) idx[i] = i;
    auto cmp = [l](int a, int b) { return l[a] > l[b] || (l[a] == l[b] && a < b); };
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), cmp);
    idx.resize(k);
    return idx;
}

static double logsumexp(const float *l, int n) {
    float mx = l[0];
    for (int i = 1; i < n; i++) mx = std::max(mx, l[i]);
    double s = 0;
    for (int i = 0; i < n; i++) s += std::exp((double)l[i] - mx);
    return std::log(s) + mx;
}

static void put_u32(FILE *f, uint32_t v) { fwrite(&v, 4, 1, f); }

int main(int argc, char **argv) {
    if (argc < 5 || (strcmp(argv[1], "logits") && strcmp(argv[1], "greedy")) ||
        (!strcmp(argv[1], "greedy") && argc < 6)) {
        fprintf(stderr, "usage: dump_logits logits MODEL IDS OUT | dump_logits greedy MODEL IDS N OUT\n");
        return 2;
    }
    const bool greedy = !strcmp(argv[1], "greedy");
    const char *model_path = argv[2], *out_path = greedy ? argv[5] : argv[4];
    const int n_gen = greedy ? atoi(argv[4]) : 0;
    std::vector<llama_token> ids = read_ids(argv[3]);
    if (ids.size() < 2) { fprintf(stderr, "dump_logits: need at least 2 ids\n"); return 1; }

    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    /* no weight repacking: this build's AMX repacked kernels stop with SIGILL on
     * this VM (the CPU lists AMX, the kernel does not grant it); the plain CPU
     * kernels quantise activations to 8 bits the same way */
    mp.use_extra_bufts = false;
    llama_model *model = llama_model_load_from_file(model_path, mp);
    if (!model) { fprintf(stderr, "dump_logits: cannot load %s\n", model_path); return 1; }
    const llama_vocab *vocab = llama_model_get_vocab(model);
    const int nv = llama_vocab_n_tokens(vocab);
    for (llama_token t : ids)
        if (t < 0 || t >= nv) { fprintf(stderr, "dump_logits: id %d outside the vocabulary\n", t); return 1; }

    const int n_total = (int)ids.size() + n_gen;
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)n_total + 16;
    cp.n_batch = (uint32_t)ids.size();
    cp.n_ubatch = (uint32_t)ids.size();
    cp.n_seq_max = 1;
    cp.n_threads = 2;
    cp.n_threads_batch = 2;
    cp.no_perf = true;
    /* flash attention: llama.cpp's default (auto = on for the CPU) unless
     * DUMP_FLASH_ATTN=off asks for the separate softmax path */
    const char *fa = getenv("DUMP_FLASH_ATTN");
    if (fa && !strcmp(fa, "off")) cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    else if (fa && !strcmp(fa, "on")) cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
    llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "dump_logits: cannot create a context\n"); return 1; }

    const int n = (int)ids.size();
    llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        b.token[i] = ids[i];
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = greedy ? (i == n - 1) : 1;
    }
    b.n_tokens = n;
    if (llama_decode(ctx, b)) { fprintf(stderr, "dump_logits: decode failed\n"); return 1; }

    FILE *out = fopen(out_path, greedy ? "w" : "wb");
    if (!out) { fprintf(stderr, "dump_logits: cannot create %s\n", out_path); return 1; }
    if (!greedy) {
        /* header: magic, version, n_vocab, n_positions, K */
        fwrite("ZLTK", 1, 4, out);
        put_u32(out, 1);
        put_u32(out, (uint32_t)nv);
        put_u32(out, (uint32_t)n);
        put_u32(out, (uint32_t)K);
        for (int i = 0; i < n; i++) {
            const float *l = llama_get_logits_ith(ctx, i);
            std::vector<int> top = top_k(l, nv, K);
            int32_t tid[K];
            float tl[K];
            for (int k = 0; k < K; k++) { tid[k] = top[k]; tl[k] = l[top[k]]; }
            float lse = (float)logsumexp(l, nv);
            float next = i + 1 < n ? l[ids[i + 1]] : NAN;
            fwrite(tid, 4, K, out);
            fwrite(tl, 4, K, out);
            fwrite(&lse, 4, 1, out);
            fwrite(&next, 4, 1, out);
        }
    } else {
        /* one line per generated token: step id top1_logit second_id second_logit */
        fprintf(out, "# step token logit second_token second_logit\n");
        const float *l = llama_get_logits_ith(ctx, n - 1);
        for (int s = 0; s < n_gen; s++) {
            std::vector<int> top = top_k(l, nv, 2);
            fprintf(out, "%d %d %.6f %d %.6f\n", s, top[0], l[top[0]], top[1], l[top[1]]);
            llama_batch one = llama_batch_init(1, 0, 1);
            one.token[0] = top[0];
            one.pos[0] = n + s;
            one.n_seq_id[0] = 1;
            one.seq_id[0][0] = 0;
            one.logits[0] = 1;
            one.n_tokens = 1;
            if (llama_decode(ctx, one)) { fprintf(stderr, "dump_logits: decode failed at step %d\n", s); return 1; }
            llama_batch_free(one);
            l = llama_get_logits_ith(ctx, 0);
        }
    }
    if (fclose(out)) { fprintf(stderr, "dump_logits: writing %s failed\n", out_path); return 1; }
    llama_batch_free(b);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
