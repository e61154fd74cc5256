/* delta.h - cumulative profiles to deltas, for uploads that carry the previous one.
 *
 * Go's heap (alloc_*), mutex and block profiles count since the process started.
 * pyroscope-go (before godeltaprof) uploads the current profile with the previous
 * upload's as `prev_profile`, and the server keeps what happened in between, so a
 * merge over a range adds up activity instead of re-counting the process's life.
 * Per stack: current - previous, or current when the counter went down (a restart
 * reset it); stacks only in the previous profile are dropped. Profiles that are
 * not cumulative (inuse_*, cpu, goroutines) are left as they are. */
#ifndef HEARTH_DELTA_H
#define HEARTH_DELTA_H

#include "common/err.h"
#include "storage/batch.h"

/* Subtracts prev from each cur profile whose `cumulative` entry is nonzero (one
 * per cur profile), matching profiles by type and labels. prev's stacks are
 * imported into cur's symtab. 0, or -1 (err set, OOM). */
int delta_subtract(batch_t *cur, const uint8_t *cumulative, const batch_t *prev, hr_err_t *err);

#endif
