/* config.h - server configuration: flags, each also readable from HEARTH_<FLAG>.
 *
 * Precedence: command-line flag, then environment variable (--data-dir <->
 * HEARTH_DATA_DIR), then the built-in default. config_usage prints every flag with
 * its default. */
#ifndef HEARTH_CONFIG_H
#define HEARTH_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/log.h"
#include "storage/wal.h"

typedef struct {
    char listen[256];
    char data_dir[2048];
    char web_dir[2048];
    wal_fsync_t wal_fsync;
    size_t max_body_bytes;
    size_t max_decompressed_bytes;
    size_t max_samples;
    size_t max_labels;
    size_t head_max_bytes;
    int64_t block_duration_ns;
    size_t block_cache_bytes;
    int zstd_level;
    unsigned max_connections;
    log_level_t log_level;
} config_t;

/* Fills cfg from defaults, environment and argv (argv[0] is skipped; a leading
 * `serve` subcommand is accepted). Returns 0, 1 when --help was printed, or -1
 * after printing an error to err_out. */
int config_load(config_t *cfg, int argc, char **argv, FILE *err_out);
void config_usage(FILE *out);

#endif
