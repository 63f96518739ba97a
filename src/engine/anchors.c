/* anchors.c — prompt text with <|anchor_start|>...<|anchor_end|> markers:
 * the markers are removed and the tokens between them are flagged, so the
 * anchor KV policy never evicts them.  Markers are token boundaries: each
 * segment is tokenized on its own (continuing segments get no SentencePiece
 * space prefix). */
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

int zl_llm_tokenize_anchored(const zl_llm *llm, const char *text, size_t len, int add_special, int parse_special,
                             int32_t **ids, uint8_t **mask, size_t *n, zl_err *err) {
    static const char OPEN[] = "<|anchor_start|>", CLOSE[] = "<|anchor_end|>";
    const size_t lo = sizeof OPEN - 1, lc = sizeof CLOSE - 1;
    *ids = NULL;
    *mask = NULL;
    *n = 0;
    size_t cap = 0, cnt = 0, pos = 0;
    int32_t *all = NULL;
    uint8_t *m = NULL;
    int inside = 0, first = 1, had_text = 0, rc = 0;
    while (pos <= len && !rc) {
        /* next marker */
        size_t next = len, mlen = 0;
        int is_open = 0;
        for (size_t i = pos; i < len; i++) {
            if (len - i >= lo && !memcmp(text + i, OPEN, lo)) { next = i; mlen = lo; is_open = 1; break; }
            if (len - i >= lc && !memcmp(text + i, CLOSE, lc)) { next = i; mlen = lc; break; }
        }
        if (next > pos || first) {
            int32_t *seg;
            size_t ns;
            /* BOS only before the first segment */
            if ((rc = zl_tokenize_ex(llm->vocab, text + pos, next - pos, first ? add_special : 0, parse_special, had_text,
                                     &seg, &ns, err)))
                break;
            if (cnt + ns > cap) {
                size_t nc = (cnt + ns) * 2 + 16;
                int32_t *na = realloc(all, nc * sizeof *na);
                uint8_t *nm = na ? realloc(m, nc) : NULL;
                if (na) all = na;
                if (nm) m = nm;
                if (!na || !nm) { free(seg); rc = zl_errf(err, ZL_ENOMEM, "out of memory"); break; }
                cap = nc;
            }
            memcpy(all + cnt, seg, ns * sizeof *seg);
            memset(m + cnt, inside, ns);
            cnt += ns;
            free(seg);
            first = 0;
            had_text |= next > pos;
        }
        if (next == len) break;
        if (is_open && inside) { rc = zl_errf(err, ZL_EINVAL, "nested %s at byte %zu", OPEN, next); break; }
        if (!is_open && !inside) { rc = zl_errf(err, ZL_EINVAL, "%s at byte %zu without a matching %s", CLOSE, next, OPEN); break; }
        inside = is_open;
        pos = next + mlen;
    }
    if (!rc && inside) rc = zl_errf(err, ZL_EINVAL, "%s without a matching %s", OPEN, CLOSE);
    if (rc) { free(all); free(m); return rc; }
    *ids = all;
    *mask = m;
    *n = cnt;
    return 0;
}
