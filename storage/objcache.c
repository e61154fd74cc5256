/* objcache.c - see objcache.h. */
#include "storage/objcache.h"

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
#include "storage/fsutil.h"

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
    entry_t *v;
    size_t nv, cap;
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
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static ssize_t find(const objcache_t *c, const entry_t *k) {
    for (size_t i = 0; i < c->nv; i++)
        if (c->v[i].k1 == k->k1 && c->v[i].k2 == k->k2 && c->v[i].off == k->off && c->v[i].n == k->n) return (ssize_t)i;
    return -1;
}

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

int objcache_read(objcache_t *c, const char *key, uint64_t off, uint64_t n, uint8_t *out, hr_err_t *err) {
    entry_t e = {.off = off, .n = n};
    key_hash(key, &e.k1, &e.k2);
    char path[2200];
    entry_path(c, &e, path, sizeof path);
    pthread_mutex_lock(&c->mu);
    ssize_t i = find(c, &e);
    if (i >= 0) c->v[i].used = c->clock++;
    pthread_mutex_unlock(&c->mu);
    if (i >= 0 && read_file(path, n, out) == 0) {
        pthread_mutex_lock(&c->mu);
        c->hits++;
        pthread_mutex_unlock(&c->mu);
        return 0;
    }
    if (i >= 0) { /* wiped or damaged underneath us: forget it */
        pthread_mutex_lock(&c->mu);
        if ((i = find(c, &e)) >= 0) drop(c, (size_t)i);
        pthread_mutex_unlock(&c->mu);
    }
    buf_t b;
    buf_init(&b);
    objstore_range_t r = {off, n};
    if (objstore_get_ranges(c->os, key, &r, 1, &b, err)) {
        buf_free(&b);
        return -1;
    }
    memcpy(out, b.data, (size_t)n); /* get_ranges appended exactly n bytes */
    pthread_mutex_lock(&c->mu);
    c->misses++;
    c->fetched += n;
    pthread_mutex_unlock(&c->mu);
    if (n <= c->budget) store_range(c, &e, out);
    buf_free(&b);
    return 0;
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
