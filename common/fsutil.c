/* fsutil.c - see fsutil.h. */
#include "common/fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

int fs_mkdirs(const char *path, hr_err_t *err) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp)
        return hr_fail(err, HR_EINVAL, "path too long: %s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return hr_fail(err, HR_EIO, "mkdir %s: %s", tmp, strerror(errno));
        *p = '/';
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return hr_fail(err, HR_EIO, "mkdir %s: %s", tmp, strerror(errno));
    return 0;
}

int fs_sync_parent(const char *path, hr_err_t *err) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
    int fd = open(dir[0] ? dir : "/", O_RDONLY | O_DIRECTORY);
    if (fd < 0) return hr_fail(err, HR_EIO, "open %s: %s", dir, strerror(errno));
    int rc = fsync(fd);
    close(fd);
    if (rc != 0) return hr_fail(err, HR_EIO, "fsync %s: %s", dir, strerror(errno));
    return 0;
}

int fs_write_all(int fd, const void *p, size_t n, const char *path, hr_err_t *err) {
    const uint8_t *b = p;
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return hr_fail(err, HR_EIO, "write %s: %s", path, w < 0 ? strerror(errno) : "no progress");
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

int fs_pwrite_all(int fd, const void *p, size_t n, uint64_t off) {
    const uint8_t *b = p;
    while (n) {
        ssize_t k = pwrite(fd, b, n, (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            if (k == 0) errno = ENOSPC;
            return -1;
        }
        b += k, off += (uint64_t)k;
        n -= (size_t)k;
    }
    return 0;
}

int fs_commit_tmp(int fd, const char *tmp, const char *path, hr_err_t *err) {
    int rc = fsync(fd) == 0 ? 0 : hr_fail(err, HR_EIO, "fsync %s: %s", tmp, strerror(errno));
    close(fd);
    if (rc == 0 && rename(tmp, path) != 0) rc = hr_fail(err, HR_EIO, "rename %s: %s", tmp, strerror(errno));
    if (rc) {
        unlink(tmp);
        return -1;
    }
    return fs_sync_parent(path, err);
}

int fs_write_atomic(const char *path, const void *p, size_t n, hr_err_t *err) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return hr_fail(err, HR_EIO, "create %s: %s", tmp, strerror(errno));
    if (fs_write_all(fd, p, n, tmp, err)) {
        close(fd);
        unlink(tmp);
        return -1;
    }
    return fs_commit_tmp(fd, tmp, path, err);
}

int fs_read_file(const char *path, size_t max, uint8_t **data, size_t *n, hr_err_t *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return hr_fail(err, errno == ENOENT ? HR_ENOTFOUND : HR_EIO, "open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || (size_t)st.st_size > max) {
        fclose(f);
        return hr_fail(err, HR_ETOOBIG, "%s: too large or unreadable", path);
    }
    size_t len = (size_t)st.st_size;
    uint8_t *d = malloc(len ? len : 1);
    if (!d) {
        fclose(f);
        return hr_fail(err, HR_ENOMEM, "out of memory");
    }
    if (fread(d, 1, len, f) != len) {
        fclose(f);
        free(d);
        return hr_fail(err, HR_EIO, "read %s failed", path);
    }
    fclose(f);
    *data = d;
    *n = len;
    return 0;
}

int fs_lock_dir(const char *dir, hr_err_t *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/LOCK", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return hr_fail(err, HR_EIO, "cannot open %s: %s", path, strerror(errno));
    /* flock, not fcntl: fcntl locks are per process, so a second open in this process
     * would silently share it, and any close of the file would drop it. */
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char pid[32] = {0};
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        close(fd);
        if (e == EWOULDBLOCK) {
            pid[n > 0 ? strcspn(pid, "\n") : 0] = 0;
            return hr_fail(err, HR_EIO,
                           "%s is in use by another hearth process (pid %s); stop it or use another data dir", dir,
                           pid[0] ? pid : "unknown");
        }
        return hr_fail(err, HR_EIO, "cannot lock %s: %s", path, strerror(e));
    }
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    /* The pid is only a hint for the error above; failing to write it (a full disk)
     * must not stop a server that holds the lock. */
    if (ftruncate(fd, 0) == 0 && pwrite(fd, pid, (size_t)n, 0) < 0) {
    }
    return fd;
}

uint64_t fs_free_bytes(const char *path) {
    struct statvfs v;
    if (statvfs(path, &v) != 0) return UINT64_MAX;
    return (uint64_t)v.f_bavail * v.f_frsize;
}
