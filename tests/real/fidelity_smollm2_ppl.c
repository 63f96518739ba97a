/* fidelity_smollm2_ppl.c — SmolLM2-135M's perplexity at contexts 128/512/
 * 1024 against llama-perplexity (6144 tokens of evaluation: label
 * real-large; its logits and greedy answer are fidelity_smollm2, label
 * real-small).
 * Perplexity: within 3 sigma of llama-perplexity, sigma = the sd of the per-
 * prediction NLL difference zerolayer - llama.cpp on the 512 fixture positions
 * (0.1037 nats) over the ~1010 predictions of each context: 0.33%, so 1%.
 */
#include "fidelity.h"

static const fid_bounds k_smollm2 = {.model = "smollm2-135m", .ppl_rel = 0.010};

Test(real_smollm2, perplexity, .timeout = 1200) { fid_perplexity(&k_smollm2); }
