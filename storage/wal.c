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

#include "common/log.h"
#include "common/vec.h"
#include "common/fsutil.h"

#define MAX_RECORD ((uint32_t)1 << 30)
#define FRAME_HDR 16
/* Under WAL_FSYNC_ALWAYS the segment is filled with zeros this far ahead of its
 * records, so that a record overwrites allocated blocks and fdatasync flushes data
 * alone: appending past the end also changes the file's size, and every such sync then
 * commits the file system's journal (about twice the time on ext4). A zero tail reads
 * as the end of the segment. */
#define ZERO_AHEAD ((off_t)1 << 20)
static const uint8_t FRAME_MAGIC[4] = {'H', 'W', 'A', 'L'};

struct wal {
    char dir[3072];
    wal_fsync_t policy;
    pthread_mutex_t mu;      /* guards fd, seg, written */
    pthread_mutex_t sync_mu; /* one fsync at a time; guards synced */
    int fd;
    uint32_t seg;
    uint64_t written, synced; /* byte counters over the WAL's lifetime */
    uint64_t seg_bytes;
    off_t zeroed; /* the segment file's size: its records, then zeros */
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
        if (ftruncate(w->fd, (off_t)w->seg_bytes) != 0) { /* the zero tail; replay would drop it anyway */
        }
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

static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Size (header and payload) of the intact record at d[off], or 0. The header's own
 * checksum is checked before its length is believed, so a resync costs a memmem and
 * a 12-byte CRC per false magic, never a CRC over a length read from garbage. */
static size_t frame_at(const uint8_t *d, size_t n, size_t off) {
    if (n - off < FRAME_HDR || memcmp(d + off, FRAME_MAGIC, 4)) return 0;
    if ((uint32_t)crc32(0, d + off, 12) != get_u32(d + off + 12)) return 0;
    uint32_t len = get_u32(d + off + 4);
    if (len == 0 || len > MAX_RECORD || n - off - FRAME_HDR < len) return 0;
    if ((uint32_t)crc32(0, d + off + FRAME_HDR, len) != get_u32(d + off + 8)) return 0;
    return FRAME_HDR + len;
}

/* Offset of the first intact record after off, or n when there is none. */
static size_t next_frame(const uint8_t *d, size_t n, size_t off) {
    for (size_t o = off + 1; o + FRAME_HDR <= n; o++) {
        const uint8_t *m = memmem(d + o, n - o, FRAME_MAGIC, 4);
        if (!m) break;
        o = (size_t)(m - d);
        if (frame_at(d, n, o)) return o;
    }
    return n;
}

typedef struct {
    wal_replay_fn fn; /* NULL: only count */
    void *ctx;
    wal_scan_t *st;
    const char *path;
    int log;     /* replay logs corruption; verification only counts it */
    int stopped; /* fn returned WAL_REPLAY_STOP */
} scan_t;

static void deliver(scan_t *sc, const uint8_t *p, size_t len) {
    int rc = sc->fn ? sc->fn(sc->ctx, p, len) : 0;
    if (rc == WAL_REPLAY_STOP) {
        sc->stopped = 1;
        return;
    }
    if (rc != 0) sc->st->skipped++;
    sc->st->records++;
}

/* The framing before the magic: stops at the first bad record, whatever follows. */
static size_t scan_v1(scan_t *sc, const uint8_t *d, size_t n) {
    size_t off = 0;
    while (n - off >= 8 && !sc->stopped) {
        uint32_t len = get_u32(d + off), crc = get_u32(d + off + 4);
        if (len > MAX_RECORD || n - off - 8 < len) break;
        if ((uint32_t)crc32(0, d + off + 8, len) != crc) break;
        deliver(sc, d + off + 8, len);
        off += 8 + (size_t)len;
    }
    return off;
}

static size_t scan_v2(scan_t *sc, const uint8_t *d, size_t n) {
    size_t off = 0;
    while (off < n && !sc->stopped) {
        size_t f = frame_at(d, n, off);
        if (f) {
            deliver(sc, d + off + FRAME_HDR, f - FRAME_HDR);
            off += f;
            continue;
        }
        size_t next = next_frame(d, n, off);
        if (next == n) break; /* nothing intact follows: a torn write */
        if (sc->log)
            log_error("wal.corrupt_record", "segment=%s offset=%zu bytes_skipped=%zu", sc->path, off, next - off);
        sc->st->corrupt++;
        sc->st->corrupt_bytes += next - off;
        off = next;
    }
    return off;
}

/* 1 when a segment uses the old framing: no magic, and an intact old record at its
 * start. (A valid old segment cannot start with the magic: read as a length it
 * exceeds MAX_RECORD.) A segment whose first record is damaged is scanned as new,
 * so corruption there resynchronises like anywhere else. */
static int old_framing(const uint8_t *d, size_t n) {
    if (n < 8 || !memcmp(d, FRAME_MAGIC, 4)) return 0;
    uint32_t len = get_u32(d);
    return len <= MAX_RECORD && n - 8 >= len && (uint32_t)crc32(0, d + 8, len) == get_u32(d + 4);
}

/* Scans one segment; *valid receives the end of its last intact record (what
 * follows is a torn tail, or zeros made ahead: then *keep is the file's size, else
 * *valid) and *v1 whether it has the old framing. */
static int scan_segment(scan_t *sc, off_t *valid, off_t *keep, int *v1, hr_err_t *err) {
    uint8_t *data;
    size_t n;
    if (fs_read_file(sc->path, (size_t)64 << 30, &data, &n, err)) return -1;
    *v1 = old_framing(data, n);
    size_t end = *v1 ? scan_v1(sc, data, n) : scan_v2(sc, data, n), zeros = end;
    while (zeros < n && !data[zeros]) zeros++;
    free(data);
    if (sc->stopped) /* what follows is unread, not torn: keep it */
        return hr_fail(err, HR_ENOMEM, "WAL replay stopped in %s: a record could not be applied", sc->path);
    sc->st->torn_bytes += zeros == n ? 0 : n - end; /* a zero tail is room made ahead, not a torn write */
    sc->st->segments++;
    *valid = (off_t)end;
    *keep = zeros == n ? (off_t)n : (off_t)end;
    return 0;
}

/* Opens segment seg for appending after its first `valid` bytes (its records; zeros
 * may follow), or (valid < 0) after all it holds: a new segment is expected empty. */
static int open_segment(wal_t *w, uint32_t seg, off_t valid, hr_err_t *err) {
    char path[3200];
    seg_path(w, seg, path, sizeof path);
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    if (fd < 0) return hr_fail(err, HR_EIO, "open %s: %s", path, strerror(errno));
    struct stat st = {0};
    fstat(fd, &st);
    if (fs_sync_parent(path, err)) {
        close(fd);
        return -1;
    }
    w->fd = fd;
    w->seg = seg;
    if (valid < 0) valid = st.st_size;
    w->seg_bytes = (uint64_t)valid;
    w->zeroed = st.st_size > valid ? st.st_size : valid;
    return 0;
}

/* Makes the segment hold zeros up to at least `need` bytes, ZERO_AHEAD past it (mu
 * held). Only a saving: on failure the records extend the file as they are written. */
static void zero_ahead(wal_t *w, off_t need) {
    static const uint8_t zeros[1 << 16];
    off_t to = need + ZERO_AHEAD;
    while (w->zeroed < to) {
        size_t n = (size_t)(to - w->zeroed) < sizeof zeros ? (size_t)(to - w->zeroed) : sizeof zeros;
        ssize_t k = pwrite(w->fd, zeros, n, w->zeroed);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return;
        w->zeroed += k;
    }
}

int wal_replay(wal_t *w, uint32_t after, wal_replay_fn fn, void *ctx, wal_scan_t *st, hr_err_t *err) {
    uint32_t *segs;
    size_t n;
    memset(st, 0, sizeof *st);
    if (list_segments(w, &segs, &n, err)) return -1;
    uint32_t last = after;
    int last_v1 = 0;
    off_t last_valid = 0;
    for (size_t i = 0; i < n; i++) {
        if (segs[i] <= after) continue;
        char path[3200];
        seg_path(w, segs[i], path, sizeof path);
        scan_t sc = {fn, ctx, st, path, 1, 0};
        off_t valid, keep;
        if (scan_segment(&sc, &valid, &keep, &last_v1, err)) {
            free(segs);
            return -1;
        }
        struct stat sb;
        if (stat(path, &sb) == 0 && sb.st_size != keep) {
            /* A torn tail: drop it so new records follow intact ones (zeros made
             * ahead stay: room the next records overwrite). */
            if (truncate(path, valid) != 0) {
                free(segs);
                return hr_fail(err, HR_EIO, "truncate %s: %s", path, strerror(errno));
            }
        }
        last = segs[i], last_valid = valid;
    }
    free(segs);
    /* Appends go to a fresh segment after a checkpoint or after an old-framing one,
     * else continue the newest. */
    int fresh = last == after || last_v1;
    return open_segment(w, fresh ? last + 1 : last, fresh ? -1 : last_valid, err);
}

int wal_append(wal_t *w, const void *payload, size_t len, hr_err_t *err) {
    if (len > MAX_RECORD) return hr_fail(err, HR_ETOOBIG, "WAL record over %u bytes", MAX_RECORD);
    if (len == 0) return hr_fail(err, HR_EINVAL, "empty WAL record");
    uint8_t hdr[FRAME_HDR];
    memcpy(hdr, FRAME_MAGIC, 4);
    put_u32(hdr + 4, (uint32_t)len);
    put_u32(hdr + 8, (uint32_t)crc32(0, payload, (uInt)len));
    put_u32(hdr + 12, (uint32_t)crc32(0, hdr, 12));
    struct part {
        const void *b;
        size_t n;
    } parts[2] = {{hdr, FRAME_HDR}, {payload, len}};
    pthread_mutex_lock(&w->mu);
    off_t start = (off_t)w->seg_bytes, end = start + FRAME_HDR + (off_t)len;
    if (w->policy == WAL_FSYNC_ALWAYS && end > w->zeroed) zero_ahead(w, end);
    for (int i = 0, at = 0; i < 2; at += (int)parts[i++].n) {
        if (fs_pwrite_all(w->fd, parts[i].b, parts[i].n, start + at) == 0) continue;
        int e = errno;
        /* Leave no partial record behind: later appends must stay readable. */
        if (ftruncate(w->fd, start) != 0) { /* replay's torn-tail check still covers it */
        }
        w->zeroed = start;
        pthread_mutex_unlock(&w->mu);
        return hr_fail(err, HR_EIO, "WAL write: %s", strerror(e));
    }
    if (end > w->zeroed) w->zeroed = end;
    w->seg_bytes += FRAME_HDR + len;
    w->written += FRAME_HDR + len;
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
    if (ftruncate(w->fd, (off_t)w->seg_bytes) != 0) { /* the zero tail: replay ends there anyway */
    }
    if (fsync(w->fd) != 0) rc = hr_fail(err, HR_EIO, "WAL fsync: %s", strerror(errno));
    int old = w->fd;
    if (rc == 0 && (rc = open_segment(w, w->seg + 1, -1, err)) == 0) {
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

int wal_verify(const char *dir, wal_scan_t *st, hr_err_t *err) {
    wal_t w = {.fd = -1};
    snprintf(w.dir, sizeof w.dir, "%s", dir);
    uint32_t *segs;
    size_t n;
    memset(st, 0, sizeof *st);
    if (list_segments(&w, &segs, &n, err)) return -1;
    for (size_t i = 0; i < n; i++) {
        char path[3200];
        seg_path(&w, segs[i], path, sizeof path);
        scan_t sc = {NULL, NULL, st, path, 0, 0};
        off_t valid, keep;
        int v1;
        if (scan_segment(&sc, &valid, &keep, &v1, err)) {
            free(segs);
            return -1;
        }
    }
    free(segs);
    return 0;
}
