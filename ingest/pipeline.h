/* pipeline.h - the write path: one entry point for live ingest, one for WAL replay.
 *
 * ingest_submit takes a resolved request (request.h) from any writer (/ingest, the
 * push and Parca endpoints, the scraper), decodes it with its format's decoder
 * (format.h), appends the request itself to the WAL as the record, and adds the
 * decoded batch to the tenant's head (store_ingest). It returns once the record is
 * durable, so a writer acknowledges only what replay can restore. Replay reads each
 * record back, decodes it with the same ingest_to_batch, and applies the batch
 * without logging it again: live ingest and recovery share every step but the WAL
 * append, so they cannot drift apart.
 *
 * Nothing here knows HTTP or the server's metrics: ingest_submit reports what it
 * stored (ingest_stats_t) and the caller counts it. */
#ifndef HEARTH_PIPELINE_H
#define HEARTH_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "ingest/request.h"
#include "storage/store.h"
#include "storage/wal.h"

/* What one accepted request stored. */
typedef struct {
    size_t profiles, samples;
    size_t dropped_negative_gauge;          /* gauge samples below zero, left out (request.h) */
    size_t unindexed_span_keys;             /* pprof label keys kept off the series labels (pprof.h): */
    size_t unindexed_high_cardinality_keys; /* trace links, and keys with too many values */
    int64_t decode_ns, store_ns;            /* time in each stage (monotonic; 0 when not reached) */
    store_ingest_times_t store;             /* store_ns's parts (store.h) */
} ingest_stats_t;

/* Decodes r under lim, logs it durably and adds it to the head. 0 with *st filled,
 * or -1 with err: HR_EINVAL/HR_EUNPROC/HR_ETOOBIG for the upload (nothing was
 * logged), HR_ELIMIT (the series limit), HR_EIO when the WAL or head could not take
 * it (logged as ingest.storage_failed), HR_ENOMEM. */
int ingest_submit(store_t *s, const ingest_limits_t *lim, const ingest_request_t *r, ingest_stats_t *st, hr_err_t *err);

/* Replays one WAL record (rec, n bytes: any version ingest_request_decode reads)
 * into the head. lim is live ingest's, without the decode budget and the label size
 * checks: a record accepted once must not be refused now, and replay decodes one
 * record at a time. 0, or -1 with err (the record is logged as wal.bad_record or
 * wal.replay_failed; the caller skips it). */
int ingest_replay_one(store_t *s, const ingest_limits_t *lim, const uint8_t *rec, size_t n, hr_err_t *err);

/* Replays the WAL past the checkpoint record by record (ingest_replay_one), logging
 * progress every few seconds on long replays. ws counts records, skipped and
 * corrupt ones (wal.h). 0, or -1 with err when the WAL cannot be read. */
int ingest_replay_wal(store_t *s, const ingest_limits_t *lim, wal_scan_t *ws, hr_err_t *err);

#endif
