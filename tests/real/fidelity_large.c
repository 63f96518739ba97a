/* fidelity_large.c — the larger models against llama.cpp, and SmolLM2's
 * perplexity (see fidelity.h; tests/fixtures/real/README.md has the spread
 * each bound comes from).  Bounds: mean |d| at most the spread between the
 * two references (llama.cpp <-> exact, over llama.cpp's top-32) + 20% (two
 * implementations that differ only in rounding land up to 1.15x the spread
 * apart: zerolayer's AVX2 build vs llama.cpp on qwen2.5-coder-0.5b); top-1
 * agreement at least the spread's less 2.5 points; a greedy divergence only
 * below the 99th percentile of |llama.cpp - exact| on the top-2 margin;
 * perplexity within 0.5% of llama-perplexity. */
#include "fidelity.h"

/* SmolLM2's logits and greedy answer are in fidelity_small (real-small); its
 * perplexity, 6144 tokens of evaluation, is checked here */
static const fid_bounds k_smollm2 = {.model = "smollm2-135m", .ppl_rel = 0.005};

/* spread 0.0933, top-1 96.9%; |d margin| p99 0.384 */
static const fid_bounds k_qwen05 = {
    .model = "qwen2.5-coder-0.5b",
    .mean_llama = 0.112, .top1_llama = 0.94, .mean_exact = 0.112, .top1_exact = 0.94,
    .exact_positions = 32, .greedy_margin = 0.40, .ppl_rel = 0.005,
};
/* spread 0.1541, top-1 97.3% (exact reference on the first 256 positions);
 * |d margin| p99 0.878 */
static const fid_bounds k_qwen15 = {
    .model = "qwen2.5-coder-1.5b",
    .mean_llama = 0.185, .top1_llama = 0.945, .mean_exact = 0.185, .top1_exact = 0.945,
    .exact_positions = 32, .greedy_margin = 0.88, .ppl_rel = 0.005,
};
/* spread 0.1899, top-1 95.7%; |d margin| p99 0.559 */
static const fid_bounds k_gemma3 = {
    .model = "gemma3-270m",
    .mean_llama = 0.228, .top1_llama = 0.93, .mean_exact = 0.228, .top1_exact = 0.93,
    .exact_positions = 32, .greedy_margin = 0.56, .ppl_rel = 0.005,
};

Test(real_smollm2, perplexity, .timeout = 1200) { fid_perplexity(&k_smollm2); }
Test(real_qwen05, logits, .timeout = 1200) { fid_logits(&k_qwen05); }
Test(real_qwen05, greedy, .timeout = 1200) { fid_greedy(&k_qwen05); }
Test(real_qwen05, perplexity, .timeout = 1200) { fid_perplexity(&k_qwen05); }
Test(real_qwen15, logits, .timeout = 1200) { fid_logits(&k_qwen15); }
Test(real_qwen15, greedy, .timeout = 1200) { fid_greedy(&k_qwen15); }
Test(real_qwen15, perplexity, .timeout = 1200) { fid_perplexity(&k_qwen15); }
Test(real_gemma3, logits, .timeout = 1200) { fid_logits(&k_gemma3); }
Test(real_gemma3, greedy, .timeout = 1200) { fid_greedy(&k_gemma3); }
Test(real_gemma3, perplexity, .timeout = 1200) { fid_perplexity(&k_gemma3); }
