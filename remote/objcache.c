/* objcache.c - see objcache.h. */
#include "remote/objcache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/vec.h"
#include "common/fsutil.h"

/* One cached range. Entries are few (a node caches partitions, not samples), so they
 * are an array searched linearly; `used` orders them for eviction. */
typedef struct {
    uint64_t k1, k2; /* the key's hash (two seeds: 128 bits) */
    uint64_t off, n;
    uint64_t used;
} entry_t;

/* Layout on disk: one data file per object (named by the key's hash), holding each
 * cached range at the range's own offset (a sparse file: the gaps take no space), and
 * one journal for the whole cache listing the ranges added and removed, replayed at
 * open. A file per range would cost an inode per partition: creating thousands of
 * them right after thousands were deleted (a refilled cache) spends most of a cold
 * query's CPU in ext4's inode allocator, which passes over recently freed inodes. */
#define JOURNAL "journal"
#define REMOVED (1ULL << 63) /* in a record's n: the range was dropped */

/* A journal record: key hash, offset, length (| REMOVED), and a check over those, so
 * a record torn by a crash (or any garbage) is told from a real one. */
typedef struct {
    uint64_t k1, k2, off, n, check;
} record_t;

struct objcache {
    objstore_t *os;
    char dir[2048];
    uint64_t budget;
    pthread_mutex_t mu;
    pthread_cond_t landed; /* a fetch in flight ended */
    entry_t *v;
    size_t nv, cap;
    entry_t *fl; /* ranges being fetched: another reader of one waits for it */
    size_t nfl, flcap;
    uint64_t failed_fetches; /* HR_EIO fetches: a waiter that saw one fails too, not retries */
    uint64_t clock, bytes;
    uint64_t hits, misses, fetched;
    int journal;      /* O_APPEND descriptor, -1: not kept (ranges then live for this run only) */
    uint64_t records; /* in the journal: it is written afresh when they far outnumber the ranges */
};

static void key_hash(const char *key, uint64_t *k1, uint64_t *k2) {
    *k1 = hash_bytes(key, strlen(key), 0x48525448);
    *k2 = hash_bytes(key, strlen(key), 0x9e3779b97f4a7c15ULL);
}

static void data_path(const objcache_t *c, uint64_t k1, uint64_t k2, char *out, size_t cap) {
    snprintf(out, cap, "%s/%016" PRIx64 "%016" PRIx64, c->dir, k1, k2);
}

static uint64_t record_check(const record_t *r) { return hash_bytes(r, 4 * sizeof(uint64_t), 0x6a6f75726e616cULL); }

/* Appends a record of e (removed or added) to the journal; mu held. A failed write
 * only means the range is not known to the next run. */
static void journal_put(objcache_t *c, const entry_t *e, int removed) {
    if (c->journal < 0) return;
    record_t r = {e->k1, e->k2, e->off, e->n | (removed ? REMOVED : 0), 0};
    r.check = record_check(&r);
    c->records++;
    if (write(c->journal, &r, sizeof r) != (ssize_t)sizeof r) {
        log_warn("objcache.journal_failed", "dir=%s err=\"%s\" (cached ranges are kept for this run only)", c->dir,
                 strerror(errno));
        close(c->journal);
        c->journal = -1;
    }
}

static int same_key(const entry_t *a, const entry_t *b) { return a->k1 == b->k1 && a->k2 == b->k2; }

static int cmp_off(const void *a, const void *b) {
    const entry_t *x = a, *y = b;
    return (x->off > y->off) - (x->off < y->off);
}

static int same_range(const entry_t *a, const entry_t *b) { return same_key(a, b) && a->off == b->off && a->n == b->n; }

/* Orders entries by object, then range, then `used`. */
static int cmp_entry(const void *a, const void *b) {
    const entry_t *x = a, *y = b;
    if (x->k1 != y->k1) return x->k1 < y->k1 ? -1 : 1;
    if (x->k2 != y->k2) return x->k2 < y->k2 ? -1 : 1;
    if (x->off != y->off) return x->off < y->off ? -1 : 1;
    if (x->n != y->n) return x->n < y->n ? -1 : 1;
    return (x->used > y->used) - (x->used < y->used);
}

/* Frees the bytes of range e that no other range of its object (cached, or being
 * fetched: its bytes may be landing) covers, punching holes in the data file; removes
 * the file when no range of the object is left. mu held. */
static void release(objcache_t *c, const entry_t *e) {
    entry_t *keep = malloc((c->nv + c->nfl + 1) * sizeof *keep);
    size_t nk = 0;
    for (size_t i = 0; keep && i < c->nv; i++)
        if (same_key(&c->v[i], e)) keep[nk++] = c->v[i];
    for (size_t i = 0; keep && i < c->nfl; i++)
        if (same_key(&c->fl[i], e)) keep[nk++] = c->fl[i];
    char path[2200];
    data_path(c, e->k1, e->k2, path, sizeof path);
    if (keep && nk == 0) {
        unlink(path);
    } else if (keep) {
        qsort(keep, nk, sizeof *keep, cmp_off);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        uint64_t at = e->off, end = e->off + e->n; /* the part of e not yet known covered */
        for (size_t i = 0; fd >= 0 && i <= nk && at < end; i++) {
            uint64_t lo = i < nk ? keep[i].off : end, hi = i < nk ? keep[i].off + keep[i].n : end;
            if (lo > at)
                (void)fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)at,
                                (off_t)((lo < end ? lo : end) - at));
            if (hi > at) at = hi;
        }
        if (fd >= 0) close(fd);
    } /* out of memory: the bytes stay until the object's last range goes */
    free(keep);
}

/* Removes entry i (its bytes, and its line in the journal); mu held. */
static void drop(objcache_t *c, size_t i) {
    entry_t e = c->v[i];
    c->bytes -= e.n;
    c->v[i] = c->v[--c->nv];
    release(c, &e);
    journal_put(c, &e, 1);
}

static void evict_locked(objcache_t *c) {
    while (c->bytes > c->budget && c->nv) {
        size_t old = 0;
        for (size_t i = 1; i < c->nv; i++)
            if (c->v[i].used < c->v[old].used) old = i;
        drop(c, old);
    }
}

/* The ranges the journal an earlier run left holds at its end, sorted by object; NULL
 * and 0 when there is none. Each range's last record says whether it is there: the
 * records are sorted by range and position (`used` holds position << 1 | removed while
 * they are), and each run of one range's records keeps its last, if an addition. */
static entry_t *replay(objcache_t *c, size_t *n) {
    char path[2200];
    snprintf(path, sizeof path, "%s/" JOURNAL, c->dir);
    uint8_t *data = NULL;
    size_t len = 0, m = 0, nrec;
    *n = 0;
    if (fs_read_file(path, SIZE_MAX / 2, &data, &len, NULL)) return NULL;
    nrec = len / sizeof(record_t);
    entry_t *v = malloc((nrec + 1) * sizeof *v);
    for (; v && m < nrec; m++) {
        record_t r;
        memcpy(&r, data + m * sizeof r, sizeof r);
        if (r.check != record_check(&r)) break; /* torn at a crash: what follows is not trusted */
        v[m] = (entry_t){r.k1, r.k2, r.off, r.n & ~REMOVED, (uint64_t)m << 1 | (r.n & REMOVED ? 1 : 0)};
    }
    free(data);
    if (!v) return NULL;
    qsort(v, m, sizeof *v, cmp_entry);
    for (size_t i = 0; i < m; i++) {
        int last = i + 1 == m || !same_range(&v[i], &v[i + 1]);
        if (last && !(v[i].used & 1)) v[(*n)++] = (entry_t){v[i].k1, v[i].k2, v[i].off, v[i].n, 0};
    }
    return v;
}

/* 1 when name is an object's data file that some entry of v[0..n) (sorted by object)
 * names. */
static int named(const char *name, const entry_t *v, size_t n) {
    entry_t k = {0};
    if (strlen(name) != 32 || sscanf(name, "%16" SCNx64 "%16" SCNx64, &k.k1, &k.k2) != 2) return 0;
    size_t lo = 0, hi = n;
    while (lo < hi) { /* the first entry not before k's object */
        size_t mid = (lo + hi) / 2;
        if (v[mid].k1 < k.k1 || (v[mid].k1 == k.k1 && v[mid].k2 < k.k2)) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && same_key(&v[lo], &k);
}

/* Writes a fresh journal holding exactly the entries, and opens it for appending. */
static void journal_restart(objcache_t *c) {
    char path[2200], tmp[2300];
    snprintf(path, sizeof path, "%s/" JOURNAL, c->dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (c->journal >= 0) close(c->journal);
    c->journal = fd;
    c->records = 0;
    for (size_t i = 0; i < c->nv; i++) journal_put(c, &c->v[i], 0);
    if (c->journal >= 0) close(c->journal);
    c->journal = -1;
    if (fd < 0 || rename(tmp, path) != 0) {
        unlink(tmp);
        log_warn("objcache.journal_failed", "dir=%s err=\"%s\" (cached ranges are kept for this run only)", c->dir,
                 strerror(errno));
        return;
    }
    c->journal = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
}

/* Takes in the ranges an earlier run left (the least recently written objects first in
 * line for eviction); every other file (an older layout's, a crash's leftovers) is
 * removed. */
static void load_existing(objcache_t *c) {
    size_t n, kept = 0;
    entry_t *v = replay(c, &n);
    struct stat st;
    int have = 0; /* st is v[i]'s object's data file (entries are sorted by object) */
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || !same_key(&v[i], &v[i - 1])) {
            char path[2200];
            data_path(c, v[i].k1, v[i].k2, path, sizeof path);
            have = stat(path, &st) == 0;
        }
        if (!have || (uint64_t)st.st_size < v[i].off + v[i].n) continue; /* its file is gone or short */
        v[kept] = v[i];
        v[kept].used = (uint64_t)st.st_mtime; /* older runs' ranges first; reads this run count past them */
        if (v[kept].used > c->clock) c->clock = v[kept].used;
        c->bytes += v[kept++].n;
    }
    n = kept;
    c->v = v, c->nv = c->cap = n;
    DIR *d = opendir(c->dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.' || !strcmp(de->d_name, JOURNAL) || named(de->d_name, v, n)) continue;
        char path[2400];
        snprintf(path, sizeof path, "%s/%s", c->dir, de->d_name);
        unlink(path);
    }
    if (d) closedir(d);
    c->clock++;
    journal_restart(c);
    evict_locked(c);
}

objcache_t *objcache_open(objstore_t *os, const char *dir, uint64_t budget, hr_err_t *err) {
    objcache_t *c = calloc(1, sizeof *c);
    if (!c) return hr_fail(err, HR_ENOMEM, "out of memory"), NULL;
    c->os = os;
    c->budget = budget;
    c->journal = -1;
    snprintf(c->dir, sizeof c->dir, "%s", dir);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->landed, NULL);
    if (fs_mkdirs(dir, err)) {
        objcache_free(c);
        return NULL;
    }
    load_existing(c);
    return c;
}

void objcache_free(objcache_t *c) {
    if (!c) return;
    if (c->journal >= 0) close(c->journal);
    free(c->v);
    free(c->fl);
    pthread_cond_destroy(&c->landed);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static ssize_t find_in(const entry_t *v, size_t n, const entry_t *k) {
    for (size_t i = 0; i < n; i++)
        if (v[i].k1 == k->k1 && v[i].k2 == k->k2 && v[i].off == k->off && v[i].n == k->n) return (ssize_t)i;
    return -1;
}

static ssize_t find(const objcache_t *c, const entry_t *k) { return find_in(c->v, c->nv, k); }

/* Reads a cached range from its object's data file: 0, or -1 when it is gone or short
 * (wiped meanwhile). */
static int read_range(const char *path, uint64_t off, uint64_t n, uint8_t *out) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    uint64_t got = 0;
    while (got < n) {
        ssize_t k = pread(fd, out + got, (size_t)(n - got), (off_t)(off + got));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (uint64_t)k;
    }
    close(fd);
    return got == n ? 0 : -1;
}

/* Writes a fetched range into its object's data file (at its own offset), then makes it
 * known. A reader finds it only once it is known, so never half of one; a failure (a
 * full disk) only costs the cache a copy. The caller's claim on e keeps eviction from
 * punching those bytes meanwhile. mu not held. */
static void store_range(objcache_t *c, entry_t *e, const uint8_t *p) {
    char path[2200];
    data_path(c, e->k1, e->k2, path, sizeof path);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 && errno == ENOENT && fs_mkdirs(c->dir, NULL) == 0) /* the folder was wiped */
        fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    int ok = fd >= 0 && fs_pwrite_all(fd, p, (size_t)e->n, e->off) == 0;
    if (!ok) log_warn("objcache.write_failed", "file=%s err=\"%s\"", path, strerror(errno));
    if (fd >= 0) close(fd);
    if (!ok) return;
    pthread_mutex_lock(&c->mu);
    if (find(c, e) < 0 && VEC_RESERVE(c->v, c->cap, c->nv + 1) == 0) {
        e->used = c->clock++;
        c->v[c->nv++] = *e;
        c->bytes += e->n;
        journal_put(c, e, 0);
    }
    evict_locked(c);
    if (c->records > 4 * c->nv + 4096) journal_restart(c); /* mostly removals by now */
    pthread_mutex_unlock(&c->mu);
}

/* What a reader of range e finds, mu held on entry and on return. */
enum { FOUND_CACHED, FOUND_NOTHING, FOUND_CLAIMED, FOUND_FAILED };

/* Waits out a fetch of e in flight, then claims e for fetching unless it is cached
 * (FOUND_CACHED, its entry touched). FOUND_FAILED when a fetch failed with HR_EIO
 * while it waited (the store is failing: the caller reports it rather than trying
 * again, so readers of one range do not queue up behind each other's timeouts). FOUND_NOTHING when
 * out of memory for the claim: the caller fetches unclaimed. */
static int find_or_claim(objcache_t *c, const entry_t *e) {
    uint64_t failed = c->failed_fetches;
    for (;;) {
        ssize_t i = find(c, e);
        if (i >= 0) {
            c->v[i].used = c->clock++;
            return FOUND_CACHED;
        }
        if (c->failed_fetches != failed) return FOUND_FAILED;
        if (find_in(c->fl, c->nfl, e) < 0) break;
        pthread_cond_wait(&c->landed, &c->mu);
    }
    if (VEC_RESERVE(c->fl, c->flcap, c->nfl + 1)) return FOUND_NOTHING;
    c->fl[c->nfl++] = *e;
    return FOUND_CLAIMED;
}

/* Ends a claim: readers waiting for e look again. mu held. */
static void unclaim(objcache_t *c, const entry_t *e) {
    ssize_t i = find_in(c->fl, c->nfl, e);
    if (i < 0) return;
    c->fl[i] = c->fl[--c->nfl];
    pthread_cond_broadcast(&c->landed);
}

/* Fetches range e of key from the store and keeps it (out: a copy, if not NULL).
 * mu not held; a claim on e, if any, is ended. */
static int fetch(objcache_t *c, entry_t *e, const char *key, uint8_t *out, hr_err_t *err) {
    buf_t b;
    buf_init(&b);
    objstore_range_t r = {e->off, e->n};
    int rc = objstore_get_ranges(c->os, key, &r, 1, &b, err);
    if (rc == 0) { /* get_ranges appended exactly n bytes */
        if (out) memcpy(out, b.data, (size_t)e->n);
        pthread_mutex_lock(&c->mu);
        c->misses++;
        c->fetched += e->n;
        pthread_mutex_unlock(&c->mu);
        if (e->n <= c->budget) store_range(c, e, b.data);
    }
    buf_free(&b);
    pthread_mutex_lock(&c->mu);
    if (rc && err->code == HR_EIO) c->failed_fetches++; /* the store failing, not a gone key */
    unclaim(c, e);
    /* Not kept (failed, over the budget, or evicted at once): the claim kept evictions of
     * the object's other ranges from freeing what it covered, so free that now. */
    if (find(c, e) < 0) release(c, e);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int objcache_read(objcache_t *c, const char *key, uint64_t off, uint64_t n, uint8_t *out, hr_err_t *err) {
    entry_t e = {.off = off, .n = n};
    key_hash(key, &e.k1, &e.k2);
    char path[2200];
    data_path(c, e.k1, e.k2, path, sizeof path);
    pthread_mutex_lock(&c->mu);
    int found = find_or_claim(c, &e);
    pthread_mutex_unlock(&c->mu);
    if (found == FOUND_FAILED)
        return hr_fail(err, HR_EIO, "the object store failed a fetch of block object %s meanwhile", key);
    if (found == FOUND_CACHED) {
        if (read_range(path, off, n, out) == 0) {
            pthread_mutex_lock(&c->mu);
            c->hits++;
            pthread_mutex_unlock(&c->mu);
            return 0;
        }
        pthread_mutex_lock(&c->mu); /* wiped or damaged underneath us: forget it, fetch it */
        ssize_t i = find(c, &e);
        if (i >= 0) drop(c, (size_t)i);
        pthread_mutex_unlock(&c->mu);
    }
    return fetch(c, &e, key, out, err);
}

int objcache_fetch(objcache_t *c, const char *key, uint64_t off, uint64_t n, hr_err_t *err) {
    entry_t e = {.off = off, .n = n};
    key_hash(key, &e.k1, &e.k2);
    pthread_mutex_lock(&c->mu);
    int known = find(c, &e) >= 0 || find_in(c->fl, c->nfl, &e) >= 0;
    int found = known ? FOUND_CACHED : find_or_claim(c, &e);
    pthread_mutex_unlock(&c->mu);
    if (found == FOUND_FAILED) return hr_fail(err, HR_EIO, "the object store failed a fetch meanwhile");
    return found == FOUND_CACHED ? 0 : fetch(c, &e, key, NULL, err);
}

int objcache_has(objcache_t *c, const char *key, uint64_t off, uint64_t n) {
    entry_t e = {.off = off, .n = n};
    key_hash(key, &e.k1, &e.k2);
    pthread_mutex_lock(&c->mu);
    int found = find(c, &e) >= 0;
    pthread_mutex_unlock(&c->mu);
    return found;
}

void objcache_forget(objcache_t *c, const char *key) {
    entry_t e = {0};
    key_hash(key, &e.k1, &e.k2);
    pthread_mutex_lock(&c->mu);
    for (size_t i = c->nv; i-- > 0;)
        if (same_key(&c->v[i], &e)) {
            journal_put(c, &c->v[i], 1);
            c->bytes -= c->v[i].n;
            c->v[i] = c->v[--c->nv];
        }
    release(c, &(entry_t){e.k1, e.k2, 0, UINT64_MAX / 2, 0}); /* all of it, but what fetches in flight write */
    pthread_mutex_unlock(&c->mu);
}

void objcache_stats(objcache_t *c, objcache_stats_t *out) {
    pthread_mutex_lock(&c->mu);
    *out = (objcache_stats_t){c->hits, c->misses, c->fetched, c->bytes, c->nv};
    pthread_mutex_unlock(&c->mu);
}
