/* gzip.h - bounded gunzip for uploads.
 *
 * Uploads may be gzipped; a gzip bomb must be stopped as soon as the output passes
 * the limit, not after inflating it, so output grows in steps and is checked every
 * step. */
#ifndef HEARTH_GZIP_H
#define HEARTH_GZIP_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

static inline int gz_is_gzip(const uint8_t *p, size_t n) { return n >= 2 && p[0] == 0x1f && p[1] == 0x8b; }

/* Inflates a gzip stream (concatenated members allowed) into a malloc'd buffer.
 * Fails with HR_ETOOBIG past max bytes and HR_EUNPROC on a corrupt or truncated
 * stream. */
int gz_inflate(const uint8_t *in, size_t n, size_t max, uint8_t **out, size_t *outlen, hr_err_t *err);
/* gzip-compresses into a malloc'd buffer. */
int gz_deflate(const uint8_t *in, size_t n, uint8_t **out, size_t *outlen, hr_err_t *err);

#endif
