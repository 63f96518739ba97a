/* types.c — the type traits table; see types.h. */
#include "types.h"

#include <strings.h>

static const zl_type_traits k_traits[ZL_TYPE_COUNT] = {
    [ZL_TYPE_F32] = {"F32", 1, 4, 1},
    [ZL_TYPE_F16] = {"F16", 1, 2, 1},
    [ZL_TYPE_BF16] = {"BF16", 1, 2, 1},
    [ZL_TYPE_Q4_0] = {"Q4_0", ZL_QK, sizeof(zl_block_q4_0), 1},
    [ZL_TYPE_Q4_1] = {"Q4_1", ZL_QK, sizeof(zl_block_q4_1), 1},
    [ZL_TYPE_Q5_0] = {"Q5_0", ZL_QK, sizeof(zl_block_q5_0), 1},
    [ZL_TYPE_Q5_1] = {"Q5_1", ZL_QK, sizeof(zl_block_q5_1), 1},
    [ZL_TYPE_Q8_0] = {"Q8_0", ZL_QK, sizeof(zl_block_q8_0), 1},
    [ZL_TYPE_Q8_1] = {"Q8_1", ZL_QK, sizeof(zl_block_q8_1), 0},
    [ZL_TYPE_Q2_K] = {"Q2_K", ZL_QK_K, 84, 0},
    [ZL_TYPE_Q3_K] = {"Q3_K", ZL_QK_K, 110, 0},
    [ZL_TYPE_Q4_K] = {"Q4_K", ZL_QK_K, sizeof(zl_block_q4_k), 1},
    [ZL_TYPE_Q5_K] = {"Q5_K", ZL_QK_K, sizeof(zl_block_q5_k), 1},
    [ZL_TYPE_Q6_K] = {"Q6_K", ZL_QK_K, sizeof(zl_block_q6_k), 1},
    [ZL_TYPE_Q8_K] = {"Q8_K", ZL_QK_K, sizeof(zl_block_q8_k), 0},
};

static const zl_type_traits k_unknown = {0, 0, 0, 0};

const zl_type_traits *zl_type_traits_of(uint32_t type) {
    if (type >= ZL_TYPE_COUNT || !k_traits[type].name) return &k_unknown;
    return &k_traits[type];
}

int zl_type_from_name(const char *name) {
    for (int i = 0; i < ZL_TYPE_COUNT; i++)
        if (k_traits[i].name && !strcasecmp(k_traits[i].name, name)) return i;
    return -1;
}

size_t zl_row_size(zl_type t, int64_t n) {
    const zl_type_traits *tr = zl_type_traits_of(t);
    if (!tr->name || n < 0 || n % tr->blck) return 0;
    return (size_t)(n / tr->blck) * (size_t)tr->size;
}
