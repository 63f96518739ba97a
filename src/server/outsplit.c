/* outsplit.c — reasoning, answer and calls out of one choice's text
 * (outsplit.h).  Owns the order of the two splitters only. */
#include "outsplit.h"

#include <stdlib.h>
#include <string.h>

int zl_outsplit_init(zl_outsplit *o, int think, int inside, int tools, zl_tc_format f) {
    memset(o, 0, sizeof *o);
    if (think && !(o->think = zl_think_new(inside))) return -1;
    if (tools && !(o->tc = zl_tc_parser_new(f))) {
        zl_outsplit_free(o);
        return -1;
    }
    return 0;
}

void zl_outsplit_free(zl_outsplit *o) {
    zl_think_free(o->think);
    zl_tc_parser_free(o->tc);
    memset(o, 0, sizeof *o);
}

int zl_outsplit_feed(zl_outsplit *o, const char *s, size_t n, int final, char **reason, size_t *rlen, char **content,
                     size_t *clen) {
    char *mid = NULL;
    size_t ml = 0;
    int rc = 0;
    if (o->think) {
        rc = zl_think_feed(o->think, s, n, reason, rlen, &mid, &ml);
        if (!rc && final) rc = zl_think_finish(o->think, reason, rlen, &mid, &ml);
        s = mid;
        n = ml;
    }
    if (!rc && o->tc) {
        if (n) rc = zl_tc_feed(o->tc, s, n, content, clen);
        if (!rc && final) rc = zl_tc_finish(o->tc, content, clen);
    } else if (!rc && n) {
        char *t = realloc(*content, *clen + n + 1);
        if (!t) rc = -1;
        else {
            memcpy(t + *clen, s, n);
            *clen += n;
            t[*clen] = 0;
            *content = t;
        }
    }
    free(mid);
    return rc ? -1 : 0;
}
