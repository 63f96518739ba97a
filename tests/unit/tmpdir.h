/* tmpdir.h — a scratch directory under /tmp for one Criterion test file.
 * Define ZL_TMP_TAG (a string literal) before including; call
 * make_tmp_dir() in a test's init and rm_tmp_dir() in its fini;
 * tmp_path(name) gives a path inside (four rotating buffers, so a few can be
 * live at once). */
#ifndef ZL_TEST_TMPDIR_H
#define ZL_TEST_TMPDIR_H

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

#endif
