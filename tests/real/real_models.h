/* real_models.h — where the trained models of tools/models.tsv are for a
 * test.  Tests under tests/real/ run through need_models.sh, which skips
 * them (exit 77) when a model is not cached and exports ZL_MODELS.
 * zl_real_model(name) returns the cached file's path (static buffer) or
 * fails the test. */
#ifndef ZL_REAL_MODELS_H
#define ZL_REAL_MODELS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

static inline const char *zl_real_model(const char *name) {
    static char path[4][1024];
    static int k;
    const char *dir = getenv("ZL_MODELS");
    cr_assert(dir, "ZL_MODELS is not set: run real-model tests through tests/real/need_models.sh");
    FILE *f = fopen(ZL_ROOT "/tools/models.tsv", "r");
    cr_assert(f, "cannot open tools/models.tsv");
    char line[4096];
    const char *out = NULL;
    while (!out && fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        char *tab = strchr(line, '\t');
        if (!tab) continue;
        *tab = 0;
        if (strcmp(line, name)) continue;
        char *file = tab + 1, *e = strchr(file, '\t');
        if (e) *e = 0;
        k = (k + 1) % 4;
        snprintf(path[k], sizeof path[k], "%s/%s", dir, file);
        out = path[k];
    }
    fclose(f);
    cr_assert(out, "model %s is not in tools/models.tsv", name);
    return out;
}

#endif
