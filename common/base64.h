/* base64.h - decoding base64 (protojson bytes, HTTP Basic credentials). */
#ifndef HEARTH_BASE64_H
#define HEARTH_BASE64_H

#include <stddef.h>
#include <stdint.h>

/* Decodes standard or URL-safe base64, padded or not, into a malloc'd buffer.
 * Returns 0, or -1 on a character outside the alphabet (or OOM). */
int base64_decode(const char *s, size_t n, uint8_t **out, size_t *outlen);

#endif
