/* store.h - the storage engine: WAL + in-memory head + immutable blocks + index.
 *
 * Write path: store_ingest appends the caller's encoded request to the WAL (durable
 * before it returns), then copies the decoded batch into the tenant's head segment.
 * When a head grows past its size or age limit, store_cut freezes the heads (new,
 * empty ones take ingest from that instant, and the WAL is rotated with them), writes
 * each frozen head as a block file, registers the blocks and the WAL checkpoint in
 * one SQLite transaction, deletes the WAL segments the blocks now cover and swaps the
 * blocks in for the frozen heads. Ingest never waits for the writing.
 *
 * Read path: store_scan hands a query the segments of a tenant that may hold what
 * its filter wants (time range, series, totals only), under a read lock, so a query
 * never sees a half-finished cut: the heads, and of each block either its footer
 * totals or the partitions (one per service, block.h) holding selected series,
 * decoded on first use into a cache bounded by block_cache_bytes.
 *
 * Locking: ingest waits for no scan of blocks and for no block being written; a cut
 * holds ingest off only for the instant it freezes the heads; compaction and
 * retention, the two operations that remove blocks, run one at a time. Every lock of
 * storage/ and their order are listed once, in store_impl.h. */
#ifndef HEARTH_STORE_H
#define HEARTH_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "storage/batch.h"
#include "catalog/index.h"
#include "remote/objstore.h"
#include "storage/segment.h"
#include "storage/wal.h"

typedef struct {
    const char *data_dir;
    wal_fsync_t fsync;
    size_t head_max_bytes;     /* cut when a tenant's head exceeds this */
    int64_t block_duration_ns; /* ... or when the head is older than this */
    int zstd_level;
    size_t block_cache_bytes;  /* decoded blocks kept in memory */
    int64_t retention_ns;      /* delete blocks whose newest profile is older; 0 = keep all */
    size_t compact_min_blocks; /* merge a run of at least this many small blocks; 0 = never */
    size_t compact_max_bytes;  /* ... into one block of at most this many bytes */
    /* Compaction tiers (ascending, each a multiple of the one before, in whole days):
     * once a tier's window (Monday-aligned) has ended, its blocks merge so each service
     * has one partition per window. Borrowed. */
    const int64_t *tiers_ns;
    size_t ntiers;
    /* Cluster mode (storage/cluster.c, docs/cluster.md): with a catalog URL the store
     * keeps no WAL and no index.db; blocks are objects in `objects`, read by byte range
     * through a disk cache, and the catalog is shared in PostgreSQL. */
    const char *catalog;    /* PostgreSQL conninfo; NULL or "": one node (SQLite) */
    objstore_t *objects;    /* borrowed; required with catalog */
    const char *cache_dir;  /* object ranges cached here ... */
    uint64_t cache_bytes;   /* ... up to this many bytes */
    int64_t trash_delay_ms; /* replaced blocks' objects stay readable this long */
    int64_t ack_timeout_ns; /* an ingest waits this long for its batch to be stored */
    const char *node;       /* this node's name: compaction leases, heartbeats */
} store_config_t;

typedef struct store store_t;

store_t *store_open(const store_config_t *cfg, hr_err_t *err);
/* Flushes nothing: a clean shutdown calls store_cut first if it wants blocks. */
void store_close(store_t *s);

/* Replays the WAL past the checkpoint through fn (which normally decodes the record
 * and calls store_apply). */
int store_replay(store_t *s, wal_replay_fn fn, void *ctx, wal_scan_t *st, hr_err_t *err);

/* Where one store_ingest's time went, in ns of the monotonic clock (0: not reached):
 * the write path's stages, for /metrics. */
typedef struct {
    int64_t series_ns; /* finding or making its series in the index */
    int64_t wait_ns;   /* waiting for `cut`, which only a cut freezing the heads holds */
    int64_t stage_ns;  /* copying its symbols into the head, with the wait for the heads' lock */
    int64_t wal_ns;    /* its WAL append, with the fsync it waits for (group commit) */
    int64_t commit_ns; /* adding its rows to the head */
} store_ingest_times_t;

/* Durably logs rec, then applies batch to tenant's head; times (may be NULL) receives
 * where the time went. In cluster mode there is no
 * log: the batch goes to the head, and the call returns once a cut has stored that
 * head as a block in the object store and registered it in the catalog (the durable
 * acknowledgement), or fails with HR_EIO after ack_timeout_ns (the data may still be
 * stored by a later cut: at least once). */
int store_ingest(store_t *s, const char *tenant, const void *rec, size_t len, const batch_t *b,
                 store_ingest_times_t *times, hr_err_t *err);
/* Applies a batch to the head without logging it (WAL replay). */
int store_apply(store_t *s, const char *tenant, const batch_t *b, hr_err_t *err);

/* Writes every non-empty head as a block (see above). */
int store_cut(store_t *s, hr_err_t *err);
/* Cuts if any head is over its limits; returns 1 if it cut, 0 if not, -1 on error. */
int store_maybe_cut(store_t *s, hr_err_t *err);

/* Deletes every block whose newest profile is older than now - retention: catalog
 * rows first (one transaction), files after, so a crash leaves only orphan files,
 * which store_open removes. Returns the number of blocks deleted, or -1. */
int store_apply_retention(store_t *s, int64_t now_ns, hr_err_t *err);

/* Compaction: finds the first due run of one tenant's blocks: a tier run (the blocks
 * starting in one ended window of a tier, largest tier first, when some service has a
 * partition in more than one of them; a tier applies while --retention is 0 or at
 * least four of its windows), else a day run (compact_min_blocks or more time-adjacent
 * blocks starting on one UTC day, each under compact_max_bytes / 2). It merges the run a
 * partition key (service) at a time (segment_merge, segment.h) into blocks of about
 * compact_max_bytes each (a block is closed once it reaches that size; a run with a
 * version-1 block is capped at compact_max_bytes of input and written as one block),
 * and swaps them in: files written and synced first, then one catalog transaction
 * (new in, old out), then the in-memory list under the data lock, then the old files
 * unlinked. A crash at any point leaves either the old blocks or the new ones in the
 * catalog, and the other side as orphan files that store_open removes. Queries scan
 * either the old blocks or the new ones, never both or neither. Ingest and cuts keep running
 * meanwhile. Returns 1 if it compacted a run, 0 if none was due, -1 on error. */
int store_compact(store_t *s, hr_err_t *err);

/* One partition of one block, or a whole block: the units a query split across
 * cluster nodes divides. */
typedef struct {
    int64_t block; /* its catalog id */
    uint32_t part; /* its index in the block's footer, or STORE_WHOLE_BLOCK */
} store_part_ref_t;
/* A ref's part standing for every partition of the block that the filter wants: a
 * share planned from the catalog's block list alone, before any footer is read. */
#define STORE_WHOLE_BLOCK UINT32_MAX

/* What a scan needs, so it decodes only that: a time range, optionally a set of
 * series, and whether the rows' totals suffice (no stacks: time series, profile
 * lists, label presence). */
typedef struct {
    int64_t from, until;          /* ns, inclusive */
    const uint8_t *series;        /* series[id] != 0: wanted; NULL: every series */
    uint32_t nseries;             /* length of series */
    int totals_only;              /* rows with their totals are enough; samples may be absent */
    int merged_ok;                /* a partition wholly in range may come as its pre-merged rows:
                            * one per series at the partition's first time, holding the sum
                            * of its samples (only the stacks' sums are wanted) */
    int funcs_ok;                 /* with merged_ok, a partition wholly in range may come as its
                            * function table (storage/functab.h: a segment with no rows and
                            * `funcs` set): only per-function sums are wanted */
    const store_part_ref_t *only; /* non-NULL: of the blocks, only these partitions (nonly of
                                   * them, sorted by block and part): a node's share */
    size_t nonly;
    int window_ok; /* a partition's rows may come as only those in the range rounded out to
                    * whole hours (block.h's window: no span samples) */
    int no_heads;  /* the heads are not scanned */
    int strict;    /* a partition that cannot be read (a corrupt or missing block, skipped
                   * otherwise) fails the scan (HR_EIO): a peer's share must not answer less */
} store_filter_t;

/* Calls fn for segments of tenant that may hold rows the filter wants: the heads,
 * and of each block overlapping the range either its footer totals (totals_only: a
 * segment of rows without samples) or each partition holding a wanted series. A
 * segment may also hold rows the filter does not want; fn checks rows itself.
 * Segments are borrowed for the duration of the call. A corrupt or missing block is
 * logged and skipped from then on; a block that fails to load for a passing reason
 * (out of memory, an I/O error) fails the scan: -1 with err filled, since an answer
 * without it would be wrong. fn returning -1 stops the scan (-1, err untouched). */
typedef int (*store_segment_fn)(void *ctx, const segment_t *seg);
int store_scan(store_t *s, const char *tenant, const store_filter_t *f, store_segment_fn fn, void *ctx, hr_err_t *err);

/* Several scans that must see the same data (a merge's passes: counts, totals and
 * stacks agree): store_scan with f[0], f[1], ... f[n-1] in turn under one read lock,
 * so no ingest, cut or compaction lands between them. pass(ctx, k) is called before
 * scan k. Stops at the first scan that returns -1. */
typedef void (*store_pass_fn)(void *ctx, size_t k);
int store_scan_passes(store_t *s, const char *tenant, const store_filter_t *f, size_t n, store_pass_fn pass,
                      store_segment_fn fn, void *ctx, hr_err_t *err);

/* The block partitions a scan with filter f would read (not the heads), with their
 * sizes in bytes: what a split query divides among nodes. Call it from a store_pass_fn
 * (the scan's lock is held then). *refs and *bytes (malloc'd) have *n entries, sorted
 * by block and part. 0, or -1 with err (a footer that does not load). */
int store_plan_locked(store_t *s, const char *tenant, const store_filter_t *f, store_part_ref_t **refs,
                      uint64_t **bytes, size_t *n, hr_err_t *err);
/* The same from the catalog's block list alone, reading no footer: a STORE_WHOLE_BLOCK
 * ref per block a scan with filter f may read, with the block's size in bytes (every
 * series in it, so an upper bound on what f decodes of it). -1 only when out of memory. */
int store_plan_blocks_locked(store_t *s, const char *tenant, const store_filter_t *f, store_part_ref_t **refs,
                             uint64_t **bytes, size_t *n);
/* What a query with filter f would read, without reading it (Grafana's AnalyzeQuery):
 * the block partitions holding a wanted series (their counts and compressed bytes
 * come from the footers, and cover every series of those partitions, so they bound
 * what the query decodes), and the heads' rows of wanted series in range (exact). */
typedef struct {
    uint64_t blocks, parts; /* blocks with at least one such partition */
    uint64_t block_profiles, block_samples, block_bytes;
    uint64_t head_profiles, head_samples, head_bytes; /* head_bytes: those rows and samples in memory */
} store_analysis_t;
int store_analyze(store_t *s, const char *tenant, const store_filter_t *f, store_analysis_t *a, hr_err_t *err);

/* Sorts refs by block and part, as store_filter_t.only wants them. */
void store_part_refs_sort(store_part_ref_t *refs, size_t n);
/* 1 when every one of refs[0..n) names a partition of a block this node knows (after
 * its last sync), or a whole block it knows, so a scan restricted to them misses none.
 * From a store_pass_fn. */
int store_has_parts_locked(store_t *s, const store_part_ref_t *refs, size_t n);

index_t *store_index(store_t *s);

/* Cluster mode (no-ops returning 0 on one node): */
/* Re-reads what other nodes changed in the catalog (new series, blocks added and
 * removed) when its version moved: one round trip when it did not. 0, or -1 with
 * HR_EIO (the catalog is unreachable). Scans call it first. */
int store_sync(store_t *s, hr_err_t *err);
/* Deletes the objects of replaced blocks whose delay has passed. Returns how many. */
int store_collect_trash(store_t *s, hr_err_t *err);
int store_clustered(const store_t *s);

typedef struct {
    size_t head_bytes, head_profiles, head_samples;
    size_t head_strings, head_functions, head_locations, head_stacks; /* interned symbols */
    size_t blocks, block_bytes, blocks_corrupt;
    size_t parts_cached, cached_bytes; /* decoded block partitions held, and their bytes */
    size_t dict_bytes;                 /* of cached_bytes, the services' shared symbol dictionaries */
    uint64_t footer_loads;             /* block footers read and attached (once per block known) */
    uint64_t part_loads;               /* partitions decoded into the cache (its misses) */
    uint64_t window_loads;             /* partitions decoded in part: the rows of a short range inside them */
    uint64_t funcs_loads;              /* of which function tables alone (storage/functab.h) */
    uint64_t symbols_decoded;          /* loads that decoded a partition's symbols: the others found
                                        * every stack in their service's dictionary by fingerprint */
    uint64_t names_decoded;            /* function table loads that decoded names stored apart: the
                                        * others found every name in the dictionary by fingerprint */
    size_t series;
    uint64_t wal_bytes;
    uint64_t cuts, retention_deleted;
    uint64_t cut_ns;                        /* time the cuts took to write, verify and commit their blocks */
    uint64_t compactions, compacted_blocks; /* runs done, blocks they replaced */
    /* cluster mode: object ranges read from the cache and from the store */
    uint64_t ocache_hits, ocache_misses, ocache_fetched_bytes, ocache_bytes, ocache_ranges;
    uint64_t compactions_lost;              /* runs another node's compaction or retention overtook */
    uint64_t syncs_full, syncs_incremental; /* cluster: block list syncs read whole, from the change log */
} store_stats_t;
void store_stats(store_t *s, store_stats_t *out);
/* The time of tenant's oldest and newest stored profile (ns), from the block catalog
 * and the head; returns 1, or 0 when the tenant has none. */
int store_time_range(store_t *s, const char *tenant, int64_t *oldest, int64_t *newest);

#endif
