/* base64.h - base64 for protojson bytes and HTTP Basic credentials. */
#ifndef HEARTH_BASE64_H
#define HEARTH_BASE64_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

/* Decodes standard or URL-safe base64, padded or not, into a malloc'd buffer.
 * Returns 0, or -1 on a character outside the alphabet (or OOM). */
int base64_decode(const char *s, size_t n, uint8_t **out, size_t *outlen);

/* Appends the standard, padded base64 of p[0..n) to out. */
void base64_encode(const uint8_t *p, size_t n, buf_t *out);

#endif
