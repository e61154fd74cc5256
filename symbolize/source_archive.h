/* source_archive.h - a binary's sources uploaded as one archive, for the source view.
 *
 * A team that runs no debuginfod server uploads the sources a build was compiled from
 * as one archive (PUT /api/v1/debuginfo/BUILD_ID/sources): tar, plain or compressed
 * with gzip, zstd, xz or bzip2, or zip; whatever libarchive reads. Parca's
 * `parca-debuginfo source` makes one such tar.
 *
 * An entry answers the path the debug info names when the two agree on whole
 * components from the end, the file name at least: for `/build/x/src/app.c`,
 * `repo/src/app.c` (two) beats `app.c` (one), and an entry agreeing on all of the
 * path's components ends the search. So an archive can be made from the build's root
 * folder, from anywhere above it, or from a checkout elsewhere.
 *
 * Archives are hostile input: an upload is read through once before it is kept and is
 * refused past limits on entries and on unpacked bytes (a small archive can unpack to
 * terabytes), and a lookup stops at the same limits and at its deadline. */
#ifndef HEARTH_SOURCE_ARCHIVE_H
#define HEARTH_SOURCE_ARCHIVE_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"

#define SOURCE_ARCHIVE_MAX_ENTRIES 200000

/* Reads the archive at path through: 0 when libarchive reads every entry and they
 * unpack to at most max_unpacked bytes in at most SOURCE_ARCHIVE_MAX_ENTRIES entries;
 * else -1 with err (HR_EINVAL: not an archive, damaged, or past a limit). *files gets
 * the number of regular files. */
int source_archive_check(const char *path, uint64_t max_unpacked, size_t *files, hr_err_t *err);

/* The entry of the archive at path that answers want (above), at most max bytes, into
 * out. 0 when found; 1 when no entry answers it (or the one that does is larger than
 * max); -1 when the archive cannot be read or deadline_ns (wall clock; 0 = none)
 * passed. max_unpacked bounds the bytes unpacked on the way. */
int source_archive_find(const char *path, const char *want, size_t max, uint64_t max_unpacked, int64_t deadline_ns,
                        buf_t *out);

#endif
