/* cache.h - the persisted answers of one binary: address -> frames.
 *
 * Resolving an address costs a DWARF walk; a second query of the same profile, or
 * the same query after a restart, must not pay it again. A symcache_t holds the
 * resolved frames of one build ID's addresses in memory (a hash of address to the
 * record's bytes) and appends each new answer to its file, DATA/symcache/BUILD_ID
 * (format in storage/format/symcache.md). Only answers read from a
 * debug file are kept; an address with no file yet is never cached, so debug info
 * that arrives later applies. Replacing or deleting a build ID's debug info deletes
 * its cache file (symbolizer_invalidate).
 *
 * No file descriptor is held: the file is read whole when opened, and new answers are
 * kept in memory until symcache_flush appends them (the symbolizer flushes after each
 * query), so a fleet of thousands of binaries costs no descriptors.
 *
 * The file is a cache, not data: it is not fsynced, a torn or corrupt tail is cut
 * at the last whole record when the file is opened, and a missing file is empty.
 * Not thread-safe: the symbolizer serializes access. */
#ifndef HEARTH_CACHE_H
#define HEARTH_CACHE_H

#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"
#include "symbolize/frames.h"

typedef struct symcache symcache_t;

/* Opens (creating) the cache file at path, loads its records and closes it again.
 * NULL with err on an I/O error or out of memory. */
symcache_t *symcache_open(const char *path, hr_err_t *err);
void symcache_close(symcache_t *c);

/* Appends addr's cached frames to out: 1 when cached (possibly with no frames: the
 * file does not cover addr), 0 when not, -1 out of memory. */
int symcache_get(const symcache_t *c, uint64_t addr, frames_t *out);

/* Records addr's frames (f may be empty) in memory, for the file at the next flush.
 * -1 is out of memory. */
int symcache_put(symcache_t *c, uint64_t addr, const frames_t *f);

/* Appends the records put since the last flush to the file (opened and closed here).
 * A failed write only loses the persistence (logged). symcache_close flushes too. */
void symcache_flush(symcache_t *c);

/* Records in memory (for tests and metrics). */
size_t symcache_count(const symcache_t *c);

#endif
