/* metrics.h - the server's own counters, rendered as Prometheus text at /metrics.
 *
 * Counters are atomics bumped on the request path; storage figures (head size,
 * blocks, series) are read from the store when /metrics is scraped. */
#ifndef HEARTH_METRICS_H
#define HEARTH_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"
#include "server/http.h"
#include "storage/store.h"

#define METRICS_NBUCKETS 12

typedef enum {
    LIMIT_SERIES,
    LIMIT_INGEST_CONCURRENCY,
    LIMIT_QUERY_CONCURRENCY,
    LIMIT_INGEST_RATE,
    LIMIT_QUERY_TIMEOUT,
    LIMIT_INFLIGHT_BODY, /* --max-inflight-body-bytes: requests refused */
    LIMIT_READ_TIMEOUT,  /* --request-read-timeout: connections shut */
    LIMIT_COUNT
} metrics_limit_t;

/* Why accepted uploads lost samples (hearth_dropped_samples_total{reason}). */
typedef enum { DROP_NEGATIVE_GAUGE, DROP_COUNT } metrics_drop_t;
/* Why pprof sample label keys were kept off series labels (hearth_unindexed_label_keys_total). */
typedef enum { UNINDEXED_SPAN, UNINDEXED_HIGH_CARDINALITY, UNINDEXED_COUNT } metrics_unindexed_t;

/* A latency histogram over the buckets of metrics.c (1 ms .. 10 s). */
typedef struct {
    atomic_ullong buckets[METRICS_NBUCKETS + 1]; /* last = +Inf */
    atomic_ullong sum_us;
} metrics_hist_t;

/* The stages of an accepted upload (hearth_ingest_stage_seconds{stage}): decoding it
 * into a batch, then storing it (the WAL append with its fsync wait, and the head),
 * and the parts of storing (storage/store.h's store_ingest_times_t). */
typedef enum {
    STAGE_DECODE,
    STAGE_STORE,
    STAGE_SERIES,
    STAGE_CUT_WAIT,
    STAGE_HEAD_STAGE,
    STAGE_WAL,
    STAGE_HEAD_COMMIT,
    STAGE_COUNT
} metrics_stage_t;

typedef struct {
    atomic_ullong ingest_requests, ingest_profiles, ingest_bytes, ingest_samples;
    atomic_ullong ingest_errors[HR_ELIMIT + 1]; /* by error code */
    atomic_ullong refused[LIMIT_COUNT];         /* by metrics_limit_t */
    atomic_ullong ingest_too_big;               /* bodies over --max-body-bytes */
    atomic_ullong queries, query_errors;
    atomic_ullong shares_ok, shares_failed;   /* split merges: peers' shares added / merged here instead */
    atomic_ullong shares_served, share_parts; /* shares this node merged for a peer, and their partitions */
    atomic_ullong peers;                      /* live query peers a merge may be split among */
    atomic_ullong peer_refreshes;             /* times the peers were read from the catalog */
    metrics_hist_t query_latency;
    metrics_hist_t ingest_stage[STAGE_COUNT]; /* by metrics_stage_t */
    atomic_ullong wal_replayed, wal_replay_skipped, wal_corrupt;
    atomic_ullong dropped_samples[DROP_COUNT];     /* by metrics_drop_t */
    atomic_ullong unindexed_keys[UNINDEXED_COUNT]; /* by metrics_unindexed_t, per upload */
} metrics_t;

void metrics_refused(metrics_t *m, metrics_limit_t which);
void metrics_ingest_ok(metrics_t *m, size_t bytes, size_t profiles, size_t samples);
void metrics_ingest_error(metrics_t *m, hr_code_t code);
void metrics_dropped(metrics_t *m, metrics_drop_t why, size_t samples);
void metrics_query(metrics_t *m, double seconds, int failed);
/* One upload's time in one stage of the write path. */
void metrics_ingest_stage(metrics_t *m, metrics_stage_t stage, double seconds);
/* Renders every metric in Prometheus' text format; http (may be NULL) is the HTTP
 * layer's handler pool. */
void metrics_render(metrics_t *m, store_t *st, const http_stats_t *http, buf_t *out);

#endif
