/* cmd_inspect.c — `zerolayer inspect MODEL`: metadata and tensor table. */
#include <stdio.h>
#include <string.h>

#include "../gguf/gguf.h"
#include "../tensor/types.h"
#include "cli.h"

static void print_value(const zl_gguf_kv *kv) {
    char buf[96];
    switch (kv->type) {
    case ZL_GGUF_STRING:
        printf("\"%s%s\"", zl_str_copy(kv->v.s, buf, sizeof buf), kv->v.s.len >= sizeof buf ? "…" : "");
        break;
    case ZL_GGUF_F32: case ZL_GGUF_F64: printf("%g", kv->v.f); break;
    case ZL_GGUF_I8: case ZL_GGUF_I16: case ZL_GGUF_I32: case ZL_GGUF_I64: printf("%lld", (long long)kv->v.i); break;
    case ZL_GGUF_BOOL: printf("%s", kv->v.u ? "true" : "false"); break;
    case ZL_GGUF_ARRAY: {
        printf("[%s x %llu]", zl_gguf_vtype_name(kv->v.arr.type), (unsigned long long)kv->v.arr.n);
        uint64_t show = kv->v.arr.n < 4 ? kv->v.arr.n : 4;
        printf(" {");
        for (uint64_t i = 0; i < show; i++) {
            if (i) printf(", ");
            if (kv->v.arr.type == ZL_GGUF_STRING) printf("\"%s\"", zl_str_copy(kv->v.arr.strs[i], buf, 32));
            else printf("%g", zl_gguf_arr_f64(kv, i));
        }
        printf("%s}", kv->v.arr.n > show ? ", …" : "");
        break;
    }
    default: printf("%llu", (unsigned long long)kv->v.u);
    }
}

int cmd_inspect(int argc, char **argv) {
    if (argc != 2 || cli_is_help(argv[1])) {
        FILE *f = argc == 2 ? stdout : stderr;
        fputs("usage: zerolayer inspect MODEL.gguf\n  print GGUF version, metadata and the tensor table\n", f);
        return argc == 2 ? 0 : 1;
    }
    zl_err err = {0};
    zl_gguf *g;
    if (zl_gguf_open(&g, argv[1], NULL, &err)) return cli_fail("%s", err.msg);
    printf("file: %s\nversion: %u\nalignment: %u\nmetadata: %llu\ntensors: %llu\n\n", argv[1], g->version,
           g->alignment, (unsigned long long)g->n_kv, (unsigned long long)g->n_tensors);
    char key[256];
    for (uint64_t i = 0; i < g->n_kv; i++) {
        printf("%-48s %-7s ", zl_str_copy(g->kv[i].key, key, sizeof key), zl_gguf_vtype_name(g->kv[i].type));
        print_value(&g->kv[i]);
        putchar('\n');
    }
    printf("\n%-40s %-6s %-28s %12s %12s\n", "tensor", "type", "shape", "bytes", "offset");
    uint64_t total = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const zl_gguf_tensor *t = &g->tensors[i];
        char shape[64] = "";
        int p = 0;
        for (uint32_t d = 0; d < t->n_dims; d++)
            p += snprintf(shape + p, sizeof shape - (size_t)p, "%s%lld", d ? " x " : "", (long long)t->ne[d]);
        printf("%-40s %-6s %-28s %12llu %12llu\n", zl_str_copy(t->name, key, sizeof key),
               zl_type_traits_of(t->type)->name, shape, (unsigned long long)t->nbytes, (unsigned long long)t->offset);
        total += t->nbytes;
    }
    printf("\ntotal tensor bytes: %llu (%.2f MiB)\n", (unsigned long long)total, total / 1048576.0);
    zl_gguf_close(g);
    return 0;
}
