/* test_files.h — files for Criterion tests: a scratch directory under /tmp
 * for one test file, and reading a whole file.
 * Define ZL_TMP_TAG (a string literal) before including; call
 * make_tmp_dir() in a test's init and rm_tmp_dir() in its fini;
 * tmp_path(name) gives a path inside (four rotating buffers, so a few can be
 * live at once); slurp(path, &n) returns the file's bytes (malloc'd) or
 * fails the test. */
#ifndef ZL_TEST_FILES_H
#define ZL_TEST_FILES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <criterion/criterion.h>

static char tmp_dir[64];

static void make_tmp_dir(void) {
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/zl_test_" ZL_TMP_TAG "_XXXXXX");
    cr_assert(mkdtemp(tmp_dir));
}
static void rm_tmp_dir(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp_dir);
    cr_assert_eq(system(cmd), 0);
}
static const char *tmp_path(const char *name) {
    static char p[4][160];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", tmp_dir, name);
    return p[k];
}

static inline uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    cr_assert(f, "%s", path);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(*n);
    cr_assert_eq(fread(p, 1, *n, f), *n);
    fclose(f);
    return p;
}

#endif
