/* backend.h - where the catalog is kept: SQLite (one node) or PostgreSQL (a
 * cluster). Private to storage/: index.c keeps the in-memory mirror of the series and
 * the locking, and calls one of these for everything durable. Calls come one at a
 * time (under the index mutex), so a backend needs no lock of its own.
 *
 * Both keep the same tables (series, their labels, blocks); PostgreSQL adds what
 * nodes share: a version bumped by every change (so a node knows when to re-read),
 * compaction jobs with leases, heartbeats, and a trash of replaced blocks' objects
 * deleted after a delay (storage/format/catalog.md). */
#ifndef HEARTH_INDEX_BACKEND_H
#define HEARTH_INDEX_BACKEND_H

#include <stdint.h>

#include "common/err.h"
#include "catalog/index.h"

/* One stored series, for index.c's mirror (strings borrowed for the call). */
typedef int (*index_row_fn)(void *ctx, uint32_t id, const char *tenant, const char *ptype, const char *labels_json);

typedef struct {
    /* Calls fn for each series with id > after, by ascending id. */
    int (*series_since)(void *db, uint32_t after, index_row_fn fn, void *ctx, hr_err_t *err);
    /* Stores a series the mirror lacks. SQLite stores it as `proposed` (the next
     * dense id); PostgreSQL answers the id the shared catalog has for it or gives it
     * (another node may have made it meanwhile). json: its labels as a JSON object. */
    int (*add_series)(void *db, uint32_t proposed, const char *tenant, const char *ptype, const labels_t *l,
                      const char *json, uint32_t *id, hr_err_t *err);
    int (*blocks)(void *db, block_meta_t **out, size_t *n, hr_err_t *err);
    int (*next_block_id)(void *db, int64_t *id, hr_err_t *err);
    int (*commit_blocks)(void *db, const block_meta_t *b, size_t n, uint32_t wal_segment, hr_err_t *err);
    /* Fails with HR_ENOTFOUND, changing nothing, when any of ids is gone already
     * (another compactor or retention took it). */
    int (*replace_blocks)(void *db, const block_meta_t *m, size_t nm, const int64_t *ids, size_t n, hr_err_t *err);
    int (*remove_blocks)(void *db, const int64_t *ids, size_t n, hr_err_t *err);
    uint32_t (*wal_checkpoint)(void *db);
    /* Shared catalogs only (NULL for SQLite): */
    int (*version)(void *db, int64_t *v, hr_err_t *err);
    int (*claim)(void *db, const char *job, const char *owner, int64_t lease_ms, hr_err_t *err);
    int (*release)(void *db, const char *job, const char *owner, hr_err_t *err);
    int (*heartbeat)(void *db, const char *node, const char *target, const char *listen, int scrapes, hr_err_t *err);
    int (*trash_take)(void *db, size_t max, char ***keys, size_t *n, hr_err_t *err);
    int (*peers)(void *db, const char *self, int max_age_s, char ***addrs, size_t *n, hr_err_t *err);
    int (*scrapers)(void *db, int max_age_s, char ***names, size_t *n, hr_err_t *err);
    int (*block_changes)(void *db, int64_t since, int64_t upto, block_meta_t **added, size_t *nadd, int64_t **removed,
                         size_t *nrem, int *complete, hr_err_t *err);
    int (*prune_log)(void *db, int64_t keep, hr_err_t *err);
    void (*close)(void *db);
} index_backend_t;

/* The SQLite backend over the database at path. */
void *index_sqlite_open(const char *path, int readonly, const index_backend_t **ops, hr_err_t *err);
/* The PostgreSQL backend at conninfo (a postgres:// URL or key=value string). */
void *index_pg_open(const index_pg_config_t *cfg, const index_backend_t **ops, hr_err_t *err);

#endif
