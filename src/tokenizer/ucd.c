/* ucd.c — lookups into the generated Unicode tables (ucd_tables.c). */
#include "ucd.h"

unsigned zl_ucd_flags(uint32_t cp) {
    if (cp < 128) return zl_ucd_ascii[cp];
    if (cp > 0x10FFFF) return ZL_UCD_C;
    /* last range whose start is <= cp */
    size_t lo = 0, hi = zl_ucd_n_ranges;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if ((zl_ucd_ranges[mid] >> 8) <= cp)
            lo = mid;
        else
            hi = mid;
    }
    return zl_ucd_ranges[lo] & 0xFF;
}

int zl_ucd_in_ranges(uint32_t cp, const uint32_t (*ranges)[2], size_t n) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < ranges[mid][0])
            hi = mid;
        else if (cp > ranges[mid][1])
            lo = mid + 1;
        else
            return 1;
    }
    return 0;
}
