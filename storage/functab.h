/* functab.h - a partition's function table: per series, the self and total value of
 * every function its samples reach, summed over the partition.
 *
 * "Which functions cost the most across the fleet" needs no stacks: only, per
 * function name, the value of the samples whose leaf frame it is (self) and of those
 * whose stack holds it anywhere, counted once however often it recurs (total, pprof's
 * `cum`). A block partition stores that table beside its pre-merged rows (format/block.md,
 * the FUNCS section), so a top table over a range covering the partition reads a few
 * kilobytes per service instead of its symbols and samples, and sums arrays instead
 * of building a call tree (query/merge.c).
 *
 * Names are the frame names the flame graph shows (a line's function name, else its
 * system name, else "?"). Only a partition whose every location has its frames gets a
 * table: an address-only frame is named at query time by the symbolizer, which a table
 * written earlier cannot know. Values are sums: a gauge averaged per series rounds per
 * stack, so gauge queries keep the stack path. */
#ifndef HEARTH_FUNCTAB_H
#define HEARTH_FUNCTAB_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"
#include "storage/symtab.h"

struct segment;

typedef struct functab {
    /* The names, sorted by strcmp and distinct: nnames of them, name i at
     * names + name_off[i]. NULL once re-numbered into a dictionary (symdict.h), and
     * while a block read deferred them (below). */
    char *names;
    uint32_t *name_off;
    size_t nnames, names_len; /* names_len: the blob's bytes, NULs included */
    /* With names stored apart (format/block.md, FUNCS): name i's fingerprint
     * (symtab_string_fp), which a dictionary that saw the name maps without reading
     * it; NULL for a table written with its names inline. */
    sym_fp_t *fp;
    /* A deferred read's NAMES section, as stored (block.c decodes it on demand:
     * block_funcs_names); NULL otherwise. */
    uint8_t *names_sec;
    size_t names_sec_len;
    /* Per series (ids ascending, as the partition lists them): the sum of every sample
     * (the empty stack's too), and its entries [first[i], first[i + 1]). */
    size_t nseries;
    uint32_t *series;
    int64_t *all;
    size_t *first; /* nseries + 1 */
    /* Entries, ascending by name within a series: the name (an index into names, or
     * the dictionary's string id once re-numbered), self and total. */
    uint32_t *fn;
    int64_t *self, *total;
    size_t nentries;
} functab_t;

/* The table of merged (a pre-merged view: one row per series, in series order) over
 * the symbols sym. NULL and *none set when sym has an address-only location (no table
 * for this partition, not an error); NULL with err on OOM. */
functab_t *functab_build(const symtab_t *sym, const struct segment *merged, int *none, hr_err_t *err);

/* The FUNCS section's raw bytes (format/block.md): with apart, the names'
 * fingerprints in place of the names, which functab_encode_names writes for a NAMES
 * section of their own. */
void functab_encode(const functab_t *t, int apart, buf_t *out);
void functab_encode_names(const functab_t *t, buf_t *out);
/* Reads functab_encode's bytes (with the same apart) for a partition of these series
 * (copied), validating every count, order and index. With apart the table has
 * fingerprints and no names until functab_decode_names gives them. NULL with err
 * (HR_EUNPROC) on malformed input. */
functab_t *functab_decode(const uint8_t *p, size_t n, const uint32_t *series, size_t nseries, int apart, hr_err_t *err);
/* Gives t (decoded apart, without names) the names of functab_encode_names' bytes,
 * checking each against its fingerprint. 0, or -1 with err (HR_EUNPROC: malformed or
 * another table's names; HR_ENOMEM); t is unchanged then. */
int functab_decode_names(functab_t *t, const uint8_t *p, size_t n, hr_err_t *err);

/* 1 when a and b hold the same names and entries (a block writer's read-back check);
 * 0 when either lacks its names. */
int functab_equal(const functab_t *a, const functab_t *b);
size_t functab_bytes(const functab_t *t);
void functab_free(functab_t *t);

#endif
