/* store.c - see store.h. */
#include "storage/store.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/vec.h"
#include "storage/block.h"
#include "storage/compact.h"
#include "storage/fsutil.h"

typedef struct {
    char tenant[128];
    segment_t *seg;
    int64_t opened_ns; /* wall clock of the head's first ingest */
} head_t;

#define DECODE_BATCH 8 /* partitions pinned at once by a scan */
#define DECODE_MAX 4    /* threads a scan decodes them on, at most */

/* One decoded partition of a block, cached under --block-cache-bytes. */
typedef struct {
    segment_t *cached; /* NULL until loaded; guarded by cache_mu */
    uint64_t last_use;
    int refs;
} part_cache_t;

typedef struct {
    block_meta_t meta;
    block_index_t *ix;   /* its footer (partitions, totals), read when the block is opened or written */
    part_cache_t *parts; /* 2 * ix->nparts: [2p + view] (block.h's BLOCK_VIEW_*) */
    int bad;             /* unreadable: skipped by queries (guarded by cache_mu) */
} block_t;

struct store {
    store_config_t cfg;
    char dir[2048];
    index_t *index;
    wal_t *wal;
    pthread_rwlock_t cut, data;
    pthread_mutex_t cache_mu;
    pthread_mutex_t compact;
    int lock_fd; /* flock on DATA_DIR/LOCK: one server per data directory */
    head_t *heads;
    size_t nheads, heads_cap;
    block_t *blocks;
    size_t nblocks, blocks_cap;
    size_t cached_bytes;
    int decode_threads; /* partitions a scan decodes at once: the machine's cores, up to DECODE_MAX */
    uint64_t clock, cuts, retention_deleted, compactions, compacted_blocks;
};

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Reads a block's footer (its partitions and totals). A corrupt or missing block is
 * marked bad, logged, and skipped by queries from then on; a passing failure (out of
 * memory or descriptors, an I/O error) leaves it unattached, for scan_block to retry. */
static void block_attach(store_t *s, block_t *b) {
    char full[4096];
    snprintf(full, sizeof full, "%s/%s", s->dir, b->meta.path);
    hr_err_t e = {0};
    if ((b->ix = block_index_read(full, &e)) && (b->parts = calloc(2 * b->ix->nparts + 1, sizeof *b->parts))) return;
    block_index_free(b->ix);
    b->ix = NULL;
    b->bad = e.code == HR_EUNPROC || e.code == HR_ENOTFOUND;
    log_error(b->bad ? "block.unreadable" : "block.attach_failed", "path=%s err=\"%s\"", b->meta.path,
              e.msg[0] ? e.msg : "out of memory");
}

/* Frees a block's index and cached partitions. cache_mu held (or no other thread). */
static void block_drop_locked(store_t *s, block_t *b) {
    for (size_t p = 0; b->ix && p < 2 * b->ix->nparts; p++) {
        if (!b->parts[p].cached) continue;
        s->cached_bytes -= segment_bytes(b->parts[p].cached);
        segment_free(b->parts[p].cached);
    }
    free(b->parts);
    block_index_free(b->ix);
    b->parts = NULL;
    b->ix = NULL;
}

/* Deletes block files the catalog does not know: left by a cut that crashed before
 * its commit, so the WAL still holds their data. */
static void remove_orphans(store_t *s, const char *tenant_dir) {
    DIR *d = opendir(tenant_dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char rel[1024];
        const char *t = strrchr(tenant_dir, '/') + 1;
        snprintf(rel, sizeof rel, "blocks/%s/%s", t, e->d_name);
        int known = 0;
        for (size_t i = 0; i < s->nblocks && !known; i++) known = !strcmp(s->blocks[i].meta.path, rel);
        if (!known) {
            char full[4096];
            snprintf(full, sizeof full, "%s/%s", s->dir, rel);
            log_warn("block.orphan_removed", "path=%s", rel);
            unlink(full);
        }
    }
    closedir(d);
}

static void remove_all_orphans(store_t *s) {
    char bdir[2100];
    snprintf(bdir, sizeof bdir, "%s/blocks", s->dir);
    DIR *d = opendir(bdir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char td[2400];
        snprintf(td, sizeof td, "%s/%s", bdir, e->d_name);
        remove_orphans(s, td);
    }
    closedir(d);
}

store_t *store_open(const store_config_t *cfg, hr_err_t *err) {
    store_t *s = calloc(1, sizeof *s);
    if (!s) {
        hr_fail(err, HR_ENOMEM, "out of memory");
        return NULL;
    }
    s->cfg = *cfg;
    snprintf(s->dir, sizeof s->dir, "%s", cfg->data_dir);
    s->cfg.data_dir = s->dir;
    s->lock_fd = -1;
    pthread_rwlock_init(&s->cut, NULL);
    pthread_rwlock_init(&s->data, NULL);
    pthread_mutex_init(&s->cache_mu, NULL);
    pthread_mutex_init(&s->compact, NULL);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    s->decode_threads = cpus < 1 ? 1 : cpus > DECODE_MAX ? DECODE_MAX : (int)cpus;
    char path[2200];
    snprintf(path, sizeof path, "%s/blocks", s->dir);
    if (fs_mkdirs(path, err)) goto fail;
    /* Before anything reads or writes: two servers on one directory would rotate and
     * delete each other's WAL segments and blocks. */
    if ((s->lock_fd = fs_lock_dir(s->dir, err)) < 0) goto fail;
    snprintf(path, sizeof path, "%s/index.db", s->dir);
    if (!(s->index = index_open(path, err))) goto fail;
    snprintf(path, sizeof path, "%s/wal", s->dir);
    if (!(s->wal = wal_open(path, cfg->fsync, err))) goto fail;
    block_meta_t *metas;
    size_t n;
    if (index_blocks(s->index, &metas, &n, err)) goto fail;
    if (VEC_RESERVE(s->blocks, s->blocks_cap, n + 1)) {
        free(metas);
        hr_fail(err, HR_ENOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < n; i++) s->blocks[i] = (block_t){.meta = metas[i]};
    s->nblocks = n;
    free(metas);
    for (size_t i = 0; i < n; i++) block_attach(s, &s->blocks[i]); /* footers only: no partition is decoded */
    remove_all_orphans(s);
    return s;
fail:
    store_close(s);
    return NULL;
}

void store_close(store_t *s) {
    if (!s) return;
    for (size_t i = 0; i < s->nheads; i++) segment_free(s->heads[i].seg);
    free(s->heads);
    for (size_t i = 0; i < s->nblocks; i++) block_drop_locked(s, &s->blocks[i]);
    free(s->blocks);
    wal_close(s->wal);
    index_close(s->index);
    pthread_rwlock_destroy(&s->cut);
    pthread_rwlock_destroy(&s->data);
    pthread_mutex_destroy(&s->cache_mu);
    pthread_mutex_destroy(&s->compact);
    if (s->lock_fd >= 0) close(s->lock_fd);
    free(s);
}

index_t *store_index(store_t *s) { return s->index; }

int store_replay(store_t *s, wal_replay_fn fn, void *ctx, wal_scan_t *st, hr_err_t *err) {
    return wal_replay(s->wal, index_wal_checkpoint(s->index), fn, ctx, st, err);
}

/* Returns the tenant's head, creating it; call with `data` held for writing. */
static head_t *head_for(store_t *s, const char *tenant) {
    for (size_t i = 0; i < s->nheads; i++)
        if (!strcmp(s->heads[i].tenant, tenant)) return &s->heads[i];
    if (VEC_RESERVE(s->heads, s->heads_cap, s->nheads + 1)) return NULL;
    head_t *h = &s->heads[s->nheads];
    memset(h, 0, sizeof *h);
    snprintf(h->tenant, sizeof h->tenant, "%s", tenant);
    if (!(h->seg = segment_new())) return NULL;
    s->nheads++;
    return h;
}

/* Resolves series ids first (SQLite work, no data lock held), then copies. */
static int apply_locked(store_t *s, const char *tenant, const batch_t *b, const uint32_t *series,
                        hr_err_t *err) {
    pthread_rwlock_wrlock(&s->data);
    int rc = 0;
    head_t *h = head_for(s, tenant);
    symtab_remap_t m;
    uint32_t *stacks = NULL;
    size_t cap = 0;
    if (!h || symtab_remap_init(&m, b->sym)) {
        pthread_rwlock_unlock(&s->data);
        return hr_fail(err, HR_ENOMEM, "out of memory");
    }
    if (h->seg->nprofiles == 0) h->opened_ns = now_ns();
    for (size_t i = 0; i < b->n && rc == 0; i++) {
        const batch_profile_t *p = &b->p[i];
        if (VEC_RESERVE(stacks, cap, p->n + 1)) rc = hr_fail(err, HR_ENOMEM, "out of memory");
        for (size_t j = 0; j < p->n && rc == 0; j++) {
            stacks[j] = symtab_import_stack(h->seg->sym, &m, p->stacks[j]);
            if (stacks[j] == SYM_NONE) rc = hr_fail(err, HR_ENOMEM, "out of memory");
        }
        if (rc == 0 && (segment_add(h->seg, series[i], p->time_ns, p->duration_ns, stacks, p->values, p->n) ||
                        segment_import_spans(h->seg, &m, p->spans, p->nspans)))
            rc = hr_fail(err, HR_ENOMEM, "out of memory");
    }
    free(stacks);
    symtab_remap_destroy(&m);
    /* Queries read the head under the read lock: its fingerprints are kept up to date
     * here, under the write lock. Out of memory leaves the newest stacks without one,
     * which merges copy the slow way (symtab.h). */
    (void)symtab_fingerprint(h->seg->sym);
    pthread_rwlock_unlock(&s->data);
    return rc;
}

/* Finds or creates the batch's series (a malloc'd array of ids, NULL on error). */
static uint32_t *resolve_series(store_t *s, const char *tenant, const batch_t *b, hr_err_t *err) {
    uint32_t *series = malloc((b->n ? b->n : 1) * sizeof *series);
    if (!series) {
        hr_fail(err, HR_ENOMEM, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < b->n; i++)
        if (index_series(s->index, tenant, b->p[i].profile_type, &b->p[i].labels, &series[i], err)) {
            free(series);
            return NULL;
        }
    return series;
}

int store_apply(store_t *s, const char *tenant, const batch_t *b, hr_err_t *err) {
    uint32_t *series = resolve_series(s, tenant, b, err);
    int rc = series ? apply_locked(s, tenant, b, series, err) : -1;
    free(series);
    return rc;
}

/* Free space an ingest leaves for the catalog's own writes (its new series rows and
 * SQLite's journal pages) besides its WAL record. */
#define INGEST_SPACE_RESERVE ((uint64_t)128 << 10)

int store_ingest(store_t *s, const char *tenant, const void *rec, size_t len, const batch_t *b,
                 hr_err_t *err) {
    /* Refused before anything is written: on a full disk an upload that created its
     * series and then failed in the WAL would leave series without data behind. While
     * the disk stays full the store is read-only; ingest resumes when space returns. */
    uint64_t avail = fs_free_bytes(s->dir);
    if (avail < len + INGEST_SPACE_RESERVE)
        return hr_fail(err, HR_EIO, "no space left on device: %llu bytes free in the data directory, this upload needs %zu "
                       "plus %llu of reserve; writes resume when space returns", (unsigned long long)avail, len,
                       (unsigned long long)INGEST_SPACE_RESERVE);
    /* Series first: a refused series (limit, I/O) must keep the upload out of the WAL. */
    uint32_t *series = resolve_series(s, tenant, b, err);
    if (!series) return -1;
    pthread_rwlock_rdlock(&s->cut);
    int rc = wal_append(s->wal, rec, len, err);
    if (rc == 0) rc = apply_locked(s, tenant, b, series, err);
    pthread_rwlock_unlock(&s->cut);
    free(series);
    return rc;
}

/* The partition key of a series: its service, so a query for one service reads only
 * that service's rows and symbols (a service's series share most of their symbols). */
static const char *service_of(void *ctx, uint32_t series) {
    const index_snapshot_t *snap = ctx;
    size_t lo = 0, hi = snap->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (snap->v[mid]->id < series) lo = mid + 1;
        else hi = mid;
    }
    if (lo == snap->n || snap->v[lo]->id != series) return "";
    const char *v = labels_get(&snap->v[lo]->labels, "service_name");
    return v ? v : "";
}

/* Writes seg as a new block file of tenant (a cut head or a compacted run); fills
 * meta for the catalog. */
static int write_block(store_t *s, const char *tenant, const segment_t *seg, block_meta_t *meta, hr_err_t *err) {
    memset(meta, 0, sizeof *meta);
    meta->id = index_next_block_id(s->index);
    snprintf(meta->tenant, sizeof meta->tenant, "%s", tenant);
    snprintf(meta->path, sizeof meta->path, "blocks/%s/%08lld.blk", tenant, (long long)meta->id);
    char full[4096];
    snprintf(full, sizeof full, "%s/blocks/%s", s->dir, tenant);
    if (fs_mkdirs(full, err)) return -1;
    snprintf(full, sizeof full, "%s/%s", s->dir, meta->path);
    size_t bytes;
    index_snapshot_t snap;
    int rc = index_snapshot(s->index, tenant, &snap, err);
    if (rc == 0) rc = block_write(full, seg, service_of, &snap, s->cfg.zstd_level, &bytes, err);
    index_snapshot_free(&snap);
    if (rc) return -1;
    meta->min_time = seg->min_time;
    meta->max_time = seg->max_time;
    meta->profiles = (int64_t)seg->nprofiles;
    meta->samples = (int64_t)seg->nsamples;
    meta->bytes = (int64_t)bytes;
    return 0;
}

static void evict_locked(store_t *s);

int store_cut(store_t *s, hr_err_t *err) {
    pthread_rwlock_wrlock(&s->cut);
    /* No ingest is running now, so the heads are stable and readers may keep
     * reading them while the blocks are written. */
    size_t n = 0;
    block_meta_t *metas = calloc(s->nheads ? s->nheads : 1, sizeof *metas);
    int rc = metas ? 0 : hr_fail(err, HR_ENOMEM, "out of memory");
    for (size_t i = 0; i < s->nheads && rc == 0; i++) {
        if (s->heads[i].seg->nprofiles == 0) continue;
        rc = write_block(s, s->heads[i].tenant, s->heads[i].seg, &metas[n], err); /* `cut` held: heads stable */
        if (rc == 0) n++;
    }
    uint32_t closed = 0;
    if (rc == 0 && n == 0) goto out;
    if (rc == 0) rc = wal_rotate(s->wal, &closed, err);
    if (rc == 0) rc = index_commit_blocks(s->index, metas, n, closed, err);
    if (rc != 0) {
        for (size_t i = 0; i < n; i++) {
            char full[4096];
            snprintf(full, sizeof full, "%s/%s", s->dir, metas[i].path);
            unlink(full);
        }
        goto out;
    }
    /* The new blocks' footers are read before the swap (I/O outside the data lock);
     * their partitions load on first use. */
    block_t *fresh = calloc(n, sizeof *fresh);
    for (size_t k = 0; fresh && k < n; k++) {
        fresh[k].meta = metas[k];
        block_attach(s, &fresh[k]);
    }
    /* Swap: the written heads become blocks, atomically for readers. */
    pthread_rwlock_wrlock(&s->data);
    pthread_mutex_lock(&s->cache_mu);
    if (fresh && VEC_RESERVE(s->blocks, s->blocks_cap, s->nblocks + n) == 0) {
        for (size_t k = 0; k < n; k++) s->blocks[s->nblocks++] = fresh[k];
        for (size_t i = 0; i < s->nheads; i++) {
            if (s->heads[i].seg->nprofiles == 0) continue;
            segment_free(s->heads[i].seg);
            s->heads[i].seg = segment_new();
            if (!s->heads[i].seg) rc = hr_fail(err, HR_ENOMEM, "out of memory");
        }
    } else {
        /* The catalog has the blocks and the WAL moved on: a restart reads them. Until
         * then the heads keep serving their data. */
        for (size_t k = 0; fresh && k < n; k++) block_drop_locked(s, &fresh[k]);
        rc = hr_fail(err, HR_ENOMEM, "out of memory");
    }
    free(fresh);
    s->cuts++; /* under data, like every counter store_stats reads */
    pthread_mutex_unlock(&s->cache_mu);
    pthread_rwlock_unlock(&s->data);
    wal_remove_upto(s->wal, closed);
    log_info("head.cut", "blocks=%zu wal_checkpoint=%u", n, closed);
out:
    free(metas);
    pthread_rwlock_unlock(&s->cut);
    return rc;
}

int store_maybe_cut(store_t *s, hr_err_t *err) {
    int due = 0;
    int64_t now = now_ns();
    pthread_rwlock_rdlock(&s->data);
    for (size_t i = 0; i < s->nheads && !due; i++) {
        const segment_t *seg = s->heads[i].seg;
        if (!seg->nprofiles) continue;
        due = segment_bytes(seg) > s->cfg.head_max_bytes ||
              now - s->heads[i].opened_ns > s->cfg.block_duration_ns;
    }
    pthread_rwlock_unlock(&s->data);
    if (!due) return 0;
    return store_cut(s, err) ? -1 : 1;
}

int store_apply_retention(store_t *s, int64_t now, hr_err_t *err) {
    if (s->cfg.retention_ns <= 0) return 0;
    int64_t cutoff = now - s->cfg.retention_ns;
    /* Blocks only change under `cut`, so holding it keeps the list stable while the
     * catalog is updated; readers are excluded only for the in-memory swap. */
    pthread_mutex_lock(&s->compact);
    pthread_rwlock_wrlock(&s->cut);
    size_t n = 0;
    int64_t *ids = malloc((s->nblocks ? s->nblocks : 1) * sizeof *ids);
    int rc = ids ? 0 : hr_fail(err, HR_ENOMEM, "out of memory");
    for (size_t i = 0; rc == 0 && i < s->nblocks; i++)
        if (s->blocks[i].meta.max_time < cutoff) ids[n++] = s->blocks[i].meta.id;
    if (rc == 0 && n) rc = index_remove_blocks(s->index, ids, n, err);
    if (rc == 0 && n) {
        char (*paths)[4096] = malloc(n * sizeof *paths);
        size_t np = 0;
        pthread_rwlock_wrlock(&s->data);
        pthread_mutex_lock(&s->cache_mu);
        size_t k = 0;
        for (size_t i = 0; i < s->nblocks; i++) {
            block_t *b = &s->blocks[i];
            if (b->meta.max_time >= cutoff) {
                s->blocks[k++] = *b;
                continue;
            }
            block_drop_locked(s, b);
            if (paths) snprintf(paths[np++], sizeof *paths, "%s/%s", s->dir, b->meta.path);
        }
        s->nblocks = k;
        s->retention_deleted += n;
        pthread_mutex_unlock(&s->cache_mu);
        pthread_rwlock_unlock(&s->data);
        for (size_t i = 0; i < np; i++) unlink(paths[i]); /* after the catalog: crash-safe */
        free(paths);
        log_info("retention.deleted", "blocks=%zu older_than_ns=%lld", n, (long long)cutoff);
    }
    pthread_rwlock_unlock(&s->cut);
    pthread_mutex_unlock(&s->compact);
    free(ids);
    return rc ? -1 : (int)n;
}

/* Frees least-recently used decoded partitions that no scan holds. cache_mu held. */
static void evict_locked(store_t *s) {
    while (s->cached_bytes > s->cfg.block_cache_bytes) {
        part_cache_t *victim = NULL;
        for (size_t i = 0; i < s->nblocks; i++)
            for (size_t p = 0; s->blocks[i].ix && p < 2 * s->blocks[i].ix->nparts; p++) {
                part_cache_t *c = &s->blocks[i].parts[p];
                if (c->cached && c->refs == 0 && (!victim || c->last_use < victim->last_use)) victim = c;
            }
        if (!victim) return;
        s->cached_bytes -= segment_bytes(victim->cached);
        segment_free(victim->cached);
        victim->cached = NULL;
    }
}

/* Pins a view of partition p of block i, decoding it on first use; NULL if it cannot
 * be read (the block is then marked bad). */
static segment_t *pin_part(store_t *s, size_t i, size_t p, int view) {
    block_t *b = &s->blocks[i];
    pthread_mutex_lock(&s->cache_mu);
    part_cache_t *c = b->bad ? NULL : &b->parts[2 * p + (size_t)view];
    segment_t *seg = c ? c->cached : NULL;
    if (seg) c->refs++, c->last_use = ++s->clock;
    pthread_mutex_unlock(&s->cache_mu);
    if (!c || seg) return seg;
    char full[4096];
    snprintf(full, sizeof full, "%s/%s", s->dir, b->meta.path);
    hr_err_t e = {0};
    seg = block_read_part(full, b->ix, p, view, &e); /* no lock held: other scans go on */
    pthread_mutex_lock(&s->cache_mu);
    if (!seg) {
        b->bad = 1;
        log_error("block.unreadable", "path=%s partition=%zu err=\"%s\"", b->meta.path, p, e.msg);
    } else if (c->cached) { /* another scan loaded it meanwhile */
        segment_free(seg);
        seg = c->cached;
    } else {
        c->cached = seg;
        s->cached_bytes += segment_bytes(seg);
    }
    if (seg) c->refs++, c->last_use = ++s->clock;
    pthread_mutex_unlock(&s->cache_mu);
    return seg;
}

static void unpin_part(store_t *s, size_t i, size_t p, int view) {
    pthread_mutex_lock(&s->cache_mu);
    s->blocks[i].parts[2 * p + (size_t)view].refs--;
    evict_locked(s);
    pthread_mutex_unlock(&s->cache_mu);
}

/* ---- compaction ---- */

typedef struct {
    char tenant[128]; /* copied while planning: s->blocks may move (a cut appends) once data is released */
    size_t *idx;  /* positions in s->blocks (stable: only compaction and retention remove, under `compact`) */
    int64_t *ids;
    size_t n;
    int64_t bytes;
    segment_t **segs; /* every partition of the run's blocks, pinned */
    struct pin {
        size_t block, part;
    } *pins;
    size_t nsegs;
} run_t;

static int cmp_block_time(const void *a, const void *b, void *ctx) {
    const block_t *bl = ctx;
    int64_t x = bl[*(const size_t *)a].meta.min_time, y = bl[*(const size_t *)b].meta.min_time;
    return (x > y) - (x < y);
}

/* Runs stay within one UTC day, so retention still frees space a day at a time. */
static int same_day(const block_meta_t *a, const block_meta_t *b) {
    const int64_t day = 86400LL * 1000000000;
    int64_t d = a->min_time / day;
    return a->max_time / day == d && b->min_time / day == d && b->max_time / day == d;
}

/* Picks the first due run (see store.h). data held shared. Returns 1 found, 0, -1 OOM. */
static int plan_run(store_t *s, run_t *r) {
    size_t *order = malloc((s->nblocks + 1) * sizeof *order);
    if (!order) return -1;
    int found = 0;
    int64_t small = (int64_t)s->cfg.compact_max_bytes / 2;
    for (size_t t = 0; t < s->nblocks && !found; t++) {
        const char *tenant = s->blocks[t].meta.tenant;
        int first = 1; /* visit each tenant once: at its first block */
        for (size_t j = 0; j < t && first; j++) first = strcmp(s->blocks[j].meta.tenant, tenant) != 0;
        if (!first) continue;
        size_t n = 0;
        for (size_t j = t; j < s->nblocks; j++)
            if (!strcmp(s->blocks[j].meta.tenant, tenant)) order[n++] = j;
        qsort_r(order, n, sizeof *order, cmp_block_time, s->blocks);
        size_t start = 0;
        int64_t bytes = 0;
        for (size_t k = 0; k <= n && !found; k++) {
            const block_t *b = k < n ? &s->blocks[order[k]] : NULL;
            int fits = b && !b->bad && b->meta.bytes < small && bytes + b->meta.bytes <= (int64_t)s->cfg.compact_max_bytes &&
                       (k == start || same_day(&s->blocks[order[start]].meta, &b->meta));
            if (fits) {
                bytes += b->meta.bytes;
                continue;
            }
            if (k - start >= s->cfg.compact_min_blocks) {
                found = 1;
                snprintf(r->tenant, sizeof r->tenant, "%s", tenant);
                r->n = k - start;
                r->bytes = bytes;
                memmove(order, order + start, r->n * sizeof *order);
                break;
            }
            /* this block ends the run; a small one that overflowed starts the next */
            start = k, bytes = 0;
            if (b && !b->bad && b->meta.bytes < small) bytes = b->meta.bytes;
            else start = k + 1;
        }
    }
    if (!found) {
        free(order);
        return 0;
    }
    r->idx = order;
    return 1;
}

/* Merges the planned blocks and writes the result; meta is filled. 0 or -1. */
static int compact_run(store_t *s, run_t *r, block_meta_t *meta, hr_err_t *err) {
    segment_t *m = compact_segments((const segment_t *const *)r->segs, r->nsegs, err);
    int rc = m ? write_block(s, r->tenant, m, meta, err) : -1;
    segment_free(m);
    return rc;
}

/* Pins every partition of the run's blocks (data held shared). 1, or 0 when one is
 * unreadable (it is now marked bad: a later plan skips it), -1 on OOM. */
static int pin_run(store_t *s, run_t *r) {
    size_t total = 0, attached = 1;
    pthread_mutex_lock(&s->cache_mu); /* scans may attach a block's footer meanwhile */
    for (size_t i = 0; i < r->n; i++) {
        const block_t *b = &s->blocks[r->idx[i]];
        attached &= b->ix != NULL;
        total += b->ix ? b->ix->nparts : 0;
    }
    pthread_mutex_unlock(&s->cache_mu);
    if (!attached) return 0; /* compact later, once every footer is in */
    r->ids = malloc(r->n * sizeof *r->ids);
    r->segs = calloc(total + 1, sizeof *r->segs);
    r->pins = calloc(total + 1, sizeof *r->pins);
    if (!r->ids || !r->segs || !r->pins) return -1;
    for (size_t i = 0; i < r->n; i++) {
        const block_t *b = &s->blocks[r->idx[i]];
        r->ids[i] = b->meta.id;
        if (!b->ix) return 0;
        for (size_t p = 0; p < b->ix->nparts; p++) {
            if (!(r->segs[r->nsegs] = pin_part(s, r->idx[i], p, BLOCK_VIEW_ROWS))) return 0;
            r->pins[r->nsegs++] = (struct pin){r->idx[i], p};
        }
    }
    return 1;
}

/* Replaces the run's blocks by the merged one in memory. data and cache_mu held. */
static int swap_in_locked(store_t *s, run_t *r, const block_t *merged, char (*paths)[4096]) {
    size_t k = 0, np = 0;
    for (size_t i = 0; i < s->nblocks; i++) {
        block_t *b = &s->blocks[i];
        int gone = 0;
        for (size_t j = 0; j < r->n && !gone; j++) gone = b->meta.id == r->ids[j];
        if (!gone) {
            s->blocks[k++] = *b;
            continue;
        }
        block_drop_locked(s, b);
        snprintf(paths[np++], sizeof *paths, "%s/%s", s->dir, b->meta.path);
    }
    s->nblocks = k; /* n blocks out, one in: the array has room */
    s->blocks[s->nblocks++] = *merged;
    return (int)np;
}

static void run_free(run_t *r) {
    free(r->idx);
    free(r->ids);
    free(r->segs);
    free(r->pins);
}

int store_compact(store_t *s, hr_err_t *err) {
    if (!s->cfg.compact_min_blocks || s->cfg.compact_min_blocks < 2 || !s->cfg.compact_max_bytes) return 0;
    int64_t t0 = now_ns();
    run_t r = {0};
    pthread_mutex_lock(&s->compact);
    pthread_rwlock_rdlock(&s->data);
    int rc = plan_run(s, &r);
    if (rc == 1) rc = pin_run(s, &r);
    pthread_rwlock_unlock(&s->data);
    if (rc < 0) hr_fail(err, HR_ENOMEM, "out of memory planning compaction");
    block_t merged = {0};
    block_meta_t meta;
    if (rc == 1 && compact_run(s, &r, &meta, err)) rc = -1;
    if (rc == 1 && index_replace_blocks(s->index, &meta, r.ids, r.n, err)) {
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", s->dir, meta.path);
        unlink(full);
        rc = -1;
    }
    if (rc == 1) {
        merged.meta = meta;
        block_attach(s, &merged); /* its footer, outside the locks */
    }
    char (*paths)[4096] = rc == 1 ? malloc(r.n * sizeof *paths) : NULL;
    int np = 0;
    pthread_rwlock_wrlock(&s->data);
    pthread_mutex_lock(&s->cache_mu);
    for (size_t k = 0; k < r.nsegs; k++) s->blocks[r.pins[k].block].parts[2 * r.pins[k].part + BLOCK_VIEW_ROWS].refs--;
    if (rc == 1) {
        if (paths) {
            np = swap_in_locked(s, &r, &merged, paths);
            s->compactions++; /* under data: store_stats reads them under it */
            s->compacted_blocks += r.n;
        } else { /* the catalog is ahead of memory: still correct (the old files stay); reopen reconciles */
            block_drop_locked(s, &merged);
            rc = hr_fail(err, HR_ENOMEM, "out of memory");
        }
    }
    evict_locked(s);
    pthread_mutex_unlock(&s->cache_mu);
    pthread_rwlock_unlock(&s->data);
    for (int i = 0; i < np; i++) unlink(paths[i]); /* after the catalog: crash-safe */
    free(paths);
    if (rc == 1) {
        log_info("compaction.done", "tenant=%s blocks_in=%zu bytes_in=%lld bytes_out=%lld profiles=%lld duration_ms=%.1f",
                 meta.tenant, r.n, (long long)r.bytes, (long long)meta.bytes, (long long)meta.profiles,
                 (double)(now_ns() - t0) / 1e6);
    }
    pthread_mutex_unlock(&s->compact);
    run_free(&r);
    return rc;
}

/* 1 when partition p may hold rows the filter wants: time range and series. */
static int part_wanted(const block_part_t *p, const store_filter_t *f) {
    if (p->series && (p->max_time < f->from || p->min_time > f->until)) return 0; /* version 1: the block's range */
    if (!f->series || !p->series) return 1;
    for (size_t k = 0; k < p->nseries; k++)
        if (p->series[k] < f->nseries && f->series[p->series[k]]) return 1;
    return 0;
}

/* ---- scans ---- */

/* A scan decodes the partitions it wants DECODE_BATCH at a time, in parallel (a cold
 * query over a week of hourly blocks decodes 168 of them), then hands them to fn in
 * block order and unpins them: at most a batch is pinned, so the cache's budget
 * holds however many partitions a query reads. */
typedef struct {
    store_t *s;
    size_t block, part;
    int view;
    segment_t *seg; /* pinned, or NULL (unreadable) */
} want_t;

typedef struct {
    want_t *w;
    size_t n, first, step; /* this worker's share: w[first], w[first + step], ... */
} share_t;

static void *pin_share(void *arg) {
    share_t *sh = arg;
    for (size_t k = sh->first; k < sh->n; k += sh->step) {
        want_t *w = &sh->w[k];
        w->seg = pin_part(w->s, w->block, w->part, w->view);
    }
    return NULL;
}

/* Pins every partition of the batch, decoding the uncached ones on up to
 * s->decode_threads threads (the caller's among them). */
static void pin_batch(store_t *s, want_t *w, size_t n) {
    size_t cold = 0;
    pthread_mutex_lock(&s->cache_mu);
    for (size_t k = 0; k < n; k++) cold += !s->blocks[w[k].block].parts[2 * w[k].part + (size_t)w[k].view].cached;
    pthread_mutex_unlock(&s->cache_mu);
    size_t t = cold < 2 ? 1 : cold < (size_t)s->decode_threads ? cold : (size_t)s->decode_threads;
    pthread_t tid[DECODE_MAX];
    share_t sh[DECODE_MAX];
    size_t started = 1; /* shares 1..started-1 run on their own threads */
    for (size_t i = 0; i < t; i++) sh[i] = (share_t){w, n, i, t};
    while (started < t && pthread_create(&tid[started], NULL, pin_share, &sh[started]) == 0) started++;
    for (size_t i = 0; i < t; i++) /* the caller's share, and any whose thread did not start */
        if (i == 0 || i >= started) pin_share(&sh[i]);
    for (size_t i = 1; i < started; i++) pthread_join(tid[i], NULL);
}

/* Hands fn the pinned batch in order, then unpins it; returns fn's first -1. */
static int run_batch(store_t *s, want_t *w, size_t n, store_segment_fn fn, void *ctx) {
    pin_batch(s, w, n);
    int rc = 0;
    for (size_t k = 0; k < n; k++) {
        if (w[k].seg && rc == 0) rc = fn(ctx, w[k].seg);
        if (w[k].seg) unpin_part(s, w[k].block, w[k].part, w[k].view);
    }
    return rc;
}

/* Queues the block's wanted partitions into the batch (running it when full), or
 * hands fn the block's footer totals when they suffice. */
static int scan_block(store_t *s, size_t i, const store_filter_t *f, want_t *batch, size_t *nb, store_segment_fn fn,
                      void *ctx) {
    block_t *b = &s->blocks[i];
    pthread_mutex_lock(&s->cache_mu); /* a footer that failed to load for a passing reason: retry */
    if (!b->ix && !b->bad) block_attach(s, b);
    const block_index_t *ix = b->ix; /* set once, under cache_mu; stable while data is held */
    pthread_mutex_unlock(&s->cache_mu);
    if (!ix) return 0;
    if (f->totals_only && ix->totals) return fn(ctx, ix->totals); /* no partition decoded */
    int rc = 0;
    for (size_t p = 0; p < ix->nparts && rc == 0; p++) {
        const block_part_t *bp = &ix->parts[p];
        if (!part_wanted(bp, f)) continue;
        /* A range covering the whole partition takes its pre-merged rows: one per
         * series instead of every profile. */
        int view = f->merged_ok && bp->merged && bp->min_time >= f->from && bp->max_time <= f->until ? BLOCK_VIEW_MERGED
                                                                                                   : BLOCK_VIEW_ROWS;
        batch[(*nb)++] = (want_t){s, i, p, view, NULL};
        if (*nb == DECODE_BATCH) {
            rc = run_batch(s, batch, *nb, fn, ctx);
            *nb = 0;
        }
    }
    return rc;
}

/* One scan; `data` held for reading. */
static int scan_locked(store_t *s, const char *tenant, const store_filter_t *f, store_segment_fn fn, void *ctx) {
    int rc = 0;
    want_t batch[DECODE_BATCH];
    size_t nb = 0;
    for (size_t i = 0; i < s->nblocks && rc == 0; i++) {
        const block_meta_t *m = &s->blocks[i].meta;
        if (strcmp(m->tenant, tenant) || m->max_time < f->from || m->min_time > f->until) continue;
        rc = scan_block(s, i, f, batch, &nb, fn, ctx);
    }
    if (nb && rc == 0) rc = run_batch(s, batch, nb, fn, ctx); /* queued, not yet pinned */
    for (size_t i = 0; i < s->nheads && rc == 0; i++) {
        const segment_t *seg = s->heads[i].seg;
        if (strcmp(s->heads[i].tenant, tenant) || !seg->nprofiles || seg->max_time < f->from ||
            seg->min_time > f->until)
            continue;
        rc = fn(ctx, seg);
    }
    return rc;
}

int store_scan(store_t *s, const char *tenant, const store_filter_t *f, store_segment_fn fn, void *ctx, hr_err_t *err) {
    return store_scan_passes(s, tenant, f, 1, NULL, fn, ctx, err);
}

int store_scan_passes(store_t *s, const char *tenant, const store_filter_t *f, size_t n, store_pass_fn pass,
                      store_segment_fn fn, void *ctx, hr_err_t *err) {
    (void)err;
    pthread_rwlock_rdlock(&s->data);
    int rc = 0;
    for (size_t k = 0; k < n && rc == 0; k++) {
        if (pass) pass(ctx, k);
        rc = scan_locked(s, tenant, &f[k], fn, ctx);
    }
    pthread_rwlock_unlock(&s->data);
    return rc;
}

void store_stats(store_t *s, store_stats_t *out) {
    memset(out, 0, sizeof *out);
    pthread_rwlock_rdlock(&s->data);
    for (size_t i = 0; i < s->nheads; i++) {
        out->head_bytes += segment_bytes(s->heads[i].seg);
        out->head_profiles += s->heads[i].seg->nprofiles;
        out->head_samples += s->heads[i].seg->nsamples;
        const symtab_t *sym = s->heads[i].seg->sym;
        out->head_strings += sym->nstrings - 1;
        out->head_functions += sym->nfunctions - 1;
        out->head_locations += sym->nlocations - 1;
        out->head_stacks += sym->nstacks - 1;
    }
    out->blocks = s->nblocks;
    pthread_mutex_lock(&s->cache_mu);
    for (size_t i = 0; i < s->nblocks; i++) {
        const block_t *b = &s->blocks[i];
        out->block_bytes += (size_t)b->meta.bytes;
        out->blocks_corrupt += b->bad != 0;
        for (size_t p = 0; b->ix && p < 2 * b->ix->nparts; p++) out->parts_cached += b->parts[p].cached != NULL;
    }
    out->cached_bytes = s->cached_bytes;
    pthread_mutex_unlock(&s->cache_mu);
    out->cuts = s->cuts;
    out->retention_deleted = s->retention_deleted;
    out->compactions = s->compactions;
    out->compacted_blocks = s->compacted_blocks;
    pthread_rwlock_unlock(&s->data);
    out->series = index_series_total(s->index);
    out->wal_bytes = wal_segment_bytes(s->wal);
}
