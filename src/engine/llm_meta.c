/* llm_meta.c — what a zl_llm handle says about itself: the GGUF metadata by
 * key and the kernel level it runs at.  Read-only views of the loaded model;
 * never opens a file (the handle's mapping holds every value). */
#include <string.h>

#include "engine_internal.h"

const char *zl_llm_isa(const zl_llm *llm) { return zl_isa_name(zl_kernels_isa(llm->model->kern)); }
