/* symbolizer.h - query-time symbolization: address-only frames get names and lines.
 *
 * Native and eBPF profilers send addresses inside mappings that carry a build ID, and
 * leave names to the server. Hearth stores them as they came and resolves them when a
 * query reads them, so debug info that arrives after the profile still applies. The
 * one hook is symbolizer_rewrite, run by merge_run on its output symtab before any
 * renderer sees it: flame graph, top, diff, pprof export and the Connect API all read
 * the resolved functions and lines exactly like frames that arrived with names.
 *
 * For each address-only location whose mapping has a build ID: the cache
 * (cache.h, per build ID, persisted) answers, or the debug file (debuginfo.h) is
 * opened (elf.h; kept open, a few at a time) and the answer cached. An address no
 * file resolves is named `BINARY!0xADDR` (BINARY the mapping file's base name), as is
 * every address-only location once the query's deadline has passed: a query answers
 * with addresses rather than run past --query-timeout, and says so in its result.
 *
 * One lock serializes resolution (libdwfl sessions are not thread-safe); cached
 * answers are read under it too, so concurrent queries of the same profile wait for
 * the first one's answers instead of computing them twice. The lock is never held
 * while a debuginfod download is waited for: a query needing that build ID waits for
 * the download (until its own deadline), every other query goes on. A query waits for
 * the lock only until its own deadline. */
#ifndef HEARTH_SYMBOLIZER_H
#define HEARTH_SYMBOLIZER_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "storage/symtab.h"
#include "symbolize/debuginfo.h"

typedef struct symbolizer symbolizer_t;

/* Creates the symbolizer over its sources (d, borrowed: outlives the symbolizer) and
 * its cache folder DATA/symcache. NULL with err. */
symbolizer_t *symbolizer_new(debuginfo_t *d, const char *data_dir, hr_err_t *err);
void symbolizer_free(symbolizer_t *s);

typedef struct {
    size_t resolved;   /* locations given frames from debug info (cached or not) */
    size_t cached;     /* of those, answered by the cache */
    size_t unresolved; /* named BINARY!0xADDR: no debug file, or the file does not cover them */
    size_t late;       /* of those, left unresolved because the deadline passed */
} symbolize_stats_t;

/* Gives every address-only location of t (a merge's output symtab) its frames, or
 * its BINARY!0xADDR name. deadline_ns is the wall clock past which nothing new is
 * resolved (0 = none). 0, or -1 out of memory (err set; t keeps the locations
 * rewritten so far, each complete). */
int symbolizer_rewrite(symbolizer_t *s, symtab_t *t, int64_t deadline_ns, symbolize_stats_t *st, hr_err_t *err);

/* Forgets everything known about id (its open file, its cache in memory and on disk):
 * called after an upload or delete of id's debug info. */
void symbolizer_invalidate(symbolizer_t *s, const char *id);

/* The debug info sources (for the upload handlers). */
debuginfo_t *symbolizer_debuginfo(symbolizer_t *s);

#endif
