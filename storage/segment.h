/* segment.h - profiles as columns over one symbol table.
 *
 * A segment is the unit both the head (recent data, in memory) and a block (a
 * file, once decoded) present to queries: a symtab plus one row per profile
 * (series, time, duration, where its samples start, how many) and the sample
 * columns (stack id, value) those rows point into. Within a profile, samples are
 * sorted by stack id with equal stacks summed, which makes block encoding compact
 * (stack deltas) and merges cheap.
 *
 * A profile may also hold span samples: copies of those of its samples that carried
 * a span id (a trace-to-profile link, as Pyroscope keeps `span_id` per sample). They
 * are counted in the profile's samples as well, so every other query ignores them;
 * only a merge restricted to given spans reads them instead. */
#ifndef HEARTH_SEGMENT_H
#define HEARTH_SEGMENT_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "storage/symtab.h"

typedef struct {
    uint32_t series;
    uint32_t nsamples;
    int64_t time_ns, duration_ns;
    uint64_t first;      /* index of the profile's first sample */
    int64_t total;       /* sum of its values, kept for time series */
    uint32_t nspans;     /* span samples */
    uint64_t span_first; /* index of its first span sample */
} seg_profile_t;

/* One span sample: a stack's value under one span id (never 0), and the 128-bit
 * trace id of that span when the upload named it (trace_hi = trace_lo = 0: unknown). */
typedef struct {
    uint64_t span;
    uint32_t stack;
    int64_t value;
    uint64_t trace_hi, trace_lo;
} span_sample_t;

/* 1 when x carries a trace id. */
static inline int span_has_trace(const span_sample_t *x) { return (x->trace_hi | x->trace_lo) != 0; }
/* Parses 32 hex digits (a W3C / OpenTelemetry trace id, not all zero). 0 or -1. */
int trace_id_parse(const char *s, uint64_t *hi, uint64_t *lo);

struct symdict;

typedef struct segment {
    symtab_t *sym;        /* owned; NULL in a block cache partition re-numbered into a shared
                    * dictionary (dict below): scans hand such a segment to readers with
                    * sym set to the dictionary's current version (storage/symdict.h) */
    struct symdict *dict; /* borrowed: that dictionary (the block cache holds a reference
                           * for the segment), or NULL when sym is the segment's own */
    size_t dict_stacks;   /* the dictionary's stacks its ids need (all below it) */
    seg_profile_t *profiles;
    size_t nprofiles, profiles_cap;
    uint32_t *stacks;
    int64_t *values;
    size_t nsamples, samples_cap;
    span_sample_t *spans;
    size_t nspans, spans_cap;
    int64_t min_time, max_time; /* over profiles; INT64_MAX/INT64_MIN when empty */
    struct functab *funcs;      /* owned; a block partition's function table (storage/functab.h),
                                 * in a segment of that alone (no rows, sym NULL until a scan
                                 * hands it with its dictionary's names); else NULL */
    size_t dict_strings;        /* the dictionary's strings funcs' names need (all below it) */
    /* A block partition read with its symbols deferred (BLOCK_VIEW_DEFER_SYMBOLS,
     * storage/block.h), until the block cache adopts it into its dictionary: its rows'
     * stack ids are 1..nstack_fp (0: the empty stack), stack_fp[k] the fingerprint the
     * block stored for stack k and stack_src[k] its id in the partition's SYMBOLS
     * table, which sym holds only once block_part_symbols gave it. Owned; NULL in any
     * other segment. */
    sym_fp_t *stack_fp;
    uint32_t *stack_src;
    size_t nstack_fp;
} segment_t;

/* A sample as (stack id, value): the unit segment rows and deltas are built from. */
typedef struct {
    uint32_t stack;
    int64_t value;
} stack_value_t;

/* Sorts p by stack, sums repeated stacks and drops zero sums, in place; returns the
 * new count. */
size_t stack_values_fold(stack_value_t *p, size_t n);

/* Returns an empty segment with its own new symtab, or NULL (OOM). */
segment_t *segment_new(void);
void segment_free(segment_t *s);

/* Appends one profile. stacks/values (n of them, ids valid in s->sym, in any order,
 * repeats allowed) are copied, sorted and summed per stack; zero sums are dropped.
 * Returns 0, or -1 on OOM (the segment is unchanged). */
int segment_add(segment_t *s, uint32_t series, int64_t time_ns, int64_t duration_ns, const uint32_t *stacks,
                const int64_t *values, size_t n);

/* segment_add for samples already folded (stack_values_fold: sorted by stack, no
 * repeats, no zero values), copied as they are. 0, or -1 on OOM (the segment is
 * unchanged); it allocates nothing when segment_reserve made room for it. */
int segment_add_folded(segment_t *s, uint32_t series, int64_t time_ns, int64_t duration_ns, const stack_value_t *p,
                       size_t n);

/* Makes room for `profiles` more rows, `samples` more samples and `spans` more span
 * samples, so that adding that much with segment_add_folded and segment_add_spans
 * (of folded span samples) allocates nothing and cannot fail. 0, or -1 on OOM (the
 * segment then holds what it held, with some more room perhaps). */
int segment_reserve(segment_t *s, size_t profiles, size_t samples, size_t spans);

/* Parses a span id as OpenTelemetry writes it: 1 to 16 hex digits, not all zero.
 * 0, or -1 when s is not one. */
int span_id_parse(const char *s, uint64_t *span);

/* Sorts p by (stack, span), sums repeats and drops zero sums and span 0, in place;
 * returns the new count. */
size_t span_samples_fold(span_sample_t *p, size_t n);

/* Gives the profile segment_add added last its span samples, once: p (n of them,
 * stack ids valid in s->sym) is copied and folded (span_samples_fold). Each must also
 * be among the profile's samples. 0, or -1 on OOM (the segment is unchanged); it
 * allocates nothing when segment_reserve made room for n. */
int segment_add_spans(segment_t *s, const span_sample_t *p, size_t n);

/* segment_add_spans for span samples whose stack ids belong to m->src: each stack is
 * imported into s->sym through m first. 0, -1 on OOM, -2 when a stack id is out of
 * m->src's range (the segment is then unchanged). */
int segment_import_spans(segment_t *s, symtab_remap_t *m, const span_sample_t *p, size_t n);

/* Approximate heap bytes held (columns and symbols). */
size_t segment_bytes(const segment_t *s);

/* Sorts *order (nprofiles indices) by (series, time): the block row order. */
int segment_sorted_order(const segment_t *s, uint32_t **order);
/* A new segment holding rows[0..n) of s (in that order, which should be by series
 * then time, as a block partition's) with only the symbols they use: a stack keeps
 * its relative order, so rows sorted by stack stay sorted. NULL with err (HR_ENOMEM,
 * or HR_EINTERNAL for a stack id out of range). */
segment_t *segment_select(const segment_t *s, const uint32_t *rows, size_t n, hr_err_t *err);

/* 1 when row i holds what segment_add and segment_add_spans leave and what block
 * encoding (stack deltas) and merges (stack ids as indexes) rely on: samples strictly
 * ascending by stack, span samples strictly ascending by (stack, span) without span 0,
 * every stack id in s->sym's range. For assert(): it reads the whole row. */
int segment_row_valid(const segment_t *s, size_t i);

/* A new segment holding every profile of in[0..n), or NULL (err set); the inputs are
 * only read. Every profile row is kept as it was (series, time, duration, samples,
 * spans), while stacks, locations, functions, mappings and strings are re-interned into
 * one symtab, so what the inputs repeated is stored once: what compaction and a
 * version-1 block's read-whole path need. */
segment_t *segment_merge(const segment_t *const *in, size_t n, hr_err_t *err);
/* segment_merge one input at a time: in's profiles appended to out, re-interned into
 * out's symtab (in is only read). 0, or -1 with err (out may then hold part of in). */
int segment_append(segment_t *out, const segment_t *in, hr_err_t *err);

#endif
