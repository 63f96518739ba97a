/* types.h — tensor element types and their block formats.
 *
 * The numeric ids are GGUF's (ggml's) so a type read from a file indexes this
 * table directly.  Each quantised format is declared once as a packed struct
 * with a size assert; the traits table gives block length and byte size so
 * the GGUF reader can check tensor extents before anything touches data. */
#ifndef ZL_TYPES_H
#define ZL_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "../base/f16.h"

typedef enum {
    ZL_TYPE_F32 = 0,
    ZL_TYPE_F16 = 1,
    ZL_TYPE_Q4_0 = 2,
    ZL_TYPE_Q4_1 = 3,
    ZL_TYPE_Q5_0 = 6,
    ZL_TYPE_Q5_1 = 7,
    ZL_TYPE_Q8_0 = 8,
    ZL_TYPE_Q8_1 = 9,
    ZL_TYPE_Q2_K = 10,
    ZL_TYPE_Q3_K = 11,
    ZL_TYPE_Q4_K = 12,
    ZL_TYPE_Q5_K = 13,
    ZL_TYPE_Q6_K = 14,
    ZL_TYPE_Q8_K = 15,
    ZL_TYPE_BF16 = 30,
    ZL_TYPE_COUNT = 40,
} zl_type;

#define ZL_QK 32   /* block length of the *_0 / *_1 formats */
#define ZL_QK_K 256 /* super-block length of the K formats */
#define ZL_K_SCALE_SIZE 12

typedef struct { zl_f16 d; uint8_t qs[ZL_QK / 2]; } zl_block_q4_0;
typedef struct { zl_f16 d, m; uint8_t qs[ZL_QK / 2]; } zl_block_q4_1;
typedef struct { zl_f16 d; uint8_t qh[4]; uint8_t qs[ZL_QK / 2]; } zl_block_q5_0;
typedef struct { zl_f16 d, m; uint8_t qh[4]; uint8_t qs[ZL_QK / 2]; } zl_block_q5_1;
typedef struct { zl_f16 d; int8_t qs[ZL_QK]; } zl_block_q8_0;
/* Q8_1: activation format for the *_1 dot products; s = d * sum(qs). */
typedef struct { zl_f16 d, s; int8_t qs[ZL_QK]; } zl_block_q8_1;
typedef struct {
    zl_f16 d, dmin;
    uint8_t scales[ZL_K_SCALE_SIZE]; /* 8 x (6-bit scale, 6-bit min) */
    uint8_t qs[ZL_QK_K / 2];
} zl_block_q4_k;
typedef struct {
    zl_f16 d, dmin;
    uint8_t scales[ZL_K_SCALE_SIZE];
    uint8_t qh[ZL_QK_K / 8];
    uint8_t qs[ZL_QK_K / 2];
} zl_block_q5_k;
typedef struct {
    uint8_t ql[ZL_QK_K / 2];
    uint8_t qh[ZL_QK_K / 4];
    int8_t scales[ZL_QK_K / 16];
    zl_f16 d;
} zl_block_q6_k;
/* Q8_K: activation format for the K dot products; bsums are sums of 16 qs. */
typedef struct { float d; int8_t qs[ZL_QK_K]; int16_t bsums[ZL_QK_K / 16]; } zl_block_q8_k;

_Static_assert(sizeof(zl_block_q4_0) == 18, "q4_0 size");
_Static_assert(sizeof(zl_block_q4_1) == 20, "q4_1 size");
_Static_assert(sizeof(zl_block_q5_0) == 22, "q5_0 size");
_Static_assert(sizeof(zl_block_q5_1) == 24, "q5_1 size");
_Static_assert(sizeof(zl_block_q8_0) == 34, "q8_0 size");
_Static_assert(sizeof(zl_block_q8_1) == 36, "q8_1 size");
_Static_assert(sizeof(zl_block_q4_k) == 144, "q4_k size");
_Static_assert(sizeof(zl_block_q5_k) == 176, "q5_k size");
_Static_assert(sizeof(zl_block_q6_k) == 210, "q6_k size");
_Static_assert(sizeof(zl_block_q8_k) == 292, "q8_k size");

typedef struct zl_type_traits {
    const char *name;  /* NULL for ids this build does not know */
    int blck;          /* elements per block */
    int size;          /* bytes per block */
    int supported;     /* 1 if weights of this type can be used (dequant + dot) */
} zl_type_traits;

/* Traits for a type id; NULL-named entry for unknown ids (never NULL pointer). */
const zl_type_traits *zl_type_traits_of(uint32_t type);
/* Type id from its name ("Q4_K", case-insensitive); -1 if unknown. */
int zl_type_from_name(const char *name);
/* Bytes of a row of n elements; 0 if n is not a multiple of the block length. */
size_t zl_row_size(zl_type t, int64_t n);

#endif
