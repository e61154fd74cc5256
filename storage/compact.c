/* compact.c - store_compact (store.h): planning, writing and swapping in compaction
 * runs; their inputs' profiles are merged by segment_merge (segment.h). */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/vec.h"
#include "storage/store_impl.h"

/* ---- store_compact ---- */

typedef struct {
    char tenant[128]; /* copied while planning: s->blocks may move (a cut appends) once data is released */
    size_t *idx;      /* positions in s->blocks while planning (data held) */
    int64_t *ids;
    size_t n;
    int64_t bytes;
    /* Each input block's catalog entry and footer, the run's own copies: in a cluster
     * a catalog sync may drop a block from s->blocks while the run reads it. */
    block_meta_t *metas;
    block_index_t **ix;
    int legacy;           /* a version-1 input: merged whole, as it has no partitions */
    int64_t span, window; /* the run's window: blocks starting in [window * span, +span) (tiers from Monday) */
    block_meta_t *out;    /* the blocks written, for the catalog */
    size_t nout, out_cap;
} run_t;

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int cmp_block_time(const void *a, const void *b, void *ctx) {
    const block_t *bl = ctx;
    int64_t x = bl[*(const size_t *)a].meta.min_time, y = bl[*(const size_t *)b].meta.min_time;
    return (x > y) - (x < y);
}

/* A run gathers blocks that start on one UTC day, so retention still frees space a
 * day at a time; a block that runs past midnight (a cluster's segment, a head cut
 * just after) joins the day it starts on rather than staying a block of its own. */
static int same_day(const block_meta_t *a, const block_meta_t *b);

#define SKIP_MAX 16
#define DAY_NS (86400LL * 1000000000)
/* Runs another cluster compactor holds, passed over by this plan: (tenant, window). */
typedef struct {
    struct {
        char tenant[128];
        int64_t span, window;
    } v[SKIP_MAX];
    size_t n;
} skip_t;

/* Tier windows start on Mondays (UTC): the epoch began on a Thursday. */
#define TIER_ORIGIN_NS (4 * DAY_NS)

static int64_t window_of(int64_t t, int64_t span, int64_t origin) {
    int64_t x = t - origin;
    return x >= 0 ? x / span : -((-x + span - 1) / span);
}

static int same_day(const block_meta_t *a, const block_meta_t *b) {
    return window_of(a->min_time, DAY_NS, 0) == window_of(b->min_time, DAY_NS, 0);
}

static int skipped(const skip_t *sk, const char *tenant, int64_t span, int64_t window) {
    for (size_t i = 0; i < sk->n; i++)
        if (sk->v[i].span == span && sk->v[i].window == window && !strcmp(sk->v[i].tenant, tenant)) return 1;
    return 0;
}

/* Takes blocks order[start..end) as the run (moved to the front of order). */
static void take_run(run_t *r, const char *tenant, size_t *order, size_t start, size_t end, int64_t bytes, int64_t span,
                     int64_t window) {
    snprintf(r->tenant, sizeof r->tenant, "%s", tenant);
    r->n = end - start;
    r->bytes = bytes;
    r->span = span, r->window = window;
    memmove(order, order + start, r->n * sizeof *order);
}

/* 1 when block b holds summaries: a tier run's output, which only a tier run merges
 * again (the day rule would fold its days into one partition). */
static int has_summaries(const block_t *b) {
    for (size_t p = 0; b->ix && p < b->ix->nparts; p++)
        if (b->ix->parts[p].summary) return 1;
    return 0;
}

/* The day rule on one tenant's blocks (order, by time): the first run of
 * compact_min_blocks or more small blocks starting on one UTC day. 1 found, 0. */
static int plan_day(store_t *s, run_t *r, size_t *order, size_t n, const skip_t *sk) {
    const char *tenant = s->blocks[order[0]].meta.tenant;
    int64_t small = (int64_t)s->cfg.compact_max_bytes / 2;
    size_t start = 0;
    int64_t bytes = 0;
    int legacy = 0;
    for (size_t k = 0; k <= n; k++) {
        const block_t *b = k < n ? &s->blocks[order[k]] : NULL;
        int v1 = b && b->ix && b->ix->version == 1;
        /* A run is written a service at a time into blocks of at most max bytes, so
         * its input is not capped, unless it holds a version-1 block (merged whole). */
        int fits = b && !b->bad && b->meta.bytes < small && !has_summaries(b) &&
                   (!(legacy || v1) || bytes + b->meta.bytes <= (int64_t)s->cfg.compact_max_bytes) &&
                   (k == start || same_day(&s->blocks[order[start]].meta, &b->meta));
        if (fits) {
            bytes += b->meta.bytes;
            legacy |= v1;
            continue;
        }
        int64_t day =
            k - start >= s->cfg.compact_min_blocks ? window_of(s->blocks[order[start]].meta.min_time, DAY_NS, 0) : 0;
        if (k - start >= s->cfg.compact_min_blocks && !skipped(sk, tenant, DAY_NS, day)) {
            take_run(r, tenant, order, start, k, bytes, DAY_NS, day);
            return 1;
        }
        /* this block ends the run; a small one that overflowed starts the next */
        start = k, bytes = 0, legacy = 0;
        if (b && !b->bad && b->meta.bytes < small && !has_summaries(b)) bytes = b->meta.bytes, legacy = v1;
        else start = k + 1;
    }
    return 0;
}

typedef struct {
    const char *key;
    size_t block;
} key_at_t;

static int cmp_key_at(const void *a, const void *b) {
    const key_at_t *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->block > y->block) - (x->block < y->block);
}

/* Marks (mark[k - a] = 1) the blocks order[a..b) that share a partition key with
 * another of them (footers attached): a tier run of those leaves each service in one
 * block of the window (its days and summaries), and a late block rewrites only the
 * blocks holding its services, not the window's whole fleet. Returns how many are
 * marked, or -1 on OOM. */
static long keys_repeat(const store_t *s, const size_t *order, size_t a, size_t b, uint8_t *mark) {
    size_t total = 0;
    for (size_t k = a; k < b; k++) total += s->blocks[order[k]].ix->nparts;
    key_at_t *v = malloc((total ? total : 1) * sizeof *v);
    if (!v) return -1;
    size_t m = 0;
    for (size_t k = a; k < b; k++) {
        const block_index_t *ix = s->blocks[order[k]].ix;
        for (size_t p = 0; p < ix->nparts; p++) v[m++] = (key_at_t){ix->parts[p].key, k};
    }
    qsort(v, m, sizeof *v, cmp_key_at);
    memset(mark, 0, b - a);
    for (size_t i = 1; i < m; i++)
        if (!strcmp(v[i - 1].key, v[i].key) && v[i - 1].block != v[i].block)
            mark[v[i - 1].block - a] = mark[v[i].block - a] = 1;
    free(v);
    long n = 0;
    for (size_t k = 0; k < b - a; k++) n += mark[k];
    return n;
}

/* 1 when every block of order[a..b) can join a tier run: readable, footer attached,
 * version 2 (a version-1 block is left to the day rule, which rewrites it). */
static int tier_ready(const store_t *s, const size_t *order, size_t a, size_t b) {
    for (size_t k = a; k < b; k++) {
        const block_t *bl = &s->blocks[order[k]];
        if (bl->bad || !bl->ix || bl->ix->version != 2) return 0;
    }
    return 1;
}

/* A tier of span L applies while retention keeps at least four of its windows: a
 * longer block would hold data long past --retention (blocks are deleted whole). */
static int tier_applies(const store_t *s, int64_t span) {
    return s->cfg.retention_ns <= 0 || s->cfg.retention_ns >= 4 * span;
}

/* The tier rule on one tenant's blocks (order, by time), largest tier first: the
 * blocks starting in one window of the tier, once the window has ended (and a grace
 * for its last cuts has passed), when some service has a partition in more than one
 * of them. 1 found, 0, -1 OOM. */
static int plan_tier(store_t *s, run_t *r, size_t *order, size_t n, const skip_t *sk, int64_t now) {
    const char *tenant = s->blocks[order[0]].meta.tenant;
    uint8_t *mark = malloc(n ? n : 1);
    if (!mark) return -1;
    int found = 0;
    int64_t grace = 2 * s->cfg.block_duration_ns;
    if (grace < 3600LL * 1000000000) grace = 3600LL * 1000000000;
    for (size_t t = s->cfg.ntiers; !found && t-- > 0;) {
        int64_t span = s->cfg.tiers_ns[t];
        if (!tier_applies(s, span)) continue;
        for (size_t a = 0, b; a < n && !found; a = b) {
            int64_t w = window_of(s->blocks[order[a]].meta.min_time, span, TIER_ORIGIN_NS);
            for (b = a; b < n && window_of(s->blocks[order[b]].meta.min_time, span, TIER_ORIGIN_NS) == w; b++) {
            }
            int ended = TIER_ORIGIN_NS + (w + 1) * span + grace <= now;
            if (b - a < 2 || !ended || skipped(sk, tenant, span, w) || !tier_ready(s, order, a, b)) continue;
            long nm = keys_repeat(s, order, a, b, mark);
            if (nm < 0) found = -1;
            if (nm <= 0) continue;
            size_t k = a; /* the marked blocks to order[a..a + nm) */
            int64_t bytes = 0;
            for (size_t i = a; i < b; i++)
                if (mark[i - a]) bytes += s->blocks[order[i]].meta.bytes, order[k++] = order[i];
            take_run(r, tenant, order, a, k, bytes, span, w);
            found = 1;
        }
    }
    free(mark);
    return found;
}

/* Picks the first due run (see store.h) that sk does not pass over: a tier run, else
 * a day run. data held shared, cache_mu (for the footers) held. 1 found, 0, -1 OOM. */
static int plan_run(store_t *s, run_t *r, const skip_t *sk) {
    size_t *order = malloc((s->nblocks + 1) * sizeof *order);
    if (!order) return -1;
    int found = 0;
    int64_t now = store_now_ns();
    for (size_t t = 0; t < s->nblocks && !found; t++) {
        const char *tenant = s->blocks[t].meta.tenant;
        int first = 1; /* visit each tenant once: at its first block */
        for (size_t j = 0; j < t && first; j++) first = strcmp(s->blocks[j].meta.tenant, tenant) != 0;
        if (!first) continue;
        size_t n = 0;
        for (size_t j = t; j < s->nblocks; j++)
            if (!strcmp(s->blocks[j].meta.tenant, tenant)) order[n++] = j;
        qsort_r(order, n, sizeof *order, cmp_block_time, s->blocks);
        found = plan_tier(s, r, order, n, sk, now);
        if (found == 0) found = plan_day(s, r, order, n, sk);
    }
    if (found != 1) {
        free(order);
        return found;
    }
    r->idx = order;
    return 1;
}

/* Records the run's ids and catalog entries (data held shared). 1, or 0 when a
 * footer is not yet attached (compact later, once every footer is in), -1 on OOM. */
static int prepare_run(store_t *s, run_t *r, hr_err_t *err) {
    r->ids = malloc(r->n * sizeof *r->ids);
    r->metas = malloc(r->n * sizeof *r->metas);
    r->ix = calloc(r->n, sizeof *r->ix);
    if (!r->ids || !r->metas || !r->ix) return hr_fail(err, HR_ENOMEM, "out of memory planning compaction");
    int attached = 1;
    pthread_mutex_lock(&s->cache_mu); /* scans may attach a block's footer meanwhile */
    for (size_t i = 0; i < r->n; i++) {
        const block_t *b = &s->blocks[r->idx[i]];
        r->ids[i] = b->meta.id;
        r->metas[i] = b->meta;
        attached &= b->ix != NULL && !b->bad;
        r->legacy |= b->ix && b->ix->version == 1;
    }
    pthread_mutex_unlock(&s->cache_mu);
    return attached;
}

/* Reads the run's own copies of its inputs' footers (no lock held). 1, 0 when an
 * input turned out unreadable, -1 with err. */
static int read_footers(store_t *s, run_t *r, hr_err_t *err) {
    for (size_t i = 0; i < r->n; i++) {
        hr_err_t e = {0};
        if ((r->ix[i] = store_read_index(s, &r->metas[i], &e))) continue;
        if (e.code != HR_EUNPROC && e.code != HR_ENOTFOUND) return *err = e, -1;
        return 0; /* bcache_attach marks it bad when a scan or the next plan attaches it */
    }
    return 1;
}

/* Reads partition p of input block i (rows view), bypassing the cache: a run reads
 * each partition once, and a day of a fleet would evict what queries use. An
 * unreadable block is marked bad (a later plan skips it): 0 with *seg NULL. */
static int read_input(store_t *s, run_t *r, size_t i, size_t p, segment_t **seg, hr_err_t *err) {
    hr_err_t e = {0};
    if ((*seg = store_read_part(s, &r->metas[i], r->ix[i], p, BLOCK_VIEW_ROWS, NULL, &e))) return 0;
    if (e.code != HR_EUNPROC && e.code != HR_ENOTFOUND) return *err = e, -1;
    log_error("block.unreadable", "path=%s partition=%zu err=\"%s\"", r->metas[i].path, p, e.msg);
    pthread_rwlock_rdlock(&s->data);
    pthread_mutex_lock(&s->cache_mu);
    for (size_t k = 0; k < s->nblocks; k++)
        if (s->blocks[k].meta.id == r->ids[i]) s->blocks[k].bad = 1;
    pthread_mutex_unlock(&s->cache_mu);
    pthread_rwlock_unlock(&s->data);
    return 0;
}

/* The distinct partition keys of the run's blocks, sorted (borrowed from the footers). */
static const char **run_keys(const run_t *r, size_t *n) {
    size_t total = 0;
    for (size_t i = 0; i < r->n; i++) total += r->ix[i]->nparts;
    const char **v = malloc((total ? total : 1) * sizeof *v);
    if (!v) return NULL;
    *n = 0;
    for (size_t i = 0; i < r->n; i++)
        for (size_t p = 0; p < r->ix[i]->nparts; p++) v[(*n)++] = r->ix[i]->parts[p].key;
    qsort(v, *n, sizeof *v, cmp_str);
    size_t k = 0;
    for (size_t i = 0; i < *n; i++)
        if (!k || strcmp(v[k - 1], v[i])) v[k++] = v[i];
    *n = k;
    return v;
}

/* 1 when partition p of input block i is one of key's (NULL: every partition). A
 * summary is never an input: it repeats rows the other partitions hold. */
static int wanted(const run_t *r, size_t i, size_t p, const char *key) {
    const block_part_t *bp = &r->ix[i]->parts[p];
    return !bp->summary && (!key || !strcmp(bp->key, key));
}

/* Merges the run's partitions of key (NULL: all) into one segment (*out), reading one
 * input partition at a time and freeing it once copied: a tier run over a month of
 * hourly blocks holds the merged rows and one hour, not 720 hours' symbol tables.
 * 1, 0 (an input is unreadable), -1 with err. */
static int merge_inputs(store_t *s, run_t *r, const char *key, segment_t **out, hr_err_t *err) {
    *out = segment_new();
    if (!*out) return hr_fail(err, HR_ENOMEM, "out of memory");
    int rc = 1;
    for (size_t i = 0; i < r->n && rc == 1; i++)
        for (size_t p = 0; p < r->ix[i]->nparts && rc == 1; p++) {
            segment_t *in = NULL;
            if (!wanted(r, i, p, key)) continue;
            if (read_input(s, r, i, p, &in, err)) rc = -1;
            else if (!in) rc = 0;
            else if (segment_append(*out, in, err)) rc = -1;
            segment_free(in);
        }
    if (rc != 1) {
        segment_free(*out);
        *out = NULL;
    }
    return rc;
}

/* Adds rows order[0..n) of m for which in(m row, a, b) holds, as a partition of key
 * (summary: its pre-merged rows alone). 0 or -1. */
static int add_rows(block_writer_t *w, const char *key, const segment_t *m, const uint32_t *order, size_t n, int64_t a,
                    int64_t b, int summary, hr_err_t *err) {
    uint32_t *rows = malloc((n ? n : 1) * sizeof *rows);
    if (!rows) return hr_fail(err, HR_ENOMEM, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (m->profiles[order[i]].time_ns >= a && m->profiles[order[i]].time_ns < b) rows[k++] = order[i];
    segment_t *p = k ? segment_select(m, rows, k, err) : NULL;
    int rc = k && !p ? -1 : 0;
    if (p && (summary ? block_writer_add_summary(w, key, p, err) : block_writer_add(w, key, p, err))) rc = -1;
    segment_free(p);
    free(rows);
    return rc;
}

/* 1 when rows of m with times in [a, b) fall on two UTC days or more: a summary of
 * them stands for more than one day partition. */
static int spans_days(const segment_t *m, int64_t a, int64_t b) {
    int64_t first = INT64_MIN;
    for (size_t i = 0; i < m->nprofiles; i++) {
        int64_t t = m->profiles[i].time_ns;
        if (t < a || t >= b) continue;
        int64_t d = window_of(t, DAY_NS, 0);
        if (first == INT64_MIN) first = d;
        else if (d != first) return 1;
    }
    return 0;
}

/* A tier run's key (m: its rows merged): one partition per UTC day, then for every
 * tier up to the run's, a summary of each of its windows that holds two days or more,
 * so a merge over any whole window reads one summary and a short range one day. */
static int write_tiered(store_t *s, const run_t *r, const char *key, const segment_t *m, block_writer_t *w,
                        hr_err_t *err) {
    uint32_t *order = NULL;
    if (segment_sorted_order(m, &order)) return hr_fail(err, HR_ENOMEM, "out of memory");
    int rc = 0;
    int64_t d0 = window_of(m->min_time, DAY_NS, 0), d1 = window_of(m->max_time, DAY_NS, 0);
    for (int64_t d = d0; d <= d1 && rc == 0; d++)
        rc = add_rows(w, key, m, order, m->nprofiles, d * DAY_NS, (d + 1) * DAY_NS, 0, err);
    for (size_t t = 0; t < s->cfg.ntiers && rc == 0; t++) {
        int64_t span = s->cfg.tiers_ns[t];
        if (span > r->span || !tier_applies(s, span)) continue;
        int64_t w0 = window_of(m->min_time, span, TIER_ORIGIN_NS), w1 = window_of(m->max_time, span, TIER_ORIGIN_NS);
        for (int64_t x = w0; x <= w1 && rc == 0; x++) {
            int64_t a = TIER_ORIGIN_NS + x * span, b = a + span;
            if (spans_days(m, a, b)) rc = add_rows(w, key, m, order, m->nprofiles, a, b, 1, err);
        }
    }
    free(order);
    return rc;
}

/* Merges one key's partitions across the run's blocks and adds the result to w (a
 * tier run: by day, with its summaries): only that key's rows and symbols are in
 * memory. */
static int merge_key(store_t *s, run_t *r, const char *key, block_writer_t *w, hr_err_t *err) {
    segment_t *m;
    int rc = merge_inputs(s, r, key, &m, err);
    if (rc == 1 && (r->span == DAY_NS ? block_writer_add(w, key, m, err) : write_tiered(s, r, key, m, w, err))) rc = -1;
    segment_free(m);
    return rc;
}

/* Starts the run's next output block. 1 or -1. */
static int open_output(store_t *s, run_t *r, block_writer_t **w, hr_err_t *err) {
    char full[4096];
    if (VEC_RESERVE(r->out, r->out_cap, r->nout + 1)) return hr_fail(err, HR_ENOMEM, "out of memory");
    if (store_new_block(s, r->tenant, &r->out[r->nout], full, sizeof full, err)) return -1;
    return (*w = block_writer_new(full, s->cfg.zstd_level, 0, err)) ? 1 : -1;
}

/* Commits the output block being written, records it and publishes it (cluster.c).
 * 1 or -1. */
static int close_output(store_t *s, run_t *r, block_writer_t **w, hr_err_t *err) {
    block_summary_t sum;
    int rc = block_writer_commit(*w, &sum, NULL, err);
    block_writer_free(*w);
    *w = NULL;
    if (rc) return -1;
    block_meta_t *m = &r->out[r->nout++];
    m->min_time = sum.min_time, m->max_time = sum.max_time;
    m->profiles = (int64_t)sum.profiles, m->samples = (int64_t)sum.samples;
    m->bytes = (int64_t)sum.bytes;
    return store_publish_block(s, m, err) ? -1 : 1;
}

/* Writes the run merged, one key (service) at a time, starting a new block once one
 * reaches --compact-max-bytes: a day of a fleet becomes a few blocks, each holding
 * whole days of some services, so a query for one service reads one partition, and
 * one symbol table, per day. 1, 0, -1 as merge_key. */
static int compact_streamed(store_t *s, run_t *r, hr_err_t *err) {
    size_t nkeys = 0;
    const char **keys = run_keys(r, &nkeys);
    int rc = keys ? 1 : hr_fail(err, HR_ENOMEM, "out of memory");
    block_writer_t *w = NULL;
    for (size_t k = 0; k < nkeys && rc == 1; k++) {
        if (!w) rc = open_output(s, r, &w, err);
        if (rc == 1) rc = merge_key(s, r, keys[k], w, err);
        if (rc == 1 && (k + 1 == nkeys || block_writer_bytes(w) >= s->cfg.compact_max_bytes))
            rc = close_output(s, r, &w, err);
    }
    block_writer_free(w);
    free(keys);
    return rc;
}

/* A run with a version-1 block (one partition of everything) is merged whole, into
 * one block (its run was planned under --compact-max-bytes). */
static int compact_whole(store_t *s, run_t *r, hr_err_t *err) {
    segment_t *m;
    int rc = merge_inputs(s, r, NULL, &m, err);
    if (rc == 1 && VEC_RESERVE(r->out, r->out_cap, 1)) rc = hr_fail(err, HR_ENOMEM, "out of memory");
    if (rc == 1 && store_write_block(s, r->tenant, m, &r->out[0], err)) rc = -1;
    if (rc == 1) r->nout = 1;
    segment_free(m);
    return rc;
}

/* Merges the run and writes the result into r->out. 1, 0 (an input turned out
 * unreadable), -1 with err; on 0 or -1 the caller discards what was written. */
static int compact_run(store_t *s, run_t *r, hr_err_t *err) {
    return r->legacy ? compact_whole(s, r, err) : compact_streamed(s, r, err);
}

/* Removes the run's output blocks (a run that failed, or lost the catalog swap). */
static void discard_outputs(store_t *s, run_t *r) {
    for (size_t i = 0; i < r->nout; i++) store_discard_block(s, &r->out[i]);
    r->nout = 0;
}

/* Replaces the run's blocks by the merged ones in memory (the array has room for
 * them; a cluster's sync may have done either half already). data and cache_mu held.
 * The replaced blocks' entries go to gone, for store_retire_block. */
static int swap_in_locked(store_t *s, run_t *r, const block_t *merged, block_meta_t *gone) {
    size_t k = 0, np = 0;
    for (size_t i = 0; i < s->nblocks; i++) {
        block_t *b = &s->blocks[i];
        int replaced = 0;
        for (size_t j = 0; j < r->n && !replaced; j++) replaced = b->meta.id == r->ids[j];
        if (!replaced) {
            s->blocks[k++] = *b;
            continue;
        }
        gone[np++] = b->meta;
        bcache_drop_locked(s, b);
    }
    s->nblocks = k;
    for (size_t i = 0; i < r->nout; i++) {
        block_t m = merged[i];
        if (store_has_block(s, m.meta.id)) bcache_drop_locked(s, &m); /* synced in already */
        else s->blocks[s->nblocks++] = m;
    }
    return (int)np;
}

static void run_free(run_t *r) {
    free(r->idx);
    free(r->ids);
    free(r->metas);
    for (size_t i = 0; r->ix && i < r->n; i++) block_index_free(r->ix[i]);
    free(r->ix);
    free(r->out);
}

/* Makes room in s->blocks for the run's outputs (before the catalog swap, after
 * which nothing may fail). 1 or -1. */
static int reserve_outputs(store_t *s, const run_t *r, hr_err_t *err) {
    pthread_rwlock_wrlock(&s->data); /* the array may move */
    int rc = VEC_RESERVE(s->blocks, s->blocks_cap, s->nblocks + r->nout);
    pthread_rwlock_unlock(&s->data);
    return rc ? hr_fail(err, HR_ENOMEM, "out of memory") : 1;
}

/* A cluster's compactors claim a run's tenant and window (day, or tier) in the catalog before merging
 * it, so two never merge the same blocks; the catalog swap checks the inputs are all
 * still there in any case (index_replace_blocks). 1 claimed (or one node), 0 held by
 * another compactor, -1. */
static int claim_run(store_t *s, const run_t *r, char *job, size_t cap, hr_err_t *err) {
    if (!index_shared(s->index)) return 1;
    if (r->span == DAY_NS) snprintf(job, cap, "compact/%s/%lld", r->tenant, (long long)r->window);
    else snprintf(job, cap, "compact/%s/%lldd/%lld", r->tenant, (long long)(r->span / DAY_NS), (long long)r->window);
    /* The lease outlasts a run (minutes at most); a compactor that died frees it then. */
    return index_claim(s->index, job, s->cfg.node ? s->cfg.node : "", 15 * 60 * 1000, err);
}

/* Reads the footers no scan has attached yet: planning needs each block's version,
 * and a compaction-only node never scans. A failure leaves the block for later. */
static void attach_footers(store_t *s) {
    pthread_rwlock_rdlock(&s->data);
    for (size_t i = 0; i < s->nblocks; i++) {
        pthread_mutex_lock(&s->cache_mu);
        if (!s->blocks[i].ix && !s->blocks[i].bad) bcache_attach(s, &s->blocks[i], NULL);
        pthread_mutex_unlock(&s->cache_mu);
    }
    pthread_rwlock_unlock(&s->data);
}

static void run_free(run_t *r);

/* Plans the first due run and, in a cluster, claims it; a run another compactor holds
 * is passed over for the next one (up to SKIP_MAX of them). 1 with r planned (and
 * job its claim's name, "" on one node), 0 when nothing is due for this node, -1. */
static int plan_claimed(store_t *s, run_t *r, char *job, size_t cap, hr_err_t *err) {
    skip_t sk = {.n = 0};
    for (;;) {
        pthread_rwlock_rdlock(&s->data);
        pthread_mutex_lock(&s->cache_mu);
        int rc = plan_run(s, r, &sk);
        pthread_mutex_unlock(&s->cache_mu);
        if (rc < 0) hr_fail(err, HR_ENOMEM, "out of memory planning compaction");
        if (rc == 1) rc = prepare_run(s, r, err);
        pthread_rwlock_unlock(&s->data);
        if (rc != 1) return rc;
        if ((rc = claim_run(s, r, job, cap, err)) != 0) return rc;
        if (sk.n == SKIP_MAX) return 0;
        snprintf(sk.v[sk.n].tenant, sizeof sk.v[sk.n].tenant, "%s", r->tenant);
        sk.v[sk.n].span = r->span;
        sk.v[sk.n++].window = r->window;
        run_free(r);
        memset(r, 0, sizeof *r);
        job[0] = 0;
    }
}

int store_compact(store_t *s, hr_err_t *err) {
    if (!s->cfg.compact_min_blocks || s->cfg.compact_min_blocks < 2 || !s->cfg.compact_max_bytes) return 0;
    if (store_sync(s, err)) return -1;
    attach_footers(s);
    int64_t t0 = store_now_ns();
    run_t r = {0};
    char job[256] = "";
    pthread_mutex_lock(&s->compact);
    int rc = plan_claimed(s, &r, job, sizeof job, err), claimed = rc == 1, lost = 0;
    if (rc == 1) rc = read_footers(s, &r, err);
    /* Allocated before the catalog swaps the run out: after that nothing may fail. */
    block_meta_t *gone = rc == 1 ? calloc(r.n, sizeof *gone) : NULL;
    if (rc == 1 && !gone) rc = hr_fail(err, HR_ENOMEM, "out of memory");
    if (rc == 1) rc = compact_run(s, &r, err);
    block_t *merged = rc == 1 ? calloc(r.nout + 1, sizeof *merged) : NULL;
    if (rc == 1 && !merged) rc = hr_fail(err, HR_ENOMEM, "out of memory");
    if (rc == 1) rc = reserve_outputs(s, &r, err);
    if (rc == 1 && index_replace_blocks(s->index, r.out, r.nout, r.ids, r.n, err)) {
        /* another node's compaction or retention took an input first: nothing changed */
        rc = err->code == HR_ENOTFOUND && index_shared(s->index) ? 0 : -1;
        if (rc == 0) log_info("compaction.overtaken", "tenant=%s err=\"%s\"", r.tenant, err->msg);
        lost = rc == 0;
    }
    if (rc != 1) discard_outputs(s, &r);
    int64_t bytes = 0, profiles = 0;
    for (size_t i = 0; i < r.nout; i++) { /* footers outside the locks; a scan retries a passing failure */
        merged[i].meta = r.out[i];
        bcache_attach(s, &merged[i], NULL);
        bytes += r.out[i].bytes, profiles += r.out[i].profiles;
    }
    int np = 0;
    pthread_rwlock_wrlock(&s->data);
    pthread_mutex_lock(&s->cache_mu);
    if (rc == 1) {
        np = swap_in_locked(s, &r, merged, gone);
        s->compactions++; /* under data: store_stats reads them under it */
        s->compacted_blocks += r.n;
    }
    s->compactions_lost += (uint64_t)lost;
    bcache_evict_locked(s);
    pthread_mutex_unlock(&s->cache_mu);
    pthread_rwlock_unlock(&s->data);
    for (int i = 0; i < np; i++) store_retire_block(s, &gone[i]); /* after the catalog: crash-safe */
    free(gone);
    free(merged);
    if (claimed == 1 && job[0]) {
        hr_err_t e = {0}; /* an unreleased lease only delays the next run of this day */
        if (index_release(s->index, job, s->cfg.node ? s->cfg.node : "", &e))
            log_warn("compaction.release_failed", "job=%s err=\"%s\"", job, e.msg);
    }
    if (rc == 1) {
        log_info("compaction.done",
                 "tenant=%s window=%lldd/%lld blocks_in=%zu bytes_in=%lld blocks_out=%zu bytes_out=%lld profiles=%lld "
                 "duration_ms=%.1f",
                 r.tenant, (long long)(r.span / DAY_NS), (long long)r.window, r.n, (long long)r.bytes, r.nout,
                 (long long)bytes, (long long)profiles, (double)(store_now_ns() - t0) / 1e6);
    }
    pthread_mutex_unlock(&s->compact);
    run_free(&r);
    return rc;
}
