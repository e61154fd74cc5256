/* store_impl.h - the store's insides, shared by the files that implement store.h.
 *
 * Private to storage/: store.c (opening, heads and ingest, cuts, scans, stats),
 * block_cache.c (block footers and decoded partitions under --block-cache-bytes),
 * compact.c (merging small blocks into day blocks) and retention.c (deleting old
 * blocks). Nothing outside storage/ includes it.
 *
 * The locks of storage/, the one place their order is written. A thread holding one
 * takes only locks further down the list, never one above it:
 *   1. `compact` (store): one compaction or retention run at a time.
 *   2. `cutting` (store): one cut at a time; retention takes it too, so the block list
 *      changes under one of them at once.
 *   3. `cut` (store, rwlock): written for the instant a cut freezes the heads and
 *      rotates the WAL; read by every ingest from stage to commit, so no ingest is in
 *      the WAL but not in the head when the WAL is rotated.
 *   4. `data` (store, rwlock): the block list; written for swaps, read by scans.
 *   5. `head_lock` (store, rwlock): the heads; written by ingest's stage and commit and
 *      by a cut's swaps, read by scans for the heads alone, so ingest waits for no
 *      scan of blocks.
 *   6. `cache_mu` (store): decoded partitions, pins, block footers attached late, `bad`.
 *   7. `sync_mu`, then `mu` (wal.c): one fsync at a time, then the file and counters.
 * Leaves, under which nothing else is taken: the index's `mu` and its innermost
 * `db_mu` (catalog/index.c; never taken while `data` is held: ingest resolves its series
 * before taking `cut`, and a query matches selectors on a snapshot after releasing
 * it), `durable_mu` (cluster.c's acknowledgements), each dictionary's `mu`
 * (symdict.c), the object cache's and the object store's pool's `mu` (remote/objcache.c,
 * remote/objstore.c). No ingest ever waits for a block being written or for a scan of
 * blocks. */
#ifndef HEARTH_STORE_IMPL_H
#define HEARTH_STORE_IMPL_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "common/hash.h"
#include "storage/block.h"
#include "remote/objcache.h"
#include "storage/store.h"
#include "storage/symdict.h"

typedef struct {
    char tenant[128];
    segment_t *seg;
    segment_t *frozen; /* the head a cut is storing as a block (store.c), read-only and still
                        * queried; NULL when none */
    int64_t opened_ns; /* wall clock of the head's first ingest */
    /* Room in seg promised to ingests between their stage and their commit (store.c):
     * seg always has room for these beyond what it holds. */
    size_t staged_profiles, staged_samples, staged_spans;
} head_t;

#define DECODE_BATCH 8        /* partitions pinned at once by a scan */
#define DECODE_BATCH_FUNCS 32 /* ... when all are function tables (tens of KB each): fewer hand-offs */
#define DECODE_MAX 4          /* threads a scan decodes them on, at most */
#define ATTACH_MAX 8          /* threads a scan reads unattached footers on (object store round trips) */
#define PREFETCH_MAX 16       /* threads a cluster scan fetches partitions on */

/* One decoded partition of a block, cached under --block-cache-bytes. Loaded ones
 * are on the store's LRU list, least recently pinned first, so eviction takes the
 * oldest unpinned without scanning every block. All guarded by cache_mu. */
typedef struct part_cache {
    segment_t *cached;  /* NULL until loaded */
    block_window_t win; /* the window slot's: the (hour-rounded) range its rows reach */
    uint32_t dict;      /* the store's dictionary entry (dicts) of its key */
    struct part_cache *older, *newer;
    int refs;
} part_cache_t;

/* A partition key's shared dictionary (symdict.h). d is NULL once pruned (no cached
 * partition used it); the entry stays so the set needs no deletion. */
typedef struct {
    char *tenant, *key;
    symdict_t *d;
} dict_entry_t;

typedef struct {
    block_meta_t meta;
    block_index_t *ix;   /* its footer (partitions, totals), read when the block is opened or written */
    part_cache_t *parts; /* CACHE_SLOTS per partition of ix (part_cache) */
    int bad;             /* unreadable: skipped by queries (guarded by cache_mu) */
} block_t;

/* A partition's cache slots: one per view (block.h's BLOCK_VIEW_*), and the window
 * slot, which holds the rows of one window (bcache_pin_window). */
#define SLOT_WINDOW BLOCK_VIEWS
#define CACHE_SLOTS (BLOCK_VIEWS + 1)

/* The cache entry of a slot (a view, or SLOT_WINDOW) of partition p of b. */
static inline part_cache_t *part_cache(const block_t *b, size_t p, int slot) {
    return &b->parts[CACHE_SLOTS * p + (size_t)slot];
}

struct store {
    store_config_t cfg;
    char dir[2048];
    index_t *index;
    wal_t *wal;
    pthread_rwlock_t cut, data, head_lock;
    pthread_mutex_t cutting;
    pthread_mutex_t cache_mu;
    pthread_mutex_t compact;
    int lock_fd; /* flock on DATA_DIR/LOCK: one server per data directory */
    head_t *heads;
    size_t nheads, heads_cap;
    block_t *blocks;
    size_t nblocks, blocks_cap;
    size_t cached_bytes;
    _Atomic size_t dict_bytes; /* held by the partition keys' shared dictionaries (symdict.h) */
    dict_entry_t *dicts;       /* one per partition key decoded (cache_mu) */
    size_t ndicts, dicts_cap;
    idset_t dict_set;                      /* dicts by (tenant, key) */
    part_cache_t *lru_oldest, *lru_newest; /* the loaded partitions (cache_mu) */
    int decode_threads; /* partitions a scan decodes at once: the machine's cores, up to DECODE_MAX */
    uint64_t part_loads, funcs_loads, window_loads, cuts, retention_deleted, compactions, compacted_blocks,
        compactions_lost;
    uint64_t cut_ns;                  /* the cuts' time, summed (store_stats_t.cut_ns) */
    _Atomic uint64_t footer_loads;    /* footers attached (a cut attaches its new blocks' without cache_mu) */
    _Atomic uint64_t symbols_decoded; /* partitions whose symbols a cache load decoded (loads hold no lock) */
    _Atomic uint64_t names_decoded;   /* function tables whose names stored apart a cache load decoded */
    /* Cluster mode (cluster.c): NULL objects means one node with local files. */
    objstore_t *objects;
    objcache_t *ocache;
    pthread_mutex_t durable_mu; /* innermost; guards the four below */
    pthread_cond_t durable_cv;  /* broadcast after every cut */
    /* The heads' generation: the uploads of generation g are in the heads until a
     * cut freezes them and moves ingest on to g + 1 (under `cut` too); generations
     * below stored_gen are over: stored, or failed. */
    uint64_t head_gen, stored_gen;
    /* The frozen heads (head_t.frozen) awaiting their blocks (`cutting`): the WAL
     * segments up to frozen_closed hold exactly them, and they are generation
     * frozen_gen. A local cut that failed keeps them for the next. */
    int frozen_pending;
    uint32_t frozen_closed;
    uint64_t frozen_gen;
    hr_err_t flush_err;     /* the last failed cut's error */
    uint64_t failed;        /* bit g % 64 set: generation g's cut failed (its uploads got 503) */
    int64_t blocks_version; /* the catalog version s->blocks was last read at (-1: never) */
    uint64_t syncs[2];      /* block list syncs: read whole [0], from the change log [1] */
};

static inline int64_t store_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A new block of tenant: fills meta's id, tenant and path (the rest is the
 * writer's), creates its folder and puts its full path in full. 0 or -1. (store.c) */
int store_new_block(store_t *s, const char *tenant, block_meta_t *meta, char *full, size_t cap, hr_err_t *err);
/* Writes seg as a new block file of tenant (a cut head or a compacted run); fills
 * meta for the catalog. 0 or -1. (store.c) */
int store_write_block(store_t *s, const char *tenant, const segment_t *seg, block_meta_t *meta, hr_err_t *err);

/* ---- cluster.c: where block bytes live ---- */

/* Reads a block's footer / one partition view, from its file or its object. In
 * cluster mode a range that reads back corrupt from the disk cache is dropped and
 * read again from the store; a missing object is a passing HR_EIO (this node's block
 * list is older than the catalog), never "unreadable". */
block_index_t *store_read_index(store_t *s, const block_meta_t *m, hr_err_t *err);
segment_t *store_read_part(store_t *s, const block_meta_t *m, const block_index_t *ix, size_t p, int view,
                           const block_window_t *win, hr_err_t *err);
/* A block just written at DATA_DIR/m->path: in cluster mode uploaded as object
 * m->path and the local file removed. 0 or -1 (the local file is then removed too). */
int store_publish_block(store_t *s, const block_meta_t *m, hr_err_t *err);
/* Removes a written block that will not be registered (its file, or its object). */
void store_discard_block(store_t *s, const block_meta_t *m);
/* Removes a block the catalog no longer names: its file (one node), or nothing (a
 * cluster: the catalog put its object in the trash). */
void store_retire_block(store_t *s, const block_meta_t *m);
/* Starts fetching the byte ranges of the partitions a scan will decode into the disk
 * cache, in scan order, on up to PREFETCH_MAX threads, and returns while they run:
 * the scan decodes each partition as soon as its bytes are in (a decode that reaches
 * a range being fetched waits for that fetch), so a cold cluster query waits for
 * about one round trip and the decode of the last partition to arrive, not a round
 * trip per partition. Errors are left for the decode to meet and report. NULL when
 * there is nothing to fetch (one node, everything cached, one partition) or no
 * thread started. `data` held for reading until store_prefetch_end. */
typedef struct prefetch prefetch_t;
prefetch_t *store_prefetch_start(store_t *s, const char *tenant, const store_filter_t *f);
/* Cancels the ranges not yet started, joins the threads and frees p (NULL: nothing). */
void store_prefetch_end(prefetch_t *p);
/* 1 when partition p of ix may hold rows the filter wants (time range and series) and
 * no summary partition standing for it is read instead (a summary is wanted only by
 * a merge covering its whole range). */
int store_part_wanted(const block_index_t *ix, size_t p, const store_filter_t *f);
/* The view (BLOCK_VIEW_*) of a wanted partition a scan with filter f reads. */
int store_part_view(const block_part_t *p, const store_filter_t *f);
/* 1 unless f restricts the scan to some partitions (f->only) and not partition p of
 * block id. */
int store_part_picked(const store_filter_t *f, int64_t block, size_t p);
/* 1 when s->blocks holds block id. data held. */
int store_has_block(const store_t *s, int64_t id);
/* Cluster ingest: waits until the cut of generation gen of the heads is over. 0 when
 * it stored them; -1 with HR_EIO when it failed (a failed cluster cut drops the frozen
 * heads: an upload is stored only if acknowledged), or after the ack timeout. */
int store_wait_durable(store_t *s, uint64_t gen, hr_err_t *err);
/* Records the outcome of the cut of generation gen (the oldest not yet over;
 * `cutting` held); e is kept for the failed uploads' error. */
void store_cut_done(store_t *s, uint64_t gen, int ok, const hr_err_t *e);

/* ---- block_cache.c ---- */

/* Reads a block's footer (its partitions and totals). A corrupt or missing block is
 * marked bad, logged, and skipped by queries from then on; a passing failure (out of
 * memory or descriptors, an I/O error) leaves it unattached, for a scan to retry, and
 * fills err (when not NULL). cache_mu held, or the block not yet visible to other
 * threads. */
void bcache_attach(store_t *s, block_t *b, hr_err_t *err);
/* Reads the footers of blocks idx[0..n) (unattached, not bad) on up to ATTACH_MAX
 * threads: a cold cluster node opens a week of blocks in a few round trips' time, not
 * one after another. A passing failure leaves a block unattached, for scan_block to
 * retry and report. `data` held for reading; cache_mu not held. */
void bcache_attach_many(store_t *s, const size_t *idx, size_t n);
/* Frees the partition keys' dictionaries (store_close; no other thread). */
void bcache_free_dicts(store_t *s);
/* Frees a block's index and cached partitions. cache_mu held (or no other thread). */
void bcache_drop_locked(store_t *s, block_t *b);
/* Frees least-recently used decoded partitions that no scan holds, down to the
 * budget. cache_mu held. */
void bcache_evict_locked(store_t *s);
/* Pins a view of partition p of block i, decoding it on first use (no lock held
 * meanwhile). NULL with err filled if it cannot be read: a corrupt or missing block
 * is then marked bad (err HR_EUNPROC or HR_ENOTFOUND: skip it); a passing failure
 * (HR_ENOMEM, HR_EIO) marks nothing, and the caller fails rather than answer without
 * the partition. */
segment_t *bcache_pin(store_t *s, size_t i, size_t p, int view, hr_err_t *err);
void bcache_unpin(store_t *s, size_t i, size_t p, int view);

/* Pins partition p's rows for a scan of window win: all of them when they are cached
 * (*slot BLOCK_VIEW_ROWS), else only the rows in win rounded out to whole hours
 * (block.h), kept in the partition's window slot (*slot SLOT_WINDOW) so the next query
 * of those hours finds them. A short range inside a long partition
 * costs its slice, and does not fill the cache with the whole. When the slot holds
 * another window still in use, the rows are decoded for this scan alone (*owned
 * set: the caller frees the segment instead of unpinning it). */
segment_t *bcache_pin_window(store_t *s, size_t i, size_t p, const block_window_t *win, int *slot, int *owned,
                             hr_err_t *err);

/* A partition view a scan wants, in scan order. */
typedef struct {
    store_t *s;
    size_t block, part;
    int view;
    segment_t *seg; /* pinned, or NULL (unreadable: err says why) */
    hr_err_t err;
    int windowed; /* rows view: only the rows in win (bcache_pin_window) */
    block_window_t win;
    int owned; /* seg is the scan's own (a windowed decode), not the cache's */
} want_t;

/* Pins the batch (decoding uncached partitions on up to s->decode_threads threads,
 * the caller's among them), hands fn the partitions in order, and unpins them,
 * skipping those of bad blocks. Returns fn's first -1, or -1 with err filled when a
 * partition failed to load for a passing reason (bcache_pin), else 0. `data` held
 * for reading. */
int bcache_run_batch(store_t *s, want_t *w, size_t n, int strict, store_segment_fn fn, void *ctx, hr_err_t *err);

#endif
