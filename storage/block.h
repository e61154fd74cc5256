/* block.h - immutable block files: a segment's columns and symbols, zstd-compressed.
 *
 * Version 2 (written today) is partitioned so a reader touches only what it selects
 * (storage/format/block.md has the byte-level description):
 *   header    "HRTHBLK2" | u32 version | u32 0
 *   partition SYMBOLS | PROFILES | SAMPLES sections, one partition per key
 *   footer    FOOTER section: per partition its key, byte range, counts, time range
 *             and series; then every profile's (series, time, duration, total)
 *   tail      u64 footer offset | u32 crc32 of those 8 bytes | "HRT2"
 * A partition holds the series of one key (the service, see store.c) with only the
 * symbols they use, so a query for one service decodes that service's symbols and
 * rows, never the fleet's; totals (timeseries, profile lists) come from the footer
 * without decompressing any stack. Rows within a partition are sorted by
 * (series, time), so series and time deltas are tiny.
 *
 * Version 1 (one partition of everything: META, SYMBOLS, PROFILES, SAMPLES) still
 * reads, as a block of one partition covering every series and no footer totals.
 *
 * Every section carries a CRC, and decoding validates every id it reads, so a
 * corrupt block is reported, never trusted. */
#ifndef HEARTH_BLOCK_H
#define HEARTH_BLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"
#include "storage/segment.h"

#define BLOCK_VERSION 2

/* The partition key of a series (its service name); the string is borrowed and must
 * stay valid while block_encode runs. */
typedef const char *(*block_key_fn)(void *ctx, uint32_t series);

/* Encodes s into out, partitioned by key (NULL: one partition ""). 0 or -1. With two
 * or more partitions and cores, every other partition is prepared on a thread of its
 * own (started and joined within the call): s is only read meanwhile, and key is
 * called on the caller's thread alone. block_write does the same. */
int block_encode(const segment_t *s, block_key_fn key, void *kctx, int zstd_level, buf_t *out, hr_err_t *err);

/* Writes s to path atomically: path.tmp, fsync, rename, fsync of the directory.
 * The encoded image is decoded and compared with s first; a block that would not
 * read back exactly is not written (-1, HR_EINTERNAL), so its data stays in the WAL.
 * *bytes receives the file size. */
int block_write(const char *path, const segment_t *s, block_key_fn key, void *kctx, int zstd_level, size_t *bytes,
                hr_err_t *err);

/* Writing a block partition by partition, so only one partition is in memory at a
 * time (compaction merges a day of a fleet this way, one service after another).
 * Each partition is encoded, decoded again and compared with its source before it
 * is written; the footer likewise before commit. A block that would not read back
 * exactly is refused (HR_EINTERNAL) and never reaches its path. */
typedef struct block_writer block_writer_t;
typedef struct {
    uint64_t bytes; /* file (or image) size */
    size_t profiles, samples;
    int64_t min_time, max_time; /* INT64_MAX/INT64_MIN when empty */
} block_summary_t;

/* Starts a block at path (written to path.tmp until committed), or in memory when
 * path is NULL; flags: 0 or BLOCK_WRITE_STACK_FPS. NULL with err on failure. */
block_writer_t *block_writer_new(const char *path, int zstd_level, int flags, hr_err_t *err);
/* Each partition stores the fingerprints of the stacks its rows name (its STACKS
 * section, format/block.md), about 17 bytes a stack: a cold merge of many of a
 * service's partitions then decodes the symbols of those that bring new stacks only.
 * Cuts write them (block_write and block_encode do: an hourly block is one of
 * hundreds a week's query reads); compaction does not, as its few large partitions
 * gain little and are kept for long. */
#define BLOCK_WRITE_STACK_FPS 1
/* Adds one partition: every row of p, whose series all have this key (the caller
 * guarantees it; each key is added once). An empty p adds nothing. 0, or -1 with
 * err; after a failure only block_writer_free may follow. */
int block_writer_add(block_writer_t *w, const char *key, const segment_t *p, hr_err_t *err);
/* Adds a summary partition of key (storage/format/block.md): the pre-merged rows and
 * function table of p, without its rows. p's rows must be exactly those of key's
 * partitions added to this block whose time ranges lie in p's (commit verifies it),
 * so a merge covering p's range can read the summary in their place. Adds nothing
 * when p is empty or a series' sum could overflow. 0 or -1. */
int block_writer_add_summary(block_writer_t *w, const char *key, const segment_t *p, hr_err_t *err);
/* Bytes of the block so far (its partitions). */
uint64_t block_writer_bytes(const block_writer_t *w);
/* Writes the footer and tail; a file writer then fsyncs and renames into place, an
 * in-memory one appends the image to *image. sum (optional) receives the counts. */
int block_writer_commit(block_writer_t *w, block_summary_t *sum, buf_t *image, hr_err_t *err);
/* Frees w; an uncommitted file writer removes its temporary file. NULL is fine. */
void block_writer_free(block_writer_t *w);

typedef struct {
    char *key;
    uint64_t off, len;  /* its sections' byte range in the file */
    int merged;         /* pre-merged rows present (BLOCK_VIEW_MERGED) */
    int spans;          /* span samples present (in the rows view; segment.h) */
    int traces;         /* ... with their trace ids */
    int stacks;         /* a STACKS section: the fingerprints of the stacks its rows name */
    uint64_t syms_len;  /* with it, the bytes of its SYMBOLS section, the first of its range */
    int units;          /* rows carry value units (format/block.md); every block since they exist */
    uint64_t funcs_len; /* bytes of its FUNCS section (the function table, storage/functab.h),
                         * the last of its range, with the NAMES section before it when names
                         * is set; 0: it has none */
    int names;          /* the table names its functions by fingerprint, spelled in NAMES */
    int summary;        /* pre-merged rows only, standing for the partitions in `covers` of
                         * other partitions: nprofiles and nsamples are 0 */
    uint32_t *covers;   /* the summaries (indices in the block's parts) standing for this */
    size_t ncovers;     /* partition: a merge covering one's whole range reads it instead */
    size_t nprofiles, nsamples;
    int64_t min_time, max_time; /* INT64_MAX/INT64_MIN when empty */
    uint32_t *series;           /* ascending; NULL: every series (a version-1 block) */
    size_t nseries;
} block_part_t;

/* What a reader knows before decoding any partition. */
typedef struct {
    int version;
    block_part_t *parts;
    size_t nparts;
    /* Every profile's row (series, time, duration, total) with no samples and an
     * empty symtab: what totals-only queries scan. NULL for version 1. */
    segment_t *totals;
} block_index_t;

/* Where a block's bytes come from: a file, or an object in the cluster's object store
 * (storage/blockstore.h). Every reader below goes through read, asking only for the
 * byte ranges it needs (header, tail, footer, the partitions it decodes). */
typedef struct {
    const char *name; /* a path or an object key, for read and for messages */
    uint64_t size;    /* the block's bytes */
    /* Reads exactly n bytes at off into out. 0, or -1 with err: HR_ENOTFOUND (gone),
     * HR_EUNPROC (short: corrupt), HR_EIO (passing), HR_ENOMEM. */
    int (*read)(void *ctx, const char *name, uint64_t off, uint64_t n, uint8_t *out, hr_err_t *err);
    void *ctx;
} block_src_t;

/* A source reading the file at path (borrowed; stat'ed now for its size). 0 or -1. */
int block_src_file(block_src_t *src, const char *path, hr_err_t *err);

/* A time range (ns, inclusive) a read of a partition's rows may stop at. */
typedef struct {
    int64_t from, until;
} block_window_t;

/* block_index_read and block_read_part from any source. With a window (NULL: none),
 * the rows view holds only the rows in it, without span samples: a merge of a short
 * range inside a long partition decompresses the partition's columns but decodes the
 * samples of its rows only, stepping over the others' bytes. */
block_index_t *block_index_read_src(const block_src_t *src, hr_err_t *err);
segment_t *block_read_part_src(const block_src_t *src, const block_index_t *ix, size_t p, int view,
                               const block_window_t *win, hr_err_t *err);
/* 1 when a rows read of partition bp in window win leaves rows out (the window does
 * not hold the partition's whole time range). */
int block_window_narrows(const block_part_t *bp, const block_window_t *win);

/* Reads the header, tail and footer of a block file (a version-1 file: its header
 * only). NULL with err on a missing, short or corrupt file. */
block_index_t *block_index_read(const char *path, hr_err_t *err);
void block_index_free(block_index_t *ix);
/* 1 when partition p holds series (binary search; a version-1 part holds all). */
int block_part_has(const block_part_t *p, uint32_t series);
/* What to decode of a partition: its profile rows, or its pre-merged rows (one per
 * series at the partition's first time, holding the sum of that series' samples in
 * the partition: what a merge covering the partition's whole time range needs), or
 * its function table (what a top table over such a range needs). */
enum { BLOCK_VIEW_ROWS = 0, BLOCK_VIEW_MERGED = 1, BLOCK_VIEW_FUNCS = 2 };
#define BLOCK_VIEWS 3
/* Or'ed into the rows or pre-merged view: read the partition's stack fingerprints
 * (its STACKS section) instead of its symbols when it has them: the read skips the
 * SYMBOLS section's bytes (segment.h's stack_fp, stack_src). A shared dictionary that
 * already knows every stack then never reads them (storage/symdict.h); a partition
 * without the section is read whole, as without the flag. */
#define BLOCK_VIEW_DEFER_SYMBOLS 0x10
/* (Or'ed into the function table's view, it defers names stored apart the same way:
 * the table has their fingerprints, and its NAMES section is kept as stored.) */
/* Instead of a view: the SYMBOLS section of a partition with stack fingerprints
 * alone, as a segment with no rows and sym set (what a deferred read skipped). */
#define BLOCK_VIEW_SYMBOLS 0x40
/* Gives s, read with BLOCK_VIEW_DEFER_SYMBOLS, the symbols of syms (a BLOCK_VIEW_SYMBOLS
 * read of the same partition, freed here): s's rows keep their stack ids
 * 1..nstack_fp, stack_src naming each in s->sym. 0, or -1 with err (HR_EUNPROC: the
 * fingerprints list stacks the table lacks). */
int block_part_symbols(segment_t *s, segment_t *syms, hr_err_t *err);
/* Gives ft, a function table read deferred, the names its kept NAMES section spells
 * (checked against the fingerprints), and frees that section. 0, or -1 with err
 * (HR_EUNPROC: corrupt; ft unchanged). */
int block_funcs_names(struct functab *ft, hr_err_t *err);
/* The bytes of the block a view of partition bp reads: the FUNCS view its function
 * table alone (a segment with no rows and `funcs` set, segment.h), the others every
 * section before it. */
void block_part_range(const block_part_t *bp, int view, uint64_t *off, uint64_t *len);
/* Decodes a view of partition p into a new segment (its own symtab and rows; a
 * version-1 block: the whole block, rows only). */
segment_t *block_read_part(const char *path, const block_index_t *ix, size_t p, int view, hr_err_t *err);

/* Decodes a whole block image (either version) into one segment (caller frees). */
segment_t *block_decode(const uint8_t *p, size_t n, hr_err_t *err);
/* Reads and decodes a whole block file. */
segment_t *block_read(const char *path, hr_err_t *err);

#endif
