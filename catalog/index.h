/* index.h - the metadata store: series and their labels, the block catalog, the WAL
 * checkpoint and the schema version; in SQLite for one node, in PostgreSQL for a
 * cluster (backend.h), where it is shared by every node.
 *
 * The database is the durable truth; the series are also mirrored in memory (an array
 * indexed by series id) because every ingest and query consults them. Series ids
 * are dense, assigned here, and never reused. All functions are thread-safe: one
 * mutex guards the mirror and another, innermost, the database handle (one call at a
 * time). Every ingest takes the mirror's to resolve its series, and the database's
 * only to make a new one, so an ingest of known series never waits for a cut's or a
 * compaction's transaction. No caller code runs under either: a query takes a snapshot
 * of a tenant's series (index_snapshot) and matches its selector after the mutex is
 * released, however slow the selector. */
#ifndef HEARTH_INDEX_H
#define HEARTH_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/labels.h"

#define INDEX_SCHEMA_VERSION 1

typedef struct {
    uint32_t id;
    char *tenant, *profile_type;
    labels_t labels;
} series_t;

typedef struct {
    int64_t id;
    char tenant[128];
    char path[512]; /* relative to the data dir */
    int64_t min_time, max_time, profiles, samples, bytes;
} block_meta_t;

typedef struct index index_t;

/* Opens (creating if needed) the database at path and loads the series. A database
 * of a newer schema version is refused. */
index_t *index_open(const char *path, hr_err_t *err);
/* Opens an existing database read-only (`hearth check`): no schema set-up, no
 * writes, so it works beside a running server and on a full disk. Functions that
 * write then fail with HR_EIO. */
index_t *index_open_readonly(const char *path, hr_err_t *err);

/* The cluster catalog in PostgreSQL (creating its tables if needed, one node at a
 * time under an advisory lock). An unreachable server is HR_EIO, as is every call
 * that finds it gone later (the connection is re-established on the next call). */
typedef struct {
    const char *conninfo;   /* postgres://user@host:port/db, or libpq's key=value form */
    int64_t trash_delay_ms; /* how long replaced blocks' objects stay readable */
} index_pg_config_t;
index_t *index_open_pg(const index_pg_config_t *cfg, hr_err_t *err);
/* 1 when the catalog is shared with other nodes (PostgreSQL). */
int index_shared(index_t *ix);
void index_close(index_t *ix);

/* Finds the series (tenant, profile type, labels) or creates it, committed to SQLite
 * before returning. *id receives its id. */
int index_series(index_t *ix, const char *tenant, const char *profile_type, const labels_t *labels, uint32_t *id,
                 hr_err_t *err);
/* Caps how many series one tenant may have; index_series then fails with HR_ELIMIT
 * for a new series past it (existing series keep working). 0 = no cap. */
void index_set_series_limit(index_t *ix, size_t max_per_tenant);

/* The series of one tenant at one moment, read without the index lock. A series is
 * immutable once created and freed only by index_close, so the borrowed pointers stay
 * valid while the index is open; series created after the snapshot are not in it. */
typedef struct {
    const series_t **v; /* by ascending id; malloc'd */
    size_t n;
} index_snapshot_t;

/* Fills out with tenant's series (the mutex is held only to copy the pointers).
 * 0, or -1 with HR_ENOMEM. Free with index_snapshot_free, also after a failure. */
int index_snapshot(index_t *ix, const char *tenant, index_snapshot_t *out, hr_err_t *err);
void index_snapshot_free(index_snapshot_t *s);
size_t index_series_total(index_t *ix);
/* One past the highest series id known: the size of a bitmap over every series. */
uint32_t index_series_bound(index_t *ix);

/* A shared catalog: reads the catalog's version (it moves with every change of
 * series or blocks, by any node) into *version and, when it moved since the last
 * call, the series other nodes made into the mirror; the caller re-reads the block
 * list when the version is not the one it last read it at. SQLite: always 0.
 * 0, or -1 (HR_EIO). */
int index_sync(index_t *ix, int64_t *version, hr_err_t *err);

/* The block catalog. */
int index_blocks(index_t *ix, block_meta_t **out, size_t *n, hr_err_t *err);
/* A shared catalog's block changes of versions (since, upto] from its change log, read in
 * one snapshot: the blocks added that are still there, the ids removed (both malloc'd).
 * *complete is 0 when the log cannot tell them all (a version without a log row: pruned,
 * or written by a node older than the log), and the caller reads the whole list. */
int index_block_changes(index_t *ix, int64_t since, int64_t upto, block_meta_t **added, size_t *nadd, int64_t **removed,
                        size_t *nrem, int *complete, hr_err_t *err);
/* Drops change log rows more than keep versions old. */
int index_prune_log(index_t *ix, int64_t keep, hr_err_t *err);
int index_next_block_id(index_t *ix, int64_t *id, hr_err_t *err);
/* Registers blocks and moves the WAL checkpoint to wal_segment in one transaction. */
int index_commit_blocks(index_t *ix, const block_meta_t *b, size_t n, uint32_t wal_segment, hr_err_t *err);
uint32_t index_wal_checkpoint(index_t *ix);
/* Compaction: registers the merged blocks and drops the n blocks they replace in one
 * transaction, so the catalog names either the old blocks or the new ones. When any
 * of the n is gone already (another node's compaction or retention), nothing changes
 * and it fails with HR_ENOTFOUND. A shared catalog puts the replaced blocks' objects
 * in its trash, deleted after the delay (index_trash_take). */
int index_replace_blocks(index_t *ix, const block_meta_t *merged, size_t nmerged, const int64_t *ids, size_t n,
                         hr_err_t *err);
/* Drops blocks from the catalog in one transaction (the caller deals with files). */
int index_remove_blocks(index_t *ix, const int64_t *ids, size_t n, hr_err_t *err);

/* Shared catalogs only (HR_EINVAL otherwise). */
/* Takes job for owner until lease_ms from now, unless another owner's lease on it
 * is still running: 1 taken, 0 held by another, -1 with err. */
int index_claim(index_t *ix, const char *job, const char *owner, int64_t lease_ms, hr_err_t *err);
int index_release(index_t *ix, const char *job, const char *owner, hr_err_t *err);
/* Records that node is alive (its role, address, and whether it scrapes targets), for
 * operators and planners. */
int index_heartbeat(index_t *ix, const char *node, const char *target, const char *listen, int scrapes, hr_err_t *err);
/* The listen addresses (host:port) of the other nodes that answer queries (target all
 * or query) and wrote a heartbeat in the last max_age_s seconds, by node name: the
 * nodes a query's partitions can be split among. *addrs (malloc'd, each one too) has
 * *n of them. */
int index_peers(index_t *ix, const char *self, int max_age_s, char ***addrs, size_t *n, hr_err_t *err);
/* The names of the nodes that scrape (a scrape config loaded) and wrote a heartbeat in
 * the last max_age_s seconds, sorted: the nodes scrape targets are divided among. */
int index_scrapers(index_t *ix, int max_age_s, char ***names, size_t *n, hr_err_t *err);
/* Takes up to max keys of replaced blocks' objects whose delay has passed off the
 * trash (their rows are gone once this returns), for the caller to delete. *keys
 * (malloc'd, each key too) has *n of them. */
int index_trash_take(index_t *ix, size_t max, char ***keys, size_t *n, hr_err_t *err);

#endif
