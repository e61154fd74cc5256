/* cache.c - see cache.h.
 *
 * On disk: an 8-byte magic "HSYMC1\n\0", then records of
 *   u32le payload length, u32le CRC-32 of the payload, payload:
 *   uvarint address, uvarint frame count, per frame: bytes name, bytes system name,
 *   bytes file (each a uvarint length and the bytes), svarint line.
 * In memory the payloads sit back to back in one buffer, found by a map of address to
 * offset (common/hash.h), so a load is one read and no allocation per record. */
#include "symbolize/cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "common/hash.h"
#include "common/log.h"

#define MAGIC "HSYMC1\n"
#define MAGIC_LEN 8
#define MAX_RECORD (1u << 20) /* a record is a few hundred bytes; longer is corruption */

struct symcache {
    char *path;
    buf_t pending;    /* records appended since the last flush, as the file holds them */
    buf_t data;       /* payloads */
    u64map_t by_addr; /* address -> payload offset in data */
};

/* Indexes the payload at data[off, off+len): its address is its first varint. */
static int index_payload(symcache_t *c, size_t off, size_t len) {
    buf_reader_t r;
    buf_reader_init(&r, c->data.data + off, len);
    uint64_t addr = buf_get_uvarint(&r);
    if (r.bad) return 0;
    uint64_t *slot = u64map_put(&c->by_addr, addr, NULL);
    if (!slot) return -1;
    *slot = off; /* a later record of an address wins */
    return 0;
}

/* Reads the whole file at fd; keeps the whole records, cuts the rest. */
static int load(symcache_t *c, int fd, hr_err_t *err) {
    struct stat st;
    if (fstat(fd, &st)) return hr_fail(err, HR_EIO, "symbolization cache: stat failed");
    size_t n = (size_t)st.st_size;
    uint8_t *p = n ? malloc(n) : NULL;
    if (n && !p) return hr_fail(err, HR_ENOMEM, "out of memory");
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(fd, p + got, n - got, (off_t)got);
        if (k <= 0) break;
        got += (size_t)k;
    }
    size_t pos = MAGIC_LEN, good = 0;
    if (got >= MAGIC_LEN && !memcmp(p, MAGIC, MAGIC_LEN)) good = MAGIC_LEN;
    while (good && pos + 8 <= got) {
        uint32_t len =
            (uint32_t)p[pos] | (uint32_t)p[pos + 1] << 8 | (uint32_t)p[pos + 2] << 16 | (uint32_t)p[pos + 3] << 24;
        uint32_t crc =
            (uint32_t)p[pos + 4] | (uint32_t)p[pos + 5] << 8 | (uint32_t)p[pos + 6] << 16 | (uint32_t)p[pos + 7] << 24;
        if (len > MAX_RECORD || len > got - pos - 8 || crc32(0, p + pos + 8, len) != crc) break;
        size_t off = c->data.len;
        buf_append(&c->data, p + pos + 8, len);
        if (c->data.oom || index_payload(c, off, len)) {
            free(p);
            return hr_fail(err, HR_ENOMEM, "out of memory");
        }
        pos += 8 + (size_t)len;
        good = pos;
    }
    free(p);
    if (good && good == n) return 0;
    if (good) { /* whole records, then a torn tail: keep them, cut the tail */
        if (ftruncate(fd, (off_t)good)) return hr_fail(err, HR_EIO, "symbolization cache: cannot cut the tail");
        log_event(LOG_WARN, "symbolize.cache_tail_cut", "bytes=%zu kept=%zu", n - good, good);
        return 0;
    }
    /* A new file, or a foreign one: start over. */
    if (ftruncate(fd, 0) || pwrite(fd, MAGIC, MAGIC_LEN, 0) != MAGIC_LEN)
        return hr_fail(err, HR_EIO, "symbolization cache: cannot write the header");
    return 0;
}

symcache_t *symcache_open(const char *path, hr_err_t *err) {
    symcache_t *c = calloc(1, sizeof *c);
    if (!c || !(c->path = strdup(path))) {
        free(c);
        hr_fail(err, HR_ENOMEM, "out of memory");
        return NULL;
    }
    buf_init(&c->data);
    buf_init(&c->pending);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        hr_fail(err, HR_EIO, "cannot open the symbolization cache %s: %s", path, strerror(errno));
        symcache_close(c);
        return NULL;
    }
    int rc = load(c, fd, err);
    close(fd); /* a fleet has thousands of binaries: no descriptor is held between uses */
    if (rc) {
        symcache_close(c);
        return NULL;
    }
    return c;
}

void symcache_flush(symcache_t *c) {
    if (!c || !c->pending.len) return;
    int fd = open(c->path, O_WRONLY | O_APPEND | O_CLOEXEC);
    ssize_t n = fd >= 0 ? write(fd, c->pending.data, c->pending.len) : -1;
    /* Only persistence is lost: the answers stay in memory, and a torn record is cut when
     * the file is next loaded. */
    if (n != (ssize_t)c->pending.len)
        log_event(LOG_WARN, "symbolize.cache_write_failed", "path=%s bytes=%zu err=\"%s\"", c->path, c->pending.len,
                  n < 0 ? strerror(errno) : "short write");
    if (fd >= 0) close(fd);
    c->pending.len = 0;
}

void symcache_close(symcache_t *c) {
    if (!c) return;
    symcache_flush(c);
    buf_free(&c->pending);
    buf_free(&c->data);
    u64map_free(&c->by_addr);
    free(c->path);
    free(c);
}

size_t symcache_count(const symcache_t *c) { return u64map_count(&c->by_addr); }

/* A string field of a payload as a NUL-terminated copy (frames_push copies again;
 * records are short, and this keeps the reader simple). */
static int get_str(buf_reader_t *r, char *tmp, size_t cap, const char **out) {
    size_t n;
    const uint8_t *p = buf_get_bytes(r, &n);
    if (!p || n >= cap) return -1;
    memcpy(tmp, p, n);
    tmp[n] = 0;
    *out = tmp;
    return 0;
}

int symcache_get(const symcache_t *c, uint64_t addr, frames_t *out) {
    const uint64_t *at = u64map_get(&c->by_addr, addr);
    if (!at) return 0;
    size_t off = (size_t)*at;
    buf_reader_t r;
    buf_reader_init(&r, c->data.data + off, c->data.len - off);
    buf_get_uvarint(&r);
    uint64_t n = buf_get_uvarint(&r);
    static __thread char name[4096], sys[4096], file[4096];
    for (uint64_t i = 0; i < n && !r.bad; i++) {
        const char *a, *b, *f;
        if (get_str(&r, name, sizeof name, &a) || get_str(&r, sys, sizeof sys, &b) ||
            get_str(&r, file, sizeof file, &f))
            return 1; /* checked by CRC when loaded; a bad record answers what it has */
        int64_t line = buf_get_svarint(&r);
        if (!r.bad && frames_push(out, a, b, f, line)) return -1;
    }
    return 1;
}

int symcache_put(symcache_t *c, uint64_t addr, const frames_t *f) {
    buf_t rec;
    buf_init(&rec);
    buf_put_u32le(&rec, 0), buf_put_u32le(&rec, 0); /* length and CRC, filled below */
    buf_put_uvarint(&rec, addr);
    buf_put_uvarint(&rec, f->n);
    for (size_t i = 0; i < f->n; i++) {
        const frame_t *x = &f->v[i];
        buf_put_bytes(&rec, x->name, strnlen(x->name, 4095));
        buf_put_bytes(&rec, x->system_name, strnlen(x->system_name, 4095));
        buf_put_bytes(&rec, x->file, strnlen(x->file, 4095));
        buf_put_svarint(&rec, x->line);
    }
    if (rec.oom) return buf_free(&rec), -1;
    uint32_t len = (uint32_t)(rec.len - 8), crc = (uint32_t)crc32(0, rec.data + 8, len);
    for (int i = 0; i < 4; i++) rec.data[i] = (uint8_t)(len >> 8 * i), rec.data[4 + i] = (uint8_t)(crc >> 8 * i);
    size_t off = c->data.len;
    buf_append(&c->data, rec.data + 8, len);
    int rc = c->data.oom || index_payload(c, off, len) ? -1 : 0;
    if (rc == 0) buf_append(&c->pending, rec.data, rec.len);
    if (c->pending.oom) c->pending.oom = 0, c->pending.len = 0; /* persistence lost, not the answer */
    buf_free(&rec);
    return rc;
}
