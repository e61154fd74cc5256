/* fsutil.h - the few file-system operations whose crash-safety matters. */
#ifndef HEARTH_FSUTIL_H
#define HEARTH_FSUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* mkdir -p; returns 0 or -1 (HR_EIO). */
int fs_mkdirs(const char *path, hr_err_t *err);
/* Writes path.tmp, fsyncs it, renames it over path, fsyncs the directory. */
int fs_write_atomic(const char *path, const void *p, size_t n, hr_err_t *err);
/* Writes all n bytes to fd (path names it in errors). 0, or -1 (HR_EIO). */
int fs_write_all(int fd, const void *p, size_t n, const char *path, hr_err_t *err);
/* Writes all n bytes to fd at off. 0, or -1 with errno set (ENOSPC for a write that makes
 * no progress): callers that only log or fall back need no hr_err_t. */
int fs_pwrite_all(int fd, const void *p, size_t n, uint64_t off);
/* Finishes a file written at tmp through fd: fsync, close, rename over path, fsync of
 * the directory. fd is closed either way; on failure tmp is removed. 0 or -1. */
int fs_commit_tmp(int fd, const char *tmp, const char *path, hr_err_t *err);
/* Reads a whole file (at most max bytes) into a malloc'd buffer. */
int fs_read_file(const char *path, size_t max, uint8_t **data, size_t *n, hr_err_t *err);
/* fsyncs the directory containing path (so a create/rename/unlink is durable). */
int fs_sync_parent(const char *path, hr_err_t *err);

/* Bytes available to this process on the file system holding path, or UINT64_MAX
 * when it cannot be told (the write itself then reports the failure). */
uint64_t fs_free_bytes(const char *path);

/* Takes an exclusive advisory lock (flock) on DIR/LOCK, creating it, and writes the
 * caller's pid there for the next one to read. Returns the open descriptor (the lock
 * lives as long as it stays open; close it to release), or -1 (HR_EIO), naming the
 * holder's pid when another process has the lock. */
int fs_lock_dir(const char *dir, hr_err_t *err);

#endif
