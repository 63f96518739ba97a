/* fidelity_smollm2_ppl.c — SmolLM2-135M's perplexity at contexts 128/512/
 * 1024 against llama-perplexity, within 0.5% (6144 tokens of evaluation:
 * label real-large; its logits and greedy answer are fidelity_smollm2, label
 * real-small). */
#include "fidelity.h"

static const fid_bounds k_smollm2 = {.model = "smollm2-135m", .ppl_rel = 0.005};

Test(real_smollm2, perplexity, .timeout = 1200) { fid_perplexity(&k_smollm2); }
