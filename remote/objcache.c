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
    unsigned seq; /* temporary file names */
};

static void key_hash(const char *key, uint64_t *k1, uint64_t *k2) {
    *k1 = hash_bytes(key, strlen(key), 0x48525448);
    *k2 = hash_bytes(key, strlen(key), 0x9e3779b97f4a7c15ULL);
}

static void entry_path(const objcache_t *c, const entry_t *e, char *out, size_t cap) {
    snprintf(out, cap, "%s/%016" PRIx64 "%016" PRIx64 ".%" PRIx64 ".%" PRIx64, c->dir, e->k1, e->k2, e->off, e->n);
}

/* Removes entry i (its file too); mu held. */
static void drop(objcache_t *c, size_t i) {
    char path[2200];
    entry_path(c, &c->v[i], path, sizeof path);
    unlink(path);
    c->bytes -= c->v[i].n;
    c->v[i] = c->v[--c->nv];
}

static void evict_locked(objcache_t *c) {
    while (c->bytes > c->budget && c->nv) {
        size_t old = 0;
        for (size_t i = 1; i < c->nv; i++)
            if (c->v[i].used < c->v[old].used) old = i;
        drop(c, old);
    }
}

/* Takes in the ranges an earlier run left (oldest file first in line); other files
 * (temporaries of a crash) are removed. */
static void load_existing(objcache_t *c) {
    DIR *d = opendir(c->dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char path[2400];
        snprintf(path, sizeof path, "%s/%s", c->dir, de->d_name);
        entry_t e = {0};
        struct stat st;
        int ok = strlen(de->d_name) > 32 &&
                 sscanf(de->d_name, "%16" SCNx64 "%16" SCNx64 ".%" SCNx64 ".%" SCNx64, &e.k1, &e.k2, &e.off, &e.n) == 4;
        if (!ok || stat(path, &st) != 0 || (uint64_t)st.st_size != e.n || VEC_RESERVE(c->v, c->cap, c->nv + 1)) {
            unlink(path);
            continue;
        }
        e.used = (uint64_t)st.st_mtime; /* older runs' ranges first; reads this run count past them */
        if (e.used > c->clock) c->clock = e.used;
        c->v[c->nv++] = e;
        c->bytes += e.n;
    }
    closedir(d);
    c->clock++;
    evict_locked(c);
}

objcache_t *objcache_open(objstore_t *os, const char *dir, uint64_t budget, hr_err_t *err) {
    objcache_t *c = calloc(1, sizeof *c);
    if (!c) return hr_fail(err, HR_ENOMEM, "out of memory"), NULL;
    c->os = os;
    c->budget = budget;
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

/* Reads a cached range's file: 0, or -1 when it is gone or short (wiped meanwhile). */
static int read_file(const char *path, uint64_t n, uint8_t *out) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    uint64_t got = 0;
    while (got < n) {
        ssize_t k = pread(fd, out + got, (size_t)(n - got), (off_t)got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (uint64_t)k;
    }
    close(fd);
    return got == n ? 0 : -1;
}

/* Keeps a fetched range: written to a temporary file and renamed, so a reader never
 * sees half of one. A failure (a full disk) only costs the cache a copy. mu not held. */
static void store_range(objcache_t *c, entry_t *e, const uint8_t *p) {
    char path[2200], tmp[2300];
    entry_path(c, e, path, sizeof path);
    pthread_mutex_lock(&c->mu);
    unsigned seq = c->seq++;
    pthread_mutex_unlock(&c->mu);
    snprintf(tmp, sizeof tmp, "%s/.tmp%u", c->dir, seq);
    hr_err_t err = {0};
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int ok = fd >= 0 && fs_write_all(fd, p, (size_t)e->n, tmp, &err) == 0;
    if (fd >= 0) close(fd);
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        log_warn("objcache.write_failed", "dir=%s err=\"%s\"", c->dir, err.msg[0] ? err.msg : strerror(errno));
        return;
    }
    pthread_mutex_lock(&c->mu);
    if (find(c, e) < 0 && VEC_RESERVE(c->v, c->cap, c->nv + 1) == 0) {
        e->used = c->clock++;
        c->v[c->nv++] = *e;
        c->bytes += e->n;
    }
    evict_locked(c);
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
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int objcache_read(objcache_t *c, const char *key, uint64_t off, uint64_t n, uint8_t *out, hr_err_t *err) {
    entry_t e = {.off = off, .n = n};
    key_hash(key, &e.k1, &e.k2);
    char path[2200];
    entry_path(c, &e, path, sizeof path);
    pthread_mutex_lock(&c->mu);
    int found = find_or_claim(c, &e);
    pthread_mutex_unlock(&c->mu);
    if (found == FOUND_FAILED)
        return hr_fail(err, HR_EIO, "the object store failed a fetch of block object %s meanwhile", key);
    if (found == FOUND_CACHED) {
        if (read_file(path, n, out) == 0) {
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
    uint64_t k1, k2;
    key_hash(key, &k1, &k2);
    pthread_mutex_lock(&c->mu);
    for (size_t i = c->nv; i-- > 0;)
        if (c->v[i].k1 == k1 && c->v[i].k2 == k2) drop(c, i);
    pthread_mutex_unlock(&c->mu);
}

void objcache_stats(objcache_t *c, objcache_stats_t *out) {
    pthread_mutex_lock(&c->mu);
    *out = (objcache_stats_t){c->hits, c->misses, c->fetched, c->bytes, c->nv};
    pthread_mutex_unlock(&c->mu);
}
