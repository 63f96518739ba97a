/* f16.h — IEEE half and bfloat16 conversions (scalar, exact, round-to-nearest-even). */
#ifndef ZL_F16_H
#define ZL_F16_H

#include <stdint.h>
#include <string.h>

typedef uint16_t zl_f16;
typedef uint16_t zl_bf16;

static inline float zl_f32_from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t zl_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static inline float zl_f16_to_f32(zl_f16 h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0) {
        if (man == 0) return zl_f32_from_bits(sign);
        /* subnormal: value = man * 2^-24 */
        float v = (float)man * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    if (exp == 31) return zl_f32_from_bits(sign | 0x7f800000u | (man << 13));
    return zl_f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
}

static inline zl_f16 zl_f32_to_f16(float f) {
    uint32_t x = zl_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (zl_f16)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0));
    if (ax >= 0x477ff000u) return (zl_f16)(sign | 0x7c00); /* overflow -> inf */
    if (ax < 0x38800000u) {                                 /* subnormal or zero in f16 */
        if (ax < 0x33000000u) return (zl_f16)sign;          /* < 2^-25 rounds to 0 */
        uint32_t e = ax >> 23, m = (ax & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e;                            /* 14..24 */
        uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (zl_f16)(sign | r);
    }
    uint32_t r = ((ax - 0x38000000u) >> 13);
    uint32_t rem = ax & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) r++;
    return (zl_f16)(sign | r);
}

static inline float zl_bf16_to_f32(zl_bf16 h) { return zl_f32_from_bits((uint32_t)h << 16); }

static inline zl_bf16 zl_f32_to_bf16(float f) {
    uint32_t u = zl_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (zl_bf16)((u >> 16) | 64); /* quiet NaN */
    return (zl_bf16)((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

#endif
