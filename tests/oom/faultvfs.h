/* faultvfs.h - SQLite's I/O through inject.h's I/O faults.
 *
 * The catalog's writes are SQLite's own calls, which the link-time wrappers of
 * inject.h cannot reach. A shim VFS registered as SQLite's default passes every call
 * to the real one (unix), after counting the calls that change the disk as inject.h
 * counts Hearth's: xOpen as open, xWrite as pwrite, xSync as fsync, xTruncate as
 * ftruncate, xDelete as unlink; a counted call that is to fail returns SQLite's I/O
 * error for it (SQLITE_FULL for a write) without reaching the disk, as a failing
 * disk would answer. */
#ifndef HEARTH_FAULTVFS_H
#define HEARTH_FAULTVFS_H

/* Registers the shim as SQLite's default VFS. 0, or -1 when SQLite refuses it. */
int faultvfs_register(void);

#endif
