/* assert.c — the failure path of ZL_ASSERT (assert.h): report and abort. */
#include "assert.h"

#include <stdio.h>
#include <stdlib.h>

void zl_assert_fail(const char *file, int line, const char *func, const char *cond) {
    fprintf(stderr, "zerolayer: internal error: %s:%d: %s: assertion '%s' failed\n", file, line, func, cond);
    abort();
}
