/* compact.h - merging segments into one, for block compaction.
 *
 * A day of 10 s profiles cut every hour is 24 blocks per tenant, each with its own
 * copy of the same symbols. Compaction merges adjacent small blocks into one: every
 * profile row is kept as it was (series, time, duration, samples), while stacks,
 * locations, functions, mappings and strings are re-interned into one symtab, so
 * what several blocks repeated is stored once. A query sees exactly the same
 * profiles before and after. */
#ifndef HEARTH_COMPACT_H
#define HEARTH_COMPACT_H

#include <stddef.h>

#include "common/err.h"
#include "storage/segment.h"

/* Returns a new segment holding every profile of in[0..n), or NULL (err set). The
 * inputs are only read. */
segment_t *compact_segments(const segment_t *const *in, size_t n, hr_err_t *err);

#endif
