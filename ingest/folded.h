/* folded.h - collapsed ("folded") stacks: one `root;...;leaf VALUE` per line.
 *
 * The format of Brendan Gregg's stackcollapse tools, perf script pipelines,
 * py-spy --format raw and async-profiler collapsed output; Pyroscope calls it
 * "groups" or "lines". The value is the text after the last space; frames are split
 * on ';'. With no value (Pyroscope's `lines` format) each line counts 1. */
#ifndef HEARTH_FOLDED_H
#define HEARTH_FOLDED_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "ingest/format.h"
#include "storage/batch.h"

/* Adds every line's stack to profile p, with values multiplied by scale. lines=1
 * reads Pyroscope's `lines` format (no values). */
int folded_decode(const char *text, size_t n, int lines, int64_t scale, batch_t *b, batch_profile_t *p, hr_err_t *err);

/* The ingest formats (format.h) `folded` and `lines`. The name's last .suffix is
 * the profile type, as Pyroscope maps it (cpu when there is none): cpu, itimer and
 * wall values are samples at sampleRate Hz, scaled to nanoseconds. One profile,
 * at `from` (else the time received). */
int folded_ingest(const ingest_request_t *r, const ingest_limits_t *lim, batch_t *b, hr_err_t *err);
int lines_ingest(const ingest_request_t *r, const ingest_limits_t *lim, batch_t *b, hr_err_t *err);
/* MAYBE for text: Pyroscope reads an upload that names no format as folded. */
ingest_sniff_t folded_sniff(const ingest_peek_t *pk);

#endif
