/* fidelity_large.c — the larger models against llama.cpp (see fidelity.h
 * and tests/fixtures/real/README.md for the bounds and their spreads). */
#include "fidelity.h"

static const fid_bounds k_qwen05 = {
    .model = "qwen2.5-coder-0.5b",
    .mean_llama = 1, .top1_llama = 0.5, .mean_exact = 1, .top1_exact = 0.5,
    .exact_positions = 32, .greedy_margin = 0.5, .ppl_rel = 0.005,
};
static const fid_bounds k_qwen15 = {
    .model = "qwen2.5-coder-1.5b",
    .mean_llama = 1, .top1_llama = 0.5, .mean_exact = 1, .top1_exact = 0.5,
    .exact_positions = 32, .greedy_margin = 0.5, .ppl_rel = 0.005,
};

Test(real_qwen05, logits, .timeout = 1200) { fid_logits(&k_qwen05); }
Test(real_qwen05, greedy, .timeout = 1200) { fid_greedy(&k_qwen05); }
Test(real_qwen05, perplexity, .timeout = 1200) { fid_perplexity(&k_qwen05); }
Test(real_qwen15, logits, .timeout = 1200) { fid_logits(&k_qwen15); }
Test(real_qwen15, greedy, .timeout = 1200) { fid_greedy(&k_qwen15); }
Test(real_qwen15, perplexity, .timeout = 1200) { fid_perplexity(&k_qwen15); }
