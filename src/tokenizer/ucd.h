/* ucd.h — the slice of the Unicode Character Database the tokenizers need.
 *
 * Every code point has one major general category (L, M, N, P, S, Z, C) and
 * may carry the White_Space property.  The data is Unicode 15.1, the version
 * of llama.cpp's tables (tokenization must agree with it on every code
 * point), generated from the unicodedata2 package pinned to that version by
 * tools/gen_unicode_tables.py into ucd_tables.c; values above
 * U+10FFFF report ZL_UCD_C (unassigned), like any unassigned code point. */
#ifndef ZL_UCD_H
#define ZL_UCD_H

#include <stddef.h>
#include <stdint.h>

enum {
    ZL_UCD_L = 1, /* letter */
    ZL_UCD_M = 2, /* mark */
    ZL_UCD_N = 3, /* number */
    ZL_UCD_P = 4, /* punctuation */
    ZL_UCD_S = 5, /* symbol */
    ZL_UCD_Z = 6, /* separator */
    ZL_UCD_C = 7, /* control, format, surrogate, private use, unassigned */
    ZL_UCD_CAT_MASK = 7,
    ZL_UCD_WS = 8 /* White_Space property */
};

extern const uint32_t zl_ucd_ranges[];
extern const size_t zl_ucd_n_ranges;
extern const uint8_t zl_ucd_ascii[128];
extern const uint32_t zl_ucd_deepseek_letters[][2];
extern const size_t zl_ucd_n_deepseek_letters;
extern const uint32_t zl_ucd_deepseek_punct[][2];
extern const size_t zl_ucd_n_deepseek_punct;
extern const uint32_t zl_ucd_deepseek_cjk[][2];
extern const size_t zl_ucd_n_deepseek_cjk;

/* Category | ZL_UCD_WS for one code point. */
unsigned zl_ucd_flags(uint32_t cp);
/* Whether cp lies in one of n sorted, disjoint inclusive ranges. */
int zl_ucd_in_ranges(uint32_t cp, const uint32_t (*ranges)[2], size_t n);

#endif
