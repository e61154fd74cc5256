/* block.h - immutable block files: a segment's columns and symbols, zstd-compressed.
 *
 * Layout (storage/FORMAT.md has the byte-level description):
 *   header  "HRTHBLK1" | u32 version | u32 section count
 *   section u32 kind | u64 raw length | u64 stored length | u32 crc32(stored) | bytes
 * Sections: META (counts, time range), SYMBOLS (symtab_encode), PROFILES (per-profile
 * columns: series delta, time delta, duration, sample count), SAMPLES (stack id
 * deltas within a profile, then zigzag values). Each section is one zstd frame.
 * Rows are sorted by (series, time) so series and time deltas are tiny.
 *
 * Every section carries a CRC, and decoding validates every id it reads, so a
 * corrupt block is reported, never trusted. */
#ifndef HEARTH_BLOCK_H
#define HEARTH_BLOCK_H

#include <stddef.h>

#include "common/buf.h"
#include "common/err.h"
#include "storage/segment.h"

#define BLOCK_VERSION 1

/* Encodes s into out. Returns 0 or -1 (err filled). */
int block_encode(const segment_t *s, int zstd_level, buf_t *out, hr_err_t *err);
/* Decodes a whole block image into a new segment (caller frees), or NULL with err. */
segment_t *block_decode(const uint8_t *p, size_t n, hr_err_t *err);

/* Writes s to path atomically: path.tmp, fsync, rename, fsync of the directory.
 * The encoded image is decoded and compared with s first; a block that would not
 * read back exactly is not written (-1, HR_EINTERNAL), so its data stays in the WAL.
 * *bytes receives the file size. */
int block_write(const char *path, const segment_t *s, int zstd_level, size_t *bytes,
                hr_err_t *err);
/* Reads and decodes a block file. */
segment_t *block_read(const char *path, hr_err_t *err);

#endif
