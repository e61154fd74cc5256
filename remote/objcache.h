/* objcache.h - a local disk cache of object byte ranges, under a byte budget.
 *
 * Cluster nodes read blocks from the object store a byte range at a time (a block's
 * header, tail, footer, and the partitions a query selects). Blocks are immutable
 * objects, so a range once fetched never changes: it is kept in its object's file in
 * the cache directory (one sparse file per object, named by a hash of the key, each
 * range at its own offset), listed in the directory's journal, and reused until the
 * least recently read ranges are evicted to stay under the budget (their bytes
 * punched out of the file, the file removed with its last range). The cache is
 * only ever a copy: deleting the directory (even while the node runs) changes no
 * answer, only the next reads' cost. Cached bytes are not checked here; block
 * decoding checks every section's CRC, and a caller that finds a cached range corrupt
 * drops the key's ranges (objcache_forget) and reads again.
 *
 * Thread safety: every call may come from any thread (one mutex over the entry list;
 * the journal's small writes and evictions' hole punching are done under it, ranges'
 * bytes are read and written outside it). A range is fetched once however many
 * threads want it at the same time: the others wait for that fetch and read the
 * cached copy. */
#ifndef HEARTH_OBJCACHE_H
#define HEARTH_OBJCACHE_H

#include <stdint.h>

#include "common/err.h"
#include "remote/objstore.h"

typedef struct objcache objcache_t;

/* A cache over os (borrowed; it must outlive the cache) in dir (created if needed),
 * holding at most budget bytes (0: cache nothing). Ranges already in dir from an
 * earlier run are kept, oldest first in line for eviction. NULL with err. */
objcache_t *objcache_open(objstore_t *os, const char *dir, uint64_t budget, hr_err_t *err);
void objcache_free(objcache_t *c);

/* Reads n bytes at off of object key into out: from the cache, or from the store
 * (then cached). Errors are the store's (objstore.h): HR_EIO passing, HR_ENOTFOUND,
 * HR_EINVAL for a range past the object's end. */
int objcache_read(objcache_t *c, const char *key, uint64_t off, uint64_t n, uint8_t *out, hr_err_t *err);
/* Makes sure the range is cached (a prefetch): 0 at once when it is, or is being
 * fetched; otherwise fetches it, with objcache_read's errors. */
int objcache_fetch(objcache_t *c, const char *key, uint64_t off, uint64_t n, hr_err_t *err);
/* 1 when the range is cached (it may still vanish before it is read). */
int objcache_has(objcache_t *c, const char *key, uint64_t off, uint64_t n);
/* Drops every cached range of key (it read back corrupt). */
void objcache_forget(objcache_t *c, const char *key);

typedef struct {
    uint64_t hits, misses;  /* reads answered from disk, and from the store */
    uint64_t fetched_bytes; /* bytes read from the store */
    uint64_t bytes, entries;
} objcache_stats_t;
void objcache_stats(objcache_t *c, objcache_stats_t *out);

#endif
