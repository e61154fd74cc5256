/* config.h - server configuration: flags, environment, an optional config file.
 *
 * Every setting has one name used everywhere: the flag --data-dir, the environment
 * variable HEARTH_DATA_DIR and the config-file key data-dir. Precedence: flag, then
 * environment, then the file given by --config (or HEARTH_CONFIG), then the built-in
 * default. The file format is one `key = value` per line; `#` starts a comment.
 * --print-config prints every key with its effective value and where it came from,
 * in that same format, so its output is a valid config file. */
#ifndef HEARTH_CONFIG_H
#define HEARTH_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/log.h"
#include "storage/wal.h"

/* A cluster node's roles (--target). */
typedef enum { TARGET_ALL, TARGET_INGEST, TARGET_QUERY, TARGET_COMPACT, TARGET_COUNT } config_target_t;
const char *config_target_name(config_target_t t);

#define CONFIG_MAX_OPTS 64

typedef struct {
    char listen[256];
    char data_dir[2048];
    char web_dir[2048];
    char scrape_config[2048];
    char auth_file[2048];
    char tls_cert[2048], tls_key[2048];
    char grpc_listen[256]; /* --grpc-listen: "" for no gRPC server */
    wal_fsync_t wal_fsync;
    size_t max_body_bytes;
    size_t max_inflight_body_bytes;
    size_t max_decompressed_bytes;
    size_t max_samples;
    size_t max_decode_memory;
    size_t max_query_memory;
    size_t max_nodes_limit;
    size_t max_labels;
    size_t max_label_value_bytes;
    size_t max_series_per_tenant;
    unsigned max_concurrent_ingests, max_concurrent_queries;
    size_t ingest_rate_bytes; /* per tenant per second, 0 = unlimited */
    size_t head_max_bytes;
    int64_t block_duration_ns;
    int64_t retention_ns;
    size_t compact_min_blocks, compact_max_bytes;
#define CONFIG_MAX_TIERS 4
    int64_t compact_tiers_ns[CONFIG_MAX_TIERS]; /* --compact-tiers, ascending */
    size_t ncompact_tiers;
    char source_dir[2048];       /* --source-dir: source files for the source view */
    char recording_rules[2048];  /* --recording-rules FILE: provisioned rules (rules.h) */
    char remote_write_url[2048]; /* where rule samples go; "" = rules are not evaluated */
    int64_t recording_rules_interval_ns;
    size_t block_cache_bytes;
    int zstd_level;
    unsigned max_connections, max_connections_per_ip;
    int64_t idle_timeout_ns, request_read_timeout_ns, query_timeout_ns;
    log_level_t log_level;
    int log_json;
    int multitenancy;
    int symbolize;              /* resolve address-only frames at query time (symbolize/) */
    char debuginfo_dir[2048];   /* local debug files named by build ID; "" for none */
    char debuginfod_urls[2048]; /* "" = the DEBUGINFOD_URLS environment variable */
    int64_t debuginfod_negative_ttl_ns;
    size_t max_debuginfo_bytes;
    size_t debuginfo_quota, debuginfo_keep_free;
    /* Cluster mode (docs/cluster.md): set by --catalog with --object-store. */
    char catalog[1024];
    char object_store[1024];
    char s3_access_key[256], s3_secret_key[256];
    char cache_dir[2048];
    size_t cache_bytes;
    size_t multipart_threshold;
    int64_t flush_interval_ns;
    size_t flush_bytes;
    int64_t ack_timeout_ns;
    int64_t trash_delay_ns;
    config_target_t target;
    char node_name[256];
    int query_split;              /* cluster mode: merges divided among the live query nodes (query/split.h) */
    size_t query_split_min_bytes; /* ... when they read at least this many bytes of partitions */
    char config_file[2048];
    /* For --print-config: each option's effective text and its source. */
    char raw[CONFIG_MAX_OPTS][512];
    const char *source[CONFIG_MAX_OPTS];
} config_t;

/* Fills cfg from defaults, config file, environment and argv (argv[0] is skipped; a
 * leading `serve` subcommand is accepted). Returns 0, 1 when --help or
 * --print-config was printed, or -1 after printing an error to err_out. */
int config_load(config_t *cfg, int argc, char **argv, FILE *err_out);
void config_usage(FILE *out);

#endif
