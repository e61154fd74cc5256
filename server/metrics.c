/* metrics.c - see metrics.h. */
#include "server/metrics.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "server/version.h"

static const double BOUNDS[METRICS_NBUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10};
static const char *REASONS[HR_ELIMIT + 1] = {"ok",      "bad_request",   "unprocessable", "too_large", "not_found",
                                             "storage", "out_of_memory", "internal",      "limited"};
static const char *LIMITS[LIMIT_COUNT] = {"max_series_per_tenant", "max_concurrent_ingests", "max_concurrent_queries",
                                          "ingest_rate",           "query_timeout",          "max_inflight_body_bytes",
                                          "request_read_timeout"};

static const char *DROPS[DROP_COUNT] = {"negative_gauge"};
static const char *UNINDEXED[UNINDEXED_COUNT] = {"span", "high_cardinality"};

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

static void observe(metrics_hist_t *h, double s) {
    size_t i = 0;
    while (i < METRICS_NBUCKETS && s > BOUNDS[i]) i++;
    h->buckets[i]++;
    h->sum_us += (unsigned long long)(s * 1e6);
}

void metrics_query(metrics_t *m, double s, int failed) {
    m->queries++;
    if (failed) m->query_errors++;
    observe(&m->query_latency, s);
}

void metrics_ingest_stage(metrics_t *m, metrics_stage_t stage, double s) { observe(&m->ingest_stage[stage], s); }

/* One metric family's HELP and TYPE lines: promtool (and Prometheus) want them for
 * every family, before its samples. */
static void family(buf_t *o, const char *name, const char *type, const char *help) {
    buf_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void scalar(buf_t *o, const char *name, const char *type, const char *help, unsigned long long v) {
    family(o, name, type, help);
    buf_printf(o, "%s %llu\n", name, v);
}

/* process_* as the Prometheus client libraries export them, from /proc/self. */
static void render_process(buf_t *o) {
    long tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    unsigned long long start = 0, vsize = 0, btime = 0;
    long long rss = 0;
    FILE *f = fopen("/proc/self/stat", "r");
    if (f) {
        /* Fields 22 (starttime), 23 (vsize), 24 (rss); the
         * command name (field 2) may hold spaces, so skip past its closing ')'. */
        char line[1024];
        const char *p = fgets(line, sizeof line, f) ? strrchr(line, ')') : NULL;
        if (p &&
            sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu %llu %lld",
                   &start, &vsize, &rss) != 3)
            start = vsize = 0, rss = 0;
        fclose(f);
    }
    if ((f = fopen("/proc/stat", "r"))) {
        char line[256];
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "btime %llu", &btime) == 1) break;
        fclose(f);
    }
    unsigned long long fds = 0;
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *e; d && (e = readdir(d));) fds += e->d_name[0] != '.';
    if (d) closedir(d);
    struct rlimit rl = {0};
    getrlimit(RLIMIT_NOFILE, &rl);
    family(o, "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.");
    /* getrusage, not /proc's clock ticks: Linux scales it to the scheduler's exact runtime, so
     * a benchmark can read one query's CPU (tens of milliseconds) off two scrapes. */
    struct rusage ru = {0};
    getrusage(RUSAGE_SELF, &ru);
    buf_printf(o, "process_cpu_seconds_total %.6f\n",
               (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
    scalar(o, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
           (unsigned long long)(rss * page));
    scalar(o, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", vsize);
    scalar(o, "process_open_fds", "gauge", "Number of open file descriptors.", fds - 1 /* opendir's own */);
    scalar(o, "process_max_fds", "gauge", "Maximum number of open file descriptors.", (unsigned long long)rl.rlim_cur);
    family(o, "process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.");
    buf_printf(o, "process_start_time_seconds %.2f\n", (double)btime + (double)start / (double)tick);
}

static void render_ingest(const metrics_t *m, buf_t *o) {
    scalar(o, "hearth_ingest_requests_total", "counter", "Ingest requests received.", m->ingest_requests);
    scalar(o, "hearth_ingested_profiles_total", "counter", "Profiles stored (one per sample type and series).",
           m->ingest_profiles);
    scalar(o, "hearth_ingested_bytes_total", "counter", "Request body bytes of accepted ingests.", m->ingest_bytes);
    scalar(o, "hearth_ingested_samples_total", "counter", "Samples accepted.", m->ingest_samples);
    family(o, "hearth_dropped_samples_total", "counter", "Samples left out of accepted uploads, by reason.");
    for (int i = 0; i < DROP_COUNT; i++)
        buf_printf(o, "hearth_dropped_samples_total{reason=\"%s\"} %llu\n", DROPS[i],
                   (unsigned long long)m->dropped_samples[i]);
    family(o, "hearth_unindexed_label_keys_total", "counter",
           "pprof sample label keys kept off series labels, per upload, by reason.");
    for (int i = 0; i < UNINDEXED_COUNT; i++)
        buf_printf(o, "hearth_unindexed_label_keys_total{reason=\"%s\"} %llu\n", UNINDEXED[i],
                   (unsigned long long)m->unindexed_keys[i]);
    family(o, "hearth_ingest_errors_total", "counter", "Rejected ingests by reason.");
    for (int i = 1; i <= HR_ELIMIT; i++)
        buf_printf(o, "hearth_ingest_errors_total{reason=\"%s\"} %llu\n", REASONS[i],
                   (unsigned long long)m->ingest_errors[i]);
    family(o, "hearth_limit_refusals_total", "counter", "Requests refused by a limit.");
    for (int i = 0; i < LIMIT_COUNT; i++)
        buf_printf(o, "hearth_limit_refusals_total{limit=\"%s\"} %llu\n", LIMITS[i], (unsigned long long)m->refused[i]);
}

/* A histogram's samples; labels is "" or `name="value",` (a trailing comma). */
static void render_hist(buf_t *o, const char *name, const char *labels, const metrics_hist_t *h) {
    unsigned long long cum = 0;
    for (int i = 0; i < METRICS_NBUCKETS; i++) {
        cum += h->buckets[i];
        buf_printf(o, "%s_bucket{%sle=\"%g\"} %llu\n", name, labels, BOUNDS[i], cum);
    }
    cum += h->buckets[METRICS_NBUCKETS];
    size_t n = strlen(labels);
    buf_printf(o, "%s_bucket{%sle=\"+Inf\"} %llu\n", name, labels, cum);
    buf_printf(o, "%s_sum%s%.*s%s %.6f\n%s_count%s%.*s%s %llu\n", name, n ? "{" : "", (int)(n ? n - 1 : 0), labels,
               n ? "}" : "", (double)h->sum_us / 1e6, name, n ? "{" : "", (int)(n ? n - 1 : 0), labels, n ? "}" : "",
               cum);
}

static void render_queries(const metrics_t *m, buf_t *o) {
    scalar(o, "hearth_queries_total", "counter", "Query requests.", m->queries);
    scalar(o, "hearth_query_errors_total", "counter", "Query requests that failed.", m->query_errors);
    family(o, "hearth_query_split_shares_total", "counter",
           "Peers' shares of merges this node split (cluster mode): added, or failed and merged here instead.");
    buf_printf(o, "hearth_query_split_shares_total{outcome=\"ok\"} %llu\n", (unsigned long long)m->shares_ok);
    buf_printf(o, "hearth_query_split_shares_total{outcome=\"failed\"} %llu\n", (unsigned long long)m->shares_failed);
    scalar(o, "hearth_query_peers", "gauge", "Other live query nodes this node's merges are split among.", m->peers);
    scalar(o, "hearth_query_peer_refreshes_total", "counter",
           "Times this node read its live query peers from the catalog (every 2 s, cluster mode).", m->peer_refreshes);
    scalar(o, "hearth_query_shares_served_total", "counter", "Shares of other nodes' merges this node merged.",
           m->shares_served);
    scalar(o, "hearth_query_share_partitions_total", "counter",
           "Block partitions (or whole blocks) those shares named (merged here for a peer).", m->share_parts);
    family(o, "hearth_query_duration_seconds", "histogram", "Query latency.");
    render_hist(o, "hearth_query_duration_seconds", "", &m->query_latency);
}

static void render_stages(const metrics_t *m, buf_t *o) {
    static const char *const STAGES[STAGE_COUNT] = {"decode",     "store", "series",     "cut_wait",
                                                    "head_stage", "wal",   "head_commit"};
    family(o, "hearth_ingest_stage_seconds", "histogram",
           "Time an accepted upload spent in each stage of the write path: decode, then store (WAL append with "
           "its fsync wait, and the head), which is series (the index), cut_wait (a cut freezing the heads), "
           "head_stage (its symbols into the head), wal (the append and its fsync) and head_commit (its rows).");
    for (int k = 0; k < STAGE_COUNT; k++) {
        char label[64];
        snprintf(label, sizeof label, "stage=\"%s\",", STAGES[k]);
        render_hist(o, "hearth_ingest_stage_seconds", label, &m->ingest_stage[k]);
    }
}

static void render_storage(const metrics_t *m, const store_stats_t *s, buf_t *o) {
    scalar(o, "hearth_head_bytes", "gauge", "Memory held by the in-memory heads.", s->head_bytes);
    scalar(o, "hearth_head_profiles", "gauge", "Profiles in the in-memory heads.", s->head_profiles);
    scalar(o, "hearth_head_samples", "gauge", "Samples in the in-memory heads.", s->head_samples);
    family(o, "hearth_head_symbols", "gauge", "Deduplicated symbols in the heads, by table.");
    buf_printf(o,
               "hearth_head_symbols{table=\"strings\"} %zu\nhearth_head_symbols{table=\"functions\"} %zu\n"
               "hearth_head_symbols{table=\"locations\"} %zu\nhearth_head_symbols{table=\"stacks\"} %zu\n",
               s->head_strings, s->head_functions, s->head_locations, s->head_stacks);
    scalar(o, "hearth_blocks", "gauge", "Blocks in the catalog.", s->blocks);
    scalar(o, "hearth_block_bytes", "gauge", "Bytes of the blocks in the catalog.", s->block_bytes);
    scalar(o, "hearth_blocks_corrupt", "gauge", "Blocks that failed to load (skipped by queries).", s->blocks_corrupt);
    scalar(o, "hearth_block_partitions_cached", "gauge", "Decoded block partitions held in the cache.",
           s->parts_cached);
    scalar(
        o, "hearth_block_cache_bytes", "gauge",
        "Bytes of decoded block partitions and their services' shared symbol dictionaries held (--block-cache-bytes).",
        s->cached_bytes);
    scalar(o, "hearth_block_dict_bytes", "gauge", "Of those, the shared symbol dictionaries.", s->dict_bytes);
    scalar(
        o, "hearth_block_footer_loads_total", "counter",
        "Block footers (partition indexes) read and attached, once per block: at start on one node; in a cluster, when "
        "a cut, a compaction or a query (its share of a split one) first needs it.",
        s->footer_loads);
    scalar(o, "hearth_block_partition_loads_total", "counter",
           "Block partitions decoded into the cache (its misses; least recently used go first).", s->part_loads);
    scalar(o, "hearth_block_function_table_loads_total", "counter",
           "Of those, partitions read as their function table alone (the top table over whole partitions).",
           s->funcs_loads);
    scalar(o, "hearth_block_window_loads_total", "counter",
           "Partitions decoded in part: the rows of a range inside them (into the partition's window slot).",
           s->window_loads);
    scalar(o, "hearth_block_symbols_decoded_total", "counter",
           "Partition loads that decoded the partition's symbols; the others found every stack in their "
           "service's shared dictionary by the fingerprints the block stores.",
           s->symbols_decoded);
    scalar(o, "hearth_block_names_decoded_total", "counter",
           "Function table loads that decoded the table's names; the others found every name in their "
           "service's shared dictionary by the fingerprints the block stores.",
           s->names_decoded);
    family(o, "hearth_catalog_syncs_total", "counter",
           "Cluster mode: block list syncs, read whole or as the changes since the last (the catalog's change log).");
    buf_printf(
        o, "hearth_catalog_syncs_total{kind=\"full\"} %llu\nhearth_catalog_syncs_total{kind=\"incremental\"} %llu\n",
        (unsigned long long)s->syncs_full, (unsigned long long)s->syncs_incremental);
    scalar(o, "hearth_head_cuts_total", "counter", "Heads cut into blocks.", s->cuts);
    family(o, "hearth_head_cut_seconds_total", "counter",
           "Time cuts took to write, verify and commit their blocks (ingest does not wait for it).");
    buf_printf(o, "hearth_head_cut_seconds_total %.6f\n", (double)s->cut_ns / 1e9);
    scalar(o, "hearth_retention_deleted_blocks_total", "counter", "Blocks deleted by retention.", s->retention_deleted);
    scalar(o, "hearth_compactions_total", "counter", "Compaction runs done.", s->compactions);
    scalar(o, "hearth_compacted_blocks_total", "counter", "Blocks replaced by compaction.", s->compacted_blocks);
    scalar(o, "hearth_compactions_overtaken_total", "counter",
           "Compaction runs dropped because another node's compaction or retention replaced an input first.",
           s->compactions_lost);
    scalar(o, "hearth_object_cache_hits_total", "counter", "Block byte ranges read from the disk cache (cluster mode).",
           s->ocache_hits);
    scalar(o, "hearth_object_cache_misses_total", "counter",
           "Block byte ranges fetched from the object store (cluster mode).", s->ocache_misses);
    scalar(o, "hearth_object_fetched_bytes_total", "counter", "Bytes fetched from the object store (cluster mode).",
           s->ocache_fetched_bytes);
    scalar(o, "hearth_object_cache_bytes", "gauge", "Bytes in the disk cache of block ranges (--cache-bytes).",
           s->ocache_bytes);
    scalar(o, "hearth_object_cache_ranges", "gauge",
           "Block byte ranges in the disk cache (kept in one sparse file per block).", s->ocache_ranges);
    scalar(o, "hearth_series", "gauge", "Series in the index.", s->series);
    scalar(o, "hearth_wal_segment_bytes", "gauge", "Bytes in the current WAL segment.", s->wal_bytes);
    scalar(o, "hearth_wal_replayed_records_total", "counter", "WAL records replayed at start.", m->wal_replayed);
    scalar(o, "hearth_wal_replay_skipped_total", "counter", "WAL records replay could not apply.",
           m->wal_replay_skipped);
    scalar(o, "hearth_wal_corrupt_records_total", "counter",
           "Damaged WAL regions skipped at start between intact records (run hearth check).", m->wal_corrupt);
}

static void render_http(const http_stats_t *h, buf_t *o) {
    scalar(o, "hearth_http_handler_threads", "gauge",
           "Threads the HTTP layer has started to run handlers (connections themselves take none).",
           h->handler_threads);
    scalar(o, "hearth_http_handlers_busy", "gauge", "Requests being handled now.", h->handlers_busy);
    scalar(o, "hearth_http_handlers_queued", "gauge", "Complete requests waiting for a handler thread.",
           h->handlers_queued);
}

void metrics_render(metrics_t *m, store_t *st, const http_stats_t *http, buf_t *o) {
    store_stats_t s;
    store_stats(st, &s);
    family(o, "hearth_build_info", "gauge", "Hearth's version; always 1.");
    buf_printf(o, "hearth_build_info{version=\"%s\"} 1\n", HEARTH_VERSION);
    render_ingest(m, o);
    render_queries(m, o);
    render_stages(m, o);
    render_storage(m, &s, o);
    if (http) render_http(http, o);
    render_process(o);
}
