/* rows.c — a sequence's cached K/V rows of positions [0, n) in and out of a
 * byte buffer, layer by layer, K then V, in f16 or f32 (keys as cached,
 * rotated for their position), through zerolayer.h's state access.  Shared by
 * snapshots and idle-session coding; never allocates beyond one row. */
#include <string.h>

#include "../base/f16.h"
#include "rows.h"

static const zl_state_part k_parts[2] = {ZL_STATE_K, ZL_STATE_V};

int zl_rows_all_f16(const zl_seq *s, zl_kv_shape sh, int n, float *row, zl_err *err, int *rc) {
    int d = sh.n_kv_heads * sh.head_dim;
    for (int l = 0; l < sh.n_layers; l++)
        for (int p = 0; p < 2; p++)
            for (int i = 0; i < n; i++) {
                if ((*rc = zl_seq_kv_read(s, l, k_parts[p], i, 1, row, err))) return 0;
                for (int j = 0; j < d; j++)
                    if (zl_f16_to_f32(zl_f32_to_f16(row[j])) != row[j]) return 0;
            }
    return 1;
}

int zl_rows_put(const zl_seq *s, zl_kv_shape sh, int n, int elt, uint8_t *out, float *row, zl_err *err) {
    int d = sh.n_kv_heads * sh.head_dim;
    for (int l = 0; l < sh.n_layers; l++)
        for (int p = 0; p < 2; p++)
            for (int i = 0; i < n; i++) {
                int rc = zl_seq_kv_read(s, l, k_parts[p], i, 1, row, err);
                if (rc) return rc;
                if (elt == 4) memcpy(out, row, (size_t)d * 4);
                else
                    for (int j = 0; j < d; j++) {
                        zl_f16 h = zl_f32_to_f16(row[j]);
                        memcpy(out + 2 * j, &h, 2);
                    }
                out += (size_t)d * elt;
            }
    return 0;
}

int zl_rows_get(zl_seq *s, zl_kv_shape sh, int n, int elt, const uint8_t *in, float *row, zl_err *err) {
    int d = sh.n_kv_heads * sh.head_dim;
    for (int l = 0; l < sh.n_layers; l++)
        for (int p = 0; p < 2; p++)
            for (int i = 0; i < n; i++) {
                if (elt == 4) memcpy(row, in, (size_t)d * 4);
                else
                    for (int j = 0; j < d; j++) {
                        zl_f16 h;
                        memcpy(&h, in + 2 * j, 2);
                        row[j] = zl_f16_to_f32(h);
                    }
                int rc = zl_seq_kv_write(s, l, k_parts[p], i, 1, row, err);
                if (rc) return rc;
                in += (size_t)d * elt;
            }
    return 0;
}

