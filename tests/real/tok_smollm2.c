/* tok_smollm2.c — SmolLM2-135M's tokenizer (byte-level BPE, pre-tokenizer
 * "smollm", 49152 tokens) on the corpus against llama.cpp; see tok_corpus.h. */
#include "tok_corpus.h"

Test(tok_real, smollm2_135m, .timeout = 600) { tok_check_model("smollm2-135m", "smollm2-135m"); }
