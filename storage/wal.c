/* wal.c - see wal.h. */
#include "storage/wal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "common/vec.h"
#include "storage/fsutil.h"

#define MAX_RECORD ((uint32_t)1 << 30)

struct wal {
    char dir[3072];
    wal_fsync_t policy;
    pthread_mutex_t mu;      /* guards fd, seg, written */
    pthread_mutex_t sync_mu; /* one fsync at a time; guards synced */
    int fd;
    uint32_t seg;
    uint64_t written, synced; /* byte counters over the WAL's lifetime */
    uint64_t seg_bytes;
};

static void seg_path(const wal_t *w, uint32_t seg, char *out, size_t n) {
    snprintf(out, n, "%s/%08u.wal", w->dir, seg);
}

wal_t *wal_open(const char *dir, wal_fsync_t policy, hr_err_t *err) {
    if (fs_mkdirs(dir, err)) return NULL;
    wal_t *w = calloc(1, sizeof *w);
    if (!w) {
        hr_fail(err, HR_ENOMEM, "out of memory");
        return NULL;
    }
    snprintf(w->dir, sizeof w->dir, "%s", dir);
    w->policy = policy;
    w->fd = -1;
    pthread_mutex_init(&w->mu, NULL);
    pthread_mutex_init(&w->sync_mu, NULL);
    return w;
}

void wal_close(wal_t *w) {
    if (!w) return;
    if (w->fd >= 0) {
        fsync(w->fd);
        close(w->fd);
    }
    pthread_mutex_destroy(&w->mu);
    pthread_mutex_destroy(&w->sync_mu);
    free(w);
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Lists segment numbers in ascending order. */
static int list_segments(const wal_t *w, uint32_t **out, size_t *n, hr_err_t *err) {
    DIR *d = opendir(w->dir);
    if (!d) return hr_fail(err, HR_EIO, "open %s: %s", w->dir, strerror(errno));
    size_t cap = 0;
    *out = NULL;
    *n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        unsigned seg;
        char tail[8];
        if (sscanf(e->d_name, "%8u.wa%1[l]", &seg, tail) != 2 || strlen(e->d_name) != 12) continue;
        if (VEC_RESERVE(*out, cap, *n + 1)) {
            closedir(d);
            return hr_fail(err, HR_ENOMEM, "out of memory");
        }
        (*out)[(*n)++] = seg;
    }
    closedir(d);
    if (*n > 1) qsort(*out, *n, sizeof **out, cmp_u32);
    return 0;
}

/* Replays one segment; returns the length of its intact prefix in *valid. */
static int replay_segment(const char *path, wal_replay_fn fn, void *ctx, size_t *records,
                          size_t *skipped, off_t *valid, hr_err_t *err) {
    uint8_t *data;
    size_t n;
    if (fs_read_file(path, (size_t)64 << 30, &data, &n, err)) return -1;
    size_t off = 0;
    while (n - off >= 8) {
        uint32_t len = (uint32_t)data[off] | (uint32_t)data[off + 1] << 8 |
                       (uint32_t)data[off + 2] << 16 | (uint32_t)data[off + 3] << 24;
        uint32_t crc = (uint32_t)data[off + 4] | (uint32_t)data[off + 5] << 8 |
                       (uint32_t)data[off + 6] << 16 | (uint32_t)data[off + 7] << 24;
        if (len > MAX_RECORD || n - off - 8 < len) break;
        if ((uint32_t)crc32(0, data + off + 8, len) != crc) break;
        if (fn(ctx, data + off + 8, len) != 0) (*skipped)++;
        (*records)++;
        off += 8 + (size_t)len;
    }
    *valid = (off_t)off;
    free(data);
    return 0;
}

static int open_segment(wal_t *w, uint32_t seg, hr_err_t *err) {
    char path[3200];
    seg_path(w, seg, path, sizeof path);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) return hr_fail(err, HR_EIO, "open %s: %s", path, strerror(errno));
    struct stat st;
    fstat(fd, &st);
    if (fs_sync_parent(path, err)) {
        close(fd);
        return -1;
    }
    w->fd = fd;
    w->seg = seg;
    w->seg_bytes = (uint64_t)st.st_size;
    return 0;
}

int wal_replay(wal_t *w, uint32_t after, wal_replay_fn fn, void *ctx, size_t *records,
               size_t *skipped, hr_err_t *err) {
    uint32_t *segs;
    size_t n;
    *records = *skipped = 0;
    if (list_segments(w, &segs, &n, err)) return -1;
    uint32_t last = after;
    for (size_t i = 0; i < n; i++) {
        if (segs[i] <= after) continue;
        char path[3200];
        seg_path(w, segs[i], path, sizeof path);
        off_t valid;
        if (replay_segment(path, fn, ctx, records, skipped, &valid, err)) {
            free(segs);
            return -1;
        }
        struct stat st;
        if (stat(path, &st) == 0 && st.st_size != valid) {
            /* A torn tail: drop it so new records follow intact ones. */
            if (truncate(path, valid) != 0) {
                free(segs);
                return hr_fail(err, HR_EIO, "truncate %s: %s", path, strerror(errno));
            }
        }
        last = segs[i];
    }
    free(segs);
    /* Appends go to a fresh segment after a checkpoint, else continue the newest. */
    return open_segment(w, last > after ? last : after + 1, err);
}

int wal_append(wal_t *w, const void *payload, size_t len, hr_err_t *err) {
    if (len > MAX_RECORD) return hr_fail(err, HR_ETOOBIG, "WAL record over %u bytes", MAX_RECORD);
    uint8_t hdr[8];
    uint32_t l = (uint32_t)len, crc = (uint32_t)crc32(0, payload, (uInt)len);
    for (int i = 0; i < 4; i++) {
        hdr[i] = (uint8_t)(l >> (8 * i));
        hdr[4 + i] = (uint8_t)(crc >> (8 * i));
    }
    struct part {
        const void *b;
        size_t n;
    } parts[2] = {{hdr, 8}, {payload, len}};
    pthread_mutex_lock(&w->mu);
    off_t start = (off_t)w->seg_bytes;
    for (int i = 0; i < 2; i++) {
        const uint8_t *p = parts[i].b;
        size_t n = parts[i].n;
        while (n) {
            ssize_t k = write(w->fd, p, n);
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) {
                int e = errno;
                /* Leave no partial record behind: later appends must stay readable. */
                if (ftruncate(w->fd, start) != 0) { /* replay's torn-tail check still covers it */ }
                pthread_mutex_unlock(&w->mu);
                return hr_fail(err, HR_EIO, "WAL write: %s", strerror(k < 0 ? e : ENOSPC));
            }
            p += k;
            n -= (size_t)k;
        }
    }
    w->seg_bytes += 8 + len;
    w->written += 8 + len;
    uint64_t mine = w->written;
    pthread_mutex_unlock(&w->mu);
    if (w->policy != WAL_FSYNC_ALWAYS) return 0;

    pthread_mutex_lock(&w->sync_mu);
    int rc = 0;
    if (w->synced < mine) {
        pthread_mutex_lock(&w->mu);
        int fd = w->fd;
        uint64_t target = w->written;
        pthread_mutex_unlock(&w->mu);
        if (fdatasync(fd) != 0) rc = hr_fail(err, HR_EIO, "WAL fsync: %s", strerror(errno));
        else w->synced = target;
    }
    pthread_mutex_unlock(&w->sync_mu);
    return rc;
}

int wal_rotate(wal_t *w, uint32_t *closed, hr_err_t *err) {
    pthread_mutex_lock(&w->sync_mu);
    pthread_mutex_lock(&w->mu);
    int rc = 0;
    *closed = w->seg;
    if (fsync(w->fd) != 0) rc = hr_fail(err, HR_EIO, "WAL fsync: %s", strerror(errno));
    int old = w->fd;
    if (rc == 0 && (rc = open_segment(w, w->seg + 1, err)) == 0) {
        close(old);
        w->synced = w->written;
    }
    pthread_mutex_unlock(&w->mu);
    pthread_mutex_unlock(&w->sync_mu);
    return rc;
}

void wal_remove_upto(wal_t *w, uint32_t upto) {
    uint32_t *segs;
    size_t n;
    if (list_segments(w, &segs, &n, NULL)) return;
    for (size_t i = 0; i < n; i++) {
        if (segs[i] > upto) continue;
        char path[3200];
        seg_path(w, segs[i], path, sizeof path);
        unlink(path);
    }
    free(segs);
}

uint64_t wal_segment_bytes(wal_t *w) {
    pthread_mutex_lock(&w->mu);
    uint64_t b = w->seg_bytes;
    pthread_mutex_unlock(&w->mu);
    return b;
}

static int count_only(void *ctx, const uint8_t *p, size_t n) {
    (void)ctx, (void)p, (void)n;
    return 0;
}

int wal_verify(const char *dir, size_t *segments, size_t *records, uint64_t *torn, hr_err_t *err) {
    wal_t w = {.fd = -1};
    snprintf(w.dir, sizeof w.dir, "%s", dir);
    uint32_t *segs;
    size_t n, skipped = 0;
    *segments = *records = 0;
    *torn = 0;
    if (list_segments(&w, &segs, &n, err)) return -1;
    for (size_t i = 0; i < n; i++) {
        char path[3200];
        seg_path(&w, segs[i], path, sizeof path);
        off_t valid;
        struct stat st;
        if (replay_segment(path, count_only, NULL, records, &skipped, &valid, err) || stat(path, &st) != 0) {
            free(segs);
            return -1;
        }
        *torn += (uint64_t)(st.st_size - valid);
    }
    *segments = n;
    free(segs);
    return 0;
}
