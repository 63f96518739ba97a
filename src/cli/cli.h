/* cli.h — subcommand entry points and small shared helpers of the CLI. */
#ifndef ZL_CLI_H
#define ZL_CLI_H

#include <stddef.h>

#include "zerolayer.h"

int cmd_run(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_codec(int argc, char **argv);

/* Print "zerolayer: <msg>" to stderr and return 1 (the exit status). */
int cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Strict number parsing: the whole string must be a number in range. */
int cli_int(const char *flag, const char *s, long lo, long hi, long *out);
int cli_float(const char *flag, const char *s, double lo, double hi, double *out);
int cli_u64(const char *flag, const char *s, unsigned long long *out);
/* --ring-cost: up to CLI_RING_COST_MAX positive numbers separated by commas
 * (the verify-cost curve: forward over 1, 2, .. tokens / over one) into cost,
 * *n set to their count; "measure" sets *n = 0 (the caller measures).
 * Prints the error and returns 1 on bad input. */
#define CLI_RING_COST_MAX 17
int cli_ring_cost(const char *s, float *cost, int *n);
/* The embedded default model path (models/stories260K.gguf next to the
 * source tree, or $ZL_DEFAULT_MODEL). */
const char *cli_default_model(void);
/* A whole file (malloc'd, NUL-terminated; *len its size) or NULL. */
char *cli_read_file(const char *path, size_t *len);
int cli_is_help(const char *a);
/* --kv-policy NAME -> kind (prints the error). */
int cli_kv_policy(const char *name, zl_kv_policy_kind *kind);
/* --kv-budget: a token count or a fraction (0 < f <= 1) of n_ctx. */
int cli_budget(const char *flag, const char *s, long n_ctx, long *out);
/* A whole file, NUL-terminated (malloc'd), or NULL when it cannot be read. */
char *cli_read_text(const char *path, size_t *len);
/* Progress bar on stderr when it is a terminal (zl_llm_preheat callback). */
void cli_progress(size_t done, size_t total, void *label);

#endif
