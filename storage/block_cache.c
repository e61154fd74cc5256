/* block_cache.c - decoded block partitions: see store_impl.h. */
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/vec.h"
#include "storage/store_impl.h"

/* 1 when a block that failed to load with code is corrupt or gone, not passing. */
static int unreadable(hr_code_t code) { return code == HR_EUNPROC || code == HR_ENOTFOUND; }

/* Gives b the footer ix read for it (NULL: the read failed with e). cache_mu held, or b
 * not yet visible to other threads (a cut's new blocks). */
static void install(store_t *s, block_t *b, block_index_t *ix, hr_err_t *e, hr_err_t *err) {
    if (ix && (b->parts = calloc(CACHE_SLOTS * ix->nparts + 1, sizeof *b->parts))) {
        b->ix = ix;
        s->footer_loads++;
        return;
    }
    if (ix) hr_fail(e, HR_ENOMEM, "out of memory");
    block_index_free(ix);
    b->bad = unreadable(e->code);
    if (err && !b->bad) *err = *e;
    log_error(b->bad ? "block.unreadable" : "block.attach_failed", "path=%s err=\"%s\"", b->meta.path,
              e->msg[0] ? e->msg : "out of memory");
}

void bcache_attach(store_t *s, block_t *b, hr_err_t *err) {
    hr_err_t e = {0};
    install(s, b, store_read_index(s, &b->meta, &e), &e, err);
}

typedef struct {
    store_t *s;
    const size_t *idx;
    block_index_t **got;
    hr_err_t *errs;
    size_t n, first, step;
} footers_t;

static void *read_footers(void *arg) {
    footers_t *f = arg;
    for (size_t k = f->first; k < f->n; k += f->step)
        f->got[k] = store_read_index(f->s, &f->s->blocks[f->idx[k]].meta, &f->errs[k]);
    return NULL;
}

void bcache_attach_many(store_t *s, const size_t *idx, size_t n) {
    block_index_t **got = calloc(n + 1, sizeof *got);
    hr_err_t *errs = calloc(n + 1, sizeof *errs);
    size_t t = n < ATTACH_MAX ? n : ATTACH_MAX, started = 1;
    footers_t f[ATTACH_MAX];
    pthread_t tid[ATTACH_MAX];
    if (!got || !errs) t = 0; /* out of memory: scan_block attaches them one by one */
    for (size_t i = 0; i < t; i++) f[i] = (footers_t){s, idx, got, errs, n, i, t};
    while (started < t && pthread_create(&tid[started], NULL, read_footers, &f[started]) == 0) started++;
    for (size_t i = 0; i < t; i++) /* the caller's share, and any whose thread did not start */
        if (i == 0 || i >= started) read_footers(&f[i]);
    for (size_t i = 1; i < started; i++) pthread_join(tid[i], NULL);
    pthread_mutex_lock(&s->cache_mu);
    for (size_t k = 0; k < (t ? n : 0); k++) {
        block_t *b = &s->blocks[idx[k]];
        if (b->ix || b->bad) block_index_free(got[k]); /* a scan attached it meanwhile */
        else if (got[k] || errs[k].code != HR_EIO) install(s, b, got[k], &errs[k], NULL);
        /* a passing failure: scan_block retries it and fails the scan */
    }
    pthread_mutex_unlock(&s->cache_mu);
    free(got);
    free(errs);
}

static void lru_unlink(store_t *s, part_cache_t *c) {
    *(c->older ? &c->older->newer : &s->lru_oldest) = c->newer;
    *(c->newer ? &c->newer->older : &s->lru_newest) = c->older;
    c->older = c->newer = NULL;
}

/* Marks c the most recently used (it is loaded). */
static void lru_touch(store_t *s, part_cache_t *c) {
    if (s->lru_newest == c) return;
    if (c->older || c->newer || s->lru_oldest == c) lru_unlink(s, c);
    c->older = s->lru_newest;
    *(s->lru_newest ? &s->lru_newest->newer : &s->lru_oldest) = c;
    s->lru_newest = c;
}

/* Frees a decoded partition and its reference to its dictionary. */
static void free_part(segment_t *seg) {
    symdict_t *d = seg ? seg->dict : NULL;
    segment_free(seg);
    symdict_unref(d);
}

static void prune_dict(store_t *s, size_t i);

/* Frees c's decoded partition and takes it off the list, and its key's dictionary
 * when no other partition (or running merge) uses it. */
static void unload(store_t *s, part_cache_t *c) {
    lru_unlink(s, c);
    s->cached_bytes -= segment_bytes(c->cached);
    free_part(c->cached);
    c->cached = NULL;
    prune_dict(s, c->dict);
}

/* ---- shared dictionaries (symdict.h), one per partition key ---- */

/* A dictionary that grew past an eighth of the cache's budget (at least this much: a
 * service's stacks over many releases while its partitions stayed cached) is replaced
 * by a fresh one for partitions decoded from then on; the old one goes with its last
 * partition. */
#define DICT_RENEW_MIN ((size_t)16 << 20)

typedef struct {
    const char *tenant, *key;
} dict_key_t;

static uint64_t dict_hash(const char *tenant, const char *key) {
    return hash_bytes(key, strlen(key), hash_bytes(tenant, strlen(tenant), 7));
}

static int dict_eq(const void *ctx, uint32_t id, const void *key) {
    const store_t *s = ctx;
    const dict_key_t *k = key;
    return !strcmp(s->dicts[id].tenant, k->tenant) && !strcmp(s->dicts[id].key, k->key);
}

/* The dictionary partitions of (tenant, key) are re-numbered into, with a reference
 * for the caller: found, or made; *entry receives its entry. cache_mu held. NULL on OOM. */
static symdict_t *dict_of(store_t *s, const char *tenant, const char *key, uint32_t *entry) {
    dict_key_t k = {tenant, key};
    uint64_t h = dict_hash(tenant, key);
    uint32_t id = idset_find(&s->dict_set, h, &k, dict_eq, s);
    if (id == UINT32_MAX) {
        if (VEC_RESERVE(s->dicts, s->dicts_cap, s->ndicts + 1)) return NULL;
        dict_entry_t *e = &s->dicts[s->ndicts];
        *e = (dict_entry_t){strdup(tenant), strdup(key), NULL};
        if (!e->tenant || !e->key || idset_add(&s->dict_set, h, (uint32_t)s->ndicts)) {
            free(e->tenant);
            free(e->key);
            return NULL;
        }
        id = (uint32_t)s->ndicts++;
    }
    *entry = id;
    dict_entry_t *e = &s->dicts[id];
    size_t renew = s->cfg.block_cache_bytes / 8 > DICT_RENEW_MIN ? s->cfg.block_cache_bytes / 8 : DICT_RENEW_MIN;
    if (e->d && symdict_bytes(e->d) > renew) symdict_unref(e->d), e->d = NULL;
    if (!e->d && !(e->d = symdict_new(&s->dict_bytes))) return NULL;
    symdict_ref(e->d);
    return e->d;
}

/* Drops entry i's dictionary when no cached partition (and no running merge) uses it
 * any more: only the entry's reference is left. cache_mu held. */
static void prune_dict(store_t *s, size_t i) {
    if (i < s->ndicts && s->dicts[i].d && symdict_refs(s->dicts[i].d) == 1)
        symdict_unref(s->dicts[i].d), s->dicts[i].d = NULL;
}

void bcache_free_dicts(store_t *s) {
    for (size_t i = 0; i < s->ndicts; i++) {
        symdict_unref(s->dicts[i].d);
        free(s->dicts[i].tenant);
        free(s->dicts[i].key);
    }
    free(s->dicts);
    idset_free(&s->dict_set);
}

/* Re-numbers a freshly decoded partition of block b into its key's dictionary, so
 * the cache holds one copy of a service's symbols (symdict.h). 0, or -1 (OOM). */
static int share_symbols(store_t *s, const block_t *b, size_t p, segment_t *seg, uint32_t *entry) {
    pthread_mutex_lock(&s->cache_mu);
    symdict_t *d = dict_of(s, b->meta.tenant, b->ix->parts[p].key, entry);
    pthread_mutex_unlock(&s->cache_mu);
    int rc = d ? symdict_adopt(d, seg) : -1;
    symdict_unref(d);
    return rc;
}

void bcache_drop_locked(store_t *s, block_t *b) {
    for (size_t p = 0; b->ix && p < CACHE_SLOTS * b->ix->nparts; p++)
        if (b->parts[p].cached) unload(s, &b->parts[p]);
    free(b->parts);
    block_index_free(b->ix);
    b->parts = NULL;
    b->ix = NULL;
}

void bcache_evict_locked(store_t *s) {
    /* Pinned partitions (a batch per running scan) are skipped, not moved: few. */
    for (part_cache_t *c = s->lru_oldest, *next; c && s->cached_bytes + s->dict_bytes > s->cfg.block_cache_bytes;
         c = next) {
        next = c->newer;
        if (c->refs == 0) unload(s, c);
    }
    /* Dictionaries a merge held while their partitions went: theirs are the bytes left. */
    for (size_t i = 0; i < s->ndicts && s->cached_bytes + s->dict_bytes > s->cfg.block_cache_bytes; i++)
        prune_dict(s, i);
}

/* Says why partition p of b did not load, and marks b bad when it is corrupt or gone.
 * cache_mu held. */
static void load_failed(block_t *b, size_t p, int view, const hr_err_t *err) {
    if (unreadable(err->code) && view == BLOCK_VIEW_FUNCS) {
        /* The function table alone is damaged: the partition's other sections may be intact,
         * so the block stays in use and the caller reads the pre-merged rows instead. */
        log_error("block.function_table_unreadable", "path=%s partition=%zu err=\"%s\"", b->meta.path, p, err->msg);
    } else if (unreadable(err->code)) {
        b->bad = 1;
        log_error("block.unreadable", "path=%s partition=%zu err=\"%s\"", b->meta.path, p, err->msg);
    } else {
        log_error("block.load_failed", "path=%s partition=%zu err=\"%s\"", b->meta.path, p, err->msg);
    }
}

/* Decodes a view of partition p of b (with win: the rows in it)
 * and re-numbers its symbols into its key's dictionary (*entry): fingerprints
 * recognise stacks across blocks, and the dictionary shares them by them. A
 * partition that stored its stacks' fingerprints is read without its symbols, which
 * are decoded only when the dictionary lacks one of its stacks. No lock held: other
 * scans go on. NULL with err. */
static segment_t *load(store_t *s, const block_t *b, size_t p, int view, const block_window_t *win, uint32_t *entry,
                       hr_err_t *err) {
    segment_t *seg = store_read_part(s, &b->meta, b->ix, p, view | BLOCK_VIEW_DEFER_SYMBOLS, win, err);
    if (!seg) return NULL;
    if (seg->sym) s->symbols_decoded++; /* a block written before stack fingerprints */
    int rc =
        seg->sym && !seg->stack_fp && symtab_fingerprint_stacks(seg->sym) ? -1 : share_symbols(s, b, p, seg, entry);
    if (rc == 1 && seg->funcs) { /* a function name new to the dictionary: spelled by the kept section */
        s->names_decoded++;
        rc = block_funcs_names(seg->funcs, err) ? -2 : share_symbols(s, b, p, seg, entry);
    }
    if (rc == 1) { /* a stack new to the dictionary: copied from the symbols, read now */
        s->symbols_decoded++;
        segment_t *syms = store_read_part(s, &b->meta, b->ix, p, BLOCK_VIEW_SYMBOLS, NULL, err);
        rc = !syms || block_part_symbols(seg, syms, err) ? -2 : share_symbols(s, b, p, seg, entry);
    }
    if (rc) {
        segment_free(seg);
        if (rc != -2) hr_fail(err, HR_ENOMEM, "out of memory");
        return NULL;
    }
    return seg;
}

/* A window rounded out to whole hours: windows of the same hours share a slot's rows. */
static block_window_t hours_of(const block_window_t *w) {
    const int64_t H = 3600000000000LL;
    int64_t from = w->from / H - (w->from % H < 0), until = w->until / H - (w->until % H < 0);
    block_window_t r = {from > INT64_MIN / H ? from * H : INT64_MIN,
                        until < INT64_MAX / H - 1 ? (until + 1) * H - 1 : INT64_MAX};
    return r;
}

/* c's segment, pinned, when it is loaded (and for the window slot, of window w). */
static segment_t *pin_loaded(store_t *s, part_cache_t *c, const block_window_t *w) {
    segment_t *seg = c->cached && (!w || (c->win.from == w->from && c->win.until == w->until)) ? c->cached : NULL;
    if (seg) c->refs++, lru_touch(s, c);
    return seg;
}

segment_t *bcache_pin_window(store_t *s, size_t i, size_t p, const block_window_t *win, int *slot, int *owned,
                             hr_err_t *err) {
    block_t *b = &s->blocks[i];
    block_window_t hw = hours_of(win);
    *owned = 0, *slot = BLOCK_VIEW_ROWS;
    pthread_mutex_lock(&s->cache_mu);
    segment_t *seg = b->bad ? NULL : pin_loaded(s, part_cache(b, p, BLOCK_VIEW_ROWS), NULL);
    if (!seg && !b->bad && (seg = pin_loaded(s, part_cache(b, p, SLOT_WINDOW), &hw))) *slot = SLOT_WINDOW;
    int bad = b->bad;
    pthread_mutex_unlock(&s->cache_mu);
    if (bad) hr_fail(err, HR_EUNPROC, "block %s is unreadable", b->meta.path);
    if (bad || seg) return seg;
    uint32_t entry = UINT32_MAX;
    seg = load(s, b, p, BLOCK_VIEW_ROWS, &hw, &entry, err);
    pthread_mutex_lock(&s->cache_mu);
    part_cache_t *c = part_cache(b, p, SLOT_WINDOW);
    if (!seg) {
        load_failed(b, p, BLOCK_VIEW_ROWS, err);
    } else if (c->refs) { /* another window in use: this scan's alone */
        *owned = 1;
    } else {
        if (c->cached) unload(s, c);
        c->cached = seg, c->win = hw, c->dict = entry;
        s->cached_bytes += segment_bytes(seg);
        c->refs++, lru_touch(s, c);
        *slot = SLOT_WINDOW;
    }
    if (seg) s->window_loads++;
    pthread_mutex_unlock(&s->cache_mu);
    return seg;
}

segment_t *bcache_pin(store_t *s, size_t i, size_t p, int view, hr_err_t *err) {
    block_t *b = &s->blocks[i];
    pthread_mutex_lock(&s->cache_mu);
    part_cache_t *c = b->bad ? NULL : part_cache(b, p, view);
    segment_t *seg = c ? c->cached : NULL;
    if (seg) c->refs++, lru_touch(s, c);
    pthread_mutex_unlock(&s->cache_mu);
    if (!c) hr_fail(err, HR_EUNPROC, "block %s is unreadable", b->meta.path);
    if (!c || seg) return seg;
    uint32_t entry = UINT32_MAX;
    seg = load(s, b, p, view, NULL, &entry, err);
    pthread_mutex_lock(&s->cache_mu);
    if (!seg) {
        load_failed(b, p, view, err);
    } else if (c->cached) { /* another scan loaded it meanwhile */
        free_part(seg);
        seg = c->cached;
    } else {
        c->cached = seg;
        c->dict = entry;
        s->cached_bytes += segment_bytes(seg);
        s->part_loads++;
        s->funcs_loads += view == BLOCK_VIEW_FUNCS;
    }
    if (seg) c->refs++, lru_touch(s, c);
    pthread_mutex_unlock(&s->cache_mu);
    return seg;
}

void bcache_unpin(store_t *s, size_t i, size_t p, int view) {
    pthread_mutex_lock(&s->cache_mu);
    part_cache(&s->blocks[i], p, view)->refs--;
    bcache_evict_locked(s);
    pthread_mutex_unlock(&s->cache_mu);
}

/* ---- scans ---- */

/* A scan decodes the partitions it wants DECODE_BATCH (of function tables
 * DECODE_BATCH_FUNCS) at a time, in parallel (a cold query over a week of hourly
 * blocks decodes 168 of them), then hands them to fn in block order and unpins them:
 * at most a batch is pinned, so the cache's budget holds however many partitions a
 * query reads. */

typedef struct {
    want_t *w;
    size_t n;
    _Atomic size_t next; /* the next partition a decoding thread takes: partitions differ in cost */
} share_t;

static void *pin_share(void *arg) {
    share_t *sh = arg;
    for (size_t k; (k = atomic_fetch_add(&sh->next, 1)) < sh->n;) {
        want_t *w = &sh->w[k];
        if (w->windowed) {
            w->seg = bcache_pin_window(w->s, w->block, w->part, &w->win, &w->view, &w->owned, &w->err);
            continue;
        }
        w->seg = bcache_pin(w->s, w->block, w->part, w->view, &w->err);
        if (!w->seg && w->view == BLOCK_VIEW_FUNCS && unreadable(w->err.code)) { /* see bcache_pin */
            w->view = BLOCK_VIEW_MERGED, w->err = (hr_err_t){0};
            w->seg = bcache_pin(w->s, w->block, w->part, w->view, &w->err);
        }
    }
    return NULL;
}

/* Pins every partition of the batch, decoding the uncached ones on up to
 * s->decode_threads threads (the caller's among them). */
static void pin_batch(store_t *s, want_t *w, size_t n) {
    size_t cold = 0;
    pthread_mutex_lock(&s->cache_mu);
    for (size_t k = 0; k < n; k++) cold += !part_cache(&s->blocks[w[k].block], w[k].part, w[k].view)->cached;
    pthread_mutex_unlock(&s->cache_mu);
    size_t t = cold < 2 ? 1 : cold < (size_t)s->decode_threads ? cold : (size_t)s->decode_threads;
    pthread_t tid[DECODE_MAX];
    share_t sh = {w, n, 0};
    size_t started = 1; /* threads 1..started-1 run beside the caller */
    while (started < t && pthread_create(&tid[started], NULL, pin_share, &sh) == 0) started++;
    pin_share(&sh);
    for (size_t i = 1; i < started; i++) pthread_join(tid[i], NULL);
}

/* Calls fn with seg, whose symbols (re-numbered into its key's dictionary) are the
 * dictionary's current version for the call. -1 when fn returns it, or with err. */
static int hand(const segment_t *seg, store_segment_fn fn, void *ctx, hr_err_t *err) {
    if (!seg->dict) return fn(ctx, seg);
    const symtab_t *sym = symdict_acquire(seg->dict, seg->dict_stacks, seg->dict_strings);
    if (!sym) return hr_fail(err, HR_ENOMEM, "out of memory");
    segment_t view = *seg;
    view.sym = (symtab_t *)sym; /* read only, as every reader of a scan's segments */
    int rc = fn(ctx, &view);
    symdict_release(seg->dict, sym);
    return rc;
}

/* Hands fn the pinned batch in order, then unpins it; returns fn's first -1. */
int bcache_run_batch(store_t *s, want_t *w, size_t n, int strict, store_segment_fn fn, void *ctx, hr_err_t *err) {
    pin_batch(s, w, n);
    int rc = 0;
    for (size_t k = 0; k < n; k++) {
        /* A passing failure: no answer without it; with strict, no answer without any. */
        if (!w[k].seg && (strict || !unreadable(w[k].err.code)) && rc == 0) {
            if (err) *err = w[k].err;
            rc = -1;
        }
        if (w[k].seg && rc == 0) rc = hand(w[k].seg, fn, ctx, err);
        if (w[k].seg && w[k].owned) free_part(w[k].seg);
        else if (w[k].seg) bcache_unpin(s, w[k].block, w[k].part, w[k].view);
    }
    return rc;
}
