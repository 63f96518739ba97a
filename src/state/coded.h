/* coded.h — a sequence's whole state through the learned codec, unencrypted,
 * for idle sessions held in memory (coded.c): tokens, the sink positions'
 * rows in f16, then one code per later position. */
#ifndef ZL_STATE_CODED_H
#define ZL_STATE_CODED_H

#include <stddef.h>
#include <stdint.h>

#include "../codec/codec.h"

/* *out malloc'd; symbols counted into hist when not NULL. */
int zl_coded_pack(const zl_codec *c, const zl_seq *s, uint8_t **out, size_t *len, zl_codec_hist *hist, zl_err *err);
/* Into a sequence (adopts the tokens, writes every row); on failure it holds nothing. */
int zl_coded_unpack(const zl_codec *c, zl_seq *s, const uint8_t *in, size_t len, zl_err *err);

#endif
