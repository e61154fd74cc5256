/* wal.h - the write-ahead log: every acknowledged ingest is here until a block
 * holds it.
 *
 * The log is a directory of numbered segment files (00000001.wal, ...). A record is
 * u32 length | u32 crc32(payload) | payload; payloads are opaque here (the ingest
 * layer encodes the request). A crash can leave a torn record at the end of the last
 * segment: replay stops there and truncates it, which loses nothing acknowledged,
 * because a record is acknowledged only after it is fully written (and fsynced under
 * the default policy).
 *
 * Appends are group-committed: concurrent writers each write their record, and one
 * fsync covers every record written before it. */
#ifndef HEARTH_WAL_H
#define HEARTH_WAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef enum { WAL_FSYNC_ALWAYS, WAL_FSYNC_NONE } wal_fsync_t;

typedef struct wal wal_t;

wal_t *wal_open(const char *dir, wal_fsync_t policy, hr_err_t *err);
void wal_close(wal_t *w);

/* Feeds fn every intact record of the segments numbered above `after`, in order,
 * then opens the newest segment for appending. Must precede any append. A record fn
 * rejects (returns -1) is counted in *skipped and replay goes on. */
typedef int (*wal_replay_fn)(void *ctx, const uint8_t *payload, size_t len);
int wal_replay(wal_t *w, uint32_t after, wal_replay_fn fn, void *ctx, size_t *records,
               size_t *skipped, hr_err_t *err);

/* Appends one record and, under WAL_FSYNC_ALWAYS, returns only once it is on disk. */
int wal_append(wal_t *w, const void *payload, size_t len, hr_err_t *err);

/* Starts a new segment; returns the number of the one just closed (via *closed). */
int wal_rotate(wal_t *w, uint32_t *closed, hr_err_t *err);
/* Deletes every segment numbered <= upto. */
void wal_remove_upto(wal_t *w, uint32_t upto);
/* Reads every segment in dir without changing anything: counts segments, intact
 * records, and the bytes of torn tails (which a replay would truncate). */
int wal_verify(const char *dir, size_t *segments, size_t *records, uint64_t *torn_bytes, hr_err_t *err);

/* Bytes appended to the current segment. */
uint64_t wal_segment_bytes(wal_t *w);

#endif
