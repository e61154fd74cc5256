/* cluster.c - what a store does differently as one node of a cluster (store.h,
 * docs/cluster.md): blocks are objects read by byte range through the disk cache,
 * the catalog is shared, and an ingest is acknowledged once a cut has stored it.
 * On one node (s->objects NULL) the same calls work on local files. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/vec.h"
#include "storage/store_impl.h"

int store_clustered(const store_t *s) { return s->objects != NULL; }

/* block_src_t's read for objects: name is the key. Every failure is the store's, not
 * the query's: a range the object does not have (it is shorter than the catalog says)
 * or an object gone since this node synced is a 503 to retry, never a 4xx. */
static int object_read(void *ctx, const char *key, uint64_t off, uint64_t n, uint8_t *out, hr_err_t *err) {
    store_t *s = ctx;
    if (objcache_read(s->ocache, key, off, n, out, err) == 0) return 0;
    if (err->code == HR_ENOTFOUND) /* the catalog moved on since this node synced: retry later */
        return hr_fail(err, HR_EIO, "block object %s is gone from the object store (the block list is stale)", key);
    if (err->code == HR_EINVAL) {
        hr_err_t e = *err;
        return hr_fail(err, HR_EIO, "block object %s: %s", key, e.msg);
    }
    return -1;
}

/* A source for block m; path receives a local file's path (cap bytes). */
static int source(store_t *s, const block_meta_t *m, block_src_t *src, char *path, size_t cap, hr_err_t *err) {
    if (s->objects) {
        *src = (block_src_t){.name = m->path, .size = (uint64_t)m->bytes, .read = object_read, .ctx = s};
        return 0;
    }
    snprintf(path, cap, "%s/%s", s->dir, m->path);
    return block_src_file(src, path, err);
}

/* Whether a read of block m that failed with err (attempt 0, 1, ...) is tried again.
 *
 * A local file that fails its checksum is damaged for good: the caller marks the block
 * bad. An object is different: the bytes in the store were checked when they were put
 * (a signed SHA-256), so a range that reads back damaged was damaged on the way (a
 * proxy, a NIC, a torn cache file). It is dropped from the cache and fetched afresh,
 * READ_ATTEMPTS times in all; if every copy is damaged the read is a passing failure
 * (HR_EIO, answered 503) and nothing is remembered, so the next query reads again. A
 * query never answers without the block: a smaller total with 200 is the one answer
 * that must not happen. */
#define READ_ATTEMPTS 3
static int read_again(store_t *s, const block_meta_t *m, int attempt, hr_err_t *err) {
    if (!s->objects || err->code != HR_EUNPROC) return 0;
    objcache_forget(s->ocache, m->path);
    if (attempt + 1 < READ_ATTEMPTS) {
        struct timespec ts = {0, 50000000L << attempt}; /* 50, 100 ms: let a burst pass */
        nanosleep(&ts, NULL);
        return 1;
    }
    hr_err_t e = *err;
    log_error("block.damaged_read", "key=%s attempts=%d err=\"%s\"", m->path, READ_ATTEMPTS, e.msg);
    hr_fail(err, HR_EIO, "block %s read back damaged from the object store %d times (%s); retry the query", m->path,
            READ_ATTEMPTS, e.msg);
    return 0;
}

block_index_t *store_read_index(store_t *s, const block_meta_t *m, hr_err_t *err) {
    char path[4096];
    block_src_t src;
    block_index_t *ix = NULL;
    for (int attempt = 0; !ix; attempt++) {
        if (source(s, m, &src, path, sizeof path, err)) return NULL;
        if ((ix = block_index_read_src(&src, err)) || !read_again(s, m, attempt, err)) break;
    }
    return ix;
}

segment_t *store_read_part(store_t *s, const block_meta_t *m, const block_index_t *ix, size_t p, int view,
                           const block_window_t *win, hr_err_t *err) {
    char path[4096];
    block_src_t src;
    segment_t *seg = NULL;
    for (int attempt = 0; !seg; attempt++) {
        if (source(s, m, &src, path, sizeof path, err)) return NULL;
        if ((seg = block_read_part_src(&src, ix, p, view, win, err)) || !read_again(s, m, attempt, err)) break;
    }
    return seg;
}

int store_publish_block(store_t *s, const block_meta_t *m, hr_err_t *err) {
    if (!s->objects) return 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", s->dir, m->path);
    /* Block ids are unique across nodes, so the key exists only when an earlier
     * attempt of this very put stored it (its answer lost): done either way. */
    int rc = objstore_put_file(s->objects, m->path, path, OBJSTORE_IF_ABSENT, err);
    unlink(path);
    return rc < 0 ? -1 : 0;
}

void store_discard_block(store_t *s, const block_meta_t *m) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", s->dir, m->path);
    unlink(path);
    hr_err_t e = {0};
    if (s->objects && objstore_delete(s->objects, m->path, &e))
        log_warn("block.discard_failed", "key=%s err=\"%s\" (an orphan object; no catalog row names it)", m->path,
                 e.msg);
}

void store_retire_block(store_t *s, const block_meta_t *m) {
    if (s->objects) return; /* the catalog trashed the object; store_collect_trash deletes it */
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", s->dir, m->path);
    unlink(path);
}

int store_has_block(const store_t *s, int64_t id) {
    for (size_t i = 0; i < s->nblocks; i++)
        if (s->blocks[i].meta.id == id) return 1;
    return 0;
}

/* ---- prefetching a scan's partitions ---- */

typedef struct {
    const char *key;
    uint64_t off, len;
} range_t;

struct prefetch {
    store_t *s;
    range_t *v;
    size_t n;
    atomic_size_t next; /* the next range to fetch; n or more: none left (or stopped) */
    pthread_t tid[PREFETCH_MAX];
    size_t threads;
};

static void *fetch_ranges(void *arg) {
    prefetch_t *p = arg;
    for (size_t k; (k = atomic_fetch_add(&p->next, 1)) < p->n;) {
        hr_err_t e = {0}; /* a failure is met again, and reported, by the decode */
        (void)objcache_fetch(p->s->ocache, p->v[k].key, p->v[k].off, p->v[k].len, &e);
    }
    return NULL;
}

/* The uncached ranges of the partitions f wants, in scan order. NULL on OOM. */
static range_t *wanted_ranges(store_t *s, const char *tenant, const store_filter_t *f, size_t *n) {
    range_t *v = NULL;
    size_t cap = 0;
    *n = 0;
    pthread_mutex_lock(&s->cache_mu); /* footers and cached partitions */
    for (size_t i = 0; i < s->nblocks; i++) {
        const block_t *b = &s->blocks[i];
        if (!b->ix || b->bad || strcmp(b->meta.tenant, tenant) || b->meta.max_time < f->from ||
            b->meta.min_time > f->until)
            continue;
        for (size_t p = 0; p < b->ix->nparts; p++) {
            const block_part_t *bp = &b->ix->parts[p];
            if (!store_part_wanted(b->ix, p, f) || !store_part_picked(f, b->meta.id, p)) continue;
            int view = store_part_view(bp, f);
            uint64_t off, len;
            block_part_range(bp, view | BLOCK_VIEW_DEFER_SYMBOLS, &off, &len); /* as the cache reads it */
            if (part_cache(b, p, view)->cached || objcache_has(s->ocache, b->meta.path, off, len)) continue;
            if (VEC_RESERVE(v, cap, *n + 1)) {
                pthread_mutex_unlock(&s->cache_mu);
                free(v);
                return NULL;
            }
            v[(*n)++] = (range_t){b->meta.path, off, len};
        }
    }
    pthread_mutex_unlock(&s->cache_mu);
    return v;
}

prefetch_t *store_prefetch_start(store_t *s, const char *tenant, const store_filter_t *f) {
    if (!s->objects) return NULL;
    prefetch_t *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->s = s;
    p->v = wanted_ranges(s, tenant, f, &p->n);
    atomic_init(&p->next, 0);
    size_t want = p->n < PREFETCH_MAX ? p->n : PREFETCH_MAX;
    if (p->v && p->n > 1) /* one partition: the decode fetches it itself */
        while (p->threads < want && pthread_create(&p->tid[p->threads], NULL, fetch_ranges, p) == 0) p->threads++;
    if (!p->threads) {
        free(p->v);
        free(p);
        return NULL;
    }
    return p;
}

void store_prefetch_end(prefetch_t *p) {
    if (!p) return;
    atomic_store(&p->next, p->n); /* a scan that stopped early wants no more */
    for (size_t i = 0; i < p->threads; i++) pthread_join(p->tid[i], NULL);
    free(p->v);
    free(p);
}

/* ---- the durable acknowledgement ---- */

int store_wait_durable(store_t *s, uint64_t gen, hr_err_t *err) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    int64_t ns = until.tv_nsec + s->cfg.ack_timeout_ns;
    until.tv_sec += ns / 1000000000;
    until.tv_nsec = ns % 1000000000;
    pthread_mutex_lock(&s->durable_mu);
    int timed_out = 0;
    while (s->stored_gen <= gen && !timed_out)
        timed_out = pthread_cond_timedwait(&s->durable_cv, &s->durable_mu, &until) == ETIMEDOUT;
    int rc = 0;
    if (s->stored_gen <= gen) /* the cut is still running (a hung object store): it may yet store it */
        rc = hr_fail(err, HR_EIO, "not stored within --ack-timeout; it may still be stored by the flush under way");
    else if (s->stored_gen - gen > 64) /* slept through 64 cuts: its outcome is forgotten, and a retry is safer */
        rc = hr_fail(err, HR_EIO, "the flush outcome of this upload is unknown; retry it");
    else if (s->failed >> (gen % 64) & 1) rc = hr_fail(err, HR_EIO, "not stored: %s", s->flush_err.msg);
    pthread_mutex_unlock(&s->durable_mu);
    return rc;
}

void store_cut_done(store_t *s, uint64_t gen, int ok, const hr_err_t *e) {
    pthread_mutex_lock(&s->durable_mu);
    uint64_t bit = 1ULL << (gen % 64);
    s->failed = ok ? s->failed & ~bit : s->failed | bit;
    if (!ok && e) s->flush_err = *e;
    s->stored_gen = gen + 1;
    pthread_cond_broadcast(&s->durable_cv);
    pthread_mutex_unlock(&s->durable_mu);
}

/* ---- catalog sync ---- */

typedef struct {
    int64_t id;
    size_t at; /* index in s->blocks */
} block_ref_t;

static int by_id(const void *a, const void *b) {
    const block_ref_t *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

/* Makes s->blocks the catalog's list: blocks it still names keep their footers and
 * cached partitions, new ones attach on first use, gone ones are dropped. The array
 * keeps the spare room it had: a cut or compaction reserved it for its swap. Old
 * blocks are found by a sorted index, so a sync costs O(n log n) in the blocks. */
static int adopt_blocks(store_t *s, block_meta_t *metas, size_t n, hr_err_t *err) {
    pthread_rwlock_wrlock(&s->data);
    size_t spare = s->blocks_cap - s->nblocks, cap = n + spare + 1;
    block_t *v = calloc(cap, sizeof *v);
    block_ref_t *old = malloc((s->nblocks + 1) * sizeof *old);
    if (!v || !old) {
        pthread_rwlock_unlock(&s->data);
        free(v), free(old);
        return hr_fail(err, HR_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < s->nblocks; i++) old[i] = (block_ref_t){s->blocks[i].meta.id, i};
    qsort(old, s->nblocks, sizeof *old, by_id);
    pthread_mutex_lock(&s->cache_mu);
    for (size_t i = 0; i < n; i++) {
        block_ref_t key = {metas[i].id, 0}, *f = bsearch(&key, old, s->nblocks, sizeof *old, by_id);
        block_t *was = f && s->blocks[f->at].meta.id != -1 ? &s->blocks[f->at] : NULL;
        v[i] = was ? *was : (block_t){.meta = metas[i]};
        if (was) was->meta.id = -1; /* moved */
    }
    for (size_t i = 0; i < s->nblocks; i++)
        if (s->blocks[i].meta.id != -1) bcache_drop_locked(s, &s->blocks[i]);
    free(s->blocks);
    free(old);
    s->blocks = v;
    s->nblocks = n;
    s->blocks_cap = cap;
    pthread_mutex_unlock(&s->cache_mu);
    pthread_rwlock_unlock(&s->data);
    return 0;
}

static int by_meta_id(const void *a, const void *b) {
    const block_meta_t *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The block list after the changes since the last sync: the blocks held, less the ids
 * removed, plus those added that are not held yet (a change read twice is applied
 * once), by id. *out (malloc'd) has *n. */
static int apply_changes(store_t *s, block_meta_t *added, size_t nadd, int64_t *removed, size_t nrem,
                         block_meta_t **out, size_t *n, hr_err_t *err) {
    pthread_rwlock_rdlock(&s->data);
    block_meta_t *v = malloc((s->nblocks + nadd + 1) * sizeof *v);
    size_t k = 0;
    if (v) {
        qsort(removed, nrem, sizeof *removed, cmp_i64);
        for (size_t i = 0; i < s->nblocks; i++)
            if (!nrem || !bsearch(&s->blocks[i].meta.id, removed, nrem, sizeof *removed, cmp_i64))
                v[k++] = s->blocks[i].meta;
    }
    pthread_rwlock_unlock(&s->data);
    if (!v) return hr_fail(err, HR_ENOMEM, "out of memory");
    qsort(v, k, sizeof *v, by_meta_id);
    size_t held = k;
    for (size_t i = 0; i < nadd; i++)
        if (!bsearch(&added[i], v, held, sizeof *v, by_meta_id) &&
            !(nrem && bsearch(&added[i].id, removed, nrem, sizeof *removed, cmp_i64)))
            v[k++] = added[i];
    qsort(v, k, sizeof *v, by_meta_id);
    *out = v, *n = k;
    return 0;
}

/* The catalog's block list at version v, from the change log since the version this
 * node read last when the log has every change since, else read whole. */
static int read_blocks(store_t *s, int64_t since, int64_t v, block_meta_t **metas, size_t *n, int *incremental,
                       hr_err_t *err) {
    block_meta_t *added = NULL;
    int64_t *removed = NULL;
    size_t nadd = 0, nrem = 0;
    int complete = 0;
    int rc = since > 0 ? index_block_changes(s->index, since, v, &added, &nadd, &removed, &nrem, &complete, err) : 0;
    if (rc == 0 && complete) rc = apply_changes(s, added, nadd, removed, nrem, metas, n, err);
    free(added), free(removed);
    *incremental = rc == 0 && complete;
    if (*incremental) return 0;
    return rc ? -1 : index_blocks(s->index, metas, n, err);
}

int store_sync(store_t *s, hr_err_t *err) {
    if (!index_shared(s->index)) return 0;
    int64_t v;
    if (index_sync(s->index, &v, err)) return -1;
    pthread_mutex_lock(&s->durable_mu);
    int64_t since = s->blocks_version;
    pthread_mutex_unlock(&s->durable_mu);
    if (v == since) return 0;
    /* Read after the version: a change landing between the two shows in the list and
     * moves the version again, so the next sync reads it once more. */
    block_meta_t *metas;
    size_t n;
    int incremental = 0;
    if (read_blocks(s, since, v, &metas, &n, &incremental, err)) return -1;
    int rc = adopt_blocks(s, metas, n, err);
    free(metas);
    pthread_mutex_lock(&s->durable_mu);
    if (rc == 0) s->blocks_version = v, s->syncs[incremental]++;
    pthread_mutex_unlock(&s->durable_mu);
    return rc;
}

/* Change log rows kept: about 9 hours of a 3-node cluster flushing every second; a node
 * further behind reads the whole block list once. */
#define CHANGE_LOG_KEEP 100000

int store_collect_trash(store_t *s, hr_err_t *err) {
    if (!s->objects) return 0;
    if (index_prune_log(s->index, CHANGE_LOG_KEEP, err)) return -1;
    char **keys;
    size_t n;
    if (index_trash_take(s->index, 256, &keys, &n, err)) return -1;
    for (size_t i = 0; i < n; i++) {
        hr_err_t e = {0};
        objcache_forget(s->ocache, keys[i]);
        if (objstore_delete(s->objects, keys[i], &e))
            log_warn("trash.delete_failed", "key=%s err=\"%s\" (left as an orphan object)", keys[i], e.msg);
        free(keys[i]);
    }
    free(keys);
    if (n) log_info("trash.deleted", "objects=%zu", n);
    return (int)n;
}
