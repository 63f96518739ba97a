/* fidelity_qwen15.c — qwen2.5-coder-1.5b against llama.cpp: logits of 512 GPL-3 positions,
 * 128 greedy chat steps, perplexity at contexts 128/512/1024 (fidelity.h).
 * Bounds (see tests/fixtures/real/README.md for the spreads): mean |d| at
 * most the spread between the two references (llama.cpp <-> exact, over
 * llama.cpp's top-32) + 20% (two implementations that differ only in
 * rounding land up to 1.15x the spread apart: zerolayer's AVX2 build vs
 * llama.cpp on qwen2.5-coder-0.5b); top-1 agreement at least the spread's
 * less 2.5 points; a greedy step may differ only below the 99th percentile
 * of |llama.cpp - exact| on the top-2 margin.
 * Perplexity: within 3 sigma of llama-perplexity, sigma = the sd of the per-
 * prediction NLL difference zerolayer - llama.cpp on the 512 fixture positions
 * (0.1109 nats) over the ~1010 predictions of each context: 0.35%, so 1.05%.
 */
#include "fidelity.h"

/* spread 0.1541, top-1 97.3% (exact reference on the first 256 positions);
 * |d margin| p99 0.878 */
static const fid_bounds k_qwen15 = {
    .model = "qwen2.5-coder-1.5b",
    .mean_llama = 0.185, .top1_llama = 0.945, .mean_exact = 0.185, .top1_exact = 0.945,
    .exact_positions = 32, .greedy_margin = 0.88, .ppl_rel = 0.0105,
};

Test(real_qwen15, logits, .timeout = 1200) { fid_logits(&k_qwen15); }
Test(real_qwen15, greedy, .timeout = 1200) { fid_greedy(&k_qwen15); }
Test(real_qwen15, perplexity, .timeout = 1200) { fid_perplexity(&k_qwen15); }
