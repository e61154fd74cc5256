/* compact.c - see compact.h (merging segments) and store.h (store_compact: planning,
 * writing and swapping in compaction runs). */
#include "storage/compact.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/vec.h"
#include "storage/store_impl.h"

/* Copies one segment's profiles into out, remapping stack ids into out's symtab. */
static int copy_segment(segment_t *out, const segment_t *in, uint32_t **stacks, size_t *cap, hr_err_t *err) {
    symtab_remap_t m;
    if (symtab_remap_init(&m, in->sym)) return hr_fail(err, HR_ENOMEM, "out of memory");
    int rc = 0;
    for (size_t i = 0; i < in->nprofiles && rc == 0; i++) {
        const seg_profile_t *p = &in->profiles[i];
        if (VEC_RESERVE(*stacks, *cap, p->nsamples + 1)) {
            rc = hr_fail(err, HR_ENOMEM, "out of memory");
            break;
        }
        for (uint32_t k = 0; k < p->nsamples && rc == 0; k++) {
            uint32_t id = symtab_import_stack(out->sym, &m, in->stacks[p->first + k]);
            if (id == SYM_NONE) rc = hr_fail(err, HR_ENOMEM, "out of memory interning symbols");
            (*stacks)[k] = id;
        }
        if (rc == 0 &&
            (segment_add(out, p->series, p->time_ns, p->duration_ns, *stacks, in->values + p->first, p->nsamples) ||
             segment_import_spans(out, &m, in->spans + p->span_first, p->nspans)))
            rc = hr_fail(err, HR_ENOMEM, "out of memory");
    }
    symtab_remap_destroy(&m);
    return rc;
}

segment_t *compact_segments(const segment_t *const *in, size_t n, hr_err_t *err) {
    segment_t *out = segment_new();
    if (!out) return hr_fail(err, HR_ENOMEM, "out of memory"), NULL;
    uint32_t *stacks = NULL;
    size_t cap = 0;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) rc = copy_segment(out, in[i], &stacks, &cap, err);
    free(stacks);
    if (rc) {
        segment_free(out);
        return NULL;
    }
    return out;
}

/* ---- store_compact ---- */

typedef struct {
    char tenant[128]; /* copied while planning: s->blocks may move (a cut appends) once data is released */
    size_t *idx;      /* positions in s->blocks (stable: only compaction and retention remove, under `compact`) */
    int64_t *ids;
    size_t n;
    int64_t bytes;
    segment_t **segs; /* every partition of the run's blocks, pinned */
    struct pin {
        size_t block, part;
    } * pins;
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
            int fits = b && !b->bad && b->meta.bytes < small &&
                       bytes + b->meta.bytes <= (int64_t)s->cfg.compact_max_bytes &&
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

/* Unpins the run's input partitions once they are merged, freeing those no scan
 * holds: the blocks they belong to are about to be replaced, and writing the merged
 * block (encoding, then decoding it again to verify) is the run's memory peak. Should
 * the run fail, they load again on demand. */
static void release_inputs(store_t *s, run_t *r) {
    pthread_rwlock_rdlock(&s->data); /* a cut may move s->blocks meanwhile */
    pthread_mutex_lock(&s->cache_mu);
    for (size_t k = 0; k < r->nsegs; k++) {
        part_cache_t *c = &s->blocks[r->pins[k].block].parts[2 * r->pins[k].part + BLOCK_VIEW_ROWS];
        if (--c->refs == 0 && c->cached) {
            s->cached_bytes -= segment_bytes(c->cached);
            segment_free(c->cached);
            c->cached = NULL;
        }
    }
    r->nsegs = 0;
    pthread_mutex_unlock(&s->cache_mu);
    pthread_rwlock_unlock(&s->data);
}

/* Merges the planned blocks and writes the result; meta is filled. 0 or -1. */
static int compact_run(store_t *s, run_t *r, block_meta_t *meta, hr_err_t *err) {
    segment_t *m = compact_segments((const segment_t *const *)r->segs, r->nsegs, err);
    if (m) release_inputs(s, r);
    int rc = m ? store_write_block(s, r->tenant, m, meta, err) : -1;
    segment_free(m);
    return rc;
}

/* Pins every partition of the run's blocks (data held shared). 1, or 0 when one is
 * unreadable (it is now marked bad: a later plan skips it) or a footer is not yet
 * attached, -1 with err on a passing failure (out of memory, I/O). */
static int pin_run(store_t *s, run_t *r, hr_err_t *err) {
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
    if (!r->ids || !r->segs || !r->pins) return hr_fail(err, HR_ENOMEM, "out of memory planning compaction");
    for (size_t i = 0; i < r->n; i++) {
        const block_t *b = &s->blocks[r->idx[i]];
        r->ids[i] = b->meta.id;
        if (!b->ix) return 0;
        for (size_t p = 0; p < b->ix->nparts; p++) {
            hr_err_t e = {0};
            if (!(r->segs[r->nsegs] = bcache_pin(s, r->idx[i], p, BLOCK_VIEW_ROWS, &e)))
                return e.code == HR_EUNPROC || e.code == HR_ENOTFOUND ? 0 : (*err = e, -1);
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
        bcache_drop_locked(s, b);
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
    int64_t t0 = store_now_ns();
    run_t r = {0};
    pthread_mutex_lock(&s->compact);
    pthread_rwlock_rdlock(&s->data);
    int rc = plan_run(s, &r);
    if (rc < 0) hr_fail(err, HR_ENOMEM, "out of memory planning compaction");
    if (rc == 1) rc = pin_run(s, &r, err);
    pthread_rwlock_unlock(&s->data);
    block_t merged = {0};
    block_meta_t meta;
    /* Allocated before the catalog swaps the run out: after that nothing may fail. */
    char(*paths)[4096] = rc == 1 ? malloc(r.n * sizeof *paths) : NULL;
    if (rc == 1 && !paths) rc = hr_fail(err, HR_ENOMEM, "out of memory");
    if (rc == 1 && compact_run(s, &r, &meta, err)) rc = -1;
    if (rc == 1 && index_replace_blocks(s->index, &meta, r.ids, r.n, err)) {
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", s->dir, meta.path);
        unlink(full);
        rc = -1;
    }
    if (rc == 1) {
        merged.meta = meta;
        bcache_attach(s, &merged, NULL); /* its footer, outside the locks; a scan retries a passing failure */
    }
    int np = 0;
    pthread_rwlock_wrlock(&s->data);
    pthread_mutex_lock(&s->cache_mu);
    for (size_t k = 0; k < r.nsegs; k++) s->blocks[r.pins[k].block].parts[2 * r.pins[k].part + BLOCK_VIEW_ROWS].refs--;
    if (rc == 1) {
        np = swap_in_locked(s, &r, &merged, paths);
        s->compactions++; /* under data: store_stats reads them under it */
        s->compacted_blocks += r.n;
    }
    bcache_evict_locked(s);
    pthread_mutex_unlock(&s->cache_mu);
    pthread_rwlock_unlock(&s->data);
    for (int i = 0; i < np; i++) unlink(paths[i]); /* after the catalog: crash-safe */
    free(paths);
    if (rc == 1) {
        log_info("compaction.done",
                 "tenant=%s blocks_in=%zu bytes_in=%lld bytes_out=%lld profiles=%lld duration_ms=%.1f", meta.tenant,
                 r.n, (long long)r.bytes, (long long)meta.bytes, (long long)meta.profiles,
                 (double)(store_now_ns() - t0) / 1e6);
    }
    pthread_mutex_unlock(&s->compact);
    run_free(&r);
    return rc;
}
