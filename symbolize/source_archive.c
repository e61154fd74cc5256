/* source_archive.c - see source_archive.h. */
#include "symbolize/source_archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <string.h>

#include "common/timeparse.h"

#define BLOCK 65536

/* The archive at path, open to read; NULL with err when libarchive cannot open it. */
static struct archive *open_archive(const char *path, hr_err_t *err) {
    struct archive *a = archive_read_new();
    if (!a) {
        hr_fail(err, HR_ENOMEM, "out of memory");
        return NULL;
    }
    archive_read_support_filter_all(a);
    archive_read_support_format_all(a);
    if (archive_read_open_filename(a, path, BLOCK) != ARCHIVE_OK) {
        hr_fail(err, HR_EINVAL, "the sources are not an archive libarchive reads (tar, tar.gz, tar.zst, zip): %s",
                archive_error_string(a) ? archive_error_string(a) : "unknown format");
        archive_read_free(a);
        return NULL;
    }
    return a;
}

/* The path without leading "/" and "./" parts: archives name files both ways. */
static const char *trim(const char *p) {
    for (;;) {
        if (*p == '/') p++;
        else if (p[0] == '.' && p[1] == '/') p += 2;
        else return p;
    }
}

/* How many whole components a and b share from the end ("x/src/app.c" and
 * "y/src/app.c": 2): the more, the better an answer; 0 when even the file names differ. */
static size_t agreement(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b), parts = 0;
    for (;;) {
        size_t i = na, j = nb; /* compare one component each, from the end */
        while (i && a[i - 1] != '/') i--;
        while (j && b[j - 1] != '/') j--;
        if (na - i != nb - j || memcmp(a + i, b + j, na - i)) return parts;
        parts++;
        if (!i || !j) return parts;
        na = i - 1, nb = j - 1;
    }
}

int source_archive_check(const char *path, uint64_t max_unpacked, size_t *files, hr_err_t *err) {
    struct archive *a = open_archive(path, err);
    if (!a) return -1;
    uint64_t unpacked = 0;
    size_t entries = 0;
    int rc = 0;
    *files = 0;
    struct archive_entry *e;
    for (int r; rc == 0 && (r = archive_read_next_header(a, &e)) != ARCHIVE_EOF;) {
        if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
            rc = hr_fail(err, HR_EINVAL, "the sources archive is damaged: %s", archive_error_string(a));
            break;
        }
        if (++entries > SOURCE_ARCHIVE_MAX_ENTRIES) {
            rc = hr_fail(err, HR_EINVAL, "the sources archive has more than %d entries", SOURCE_ARCHIVE_MAX_ENTRIES);
            break;
        }
        *files += archive_entry_filetype(e) == AE_IFREG;
        const void *block; /* libarchive's own buffer: nothing is copied to count the bytes */
        size_t n;
        la_int64_t off;
        for (int b; rc == 0 && (b = archive_read_data_block(a, &block, &n, &off)) != ARCHIVE_EOF;) {
            if (b != ARCHIVE_OK && b != ARCHIVE_WARN)
                rc = hr_fail(err, HR_EINVAL, "the sources archive is damaged: %s", archive_error_string(a));
            else if ((unpacked += (uint64_t)n) > max_unpacked)
                rc = hr_fail(err, HR_EINVAL, "the sources archive unpacks to more than %llu bytes",
                             (unsigned long long)max_unpacked);
        }
    }
    archive_read_free(a);
    return rc;
}

/* The current entry's data into out (at most max bytes): 0, or -1 (damaged, larger). */
static int read_entry(struct archive *a, size_t max, buf_t *out) {
    const void *block;
    size_t n;
    la_int64_t off;
    for (int b; (b = archive_read_data_block(a, &block, &n, &off)) != ARCHIVE_EOF;) {
        /* A block lands at its offset: the hole of a sparse entry before it reads as zeros. */
        if ((b != ARCHIVE_OK && b != ARCHIVE_WARN) || off < 0 || (uint64_t)off > max || n > max - (size_t)off)
            return -1;
        while (out->len < (size_t)off && !out->oom) buf_putc(out, 0);
        buf_append(out, block, n);
    }
    return out->oom ? -1 : 0;
}

int source_archive_find(const char *path, const char *want, size_t max, uint64_t max_unpacked, int64_t deadline_ns,
                        buf_t *out) {
    hr_err_t err = {0};
    struct archive *a = open_archive(path, &err);
    if (!a) return -1;
    want = trim(want);
    size_t best = 0, entries = 0, exact = 1; /* want's components: agreeing on all of them ends the search */
    for (const char *s = want; *s; s++) exact += *s == '/';
    uint64_t unpacked = 0;
    int failed = 0;
    struct archive_entry *e;
    for (int r; best < exact && (r = archive_read_next_header(a, &e)) != ARCHIVE_EOF;) {
        int64_t size = archive_entry_size(e);
        unpacked += size > 0 ? (uint64_t)size : 0;
        if ((r != ARCHIVE_OK && r != ARCHIVE_WARN) || ++entries > SOURCE_ARCHIVE_MAX_ENTRIES ||
            unpacked > max_unpacked || (deadline_ns && time_now_ns() > deadline_ns)) {
            failed = 1;
            break;
        }
        const char *name = archive_entry_pathname(e);
        size_t score = name && archive_entry_filetype(e) == AE_IFREG ? agreement(trim(name), want) : 0;
        if (score <= best || size < 0 || (uint64_t)size > max) continue;
        buf_t data;
        buf_init(&data);
        if (read_entry(a, max, &data)) {
            buf_free(&data);
            failed = 1;
            break;
        }
        buf_free(out);
        *out = data; /* the better answer replaces the one before */
        best = score;
    }
    int rc = best ? 0 : failed ? -1 : 1;
    archive_read_free(a);
    return rc;
}
