/* faultvfs.c - see faultvfs.h. A shim file is the real file's handle placed right
 * after the shim's own header, in the one allocation SQLite makes of szOsFile bytes. */
#include "tests/oom/faultvfs.h"

#include <errno.h>
#include <sqlite3.h>
#include <stddef.h>

#include "tests/oom/inject.h"

typedef struct {
    sqlite3_file base;
    sqlite3_file *real; /* right after this struct */
} shim_file_t;

static sqlite3_vfs *root;

static sqlite3_file *real_of(sqlite3_file *f) { return ((shim_file_t *)f)->real; }

/* The io methods: the counted ones may fail, every one forwards. */
static int f_close(sqlite3_file *f) { return real_of(f)->pMethods->xClose(real_of(f)); }
static int f_read(sqlite3_file *f, void *p, int n, sqlite3_int64 off) {
    return real_of(f)->pMethods->xRead(real_of(f), p, n, off);
}
static int f_write(sqlite3_file *f, const void *p, int n, sqlite3_int64 off) {
    if (io_inject(IO_PWRITE, ENOSPC)) return SQLITE_FULL;
    return real_of(f)->pMethods->xWrite(real_of(f), p, n, off);
}
static int f_truncate(sqlite3_file *f, sqlite3_int64 n) {
    if (io_inject(IO_FTRUNCATE, EIO)) return SQLITE_IOERR_TRUNCATE;
    return real_of(f)->pMethods->xTruncate(real_of(f), n);
}
static int f_sync(sqlite3_file *f, int flags) {
    if (io_inject(IO_FSYNC, EIO)) return SQLITE_IOERR_FSYNC;
    return real_of(f)->pMethods->xSync(real_of(f), flags);
}
static int f_size(sqlite3_file *f, sqlite3_int64 *n) { return real_of(f)->pMethods->xFileSize(real_of(f), n); }
static int f_lock(sqlite3_file *f, int l) { return real_of(f)->pMethods->xLock(real_of(f), l); }
static int f_unlock(sqlite3_file *f, int l) { return real_of(f)->pMethods->xUnlock(real_of(f), l); }
static int f_reserved(sqlite3_file *f, int *out) { return real_of(f)->pMethods->xCheckReservedLock(real_of(f), out); }
static int f_control(sqlite3_file *f, int op, void *arg) {
    return real_of(f)->pMethods->xFileControl(real_of(f), op, arg);
}
static int f_sector(sqlite3_file *f) { return real_of(f)->pMethods->xSectorSize(real_of(f)); }
static int f_device(sqlite3_file *f) { return real_of(f)->pMethods->xDeviceCharacteristics(real_of(f)); }
static int f_shm_map(sqlite3_file *f, int pg, int sz, int extend, void volatile **pp) {
    return real_of(f)->pMethods->xShmMap(real_of(f), pg, sz, extend, pp);
}
static int f_shm_lock(sqlite3_file *f, int off, int n, int flags) {
    return real_of(f)->pMethods->xShmLock(real_of(f), off, n, flags);
}
static void f_shm_barrier(sqlite3_file *f) { real_of(f)->pMethods->xShmBarrier(real_of(f)); }
static int f_shm_unmap(sqlite3_file *f, int del) { return real_of(f)->pMethods->xShmUnmap(real_of(f), del); }
static int f_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **pp) {
    return real_of(f)->pMethods->xFetch(real_of(f), off, n, pp);
}
static int f_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p) {
    return real_of(f)->pMethods->xUnfetch(real_of(f), off, p);
}

/* clang-format off */
static const sqlite3_io_methods METHODS = {
    3, f_close, f_read, f_write, f_truncate, f_sync, f_size, f_lock, f_unlock, f_reserved, f_control, f_sector,
    f_device, f_shm_map, f_shm_lock, f_shm_barrier, f_shm_unmap, f_fetch, f_unfetch,
};
/* clang-format on */

static int v_open(sqlite3_vfs *v, const char *name, sqlite3_file *f, int flags, int *out) {
    (void)v;
    shim_file_t *s = (shim_file_t *)f;
    s->base.pMethods = NULL; /* SQLite calls no xClose on a file whose open failed */
    s->real = (sqlite3_file *)(s + 1);
    if (io_inject(IO_OPEN, EIO)) return SQLITE_CANTOPEN;
    int rc = root->xOpen(root, name, s->real, flags, out);
    if (rc == SQLITE_OK && s->real->pMethods) s->base.pMethods = &METHODS;
    return rc;
}
static int v_delete(sqlite3_vfs *v, const char *name, int sync) {
    (void)v;
    if (io_inject(IO_UNLINK, EIO)) return SQLITE_IOERR_DELETE;
    return root->xDelete(root, name, sync);
}
static int v_access(sqlite3_vfs *v, const char *name, int flags, int *out) {
    (void)v;
    return root->xAccess(root, name, flags, out);
}
static int v_full(sqlite3_vfs *v, const char *name, int n, char *out) {
    (void)v;
    return root->xFullPathname(root, name, n, out);
}
static void *v_dlopen(sqlite3_vfs *v, const char *name) {
    (void)v;
    return root->xDlOpen(root, name);
}
static void v_dlerror(sqlite3_vfs *v, int n, char *msg) {
    (void)v;
    root->xDlError(root, n, msg);
}
static void (*v_dlsym(sqlite3_vfs *v, void *h, const char *sym))(void) {
    (void)v;
    return root->xDlSym(root, h, sym);
}
static void v_dlclose(sqlite3_vfs *v, void *h) {
    (void)v;
    root->xDlClose(root, h);
}
static int v_random(sqlite3_vfs *v, int n, char *out) {
    (void)v;
    return root->xRandomness(root, n, out);
}
static int v_sleep(sqlite3_vfs *v, int us) {
    (void)v;
    return root->xSleep(root, us);
}
static int v_time(sqlite3_vfs *v, double *out) {
    (void)v;
    return root->xCurrentTime(root, out);
}
static int v_lasterr(sqlite3_vfs *v, int n, char *out) {
    (void)v;
    return root->xGetLastError(root, n, out);
}
static int v_time64(sqlite3_vfs *v, sqlite3_int64 *out) {
    (void)v;
    return root->xCurrentTimeInt64(root, out);
}

static sqlite3_vfs SHIM = {
    .iVersion = 2,
    .zName = "hearth-faults",
    .xOpen = v_open,
    .xDelete = v_delete,
    .xAccess = v_access,
    .xFullPathname = v_full,
    .xDlOpen = v_dlopen,
    .xDlError = v_dlerror,
    .xDlSym = v_dlsym,
    .xDlClose = v_dlclose,
    .xRandomness = v_random,
    .xSleep = v_sleep,
    .xCurrentTime = v_time,
    .xGetLastError = v_lasterr,
    .xCurrentTimeInt64 = v_time64,
};

int faultvfs_register(void) {
    if (!(root = sqlite3_vfs_find(NULL))) return -1;
    SHIM.szOsFile = (int)sizeof(shim_file_t) + root->szOsFile;
    SHIM.mxPathname = root->mxPathname;
    return sqlite3_vfs_register(&SHIM, 1) == SQLITE_OK ? 0 : -1;
}
