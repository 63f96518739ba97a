/* fuzz_zlc.c — libFuzzer target: the .zlc codec file parser
 * (zl_codec_parse) on arbitrary bytes.  What it accepts must re-allocate at
 * another ratio, serialise, and parse back to the same codec id; a rejected
 * file is a clean error.  Never crashes, reads out of bounds or leaks. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    zl_codec *c = NULL;
    zl_err err = {0};
    if (zl_codec_parse(&c, data, size, &err)) {
        if (c || !err.msg[0]) abort(); /* a rejection always says why and returns nothing */
        return 0;
    }
    uint8_t *buf = NULL;
    size_t n = 0;
    if (zl_codec_serialize(c, &buf, &n, &err)) abort();
    zl_codec *d = NULL;
    if (zl_codec_parse(&d, buf, n, &err) || memcmp(c->id, d->id, 32)) abort();
    zl_codec_set_ratio(d, 0.125, &err); /* may refuse a tiny head; must not crash */
    free(buf);
    zl_codec_free(d);
    zl_codec_free(c);
    return 0;
}
