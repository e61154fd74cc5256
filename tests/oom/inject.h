/* inject.h - making the Nth allocation of Hearth's own code fail.
 *
 * The allocation-failure test binary is linked with
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,--wrap=strndup, so
 * every such call made by Hearth's objects (storage, ingest, query, common: the code
 * whose out-of-memory branches are under test) goes through inject.c, while the
 * libraries' own allocations (SQLite, zstd, zlib, protobuf-c, jansson, libc) do not:
 * they are not Hearth's branches to test. Free is not wrapped, so a pointer from a
 * wrapped allocation still goes back to the real allocator (ASan's, in this build).
 *
 * The counter is atomic: a scan decodes block partitions on several threads, so the
 * Nth allocation is then the Nth in whatever order the threads made them. */
#ifndef HEARTH_OOM_INJECT_H
#define HEARTH_OOM_INJECT_H

/* From now on count allocations, and make the nth fail (n 0: none fails). Only that
 * one fails: the next succeeds again, as when memory comes back. */
void oom_arm(long n);
/* Stops counting and failing; returns how many allocations were made since oom_arm. */
long oom_disarm(void);
/* 1 when the allocation oom_arm named has failed since. */
int oom_fired(void);

/* ---- I/O faults, the same way ----
 *
 * The binary is also linked with --wrap=open,write,pwrite,fsync,fdatasync,ftruncate,
 * rename,unlink: Hearth's own calls of each kind are counted, and the nth fails (once,
 * or from then on: a disk that stays broken), with ENOSPC for writes and EIO for the
 * rest. SQLite's and the libraries' own I/O is not Hearth's code and is not wrapped. */
typedef enum { IO_OPEN, IO_WRITE, IO_PWRITE, IO_FSYNC, IO_FTRUNCATE, IO_RENAME, IO_UNLINK, IO_KINDS } io_kind_t;
extern const char *const IO_KIND_NAMES[IO_KINDS];

/* From now on count calls of kind, and make the nth fail (and, persistent, every later
 * one); n 0: none fails. */
void io_arm(io_kind_t kind, long n, int persistent);
/* Stops counting and failing; returns how many calls of the kind were made. */
long io_disarm(void);
/* 1 when a call has failed since io_arm. */
int io_fired(void);
/* Counts one call of kind k: 1 (errno set to e) when it is to fail. For wrappers that
 * are not link-time ones (faultvfs.h). */
int io_inject(io_kind_t k, int e);

#endif
