/* fidelity_smollm2.c — SmolLM2-135M (Q4_1) against llama.cpp: logits of 512
 * GPL-3 positions and a 128-token greedy chat answer (see fidelity.h; the
 * bounds and the spread they come from are in tests/fixtures/real/README.md;
 * its perplexity is fidelity_smollm2_ppl, label real-large). */
#include "fidelity.h"

/* spread llama.cpp <-> exact on these 512 positions: mean |d| 0.163 over
 * llama.cpp's top-32, top-1 95.7%.  Bounds as in fidelity_qwen05: mean |d|
 * the spread + 20%, top-1 the spread's less 2.5 points, a greedy divergence
 * only below the 99th percentile of |llama.cpp - exact| on the top-2 margin. */
static const fid_bounds k_smollm2 = {
    .model = "smollm2-135m",
    .mean_llama = 0.195, .top1_llama = 0.93,
    .mean_exact = 0.195, .top1_exact = 0.93,
    .exact_positions = 64,
    .greedy_margin = 0.55, /* p99 of |llama.cpp - exact| on the top-2 margin of the 512 positions: 0.535 */
};

Test(real_smollm2, logits, .timeout = 1200) { fid_logits(&k_smollm2); }
Test(real_smollm2, greedy, .timeout = 1200) { fid_greedy(&k_smollm2); }
