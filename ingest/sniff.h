/* sniff.h - telling an upload's format from its bytes, for uploads that do not name
 * one (`/ingest` without `format`, `hearth push` without --format).
 *
 * pprof is protobuf (binary) and usually gzipped; JFR starts with "FLR\0" (also
 * gzipped); folded stacks are text. Pyroscope reads an unnamed format as folded, so a
 * gzipped pprof sent bare used to fail as "not valid UTF-8": the bytes decide now. */
#ifndef HEARTH_SNIFF_H
#define HEARTH_SNIFF_H

#include <stddef.h>
#include <stdint.h>

#include "ingest/request.h"

/* INGEST_PPROF, INGEST_JFR or INGEST_FOLDED (text, and the empty body). */
ingest_format_t ingest_sniff(const uint8_t *p, size_t n);

#endif
