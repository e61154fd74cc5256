/* symtab.h - deduplicated symbol tables: strings, functions, mappings, locations and
 * stacks.
 *
 * Every profile that reaches Hearth is mostly symbols: the same function names,
 * files and call paths arrive again in every upload. A symtab interns each of them
 * once and hands out dense 32-bit ids, so samples shrink to (stack id, value).
 *
 * Stacks are stored as a trie: a stack id names a node (parent stack, location),
 * with id 0 the empty stack. A call path root..leaf is therefore the chain of
 * parents from its leaf node, prefixes are shared, and merging profiles is adding
 * values per node. Id 0 is reserved in every table ("none"; string 0 is "").
 *
 * Tables are append-only; ids stay valid for the symtab's lifetime. A symtab is not
 * thread-safe: its owner (a head, a block, a query) serializes access.
 *
 * Fingerprints name a stack by its content across symtabs: two stacks with the same
 * frames (names, files, lines, mappings, addresses) have the same 128-bit
 * fingerprint in any symtab. A merge over many blocks uses them to recognise a stack
 * it has already copied without interning it again (query/merge.c). */
#ifndef HEARTH_SYMTAB_H
#define HEARTH_SYMTAB_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"
#include "common/hash.h"

#define SYM_NONE UINT32_MAX /* returned by the intern functions when out of memory */

typedef struct {
    uint32_t name, system_name, filename;
    int64_t start_line;
} sym_function_t;

typedef struct {
    uint64_t start, limit, offset;
    uint32_t filename, build_id;
} sym_mapping_t;

typedef struct {
    uint32_t function;
    int64_t line;
} sym_line_t;

typedef struct {
    uint32_t mapping;
    uint64_t address;
    uint32_t first_line, nlines; /* a slice of symtab_t.lines; [0] is the innermost */
} sym_location_t;

typedef struct {
    uint32_t parent, location;
} sym_stack_t;

/* A 128-bit content fingerprint (two independent 64-bit hashes). */
typedef struct {
    uint64_t a, b;
} sym_fp_t;

typedef struct symtab {
    char *sdata; /* NUL-terminated strings back to back */
    size_t sdata_len, sdata_cap;
    uint32_t *soff, *slen;
    size_t nstrings, strings_cap;
    sym_function_t *functions;
    size_t nfunctions, functions_cap;
    sym_mapping_t *mappings;
    size_t nmappings, mappings_cap;
    sym_location_t *locations;
    size_t nlocations, locations_cap;
    sym_line_t *lines;
    size_t nlines, lines_cap;
    sym_stack_t *stacks;
    size_t nstacks, stacks_cap;
    idset_t set_strings, set_functions, set_mappings, set_locations, set_stacks;
    int unindexed; /* the sets are not built (a decoded symtab): the intern functions build them first */
    /* Fingerprints of the first nfp[k] entries of each table (k: strings, functions,
     * mappings, locations, stacks), as symtab_fingerprint last brought them up to date. */
    sym_fp_t *fp[5];
    size_t nfp[5], fp_cap[5];
} symtab_t;

enum { SYM_FP_STRINGS, SYM_FP_FUNCTIONS, SYM_FP_MAPPINGS, SYM_FP_LOCATIONS, SYM_FP_STACKS };

/* Returns a new symtab holding only the reserved id-0 entries, or NULL (OOM). */
symtab_t *symtab_new(void);
void symtab_free(symtab_t *t);

/* Makes room in t's lookup sets for n[k] entries in all of each kind (in SYM_FP_ order:
 * strings, functions, mappings, locations, stacks), so that interning up to that many
 * grows no set on the way: a decoder that knows its input's counts calls it first
 * (again for each profile of a batch: a set already that large is left alone). A
 * count may be an upper bound; a slot takes 8 bytes. 0, or -1 (OOM; the sets grown
 * before the failure keep their room, and t stays usable). */
int symtab_reserve(symtab_t *t, const size_t n[5]);

/* Intern functions: return the id of an equal entry, adding it if absent, or
 * SYM_NONE when out of memory. Ids passed inside entries must be valid in t. */
uint32_t symtab_string(symtab_t *t, const char *s, size_t n);
uint32_t symtab_function(symtab_t *t, const sym_function_t *f);
uint32_t symtab_mapping(symtab_t *t, const sym_mapping_t *m);
uint32_t symtab_location(symtab_t *t, uint32_t mapping, uint64_t address, const sym_line_t *lines, uint32_t nlines);
uint32_t symtab_stack(symtab_t *t, uint32_t parent, uint32_t location);

/* Gives location id, which has no lines, these lines (function ids valid in t): the
 * query-time symbolization of a merge's own symtab (symbolize/symbolizer.h), so
 * every renderer sees the frames. The location stays findable by its new content;
 * fingerprints of locations and stacks are recomputed by the next
 * symtab_fingerprint. 0, or -1 out of memory (the location unchanged). */
int symtab_set_lines(symtab_t *t, uint32_t id, const sym_line_t *lines, uint32_t nlines);

/* Borrowed NUL-terminated string for id (valid while t lives). */
static inline const char *symtab_str(const symtab_t *t, uint32_t id) {
    assert(id < t->nstrings);
    return t->sdata + t->soff[id];
}

/* Number of frames in a stack (the depth of its trie node). */
size_t symtab_stack_depth(const symtab_t *t, uint32_t stack);

/* Brings every table's fingerprints up to date (tables only grow, so this costs the
 * entries added since the last call). After it, t->fp[SYM_FP_STACKS][id] is the
 * fingerprint of stack id for id < t->nfp[SYM_FP_STACKS]. 0 or -1 (OOM; the
 * fingerprints then cover fewer entries, never wrong ones). */
int symtab_fingerprint(symtab_t *t);
/* The same for a table that will only be read from now on (a decoded block
 * partition the cache shares with merges): only the stacks' fingerprints are kept.
 * symtab_decode leaves fingerprinting to the reader that needs it: compaction, cuts
 * verifying what they wrote and `hearth check` copy or compare by content and never
 * read them. 0 or -1 (OOM). */
int symtab_fingerprint_stacks(symtab_t *t);

/* The fingerprint of the n bytes at s as a string of any symtab (fp[SYM_FP_STRINGS]'s):
 * part of the block format, as function tables name their functions by it
 * (format/block.md, FUNCS). */
sym_fp_t symtab_string_fp(const char *s, size_t n);

/* The fingerprints of every stack of t (t->nstacks of them, in a new array *out the
 * caller frees), computed without touching t: a block writer's partition, which it
 * only reads. 0 or -1 (OOM). */
int symtab_stack_fps(const symtab_t *t, sym_fp_t **out);

/* Stack ids by fingerprint: one slot of 24 bytes per stack, so a lookup reads one
 * cache line (merges map stacks of many symtabs into one, shared dictionaries
 * recognise a partition's stacks). Ids are non-zero: 0 marks an empty slot (stack 0,
 * the empty stack, is the same in every symtab and never needs a lookup). */
typedef struct {
    struct sym_fp_slot {
        sym_fp_t fp;
        uint32_t id;
    } * slots;
    size_t cap, len;
} sym_fpmap_t;

/* The id slot of fp: holding its id, or 0 when fp is new (the caller fills it in, or
 * leaves it 0). NULL on OOM. */
uint32_t *sym_fpmap_slot(sym_fpmap_t *m, sym_fp_t fp);
/* The id of fp, or 0 when absent. */
uint32_t sym_fpmap_get(const sym_fpmap_t *m, sym_fp_t fp);
/* Starts loading fp's first slot into the cache: a caller with many lookups to make
 * issues it some lookups ahead. */
static inline void sym_fpmap_prefetch(const sym_fpmap_t *m, sym_fp_t fp) {
    if (m->cap) __builtin_prefetch(&m->slots[fp.a & (m->cap - 1)]);
}
size_t sym_fpmap_bytes(const sym_fpmap_t *m);
void sym_fpmap_free(sym_fpmap_t *m);

/* A read-only copy of t's tables and stack fingerprints (no sets: interning into it
 * builds them first), sized exactly: what a shared dictionary hands its readers
 * (storage/symdict.h) while it keeps growing its own table. NULL on OOM. */
symtab_t *symtab_snapshot(const symtab_t *t);

/* Approximate heap bytes held, for head-size accounting. */
size_t symtab_bytes(const symtab_t *t);

/* Copies symbols from one symtab into another, remembering what it has copied so
 * each source entry is looked up once. Create one per (dst, src) pair. */
typedef struct {
    const symtab_t *src;
    uint32_t *strings, *functions, *mappings, *locations, *stacks; /* 0 = not yet */
} symtab_remap_t;

int symtab_remap_init(symtab_remap_t *m, const symtab_t *src);
void symtab_remap_destroy(symtab_remap_t *m);
/* Returns the id in dst of src's stack (interning the whole path), or SYM_NONE. */
uint32_t symtab_import_stack(symtab_t *dst, symtab_remap_t *m, uint32_t src_stack);

/* Serializes every table (varint-encoded, ids implicit by position). */
void symtab_encode(const symtab_t *t, buf_t *out);
/* Rebuilds a symtab from symtab_encode's bytes, validating every reference.
 * Returns NULL and fills err on malformed input. */
symtab_t *symtab_decode(const uint8_t *p, size_t n, hr_err_t *err);

#endif
