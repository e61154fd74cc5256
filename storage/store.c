/* store.c - see store.h. */
#include "storage/store.h"
#include "storage/store_impl.h"

#include <assert.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/timeparse.h"
#include "common/vec.h"
#include "storage/block.h"
#include "common/fsutil.h"

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

/* The catalog and the log: index.db and the WAL in the data dir, or in cluster mode
 * the shared catalog, the object store's disk cache and no log (an ingest is
 * acknowledged only once stored as a block). */
static int open_catalog(store_t *s, hr_err_t *err) {
    char path[2200];
    if (s->cfg.catalog && s->cfg.catalog[0]) {
        if (!s->cfg.objects) return hr_fail(err, HR_EINVAL, "a cluster catalog needs an object store");
        index_pg_config_t pc = {s->cfg.catalog, s->cfg.trash_delay_ms};
        if (!(s->index = index_open_pg(&pc, err))) return -1;
        s->objects = s->cfg.objects;
        s->ocache = objcache_open(s->objects, s->cfg.cache_dir, s->cfg.cache_bytes, err);
        return s->ocache ? 0 : -1;
    }
    snprintf(path, sizeof path, "%s/index.db", s->dir);
    if (!(s->index = index_open(path, err))) return -1;
    snprintf(path, sizeof path, "%s/wal", s->dir);
    return (s->wal = wal_open(path, s->cfg.fsync, err)) ? 0 : -1;
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
    /* Writers first on the two locks ingest meets: a waiting cut goes before new ingests
     * (it holds `cut` only while it freezes the heads), and an ingest's short write of
     * the heads goes before new scans of them, or a steady stream of either would hold
     * the other off (a Grafana panel refreshing the last minutes reads the heads all the
     * time). Neither is ever taken twice by one thread. */
    pthread_rwlockattr_t wr_first;
    pthread_rwlockattr_init(&wr_first);
    pthread_rwlockattr_setkind_np(&wr_first, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&s->cut, &wr_first);
    pthread_rwlock_init(&s->head_lock, &wr_first);
    pthread_rwlockattr_destroy(&wr_first);
    pthread_rwlock_init(&s->data, NULL);
    pthread_mutex_init(&s->cutting, NULL);
    pthread_mutex_init(&s->cache_mu, NULL);
    pthread_mutex_init(&s->compact, NULL);
    pthread_mutex_init(&s->durable_mu, NULL);
    pthread_cond_init(&s->durable_cv, NULL);
    s->blocks_version = -1;
    idset_init(&s->dict_set);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    s->decode_threads = cpus < 1 ? 1 : cpus > DECODE_MAX ? DECODE_MAX : (int)cpus;
    /* A cluster node's partitions come over the network: round trips, not cores, bound it. */
    if (cfg->catalog && cfg->catalog[0]) s->decode_threads = DECODE_MAX;
    char path[2200];
    snprintf(path, sizeof path, "%s/blocks", s->dir);
    if (fs_mkdirs(path, err)) goto fail;
    /* Before anything reads or writes: two servers on one directory would rotate and
     * delete each other's WAL segments and blocks. */
    if ((s->lock_fd = fs_lock_dir(s->dir, err)) < 0) goto fail;
    if (open_catalog(s, err)) goto fail;
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
    /* One node reads its footers now (local files: blocks_corrupt is right from the
     * start). A cluster node reads a footer from the object store when a scan first
     * needs it (attach_range, footer_of): a query node that joins a large catalog
     * fetches nothing up front, and a share of a split merge reads only its blocks'. */
    for (size_t i = 0; !s->objects && i < n; i++) bcache_attach(s, &s->blocks[i], NULL);
    remove_all_orphans(s);
    return s;
fail:
    store_close(s);
    return NULL;
}

void store_close(store_t *s) {
    if (!s) return;
    for (size_t i = 0; i < s->nheads; i++) segment_free(s->heads[i].seg), segment_free(s->heads[i].frozen);
    free(s->heads);
    for (size_t i = 0; i < s->nblocks; i++) bcache_drop_locked(s, &s->blocks[i]);
    free(s->blocks);
    bcache_free_dicts(s);
    wal_close(s->wal);
    index_close(s->index);
    objcache_free(s->ocache);
    pthread_mutex_destroy(&s->durable_mu);
    pthread_cond_destroy(&s->durable_cv);
    pthread_rwlock_destroy(&s->cut);
    pthread_rwlock_destroy(&s->data);
    pthread_rwlock_destroy(&s->head_lock);
    pthread_mutex_destroy(&s->cutting);
    pthread_mutex_destroy(&s->cache_mu);
    pthread_mutex_destroy(&s->compact);
    if (s->lock_fd >= 0) close(s->lock_fd);
    free(s);
}

index_t *store_index(store_t *s) { return s->index; }

int store_replay(store_t *s, wal_replay_fn fn, void *ctx, wal_scan_t *st, hr_err_t *err) {
    if (!s->wal) return memset(st, 0, sizeof *st), 0; /* a cluster node keeps no log */
    return wal_replay(s->wal, index_wal_checkpoint(s->index), fn, ctx, st, err);
}

/* Segment i of the heads' 2 * nheads: head i / 2's frozen one (NULL when none), then
 * its live one. `head_lock` held. */
static const segment_t *head_part(const store_t *s, size_t i) {
    return i % 2 ? s->heads[i / 2].seg : s->heads[i / 2].frozen;
}

/* Returns the tenant's head, creating it; call with `head_lock` held for writing. */
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

/* An ingest in two steps, so that a batch is in the head exactly when its WAL record
 * is in the log. Staging does everything that allocates: the batch's stacks are
 * imported into the head's symtab (symbols no row refers to yet, which no query or
 * block shows), its samples folded, and room reserved in the head. Committing, after
 * the WAL append, only appends the staged rows into that room: it cannot fail. Out of
 * memory while staging leaves the head's rows as they were and nothing in the WAL. */
typedef struct {
    size_t head;          /* index in s->heads (the array may move; heads are never removed) */
    size_t n;             /* the batch's profiles */
    stack_value_t *sv;    /* their folded samples, in the head's stack ids, back to back */
    size_t *at;           /* profile i's are sv[at[i] .. at[i + 1]) */
    span_sample_t *spans; /* their folded span samples, likewise */
    size_t *span_at;
} staged_t;

static void staged_free(staged_t *st) {
    free(st->sv);
    free(st->at);
    free(st->spans);
    free(st->span_at);
}

/* Copies profile p's samples and span samples into st (profile i), in h's stack ids. */
static int stage_profile(staged_t *st, size_t i, const batch_profile_t *p, symtab_t *sym, symtab_remap_t *m) {
    stack_value_t *sv = st->sv + st->at[i];
    for (size_t j = 0; j < p->n; j++)
        if ((sv[j] = (stack_value_t){symtab_import_stack(sym, m, p->stacks[j]), p->values[j]}).stack == SYM_NONE)
            return -1;
    st->at[i + 1] = st->at[i] + stack_values_fold(sv, p->n);
    span_sample_t *sp = st->spans + st->span_at[i];
    for (size_t j = 0; j < p->nspans; j++)
        if ((sp[j] = (span_sample_t){p->spans[j].span, symtab_import_stack(sym, m, p->spans[j].stack),
                                     p->spans[j].value, p->spans[j].trace_hi, p->spans[j].trace_lo})
                .stack == SYM_NONE)
            return -1;
    st->span_at[i + 1] = st->span_at[i] + span_samples_fold(sp, p->nspans);
    return 0;
}

/* Stages b for tenant's head (see staged_t). 0, or -1 with HR_ENOMEM. */
static int stage(store_t *s, const char *tenant, const batch_t *b, staged_t *st, hr_err_t *err) {
    size_t nsv = 0, nspans = 0;
    for (size_t i = 0; i < b->n; i++) nsv += b->p[i].n, nspans += b->p[i].nspans;
    memset(st, 0, sizeof *st);
    st->n = b->n;
    st->sv = malloc((nsv ? nsv : 1) * sizeof *st->sv);
    st->spans = malloc((nspans ? nspans : 1) * sizeof *st->spans);
    st->at = calloc(b->n + 1, sizeof *st->at);
    st->span_at = calloc(b->n + 1, sizeof *st->span_at);
    if (!st->sv || !st->spans || !st->at || !st->span_at) {
        staged_free(st);
        return hr_fail(err, HR_ENOMEM, "out of memory");
    }
    pthread_rwlock_wrlock(&s->head_lock);
    head_t *h = head_for(s, tenant);
    symtab_remap_t m;
    int rc = h && symtab_remap_init(&m, b->sym) == 0 ? 0 : -1, have_m = rc == 0;
    for (size_t i = 0; i < b->n && rc == 0; i++) rc = stage_profile(st, i, &b->p[i], h->seg->sym, &m);
    if (rc == 0) {
        st->head = (size_t)(h - s->heads);
        rc = segment_reserve(h->seg, h->staged_profiles + b->n, h->staged_samples + st->at[b->n],
                             h->staged_spans + st->span_at[b->n]);
    }
    if (rc == 0) {
        h->staged_profiles += b->n;
        h->staged_samples += st->at[b->n];
        h->staged_spans += st->span_at[b->n];
    }
    pthread_rwlock_unlock(&s->head_lock);
    if (have_m) symtab_remap_destroy(&m);
    if (rc) {
        staged_free(st);
        return hr_fail(err, HR_ENOMEM, "out of memory");
    }
    return 0;
}

/* Gives back the room a stage reserved (its WAL append failed) and frees it. */
static void unstage(store_t *s, staged_t *st) {
    pthread_rwlock_wrlock(&s->head_lock);
    head_t *h = &s->heads[st->head];
    h->staged_profiles -= st->n;
    h->staged_samples -= st->at[st->n];
    h->staged_spans -= st->span_at[st->n];
    pthread_rwlock_unlock(&s->head_lock);
    staged_free(st);
}

/* Appends the staged rows to the head (series[i]: profile i's series) and frees st.
 * Allocates nothing: the stage reserved the room. */
static void commit(store_t *s, const batch_t *b, const uint32_t *series, staged_t *st) {
    pthread_rwlock_wrlock(&s->head_lock);
    head_t *h = &s->heads[st->head];
    if (h->seg->nprofiles == 0) h->opened_ns = store_now_ns();
    for (size_t i = 0; i < b->n; i++) {
        const batch_profile_t *p = &b->p[i];
        int rc = segment_add_folded(h->seg, series[i], p->time_ns, p->duration_ns, st->sv + st->at[i],
                                    st->at[i + 1] - st->at[i]);
        rc = rc ? rc : segment_add_spans(h->seg, st->spans + st->span_at[i], st->span_at[i + 1] - st->span_at[i]);
        assert(rc == 0); /* the room was reserved */
        (void)rc;
    }
    h->staged_profiles -= st->n;
    h->staged_samples -= st->at[st->n];
    h->staged_spans -= st->span_at[st->n];
    /* Queries read the head under the read lock: its fingerprints are kept up to date
     * here, under the write lock. Out of memory leaves the newest stacks without one,
     * which merges copy the slow way (symtab.h). */
    (void)symtab_fingerprint(h->seg->sym);
    pthread_rwlock_unlock(&s->head_lock);
    staged_free(st);
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
    staged_t st;
    int rc = series ? stage(s, tenant, b, &st, err) : -1;
    if (rc == 0) commit(s, b, series, &st);
    free(series);
    return rc;
}

/* Free space an ingest leaves for the catalog's own writes (its new series rows and
 * SQLite's journal pages) besides its WAL record. */
#define INGEST_SPACE_RESERVE ((uint64_t)128 << 10)

int store_ingest(store_t *s, const char *tenant, const void *rec, size_t len, const batch_t *b,
                 store_ingest_times_t *times, hr_err_t *err) {
    store_ingest_times_t t_ = {0}, *t = times ? times : &t_;
    *t = (store_ingest_times_t){0};
    /* Refused before anything is written: on a full disk an upload that created its
     * series and then failed in the WAL would leave series without data behind. While
     * the disk stays full the store is read-only; ingest resumes when space returns. */
    uint64_t avail = fs_free_bytes(s->dir);
    if (s->wal && avail < len + INGEST_SPACE_RESERVE)
        return hr_fail(err, HR_EIO,
                       "no space left on device: %llu bytes free in the data directory, this upload needs %zu "
                       "plus %llu of reserve; writes resume when space returns",
                       (unsigned long long)avail, len, (unsigned long long)INGEST_SPACE_RESERVE);
    /* Series first: a refused series (limit, I/O) must keep the upload out of the WAL.
     * An upload refused after them (out of memory, the WAL) leaves its series known
     * without data, as retention leaves series: lists with a time range skip them. */
    int64_t t0 = time_mono_ns();
    uint32_t *series = resolve_series(s, tenant, b, err);
    int64_t t1 = time_mono_ns();
    t->series_ns = t1 - t0;
    if (!series) return -1;
    /* Staged, logged, committed, all under `cut`, so no cut comes between. */
    pthread_rwlock_rdlock(&s->cut);
    int64_t t2 = time_mono_ns();
    t->wait_ns = t2 - t1;
    staged_t st;
    int rc = stage(s, tenant, b, &st, err);
    int64_t t3 = time_mono_ns();
    t->stage_ns = t3 - t2;
    if (rc == 0 && s->wal && (rc = wal_append(s->wal, rec, len, err)) != 0) unstage(s, &st);
    int64_t t4 = time_mono_ns();
    t->wal_ns = s->wal ? t4 - t3 : 0;
    if (rc == 0) commit(s, b, series, &st), t->commit_ns = time_mono_ns() - t4;
    pthread_mutex_lock(&s->durable_mu);
    uint64_t gen = s->head_gen; /* the heads it is in: the cut that freezes them stores them */
    pthread_mutex_unlock(&s->durable_mu);
    pthread_rwlock_unlock(&s->cut);
    free(series);
    if (rc == 0 && !s->wal && b->n) rc = store_wait_durable(s, gen, err);
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
int store_new_block(store_t *s, const char *tenant, block_meta_t *meta, char *full, size_t cap, hr_err_t *err) {
    memset(meta, 0, sizeof *meta);
    if (index_next_block_id(s->index, &meta->id, err)) return -1;
    snprintf(meta->tenant, sizeof meta->tenant, "%s", tenant);
    snprintf(meta->path, sizeof meta->path, "blocks/%s/%08lld.blk", tenant, (long long)meta->id);
    snprintf(full, cap, "%s/blocks/%s", s->dir, tenant);
    if (fs_mkdirs(full, err)) return -1;
    snprintf(full, cap, "%s/%s", s->dir, meta->path);
    return 0;
}

int store_write_block(store_t *s, const char *tenant, const segment_t *seg, block_meta_t *meta, hr_err_t *err) {
    char full[4096];
    if (store_new_block(s, tenant, meta, full, sizeof full, err)) return -1;
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
    return store_publish_block(s, meta, err);
}

/* A cut in two steps, so that no ingest waits for a block to be written. Freezing
 * (an instant under `cut`, which no ingest holds between its stage and its commit):
 * each non-empty head becomes its tenant's frozen segment and a new, empty head takes
 * its place, and the WAL is rotated, so its closed segments hold exactly the frozen
 * heads. Storing (no lock held but `cutting`): each frozen head is written as a block,
 * the blocks and the WAL checkpoint are registered in one catalog transaction, and
 * the blocks replace the frozen heads for readers in one swap. Scans read the frozen
 * heads until then. A local cut that fails keeps its frozen heads for the next one
 * (the WAL still holds them); a failed cluster cut drops them (their uploads get 503). */

/* The frozen heads' tenants and segments, copied under `head_lock` (s->heads moves
 * when a tenant's first upload adds a head); the segments stay put. */
typedef struct {
    char tenant[sizeof(((head_t *)0)->tenant)];
    const segment_t *seg;
} frozen_t;

static int freeze_heads(store_t *s, hr_err_t *err) {
    pthread_rwlock_wrlock(&s->cut);
    size_t n = s->nheads; /* stable: only stage makes heads, under `cut` */
    segment_t **empty = calloc(n ? n : 1, sizeof *empty);
    int rc = empty ? 0 : -1, any = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        if (s->heads[i].seg->nprofiles && !(empty[i] = segment_new())) rc = -1;
        else any |= s->heads[i].seg->nprofiles != 0;
    if (rc) hr_fail(err, HR_ENOMEM, "out of memory");
    uint32_t closed = 0;
    if (rc == 0 && any && s->wal) rc = wal_rotate(s->wal, &closed, err);
    if (rc == 0 && any) {
        pthread_rwlock_wrlock(&s->head_lock);
        for (size_t i = 0; i < n; i++) {
            if (!empty[i]) continue;
            s->heads[i].frozen = s->heads[i].seg;
            s->heads[i].seg = empty[i];
            empty[i] = NULL;
        }
        pthread_rwlock_unlock(&s->head_lock);
        pthread_mutex_lock(&s->durable_mu);
        s->frozen_gen = s->head_gen++;
        pthread_mutex_unlock(&s->durable_mu);
        s->frozen_pending = 1, s->frozen_closed = closed;
    }
    pthread_rwlock_unlock(&s->cut);
    for (size_t i = 0; empty && i < n; i++) segment_free(empty[i]);
    free(empty);
    return rc;
}

/* The frozen heads, in v[0..*n). NULL on OOM. */
static frozen_t *list_frozen(store_t *s, size_t *n) {
    pthread_rwlock_rdlock(&s->head_lock);
    frozen_t *v = calloc(s->nheads ? s->nheads : 1, sizeof *v);
    *n = 0;
    for (size_t i = 0; v && i < s->nheads; i++)
        if (s->heads[i].frozen) {
            memcpy(v[*n].tenant, s->heads[i].tenant, sizeof v[*n].tenant);
            v[(*n)++].seg = s->heads[i].frozen;
        }
    pthread_rwlock_unlock(&s->head_lock);
    return v;
}

/* Replaces the frozen heads by the new blocks (fresh[0..n), footers read), or with
 * fresh NULL, drops them; cut_ns is what storing them took. */
static void unfreeze(store_t *s, block_t *fresh, size_t n, int64_t cut_ns) {
    pthread_rwlock_wrlock(&s->data);
    pthread_rwlock_wrlock(&s->head_lock);
    pthread_mutex_lock(&s->cache_mu);
    for (size_t k = 0; fresh && k < n; k++) {
        if (store_has_block(s, fresh[k].meta.id)) bcache_drop_locked(s, &fresh[k]); /* a sync took it in already */
        else s->blocks[s->nblocks++] = fresh[k];
    }
    for (size_t i = 0; i < s->nheads; i++) segment_free(s->heads[i].frozen), s->heads[i].frozen = NULL;
    if (fresh) s->cuts++, s->cut_ns += (uint64_t)cut_ns; /* under data, like every counter store_stats reads */
    pthread_mutex_unlock(&s->cache_mu);
    pthread_rwlock_unlock(&s->head_lock);
    pthread_rwlock_unlock(&s->data);
    s->frozen_pending = 0;
}

/* Stores the frozen heads as blocks. `cutting` held. */
static int store_frozen(store_t *s, hr_err_t *err) {
    int64_t t0 = time_mono_ns();
    size_t n = 0, nf = 0;
    frozen_t *fz = list_frozen(s, &nf);
    block_meta_t *metas = calloc(nf ? nf : 1, sizeof *metas);
    block_t *fresh = calloc(nf ? nf : 1, sizeof *fresh);
    int rc = fz && metas && fresh ? 0 : hr_fail(err, HR_ENOMEM, "out of memory");
    if (rc == 0) { /* room for the swap, made now: once the catalog has the blocks nothing may fail */
        pthread_rwlock_wrlock(&s->data);
        if (VEC_RESERVE(s->blocks, s->blocks_cap, s->nblocks + nf)) rc = hr_fail(err, HR_ENOMEM, "out of memory");
        pthread_rwlock_unlock(&s->data);
    }
    for (size_t i = 0; i < nf && rc == 0; i++)
        if ((rc = store_write_block(s, fz[i].tenant, fz[i].seg, &metas[n], err)) == 0) n++;
    if (rc == 0) rc = index_commit_blocks(s->index, metas, n, s->frozen_closed, err);
    if (rc != 0) {
        for (size_t i = 0; i < n; i++) store_discard_block(s, &metas[i]);
        if (!s->wal && fz) unfreeze(s, NULL, 0, 0), store_cut_done(s, s->frozen_gen, 0, err); /* their 503s */
    } else {
        /* The new blocks' footers are read before the swap (I/O outside the data lock);
         * their partitions load on first use, and a footer that fails to load now loads
         * on the next scan. */
        for (size_t k = 0; k < n; k++) {
            fresh[k].meta = metas[k];
            bcache_attach(s, &fresh[k], NULL);
        }
        int64_t took = time_mono_ns() - t0;
        unfreeze(s, fresh, n, took);
        store_cut_done(s, s->frozen_gen, 1, NULL);
        if (s->wal) wal_remove_upto(s->wal, s->frozen_closed);
        log_info("head.cut", "blocks=%zu wal_checkpoint=%u duration_ms=%.1f", n, s->frozen_closed, (double)took / 1e6);
    }
    free(fz);
    free(metas);
    free(fresh);
    return rc;
}

int store_cut(store_t *s, hr_err_t *err) {
    pthread_mutex_lock(&s->cutting);
    int rc = s->frozen_pending ? 0 : freeze_heads(s, err);
    if (rc == 0 && s->frozen_pending) rc = store_frozen(s, err);
    pthread_mutex_unlock(&s->cutting);
    return rc;
}

int store_maybe_cut(store_t *s, hr_err_t *err) {
    int due = 0;
    int64_t now = store_now_ns();
    pthread_rwlock_rdlock(&s->head_lock);
    for (size_t i = 0; i < s->nheads && !due; i++) {
        const segment_t *seg = s->heads[i].seg;
        due = s->heads[i].frozen != NULL; /* a failed cut's, stored again */
        if (!seg->nprofiles) continue;
        due |= segment_bytes(seg) > s->cfg.head_max_bytes || now - s->heads[i].opened_ns > s->cfg.block_duration_ns;
    }
    pthread_rwlock_unlock(&s->head_lock);
    if (!due) return 0;
    return store_cut(s, err) ? -1 : 1;
}

/* 1 when partition p may hold rows the filter wants: time range and series. */
/* 1 when a scan with filter f reads summary partition p in place of the partitions it
 * stands for: a merge of stacks whose range holds p's whole range. */
static int summary_usable(const block_part_t *p, const store_filter_t *f) {
    return p->summary && !f->totals_only && f->merged_ok && p->merged && p->min_time >= f->from &&
           p->max_time <= f->until;
}

int store_part_wanted(const block_index_t *ix, size_t pi, const store_filter_t *f) {
    const block_part_t *p = &ix->parts[pi];
    if (p->summary && !summary_usable(p, f)) return 0;
    for (size_t k = 0; k < p->ncovers; k++)
        if (summary_usable(&ix->parts[p->covers[k]], f)) return 0;                /* that summary is read instead */
    if (p->series && (p->max_time < f->from || p->min_time > f->until)) return 0; /* version 1: the block's range */
    if (!f->series || !p->series) return 1;
    for (size_t k = 0; k < p->nseries; k++)
        if (p->series[k] < f->nseries && f->series[p->series[k]]) return 1;
    return 0;
}

static int cmp_part_ref(const void *a, const void *b) {
    const store_part_ref_t *x = a, *y = b;
    if (x->block != y->block) return x->block < y->block ? -1 : 1;
    return (x->part > y->part) - (x->part < y->part);
}

void store_part_refs_sort(store_part_ref_t *refs, size_t n) {
    if (n) qsort(refs, n, sizeof *refs, cmp_part_ref); /* an empty share may have no array: qsort wants one */
}

/* Sorts refs[0..n) as store_part_refs_sort does, bytes[] kept in step. 0 or -1 (OOM). */
static int sort_plan(store_part_ref_t *refs, uint64_t *bytes, size_t n) {
    typedef struct {
        store_part_ref_t ref; /* first: cmp_part_ref reads it */
        uint64_t bytes;
    } planned_t;
    planned_t *v = malloc((n + 1) * sizeof *v);
    if (!v) return -1;
    for (size_t i = 0; i < n; i++) v[i] = (planned_t){refs[i], bytes[i]};
    if (n) qsort(v, n, sizeof *v, cmp_part_ref);
    for (size_t i = 0; i < n; i++) refs[i] = v[i].ref, bytes[i] = v[i].bytes;
    free(v);
    return 0;
}

int store_part_picked(const store_filter_t *f, int64_t block, size_t p) {
    store_part_ref_t key = {block, (uint32_t)p}, whole = {block, STORE_WHOLE_BLOCK};
    if (!f->only) return 1;
    return bsearch(&key, f->only, f->nonly, sizeof key, cmp_part_ref) ||
           bsearch(&whole, f->only, f->nonly, sizeof key, cmp_part_ref);
}

/* A block id against a ref's block (refs sorted by block, so bsearch finds any of it). */
static int cmp_ref_block(const void *key, const void *ref) {
    int64_t b = *(const int64_t *)key, r = ((const store_part_ref_t *)ref)->block;
    return (b > r) - (b < r);
}

/* Whether a scan by f reads block m: the tenant's, overlapping the range and, for a
 * share of a split merge (f->only), holding one of its partitions. A node asked for a
 * share then reads only its blocks' footers, not every footer in the range. */
static int block_in_scan(const block_meta_t *m, const char *tenant, const store_filter_t *f) {
    if (strcmp(m->tenant, tenant) || m->max_time < f->from || m->min_time > f->until) return 0;
    return !f->only || bsearch(&m->id, f->only, f->nonly, sizeof *f->only, cmp_ref_block) != NULL;
}

int store_part_view(const block_part_t *p, const store_filter_t *f) {
    int whole = p->min_time >= f->from && p->max_time <= f->until;
    if (whole && f->funcs_ok && p->funcs_len) return BLOCK_VIEW_FUNCS;
    return whole && f->merged_ok && p->merged ? BLOCK_VIEW_MERGED : BLOCK_VIEW_ROWS;
}

/* Hands fn the footer totals of the block's wanted partitions: the footer lists
 * every row partition by partition, so each run of wanted partitions is one slice of
 * it, passed as a view (the same rows, not copied). A query for one service of a
 * fleet then walks that service's rows, not the fleet's. */
static int scan_totals(const block_index_t *ix, int64_t id, const store_filter_t *f, store_segment_fn fn, void *ctx) {
    size_t at = 0, run = 0; /* rows before partition p; the wanted run's first row */
    int rc = 0, in_run = 0;
    for (size_t p = 0; p <= ix->nparts && rc == 0; p++) {
        int want = p < ix->nparts && store_part_wanted(ix, p, f) && store_part_picked(f, id, p);
        if (want && !in_run) run = at;
        if (!want && in_run && at > run) {
            segment_t view = *ix->totals;
            view.profiles = ix->totals->profiles + run;
            view.nprofiles = view.profiles_cap = at - run;
            rc = fn(ctx, &view);
        }
        in_run = want;
        if (p < ix->nparts) at += ix->parts[p].nprofiles;
    }
    return rc;
}

/* Block i's footer, attached now if a passing failure left it without one; NULL when
 * it is bad (skipped) or failed again (err). `data` held. */
static const block_index_t *footer_of(store_t *s, size_t i, hr_err_t *err) {
    block_t *b = &s->blocks[i];
    pthread_mutex_lock(&s->cache_mu);
    if (!b->ix && !b->bad) bcache_attach(s, b, err);
    const block_index_t *ix = b->ix;
    pthread_mutex_unlock(&s->cache_mu);
    return ix;
}

/* 1 when a batch of n partitions is to be run now: DECODE_BATCH of them, or
 * DECODE_BATCH_FUNCS while all are function tables. */
static int batch_full(const want_t *batch, size_t n) {
    for (size_t k = 0; k < n && n >= DECODE_BATCH; k++)
        if (batch[k].view != BLOCK_VIEW_FUNCS) return 1;
    return n == DECODE_BATCH_FUNCS;
}

/* Queues the block's wanted partitions into the batch (running it when full), or
 * hands fn the block's footer totals when they suffice. A bad block is skipped; one
 * whose footer does not load for a passing reason fails the scan (err). */
static int scan_block(store_t *s, size_t i, const store_filter_t *f, want_t *batch, size_t *nb, store_segment_fn fn,
                      void *ctx, hr_err_t *err) {
    const block_t *b = &s->blocks[i];
    hr_err_t e = {0};
    const block_index_t *ix = footer_of(s, i, &e); /* stable while data is held */
    if (!ix && !e.code && f->strict) hr_fail(&e, HR_EIO, "block %s is unreadable on this node", b->meta.path);
    if (!ix && e.code && err) *err = e;
    if (!ix) return e.code ? -1 : 0;
    if (f->totals_only && ix->totals) return scan_totals(ix, b->meta.id, f, fn, ctx); /* no partition decoded */
    int rc = 0;
    for (size_t p = 0; p < ix->nparts && rc == 0; p++) {
        const block_part_t *bp = &ix->parts[p];
        if (!store_part_wanted(ix, p, f) || !store_part_picked(f, b->meta.id, p)) continue;
        /* A range covering the whole partition takes its pre-merged rows (one per
         * series instead of every profile), or its function table. */
        want_t w = {s, i, p, store_part_view(bp, f), NULL, {0}, 0, {f->from, f->until}, 0};
        w.windowed = f->window_ok && w.view == BLOCK_VIEW_ROWS && block_window_narrows(bp, &w.win);
        batch[(*nb)++] = w;
        if (batch_full(batch, *nb)) {
            rc = bcache_run_batch(s, batch, *nb, f->strict, fn, ctx, err);
            *nb = 0;
        }
    }
    return rc;
}

/* Reads, in parallel, the footers of the scan's blocks that have none yet (a node
 * that just started, or blocks other nodes wrote). `data` held for reading. */
static void attach_range(store_t *s, const char *tenant, const store_filter_t *f) {
    size_t *idx = malloc((s->nblocks + 1) * sizeof *idx), n = 0;
    if (!idx) return; /* scan_block attaches them one by one */
    pthread_mutex_lock(&s->cache_mu);
    for (size_t i = 0; i < s->nblocks; i++) {
        const block_t *b = &s->blocks[i];
        if (!b->ix && !b->bad && block_in_scan(&b->meta, tenant, f)) idx[n++] = i;
    }
    pthread_mutex_unlock(&s->cache_mu);
    if (n > 1) bcache_attach_many(s, idx, n);
    free(idx);
}

/* A head's extent when a scan began: every pass of the scan reads its rows up to
 * there, though ingest appends meanwhile (it waits for no scan), so the passes see the
 * same profiles. The segment stays valid while the scan holds `data`: a cut freezes a
 * head in place and frees it only in its swap, under `data`. */
typedef struct {
    const segment_t *seg;
    size_t nprofiles, nsamples, nspans;
} head_mark_t;

/* The marks of tenant's heads (frozen or not) now, in *marks (*n of them); `data` held. */
static int mark_heads(store_t *s, const char *tenant, head_mark_t **marks, size_t *n, hr_err_t *err) {
    pthread_rwlock_rdlock(&s->head_lock);
    *n = 0;
    if ((*marks = malloc((2 * s->nheads + 1) * sizeof **marks)))
        for (size_t i = 0; i < 2 * s->nheads; i++) {
            const segment_t *seg = head_part(s, i);
            if (seg && seg->nprofiles && !strcmp(s->heads[i / 2].tenant, tenant))
                (*marks)[(*n)++] = (head_mark_t){seg, seg->nprofiles, seg->nsamples, seg->nspans};
        }
    pthread_rwlock_unlock(&s->head_lock);
    return *marks ? 0 : hr_fail(err, HR_ENOMEM, "out of memory");
}

/* Hands fn the marked heads, each as a view of its rows up to its mark. The heads
 * alone are read under `head_lock`: ingest waits for no scan of blocks. */
static int scan_heads(store_t *s, const head_mark_t *marks, size_t n, const store_filter_t *f, store_segment_fn fn,
                      void *ctx) {
    int rc = 0;
    pthread_rwlock_rdlock(&s->head_lock);
    for (size_t i = 0; i < n && rc == 0; i++) {
        segment_t view = *marks[i].seg;
        if (view.max_time < f->from || view.min_time > f->until) continue;
        view.nprofiles = marks[i].nprofiles, view.nsamples = marks[i].nsamples, view.nspans = marks[i].nspans;
        rc = fn(ctx, &view);
    }
    pthread_rwlock_unlock(&s->head_lock);
    return rc;
}

/* One scan; `data` held for reading. */
static int scan_locked(store_t *s, const char *tenant, const store_filter_t *f, const head_mark_t *marks, size_t nmarks,
                       store_segment_fn fn, void *ctx, hr_err_t *err) {
    int rc = 0;
    want_t batch[DECODE_BATCH_FUNCS];
    size_t nb = 0;
    attach_range(s, tenant, f);
    prefetch_t *pf = f->totals_only ? NULL : store_prefetch_start(s, tenant, f);
    for (size_t i = 0; i < s->nblocks && rc == 0; i++) {
        const block_meta_t *m = &s->blocks[i].meta;
        if (!block_in_scan(m, tenant, f)) continue;
        rc = scan_block(s, i, f, batch, &nb, fn, ctx, err);
    }
    if (nb && rc == 0) rc = bcache_run_batch(s, batch, nb, f->strict, fn, ctx, err); /* queued, not yet pinned */
    store_prefetch_end(pf);
    return rc || f->no_heads ? rc : scan_heads(s, marks, nmarks, f, fn, ctx);
}

/* Calls fn for each partition of tenant's blocks in f's range that holds a wanted
 * series (store_part_wanted), loading footers as needed; `data` held. fn returning -1
 * stops the walk. 0, or -1 with err (a footer that does not load, or fn's). */
typedef int (*part_fn)(void *ctx, const block_meta_t *m, size_t p, const block_part_t *bp, hr_err_t *err);
static int walk_wanted_parts(store_t *s, const char *tenant, const store_filter_t *f, part_fn fn, void *ctx,
                             hr_err_t *err) {
    attach_range(s, tenant, f);
    for (size_t i = 0; i < s->nblocks; i++) {
        const block_meta_t *m = &s->blocks[i].meta;
        if (!block_in_scan(m, tenant, f)) continue;
        hr_err_t e = {0};
        const block_index_t *ix = footer_of(s, i, &e);
        if (!ix && e.code) return err ? (*err = e, -1) : -1;
        for (size_t p = 0; ix && p < ix->nparts; p++)
            if (store_part_wanted(ix, p, f) && fn(ctx, m, p, &ix->parts[p], err)) return -1;
    }
    return 0;
}

typedef struct {
    const store_filter_t *f;
    store_part_ref_t *refs;
    uint64_t *bytes;
    size_t n, cap, bcap;
} plan_t;

static int plan_part(void *ctx, const block_meta_t *m, size_t p, const block_part_t *bp, hr_err_t *err) {
    plan_t *pl = ctx;
    if (!store_part_picked(pl->f, m->id, p)) return 0;
    if (VEC_RESERVE(pl->refs, pl->cap, pl->n + 1) || VEC_RESERVE(pl->bytes, pl->bcap, pl->n + 1))
        return hr_fail(err, HR_ENOMEM, "out of memory");
    uint64_t off;
    pl->refs[pl->n] = (store_part_ref_t){m->id, (uint32_t)p};
    block_part_range(bp, store_part_view(bp, pl->f), &off, &pl->bytes[pl->n]);
    pl->n++;
    return 0;
}

int store_plan_locked(store_t *s, const char *tenant, const store_filter_t *f, store_part_ref_t **refs,
                      uint64_t **bytes, size_t *n, hr_err_t *err) {
    plan_t pl = {.f = f};
    int rc = walk_wanted_parts(s, tenant, f, plan_part, &pl, err);
    if (rc == 0 && sort_plan(pl.refs, pl.bytes, pl.n)) rc = hr_fail(err, HR_ENOMEM, "out of memory");
    *refs = pl.refs, *bytes = pl.bytes, *n = pl.n; /* the caller frees them, whatever rc */
    return rc;
}

int store_plan_blocks_locked(store_t *s, const char *tenant, const store_filter_t *f, store_part_ref_t **refs,
                             uint64_t **bytes, size_t *n) {
    *refs = malloc((s->nblocks + 1) * sizeof **refs), *bytes = malloc((s->nblocks + 1) * sizeof **bytes), *n = 0;
    if (!*refs || !*bytes) return -1; /* the caller frees them, whatever rc */
    for (size_t i = 0; i < s->nblocks; i++) {
        const block_meta_t *m = &s->blocks[i].meta;
        if (!block_in_scan(m, tenant, f)) continue;
        (*refs)[*n] = (store_part_ref_t){m->id, STORE_WHOLE_BLOCK};
        (*bytes)[(*n)++] = m->bytes > 0 ? (uint64_t)m->bytes : 0;
    }
    return sort_plan(*refs, *bytes, *n);
}

/* A wanted partition into the analysis; a->blocks counts each block once (the walk
 * visits a block's partitions one after another). */
typedef struct {
    store_analysis_t *a;
    int64_t last_block;
} analysis_ctx_t;

static int analyze_part(void *ctx, const block_meta_t *m, size_t p, const block_part_t *bp, hr_err_t *err) {
    (void)p, (void)err;
    analysis_ctx_t *c = ctx;
    store_analysis_t *a = c->a;
    a->blocks += m->id != c->last_block, c->last_block = m->id;
    a->parts++;
    a->block_profiles += bp->nprofiles, a->block_samples += bp->nsamples, a->block_bytes += bp->len;
    return 0;
}

/* Adds the heads' rows of wanted series in f's range to a; `data` held. */
static void analyze_heads(store_t *s, const char *tenant, const store_filter_t *f, store_analysis_t *a) {
    pthread_rwlock_rdlock(&s->head_lock);
    for (size_t i = 0; i < 2 * s->nheads; i++) {
        const segment_t *seg = head_part(s, i);
        if (!seg || strcmp(s->heads[i / 2].tenant, tenant)) continue;
        for (size_t r = 0; r < seg->nprofiles; r++) {
            const seg_profile_t *row = &seg->profiles[r];
            int wanted = !f->series || (row->series < f->nseries && f->series[row->series]);
            if (!wanted || row->time_ns < f->from || row->time_ns > f->until) continue;
            a->head_profiles++, a->head_samples += row->nsamples;
        }
    }
    pthread_rwlock_unlock(&s->head_lock);
    a->head_bytes = a->head_profiles * sizeof(seg_profile_t) + a->head_samples * (sizeof(uint32_t) + sizeof(int64_t));
}

int store_analyze(store_t *s, const char *tenant, const store_filter_t *f, store_analysis_t *a, hr_err_t *err) {
    memset(a, 0, sizeof *a);
    if (store_sync(s, err)) return -1;
    pthread_rwlock_rdlock(&s->data);
    analysis_ctx_t c = {a, -1};
    int rc = walk_wanted_parts(s, tenant, f, analyze_part, &c, err);
    if (rc == 0) analyze_heads(s, tenant, f, a);
    pthread_rwlock_unlock(&s->data);
    return rc;
}

int store_has_parts_locked(store_t *s, const store_part_ref_t *refs, size_t n) {
    for (size_t k = 0; k < n; k++) {
        size_t i = 0;
        while (i < s->nblocks && s->blocks[i].meta.id != refs[k].block) i++;
        if (refs[k].part == STORE_WHOLE_BLOCK && i < s->nblocks) continue; /* its footer is read by the scan */
        hr_err_t e = {0};
        const block_index_t *ix = i < s->nblocks ? footer_of(s, i, &e) : NULL;
        if (!ix || refs[k].part >= ix->nparts) return 0;
    }
    return 1;
}

int store_scan(store_t *s, const char *tenant, const store_filter_t *f, store_segment_fn fn, void *ctx, hr_err_t *err) {
    return store_scan_passes(s, tenant, f, 1, NULL, fn, ctx, err);
}

int store_scan_passes(store_t *s, const char *tenant, const store_filter_t *f, size_t n, store_pass_fn pass,
                      store_segment_fn fn, void *ctx, hr_err_t *err) {
    if (store_sync(s, err)) return -1;
    pthread_rwlock_rdlock(&s->data);
    head_mark_t *marks;
    size_t nmarks;
    int rc = mark_heads(s, tenant, &marks, &nmarks, err);
    for (size_t k = 0; k < n && rc == 0; k++) {
        if (pass) pass(ctx, k);
        rc = scan_locked(s, tenant, &f[k], marks, nmarks, fn, ctx, err);
    }
    pthread_rwlock_unlock(&s->data);
    free(marks);
    return rc;
}

int store_time_range(store_t *s, const char *tenant, int64_t *oldest, int64_t *newest) {
    *oldest = INT64_MAX, *newest = INT64_MIN;
    hr_err_t e = {0};
    if (store_sync(s, &e)) log_warn("catalog.sync_failed", "err=\"%s\" (answering from the last sync)", e.msg);
    pthread_rwlock_rdlock(&s->data);
    for (size_t i = 0; i < s->nblocks; i++) {
        const block_meta_t *m = &s->blocks[i].meta;
        if (strcmp(m->tenant, tenant) || !m->profiles) continue;
        if (m->min_time < *oldest) *oldest = m->min_time;
        if (m->max_time > *newest) *newest = m->max_time;
    }
    pthread_rwlock_rdlock(&s->head_lock);
    for (size_t i = 0; i < 2 * s->nheads; i++) {
        const segment_t *h = head_part(s, i);
        if (!h || strcmp(s->heads[i / 2].tenant, tenant) || !h->nprofiles) continue;
        if (h->min_time < *oldest) *oldest = h->min_time;
        if (h->max_time > *newest) *newest = h->max_time;
    }
    pthread_rwlock_unlock(&s->head_lock);
    pthread_rwlock_unlock(&s->data);
    return *oldest <= *newest;
}

void store_stats(store_t *s, store_stats_t *out) {
    memset(out, 0, sizeof *out);
    pthread_rwlock_rdlock(&s->data);
    pthread_rwlock_rdlock(&s->head_lock);
    for (size_t i = 0; i < 2 * s->nheads; i++) { /* a frozen head is still a head until its block is in */
        const segment_t *h = head_part(s, i);
        if (!h) continue;
        out->head_bytes += segment_bytes(h);
        out->head_profiles += h->nprofiles;
        out->head_samples += h->nsamples;
        out->head_strings += h->sym->nstrings - 1;
        out->head_functions += h->sym->nfunctions - 1;
        out->head_locations += h->sym->nlocations - 1;
        out->head_stacks += h->sym->nstacks - 1;
    }
    pthread_rwlock_unlock(&s->head_lock);
    out->blocks = s->nblocks;
    pthread_mutex_lock(&s->cache_mu);
    for (size_t i = 0; i < s->nblocks; i++) {
        const block_t *b = &s->blocks[i];
        out->block_bytes += (size_t)b->meta.bytes;
        out->blocks_corrupt += b->bad != 0;
    }
    for (const part_cache_t *c = s->lru_oldest; c; c = c->newer) out->parts_cached++;
    out->cached_bytes = s->cached_bytes + s->dict_bytes;
    out->dict_bytes = s->dict_bytes;
    out->footer_loads = s->footer_loads;
    out->part_loads = s->part_loads;
    out->window_loads = s->window_loads;
    out->symbols_decoded = s->symbols_decoded;
    out->names_decoded = s->names_decoded;
    pthread_mutex_lock(&s->durable_mu);
    out->syncs_full = s->syncs[0], out->syncs_incremental = s->syncs[1];
    pthread_mutex_unlock(&s->durable_mu);
    out->funcs_loads = s->funcs_loads;
    pthread_mutex_unlock(&s->cache_mu);
    out->cuts = s->cuts;
    out->cut_ns = s->cut_ns;
    out->retention_deleted = s->retention_deleted;
    out->compactions = s->compactions;
    out->compacted_blocks = s->compacted_blocks;
    out->compactions_lost = s->compactions_lost;
    pthread_rwlock_unlock(&s->data);
    out->series = index_series_total(s->index);
    out->wal_bytes = s->wal ? wal_segment_bytes(s->wal) : 0;
    if (s->ocache) {
        objcache_stats_t oc;
        objcache_stats(s->ocache, &oc);
        out->ocache_hits = oc.hits, out->ocache_misses = oc.misses;
        out->ocache_fetched_bytes = oc.fetched_bytes, out->ocache_bytes = oc.bytes;
        out->ocache_ranges = oc.entries;
    }
}
