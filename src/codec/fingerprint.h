/* fingerprint.h — a model's identity as sha256 (OpenSSL EVP) over the bytes
 * zl_llm_identity feeds: the hyper-parameters that shape the forward pass and
 * every tensor's name, type, shape and data.  Codecs and snapshots carry it
 * to refuse another model; computed once per model load by the caller. */
#ifndef ZL_FINGERPRINT_H
#define ZL_FINGERPRINT_H

#include <stddef.h>
#include <stdint.h>

#include "zerolayer.h"

int zl_fingerprint_llm(const zl_llm *llm, uint8_t out[32], zl_err *err);
/* sha256 of one buffer. */
int zl_fingerprint_bytes(const void *p, size_t n, uint8_t out[32], zl_err *err);
/* 64 lowercase hex digits and a NUL. */
void zl_fingerprint_hex(const uint8_t fp[32], char out[65]);

#endif
