/* pprof_upload.h - a pprof upload as an ingest format (format.h).
 *
 * What an upload adds to the pprof itself (pprof.h): the series from the request
 * (request.h), Pyroscope's sample_type_config (display names, which types count
 * cumulatively) and a multipart prev_profile, whose cumulative counters are
 * subtracted (delta.h). */
#ifndef HEARTH_PPROF_UPLOAD_H
#define HEARTH_PPROF_UPLOAD_H

#include "ingest/format.h"

/* The ingest format `pprof`: one upload, gzipped or not, under the request's series. */
int pprof_ingest(const ingest_request_t *r, const ingest_limits_t *lim, batch_t *b, hr_err_t *err);
/* MAYBE when gzipped or binary: profile.proto has no magic number. */
ingest_sniff_t pprof_sniff(const ingest_peek_t *pk);

#endif
