/* rows.c — a sequence's cached K/V rows of positions [0, n) in and out of a
 * byte buffer, layer by layer, K then V, in the cache's own type (keys as
 * cached, rotated for their position): a copy, exact whatever the type.
 * Shared by snapshots and idle-session coding. */
#include "rows.h"

size_t zl_rows_bytes(const zl_seq *s, int n) {
    return (size_t)zl_seq_kv_shape(s).n_layers * 2 * (size_t)n * zl_seq_kv_row_bytes(s);
}

int zl_rows_put(const zl_seq *s, int n, uint8_t *out, zl_err *err) {
    size_t part = (size_t)n * zl_seq_kv_row_bytes(s);
    for (int l = 0; l < zl_seq_kv_shape(s).n_layers; l++)
        for (int v = 0; v < 2; v++, out += part) {
            int rc = zl_seq_kv_read_raw(s, l, v, 0, n, out, err);
            if (rc) return rc;
        }
    return 0;
}

int zl_rows_get(zl_seq *s, int n, const uint8_t *in, zl_err *err) {
    size_t part = (size_t)n * zl_seq_kv_row_bytes(s);
    for (int l = 0; l < zl_seq_kv_shape(s).n_layers; l++)
        for (int v = 0; v < 2; v++, in += part) {
            int rc = zl_seq_kv_write_raw(s, l, v, 0, n, in, err);
            if (rc) return rc;
        }
    return 0;
}
