/* inject.c - the allocation wrappers: see inject.h. */
#include "tests/oom/inject.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);

static int armed, fired;
static long count, fail_at;

void oom_arm(long n) {
    __atomic_store_n(&count, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&fired, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&fail_at, n, __ATOMIC_SEQ_CST);
    __atomic_store_n(&armed, 1, __ATOMIC_SEQ_CST);
}

long oom_disarm(void) {
    __atomic_store_n(&armed, 0, __ATOMIC_SEQ_CST);
    return __atomic_load_n(&count, __ATOMIC_SEQ_CST);
}

int oom_fired(void) { return __atomic_load_n(&fired, __ATOMIC_SEQ_CST); }

/* 1 when this allocation is the one to fail. */
static int fail_now(void) {
    if (!__atomic_load_n(&armed, __ATOMIC_SEQ_CST)) return 0;
    long c = __atomic_add_fetch(&count, 1, __ATOMIC_SEQ_CST);
    if (c != __atomic_load_n(&fail_at, __ATOMIC_SEQ_CST)) return 0;
    __atomic_store_n(&fired, 1, __ATOMIC_SEQ_CST);
    return 1;
}

void *__wrap_malloc(size_t n) { return fail_now() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t k, size_t n) { return fail_now() ? NULL : __real_calloc(k, n); }
void *__wrap_realloc(void *p, size_t n) { return fail_now() ? NULL : __real_realloc(p, n); }
char *__wrap_strdup(const char *s) { return fail_now() ? NULL : __real_strdup(s); }
char *__wrap_strndup(const char *s, size_t n) { return fail_now() ? NULL : __real_strndup(s, n); }

/* ---- I/O ---- */

int __real_open(const char *path, int flags, ...);
ssize_t __real_write(int fd, const void *p, size_t n);
ssize_t __real_pwrite(int fd, const void *p, size_t n, off_t off);
int __real_fsync(int fd);
int __real_fdatasync(int fd);
int __real_ftruncate(int fd, off_t len);
int __real_rename(const char *from, const char *to);
int __real_unlink(const char *path);

const char *const IO_KIND_NAMES[IO_KINDS] = {"open", "write", "pwrite", "fsync", "ftruncate", "rename", "unlink"};

static int io_armed, io_fired_, io_persistent;
static long io_count, io_fail_at;
static io_kind_t io_kind;

void io_arm(io_kind_t kind, long n, int persistent) {
    __atomic_store_n(&io_count, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&io_fired_, 0, __ATOMIC_SEQ_CST);
    io_kind = kind, io_persistent = persistent;
    __atomic_store_n(&io_fail_at, n, __ATOMIC_SEQ_CST);
    __atomic_store_n(&io_armed, 1, __ATOMIC_SEQ_CST);
}

long io_disarm(void) {
    __atomic_store_n(&io_armed, 0, __ATOMIC_SEQ_CST);
    return __atomic_load_n(&io_count, __ATOMIC_SEQ_CST);
}

int io_fired(void) { return __atomic_load_n(&io_fired_, __ATOMIC_SEQ_CST); }

int io_inject(io_kind_t k, int e) {
    if (!__atomic_load_n(&io_armed, __ATOMIC_SEQ_CST) || k != io_kind) return 0;
    long c = __atomic_add_fetch(&io_count, 1, __ATOMIC_SEQ_CST), at = __atomic_load_n(&io_fail_at, __ATOMIC_SEQ_CST);
    if (!at || c < at || (c > at && !io_persistent)) return 0;
    __atomic_store_n(&io_fired_, 1, __ATOMIC_SEQ_CST);
    errno = e;
    return 1;
}

int __wrap_open(const char *path, int flags, ...) {
    int mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, int);
        va_end(ap);
    }
    return io_inject(IO_OPEN, EIO) ? -1 : __real_open(path, flags, mode);
}
ssize_t __wrap_write(int fd, const void *p, size_t n) {
    return io_inject(IO_WRITE, ENOSPC) ? -1 : __real_write(fd, p, n);
}
ssize_t __wrap_pwrite(int fd, const void *p, size_t n, off_t off) {
    return io_inject(IO_PWRITE, ENOSPC) ? -1 : __real_pwrite(fd, p, n, off);
}
int __wrap_fsync(int fd) { return io_inject(IO_FSYNC, EIO) ? -1 : __real_fsync(fd); }
int __wrap_fdatasync(int fd) { return io_inject(IO_FSYNC, EIO) ? -1 : __real_fdatasync(fd); }
int __wrap_ftruncate(int fd, off_t len) { return io_inject(IO_FTRUNCATE, EIO) ? -1 : __real_ftruncate(fd, len); }
int __wrap_rename(const char *from, const char *to) { return io_inject(IO_RENAME, EIO) ? -1 : __real_rename(from, to); }
int __wrap_unlink(const char *path) { return io_inject(IO_UNLINK, EIO) ? -1 : __real_unlink(path); }
