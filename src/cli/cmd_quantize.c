/* cmd_quantize.c — `zerolayer quantize IN.gguf OUT.gguf TYPE`: argument
 * parsing and progress output over zl_quantize_file (src/model/quantize.c). */
#include <stdio.h>
#include <string.h>

#include "../model/quantize.h"
#include "cli.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: zerolayer quantize [-t THREADS] IN.gguf OUT.gguf TYPE\n"
            "  convert the weight matrices of IN to TYPE and write OUT; metadata is copied,\n"
            "  general.file_type is set, 1-D tensors (norms, biases) are stored as F32\n"
            "  TYPE: %s\n"
            "    F32/F16/BF16, Q4_K, Q5_K: every matrix in that type\n"
            "    Q4_0 .. Q8_0, Q6_K: as llama.cpp (output.weight in Q6_K unless Q8_0)\n"
            "    Q4_K_S/M, Q5_K_S/M: llama.cpp's mixes (attn_v/ffn_down with more bits in some layers)\n"
            "  a matrix whose rows do not fit the type's blocks falls back to a compatible type\n"
            "  -t, --threads N   worker threads (default: all CPUs)\n",
            zl_qtarget_names());
}

static void progress(void *ud, const zl_qevent *ev) {
    (void)ud;
    char shape[64];
    int p = 0;
    for (uint32_t d = 0; d < ev->n_dims; d++)
        p += snprintf(shape + p, sizeof shape - (size_t)p, "%s%lld", d ? " x " : "", (long long)ev->ne[d]);
    fprintf(stderr, "[%4d/%d] %-32s %-16s %5s -> %-5s %9.2f -> %8.2f MiB\n", ev->index + 1, ev->count, ev->name, shape,
            zl_type_traits_of(ev->from)->name, zl_type_traits_of(ev->to)->name, ev->in_bytes / 1048576.0,
            ev->out_bytes / 1048576.0);
    if (ev->note) fprintf(stderr, "         note: %s: %s\n", ev->name, ev->note);
}

int cmd_quantize(int argc, char **argv) {
    const char *pos[3];
    int n_pos = 0;
    long threads = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) { usage(stdout); return 0; }
        if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (cli_int(a, i + 1 < argc ? argv[++i] : NULL, 1, 1024, &threads)) return 1;
        } else if (a[0] == '-' && a[1]) {
            return cli_fail("quantize: unknown option '%s' (see zerolayer quantize --help)", a);
        } else {
            if (n_pos == 3) return cli_fail("quantize: unexpected argument '%s' (see zerolayer quantize --help)", a);
            pos[n_pos++] = a;
        }
    }
    if (n_pos != 3) return cli_fail("quantize: expected IN.gguf OUT.gguf TYPE (see zerolayer quantize --help)");
    zl_qtarget t;
    if (zl_qtarget_parse(pos[2], &t)) return cli_fail("quantize: unknown type '%s' (one of %s)", pos[2], zl_qtarget_names());
    zl_quantize_opts o = {(int)threads, progress, NULL};
    zl_qstats st;
    zl_err err = {0};
    if (zl_quantize_file(pos[0], pos[1], &t, &o, &st, &err)) return cli_fail("quantize: %s", err.msg);
    fprintf(stderr, "quantized %d tensors to %s: %.2f MiB -> %.2f MiB of tensors (%.1f%%), file %.2f MiB, %d fallback%s, %.2f s\n",
            st.n_tensors, t.name, st.in_bytes / 1048576.0, st.out_bytes / 1048576.0,
            st.in_bytes ? 100.0 * (double)st.out_bytes / (double)st.in_bytes : 0.0, st.file_bytes / 1048576.0,
            st.n_fallback, st.n_fallback == 1 ? "" : "s", st.seconds);
    return 0;
}
