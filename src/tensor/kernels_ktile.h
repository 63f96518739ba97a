/* kernels_ktile.h — the scalar side of packing K-format row groups, shared by
 * the tile kernels of every x86 level (kernels_ktile_avx2.c,
 * kernels_ktile_avx512.c): a row's super-block header (where its codes are,
 * its eight sub-block scales and mins, d and dmin) and two 16-bit values
 * paired in one int32 lane.  ISA-neutral: no intrinsics; what differs per
 * level (lane count, how codes are rearranged, how scales are laid out for
 * its multiply instructions) stays in the level's file. */
#ifndef ZL_KERNELS_KTILE_H
#define ZL_KERNELS_KTILE_H

#include <stddef.h>
#include <stdint.h>

#include "../base/f16.h"
#include "kernels_isa.h"

/* a | b << 16, each as 16 bits: a pair for a 16-bit multiply-add lane. */
static inline int32_t zl_ktile_pair16(int a, int b) {
    return (int32_t)((uint32_t)(uint16_t)a | (uint32_t)(uint16_t)b << 16);
}

/* Row r's super-block b of a Q4_K (hb 0) or Q5_K (hb 1) matrix of row
 * stride rb. */
typedef struct zl_ktile_k45 {
    const uint8_t *qs, *qh; /* qh NULL for Q4_K */
    int s[8], m[8];         /* sub-block scales and mins (zl_kscale) */
    float d, dmin;
} zl_ktile_k45;

static inline void zl_ktile_k45_row(const void *w, size_t rb, int r, int64_t b, int hb, zl_ktile_k45 *h) {
    const uint8_t *row = (const uint8_t *)w + (size_t)r * rb, *scales;
    zl_f16 dh, dminh;
    if (hb) {
        const zl_block_q5_k *a = (const zl_block_q5_k *)row + b;
        scales = a->scales, h->qs = a->qs, h->qh = a->qh, dh = a->d, dminh = a->dmin;
    } else {
        const zl_block_q4_k *a = (const zl_block_q4_k *)row + b;
        scales = a->scales, h->qs = a->qs, h->qh = NULL, dh = a->d, dminh = a->dmin;
    }
    for (int j = 0; j < 8; j++) zl_kscale(j, scales, &h->s[j], &h->m[j]);
    h->d = zl_f16_to_f32(dh);
    h->dmin = zl_f16_to_f32(dminh);
}

/* Row r's super-block b of a Q6_K matrix, NULL past the group's nrows rows;
 * its scales go to lane r of sc[16][stride] (each scale twice, paired, when
 * pair_scales: for 16-bit multiply-adds) and of scp[8][stride] (scales 2i
 * and 2i + 1 paired), and its d to *d; a missing row's are zero. */
static inline const zl_block_q6_k *zl_ktile_q6_row(const void *w, size_t rb, int nrows, int r, int64_t b,
                                                   int32_t *sc, int32_t *scp, int stride, int pair_scales, float *d) {
    const zl_block_q6_k *a = r < nrows ? (const zl_block_q6_k *)((const uint8_t *)w + (size_t)r * rb) + b : NULL;
    for (int g = 0; g < 16; g++)
        sc[stride * g + r] = !a ? 0 : pair_scales ? zl_ktile_pair16(a->scales[g], a->scales[g]) : a->scales[g];
    for (int i = 0; i < 8; i++) scp[stride * i + r] = a ? zl_ktile_pair16(a->scales[2 * i], a->scales[2 * i + 1]) : 0;
    *d = a ? zl_f16_to_f32(a->d) : 0.0f;
    return a;
}

#endif
