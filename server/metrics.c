/* metrics.c - see metrics.h. */
#include "server/metrics.h"

static const double BOUNDS[METRICS_NBUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                0.1,   0.25,   0.5,   1,    2.5,   10};
static const char *REASONS[HR_ELIMIT + 1] = {"ok",      "bad_request",   "unprocessable", "too_large", "not_found",
                                             "storage", "out_of_memory", "internal",      "limited"};
static const char *LIMITS[LIMIT_COUNT] = {"max_series_per_tenant", "max_concurrent_ingests", "max_concurrent_queries",
                                          "ingest_rate", "query_timeout"};

static const char *DROPS[DROP_COUNT] = {"negative_gauge"};

void metrics_refused(metrics_t *m, metrics_limit_t which) { m->refused[which]++; }

void metrics_dropped(metrics_t *m, metrics_drop_t why, size_t samples) { m->dropped_samples[why] += samples; }

void metrics_ingest_ok(metrics_t *m, size_t bytes, size_t profiles, size_t samples) {
    m->ingest_requests++;
    m->ingest_bytes += bytes;
    m->ingest_profiles += profiles;
    m->ingest_samples += samples;
}

void metrics_ingest_error(metrics_t *m, hr_code_t code) {
    m->ingest_requests++;
    if (code <= HR_ELIMIT) m->ingest_errors[code]++;
}

void metrics_query(metrics_t *m, double s, int failed) {
    m->queries++;
    if (failed) m->query_errors++;
    size_t i = 0;
    while (i < METRICS_NBUCKETS && s > BOUNDS[i]) i++;
    m->query_buckets[i]++;
    m->query_sum_us += (unsigned long long)(s * 1e6);
}

void metrics_render(metrics_t *m, store_t *st, buf_t *o) {
    store_stats_t s;
    store_stats(st, &s);
    buf_printf(o, "# HELP hearth_ingest_requests_total Ingest requests received.\n# TYPE hearth_ingest_requests_total counter\n");
    buf_printf(o, "hearth_ingest_requests_total %llu\n", (unsigned long long)m->ingest_requests);
    buf_printf(o, "# HELP hearth_ingested_profiles_total Profiles stored (one per sample type and series).\n"
                  "# TYPE hearth_ingested_profiles_total counter\nhearth_ingested_profiles_total %llu\n",
               (unsigned long long)m->ingest_profiles);
    buf_printf(o, "# HELP hearth_ingested_bytes_total Request body bytes of accepted ingests.\n"
                  "# TYPE hearth_ingested_bytes_total counter\nhearth_ingested_bytes_total %llu\n",
               (unsigned long long)m->ingest_bytes);
    buf_printf(o, "# HELP hearth_ingested_samples_total Samples accepted.\n"
                  "# TYPE hearth_ingested_samples_total counter\nhearth_ingested_samples_total %llu\n",
               (unsigned long long)m->ingest_samples);
    buf_printf(o, "# HELP hearth_dropped_samples_total Samples left out of accepted uploads, by reason.\n"
                  "# TYPE hearth_dropped_samples_total counter\n");
    for (int i = 0; i < DROP_COUNT; i++)
        buf_printf(o, "hearth_dropped_samples_total{reason=\"%s\"} %llu\n", DROPS[i],
                   (unsigned long long)m->dropped_samples[i]);
    buf_printf(o, "# HELP hearth_ingest_errors_total Rejected ingests by reason.\n# TYPE hearth_ingest_errors_total counter\n");
    for (int i = 1; i <= HR_ELIMIT; i++)
        buf_printf(o, "hearth_ingest_errors_total{reason=\"%s\"} %llu\n", REASONS[i], (unsigned long long)m->ingest_errors[i]);
    buf_printf(o, "# HELP hearth_limit_refusals_total Requests refused by a limit.\n# TYPE hearth_limit_refusals_total counter\n");
    for (int i = 0; i < LIMIT_COUNT; i++)
        buf_printf(o, "hearth_limit_refusals_total{limit=\"%s\"} %llu\n", LIMITS[i], (unsigned long long)m->refused[i]);
    buf_printf(o, "# HELP hearth_queries_total Query requests.\n# TYPE hearth_queries_total counter\n"
                  "hearth_queries_total %llu\nhearth_query_errors_total %llu\n",
               (unsigned long long)m->queries, (unsigned long long)m->query_errors);
    buf_printf(o, "# HELP hearth_query_duration_seconds Query latency.\n# TYPE hearth_query_duration_seconds histogram\n");
    unsigned long long cum = 0;
    for (int i = 0; i < METRICS_NBUCKETS; i++) {
        cum += m->query_buckets[i];
        buf_printf(o, "hearth_query_duration_seconds_bucket{le=\"%g\"} %llu\n", BOUNDS[i], cum);
    }
    cum += m->query_buckets[METRICS_NBUCKETS];
    buf_printf(o, "hearth_query_duration_seconds_bucket{le=\"+Inf\"} %llu\n", cum);
    buf_printf(o, "hearth_query_duration_seconds_sum %.6f\nhearth_query_duration_seconds_count %llu\n",
               (double)m->query_sum_us / 1e6, cum);
    buf_printf(o, "# HELP hearth_head_bytes Memory held by the in-memory head.\n# TYPE hearth_head_bytes gauge\n"
                  "hearth_head_bytes %zu\nhearth_head_profiles %zu\nhearth_head_samples %zu\n",
               s.head_bytes, s.head_profiles, s.head_samples);
    buf_printf(o, "# HELP hearth_head_symbols Deduplicated symbols in the head, by table.\n# TYPE hearth_head_symbols gauge\n"
                  "hearth_head_symbols{table=\"strings\"} %zu\nhearth_head_symbols{table=\"functions\"} %zu\n"
                  "hearth_head_symbols{table=\"locations\"} %zu\nhearth_head_symbols{table=\"stacks\"} %zu\n",
               s.head_strings, s.head_functions, s.head_locations, s.head_stacks);
    buf_printf(o, "# HELP hearth_blocks Blocks in the catalog.\n# TYPE hearth_blocks gauge\nhearth_blocks %zu\n"
                  "hearth_block_bytes %zu\nhearth_blocks_corrupt %zu\nhearth_head_cuts_total %llu\n"
                  "hearth_retention_deleted_blocks_total %llu\nhearth_compactions_total %llu\n"
                  "hearth_compacted_blocks_total %llu\n",
               s.blocks, s.block_bytes, s.blocks_corrupt, (unsigned long long)s.cuts,
               (unsigned long long)s.retention_deleted, (unsigned long long)s.compactions,
               (unsigned long long)s.compacted_blocks);
    buf_printf(o, "# HELP hearth_series Series in the index.\n# TYPE hearth_series gauge\nhearth_series %zu\n", s.series);
    buf_printf(o, "hearth_wal_segment_bytes %llu\nhearth_wal_replayed_records_total %llu\n"
                  "hearth_wal_replay_skipped_total %llu\nhearth_wal_corrupt_records_total %llu\n",
               (unsigned long long)s.wal_bytes, (unsigned long long)m->wal_replayed,
               (unsigned long long)m->wal_replay_skipped, (unsigned long long)m->wal_corrupt);
}
