/* wal.h - the write-ahead log: every acknowledged ingest is here until a block
 * holds it.
 *
 * The log is a directory of numbered segment files (00000001.wal, ...). A record is
 *   "HWAL" | u32 length | u32 crc32(payload) | u32 crc32(the 12 bytes before) | payload
 * (little-endian); payloads are opaque here (the ingest layer encodes the request).
 * The magic and the header's own checksum make every record findable from any
 * offset, so damage is told apart from a torn write:
 * - a damaged record followed by intact ones is corruption: replay skips exactly the
 *   damaged bytes, resynchronising on the next intact frame, and counts it;
 * - a damaged record with nothing intact after it is a torn write (a crash
 *   mid-append): replay truncates it, which loses nothing acknowledged, because a
 *   record is acknowledged only after it is fully written (and fsynced by default).
 * Segments written before this framing (u32 length | u32 crc | payload, no magic)
 * still replay, stopping at their first bad record as they always did; appends never
 * go to such a segment.
 *
 * Appends are group-committed: concurrent writers each write their record, and one
 * fsync covers every record written before it. Under WAL_FSYNC_ALWAYS the segment is
 * kept filled with zeros ahead of its records (records overwrite allocated blocks, so
 * a sync flushes data, not the file system's journal); a zero tail reads as the end
 * of the segment, is no torn write, and stays as room after a crash. A clean close or
 * a rotation cuts it off. */
#ifndef HEARTH_WAL_H
#define HEARTH_WAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef enum { WAL_FSYNC_ALWAYS, WAL_FSYNC_NONE } wal_fsync_t;

typedef struct wal wal_t;

wal_t *wal_open(const char *dir, wal_fsync_t policy, hr_err_t *err);
void wal_close(wal_t *w);

/* What a replay or a verification found. */
typedef struct {
    size_t segments;        /* segment files read */
    size_t records;         /* intact records */
    size_t skipped;         /* ... of them rejected by the replay callback */
    size_t corrupt;         /* damaged regions skipped between intact records */
    uint64_t corrupt_bytes; /* bytes in those regions */
    uint64_t torn_bytes;    /* bytes of torn tails (a replay truncates them) */
} wal_scan_t;

/* Feeds fn every intact record of the segments numbered above `after`, in order,
 * then opens the newest segment for appending (a fresh one when the newest has the
 * old framing). Must precede any append. A record fn rejects (returns -1) is counted
 * in st->skipped and replay goes on; corruption is logged, counted and skipped. fn
 * returns WAL_REPLAY_STOP for a passing failure (out of memory): the replay stops
 * there, truncates nothing and returns -1, so the record is replayed on the next
 * start instead of being lost. */
#define WAL_REPLAY_STOP (-2)
typedef int (*wal_replay_fn)(void *ctx, const uint8_t *payload, size_t len);
int wal_replay(wal_t *w, uint32_t after, wal_replay_fn fn, void *ctx, wal_scan_t *st, hr_err_t *err);

/* Appends one record and, under WAL_FSYNC_ALWAYS, returns only once it is on disk. */
int wal_append(wal_t *w, const void *payload, size_t len, hr_err_t *err);

/* Starts a new segment; returns the number of the one just closed (via *closed). */
int wal_rotate(wal_t *w, uint32_t *closed, hr_err_t *err);
/* Deletes every segment numbered <= upto. */
void wal_remove_upto(wal_t *w, uint32_t upto);
/* Reads every segment in dir without changing anything and fills st. */
int wal_verify(const char *dir, wal_scan_t *st, hr_err_t *err);

/* Bytes appended to the current segment. */
uint64_t wal_segment_bytes(wal_t *w);

#endif
